#!/usr/bin/env bash
# One piece of a chapter's `paper` run on a bare GPU machine (issue 31), as one command from the
# repo root (the device tool's `run`, carrying what benchmarks/gpu_prepare.sh names: .whl, for
# chapter 2b .paper-data, and .paper-carry only where `keep` left a file out of carry/):
#
#   CHAPTER=05_rebasin_hmc PIECE_S=420 SYMLIB_COMMIT=<this checkout's HEAD> bash benchmarks/gpu_piece.sh
#
# (SYMLIB_COMMIT: the copy the machine is sent need not have this checkout's HEAD, which the
# pieces file records as the commit; the compute code hash it also records is the code's identity.)
#
# It unpacks the state the previous pieces left (.paper-carry/<chapter>/state.tgz.*: the cache's
# entries and checkpoints, and the pieces file), runs `pipeline compute --profile paper --device
# cuda <chapter>` with SYMLIB_BUDGET_S=$PIECE_S (a stage stops there, its checkpoint written, exit
# 75), and packs the state again into $OUT as state.tgz.00, .01, ... of at most 15 MiB each (the
# device tool returns at most 8 files of 16 MiB), with the whole output in $OUT/piece.log.
# A stage that cannot stop at the budget (a training) runs to its end: HARD_S (default PIECE_S +
# 120) kills the piece, which then keeps only what was cached before. A state larger than RETURN_MIB
# (default 100: 7 parts come back beside the log) drops its largest checkpoints, named in the log,
# rather than come back cut: their items start again in the next piece.
#
# Back on this machine, put the returned parts where the next piece finds them:
#   bash benchmarks/gpu_piece.sh keep FILES_AT      # replaces .paper-carry/<chapter>/state.tgz.*
# (it also copies the run's pieces file to published/paper/progress/<chapter>.json and, for chapters
# 5 and 6, writes the HMC runs' length, R-hat and ESS so far to <chapter>.chains.json: commit both, and
# the reproducibility page says how far the run got; and it saves the state's files into the
# tracked carry/ with `python -m symlib.book.carry save` (over 1 MiB xz-compressed; a file whose
# stored size passes CARRY_LIMIT_MIB, default 32, stays behind, named): commit carry/ too, once,
# after the session's last piece, so that the run continues after .paper-carry/ is lost with a
# replaced machine (git keeps each committed version: chapter 5's HMC checkpoint is about 14 MB
# stored with its one chain, 24 with four; benchmarks/carry_size.py); each piece first loads carry/ where its unpacked state lacks
# a file, so a piece need not carry .paper-carry/ at all unless keep left a file behind)
# and, once a piece reports the chapter complete, render its pages from that state:
#   bash benchmarks/gpu_piece.sh render             # execute --cached-only --profile paper --device cuda
# PROFILE (default paper) and DEVICE (default cuda) exist for trying it out: PROFILE=smoke DEVICE=cpu.
#
# What travels to the GPU machine is at most 64 MiB (the working tree with carry/, .whl and
# .paper-carry when it is carried, together). carry/ holds the state compressed (chapter 5's
# robust run: about 24 MB for the 4-chain checkpoint beside its finished entries), so a piece that
# carries .paper-carry too nears the limit; there a finished stage nothing later reads can stay here:
#   bash benchmarks/gpu_piece.sh aside bayes     # its entries -> .paper-aside/<chapter>/, not carried
# then run the next pieces with SKIP=bayes (`pipeline compute --skip bayes`: the stage is left out,
# the pieces file says so); `render` puts the entries set aside back before rendering.
set -u
CHAPTER=${CHAPTER:-05_rebasin_hmc}
PROFILE=${PROFILE:-paper}
DEVICE=${DEVICE:-cuda}
CARRY=.paper-carry/$CHAPTER
ASIDE=.paper-aside/$CHAPTER
PY=${PY:-python3}

unpack() {  # unpack STATE_DIR: the carried parts into $SYMLIB_CACHE and $SYMLIB_RESULTS
  mkdir -p "$SYMLIB_CACHE" "$SYMLIB_RESULTS"
  if compgen -G "$CARRY/state.tgz.*" > /dev/null; then
    cat "$CARRY"/state.tgz.* | tar -xzf - -C "$1"
    echo "unpacked $(du -sh "$1" | cut -f1) from $(ls "$CARRY"/state.tgz.* | wc -l) part(s)"
  else
    echo "no carried state in $CARRY: the first piece"
  fi
}

case "${1:-piece}" in
  keep)
    [ -n "${2:-}" ] || { echo "usage: gpu_piece.sh keep FILES_AT" >&2; exit 2; }
    compgen -G "$2/state.tgz.*" > /dev/null || { echo "no state.tgz.* in $2" >&2; exit 1; }
    mkdir -p "$CARRY" && rm -f "$CARRY"/state.tgz.* && cp "$2"/state.tgz.* "$CARRY"/ && chmod u+w "$CARRY"/state.tgz.*
    cp "$2"/piece.log "$CARRY"/last-piece.log 2>/dev/null
    # the book says how far the run got: its pieces file, copied to published/paper/progress/,
    # and (chapters 5 and 6) the length, R-hat and ESS so far of the HMC runs in progress, read
    # from chapter 5's newest checkpoint (one HMC run samples at a time; older ones are of
    # abandoned code) or chapter 6's gold-standard checkpoints (removed once an item is cached)
    tmp=$(mktemp -d) && cat "$CARRY"/state.tgz.* | tar -xzf - -C "$tmp" 2>/dev/null
    "$PY" -m symlib.book.published progress "$CHAPTER" "$tmp/results/pieces/$CHAPTER.json"
    # the state also goes to the tracked carry/ (entries and checkpoints of at most CARRY_LIMIT_MIB
    # each as stored, large ones xz-compressed, and the pieces file): committed, it survives a
    # replaced machine, which .paper-carry/ does not; the next piece loads it where its unpacked
    # state lacks it
    SYMLIB_CACHE=$tmp/cache SYMLIB_RESULTS=$tmp/results "$PY" -m symlib.book.carry save --limit "${CARRY_LIMIT_MIB:-32}" "$CHAPTER"
    case $CHAPTER in
      05_rebasin_hmc)
        newest=$(ls -t "$tmp"/cache/checkpoints/*.pt 2>/dev/null | head -1)
        "$PY" -m symlib.chapters.rebasin_hmc.progress "published/paper/progress/$CHAPTER.chains.json" $newest ;;
      06_synthesis)   # every gold standard stopped at the budget (items may stop side by side)
        stopped=$(ls "$tmp"/cache/checkpoints/06_synthesis-gold-*.pt 2>/dev/null)
        if [ -n "$stopped" ]; then
          "$PY" -m symlib.chapters.synthesis.progress "published/paper/progress/$CHAPTER.chains.json" $stopped
        else rm -f "published/paper/progress/$CHAPTER.chains.json"; fi ;;
    esac
    rm -rf "$tmp"
    ls -l "$CARRY"; exit 0 ;;
  aside)
    [ -n "${2:-}" ] || { echo "usage: gpu_piece.sh aside STAGE" >&2; exit 2; }
    compgen -G "$CARRY/state.tgz.*" > /dev/null || { echo "no carried state in $CARRY" >&2; exit 1; }
    tmp=$(mktemp -d) && cat "$CARRY"/state.tgz.* | tar -xzf - -C "$tmp"
    dir=cache/$CHAPTER-$2
    compgen -G "$tmp/$dir/*" > /dev/null || { echo "no finished entry of stage $2 in the carried state" >&2; rm -rf "$tmp"; exit 1; }
    mkdir -p "$ASIDE" && tar -czf "$ASIDE/$2.$(date -u +%Y%m%dT%H%M%S).tgz" -C "$tmp" "$dir" \
      && rm -rf "$tmp/$dir"/* && rm -f "$CARRY"/state.tgz.* \
      && tar -czf - -C "$tmp" cache results | split -b 15m -d - "$CARRY/state.tgz."
    rm -rf "$tmp"
    echo "stage $2's entries kept in $ASIDE (not carried); run the next pieces with SKIP=$2"
    ls -l "$ASIDE" "$CARRY"; exit 0 ;;
  render)
    STATE=${STATE:-/tmp/symlib-paper-state/$CHAPTER}
    rm -rf "$STATE" && mkdir -p "$STATE"
    export SYMLIB_CACHE=$STATE/cache SYMLIB_RESULTS=${SYMLIB_RESULTS:-results}
    tmp=$(mktemp -d) && SYMLIB_RESULTS=$tmp unpack "$STATE" && mkdir -p "$SYMLIB_RESULTS/pieces" \
      && cp "$STATE"/results/pieces/"$CHAPTER".json "$SYMLIB_RESULTS/pieces/" 2>/dev/null
    for f in "$ASIDE"/*.tgz; do [ -f "$f" ] && tar -xzf "$f" -C "$STATE" && echo "put back $f"; done
    exec "$PY" -m symlib.book.pipeline execute --cached-only --profile "$PROFILE" --seed 0 --device "$DEVICE" "$CHAPTER" ;;
  piece) ;;
  *) echo "usage: gpu_piece.sh [piece|keep FILES_AT|aside STAGE|render]" >&2; exit 2 ;;
esac

OUT=${OUT:-/tmp/gpu-piece}
PIECE_S=${PIECE_S:-420}
HARD_S=${HARD_S:-$((PIECE_S + 120))}
RETURN_MIB=${RETURN_MIB:-100}
STATE=${STATE:-/tmp/symlib-paper-state}
rm -rf "$STATE"
mkdir -p "$OUT" "$STATE"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD XDG_CACHE_HOME=/tmp/symlib-xdg
export SYMLIB_CACHE=$STATE/cache SYMLIB_RESULTS=$STATE/results
# the data a bare machine lacks, carried as benchmarks/gpu_prepare.sh left it (Fashion-MNIST for 2b)
[ -d .paper-data/fashion-mnist ] && export SYMLIB_FASHION_MNIST=$PWD/.paper-data/fashion-mnist
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PWD:/tmp/site
fi
{
  nvidia-smi -L
  "$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
  unpack "$STATE"
  "$PY" -m symlib.book.carry load "$CHAPTER"   # committed carry/: what the unpacked state lacks
  date -u +"start %FT%TZ"
  skip=() && for s in ${SKIP:-}; do skip+=(--skip "$s"); done
  SYMLIB_BUDGET_S=$PIECE_S timeout "$HARD_S" "$PY" -m symlib.book.pipeline compute --profile "$PROFILE" --seed 0 \
    --device "$DEVICE" "${skip[@]}" "$CHAPTER"
  echo "compute rc=$?"
  date -u +"end %FT%TZ"
  find "$STATE" -type f -name '*.tmp' -delete
  # what comes back is at most 8 files of 16 MiB: piece.log and 7 parts of 15 MiB. A state past
  # RETURN_MIB (raw) would come back cut, and a cut archive loses every finished
  # entry with it, so the largest checkpoints of fits stopped at the budget go first (chapter 6's
  # digits gold standard stopped late: 113 MB; benchmarks/carry_size_gold.py): their items start
  # again in the next piece, which must then finish them
  limit=$(( RETURN_MIB << 20 ))
  while [ "$(du -sb "$STATE" | cut -f1)" -gt "$limit" ]; do
    big=$(find "$STATE/cache/checkpoints" -type f -printf '%s %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)
    [ -n "$big" ] || { echo "WARNING: the state passes RETURN_MIB=$RETURN_MIB MiB without a checkpoint to drop"; break; }
    echo "dropped $(basename "$big") ($(( $(stat -c %s "$big") >> 20 )) MiB): over the $RETURN_MIB MiB that can come back; its item starts again in the next piece"
    rm -f "$big"
  done
  du -ah "$STATE" | sort -h | tail -20
} 2>&1 | tee "$OUT/piece.log" | grep -v '^\s*$' | tail -"${TAIL:-40}"
tar -czf - -C "$STATE" cache results | split -b 15m -d - "$OUT/state.tgz."
ls -l "$OUT"
size=$(cat "$OUT"/state.tgz.* | wc -c)
if [ "$size" -gt $((52 << 20)) ]; then   # 64 MiB travel with the working tree and .whl
  echo "WARNING: the state weighs $((size >> 20)) MiB; near the 64 MiB that can travel to the next piece:" \
       "set a finished stage aside (gpu_piece.sh aside STAGE, then SKIP=STAGE)" | tee -a "$OUT/piece.log"
fi
