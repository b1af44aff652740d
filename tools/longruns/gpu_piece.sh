#!/usr/bin/env bash
# One piece of the `paper` run of one chapter or several on a bare GPU machine lent for minutes, as
# one command from the repo root (sent with the working tree and what tools/longruns/gpu_prepare.sh
# names for the same chapters: .whl, for chapter 2b .paper-data, and .paper-carry only where `keep`
# left a file out of carry/; book/running-long-tiers.md explains the whole loop):
#
#   CHAPTER=05_rebasin_hmc PIECE_S=420 SYMLIB_COMMIT=<this checkout's HEAD> bash tools/longruns/gpu_piece.sh
#   CHAPTER="03_sgm_vi 01_ortho_skip" PIECE_S=480 ... bash tools/longruns/gpu_piece.sh
#
# (SYMLIB_COMMIT: the copy the machine is sent need not have this checkout's HEAD, which the
# pieces file records as the commit; the compute code hash it also records is the code's identity.)
#
# Several chapters share the piece's PIECE_S seconds in the order given: each gets what the ones
# before it left (a chapter that finishes early leaves the rest of the call to the next: chapter 3's
# whole run is estimated at 5-10 minutes of an 8-minute piece); once one stops at the budget, or
# fewer than MIN_S (default 60) seconds are left, the later ones wait for the next piece, said so.
# For each chapter it unpacks the state the previous pieces left (.paper-carry/<chapter>/state.tgz.*:
# the cache's entries and checkpoints, and the pieces file; then what the committed carry/ adds),
# runs `pipeline compute --profile paper --device cuda <chapter>` with SYMLIB_BUDGET_S set to the
# seconds left (a stage stops there, its checkpoint written, exit 75), and packs the states of the
# chapters it ran again, one folder each, into one archive in $OUT as state.tgz.00, .01, ... of at
# most 15 MiB each (at most 8 files of 16 MiB come back from the machine: one archive, not one per
# chapter, so that the number of parts follows the size alone), with the whole output in
# $OUT/piece.log. For chapters 1, 5 and 6 it also
# reads how far their VI fits and HMC runs got from the checkpoints on the machine (results/progress/ in the
# state), so that the book has it even for a checkpoint that cannot come back.
# A stage that cannot stop at the budget (a training) runs to its end: HARD_S (default PIECE_S +
# 120, for the whole piece) kills it (SIGTERM), and the chapter then keeps only what was cached
# before; the piece is still logged, `failed`, with its seconds and the items cached (`keep` warns
# when two pieces in a row lost the same unit so: symlib.book.pieces.stalled). States
# larger together than RETURN_MIB (default 100: 7 parts come back beside the log) drop their
# largest checkpoints, named in the log, rather than come back cut: their items start again in the
# next piece, unless that piece runs on this same machine (a second call while it is still warm):
# the dropped checkpoints wait in $LOCAL (default /tmp/symlib-paper-local) beside a digest of the
# chapter's pieces file, and a piece whose carried state has that same pieces file puts them back.
#
# Back on this machine, put the returned parts where the next piece finds them:
#   bash tools/longruns/gpu_piece.sh keep FILES_AT      # each chapter's state -> .paper-carry/<chapter>/state.tgz.*
# (for each chapter it also copies the run's pieces file to published/paper/progress/<chapter>.json
# and, for chapters 5 and 6, the HMC runs' length, R-hat and ESS so far to <chapter>.chains.json:
# commit both, and the reproducibility page says how far the run got; and it saves the state's files
# into the tracked carry/ with `python -m tools.longruns.carry save` (over 1 MiB xz-compressed; a file
# whose stored size passes CARRY_LIMIT_MIB, default 32, stays behind, named): commit carry/ too,
# once, after the last piece of the day, so that the run continues after .paper-carry/ is lost with a
# replaced machine (git keeps each committed version: chapter 5's HMC checkpoint is about 14 MB
# stored with its one chain, 24 with four; tools/longruns/carry_size.py); each piece first loads carry/ where its unpacked state lacks
# a file, so a piece need not carry .paper-carry/ at all unless keep left a file behind)
# and, once a piece reports the chapter complete, render its pages from that state:
#   CHAPTER=... bash tools/longruns/gpu_piece.sh render   # execute --cached-only --profile paper --device cuda
# PROFILE (default paper) and DEVICE (default cuda) exist for trying it out: PROFILE=smoke DEVICE=cpu.
#
# What travels to the GPU machine is at most 64 MiB (the working tree with carry/, .whl and
# .paper-carry when it is carried, together). carry/ holds the state compressed (chapter 5's
# robust run: about 24 MB for the 4-chain checkpoint beside its finished entries), so a piece that
# carries .paper-carry too nears the limit; there a finished stage nothing later reads can stay here:
#   CHAPTER=05_rebasin_hmc bash tools/longruns/gpu_piece.sh aside bayes   # -> .paper-aside/<chapter>/, not carried
# then run the next pieces of that chapter alone with SKIP=bayes (`pipeline compute --skip bayes`:
# the stage is left out, the pieces file says so); `render` puts the entries set aside back.
set -u
CHAPTER=${CHAPTER:-05_rebasin_hmc}
read -r -a CHAPTERS <<< "$CHAPTER"
PROFILE=${PROFILE:-paper}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}

one_chapter() {  # the subcommands that act on one chapter's state
  [ "${#CHAPTERS[@]}" = 1 ] || { echo "gpu_piece.sh $1: name one chapter (CHAPTER=$CHAPTER)" >&2; exit 2; }
}

unpack() {  # unpack CHAPTER STATE_DIR: its carried parts into STATE_DIR's cache and results
  local carry=.paper-carry/$1
  mkdir -p "$2/cache" "$2/results"
  if compgen -G "$carry/state.tgz.*" > /dev/null; then
    cat "$carry"/state.tgz.* | tar -xzf - -C "$2"
    echo "$1: unpacked $(du -sh "$2" | cut -f1) from $(ls "$carry"/state.tgz.* | wc -l) part(s)"
  else
    echo "$1: no carried state in $carry: the first piece"
  fi
}

chains_progress() {  # chains_progress CHAPTER STATE_DIR OUT: how far its HMC runs (VI fits) got, from the checkpoints (on the device)
  # exactly the checkpoints this run (profile, seed 0, device) continues, as STATE_DIR/results/
  # live-checkpoints names them (tools.longruns.checkpoint_names), those it has not spent (a finished
  # item's is removed); never one of other code or settings
  local reader stopped=() name
  case $1 in
    01_ortho_skip)  reader=symlib.book.vi_progress ;;
    05_rebasin_hmc) reader=symlib.chapters.rebasin_hmc.progress ;;
    06_synthesis)   reader=symlib.chapters.synthesis.progress ;;
    *) return 0 ;;
  esac
  while read -r name; do
    [ -f "$2/cache/checkpoints/$name" ] && stopped+=("$2/cache/checkpoints/$name")
  done < "$2/results/live-checkpoints"
  if [ "${#stopped[@]}" -gt 0 ]; then "$PY" -m "$reader" "$3" "${stopped[@]}"; else rm -f "$3"; fi
}

keep_one() {  # keep_one CHAPTER DIR: one chapter's returned state (DIR/cache, DIR/results), unpacked
  local ch=$1 dir=$2 carry=.paper-carry/$1
  mkdir -p "$carry" && rm -f "$carry"/state.tgz.* || return 1
  tar -czf - -C "$dir" cache results | split -b 15m -d - "$carry/state.tgz." || return 1
  cp "$FILES_AT"/piece.log "$carry"/last-piece.log 2>/dev/null
  # the book says how far the run got: its pieces file, copied to published/paper/progress/,
  # and (chapters 5 and 6) the length, R-hat and ESS so far of the HMC runs in progress, as the
  # piece read them on the device (results/progress/; none there: no run in progress)
  "$PY" -m symlib.book.records progress "$ch" "$dir/results/pieces/$ch.json"
  # the state also goes to the tracked carry/ (entries and checkpoints of at most CARRY_LIMIT_MIB
  # each as stored, large ones xz-compressed, and the pieces file): committed, it survives a
  # replaced machine, which .paper-carry/ does not; the next piece loads it where its unpacked
  # state lacks it
  # (a checkpoint the state no longer has is removed from carry/, its fit finished, unless the
  # piece dropped it for the way back: results/dropped names those)
  # (and one that no recorded run continues with this code -- left by a code change -- is removed;
  # results/live-checkpoints names those the piece's run continues, as the device named them)
  local names=() && while read -r name; do names+=(--dropped "$name"); done < <(cat "$dir/results/dropped" 2>/dev/null)
  while read -r name; do names+=(--live "$name"); done < <(cat "$dir/results/live-checkpoints" 2>/dev/null)
  SYMLIB_CACHE=$dir/cache SYMLIB_RESULTS=$dir/results "$PY" -m tools.longruns.carry save --limit "${CARRY_LIMIT_MIB:-32}" \
    "${names[@]}" "$ch"
  local read=$dir/results/progress/$ch.chains.json published=published/paper/progress/$ch.chains.json
  if [ -f "$read" ]; then
    mkdir -p "$(dirname "$published")" && cp "$read" "$published" && echo "$ch: how far its fits got, as the piece read it on the device -> $published"
  else
    rm -f "$published"
  fi
  ls -l "$carry"
}

case "${1:-piece}" in
  keep)
    [ -n "${2:-}" ] || { echo "usage: gpu_piece.sh keep FILES_AT" >&2; exit 2; }
    FILES_AT=$2
    compgen -G "$FILES_AT/state.tgz.*" > /dev/null || { echo "no state.tgz.* in $FILES_AT" >&2; exit 1; }
    tmp=$(mktemp -d) && cat "$FILES_AT"/state.tgz.* | tar -xzf - -C "$tmp" || { echo "the parts in $FILES_AT do not unpack" >&2; exit 1; }
    for dir in "$tmp"/*/; do keep_one "$(basename "$dir")" "$dir" || exit 1; done
    rm -rf "$tmp"
    exit 0 ;;
  aside)
    one_chapter aside
    [ -n "${2:-}" ] || { echo "usage: gpu_piece.sh aside STAGE" >&2; exit 2; }
    CARRY=.paper-carry/$CHAPTER ASIDE=.paper-aside/$CHAPTER
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
    one_chapter render
    STATE=${STATE:-/tmp/symlib-paper-state/$CHAPTER}
    rm -rf "$STATE" && mkdir -p "$STATE"
    export SYMLIB_CACHE=$STATE/cache SYMLIB_RESULTS=${SYMLIB_RESULTS:-results}
    unpack "$CHAPTER" "$STATE" && mkdir -p "$SYMLIB_RESULTS/pieces" \
      && cp "$STATE"/results/pieces/"$CHAPTER".json "$SYMLIB_RESULTS/pieces/" 2>/dev/null
    for f in .paper-aside/"$CHAPTER"/*.tgz; do [ -f "$f" ] && tar -xzf "$f" -C "$STATE" && echo "put back $f"; done
    exec "$PY" -m symlib.book.pipeline execute --cached-only --profile "$PROFILE" --seed 0 --device "$DEVICE" "$CHAPTER" ;;
  piece) ;;
  *) echo "usage: gpu_piece.sh [piece|keep FILES_AT|aside STAGE|render]" >&2; exit 2 ;;
esac

OUT=${OUT:-/tmp/gpu-piece}
PIECE_S=${PIECE_S:-420}
HARD_S=${HARD_S:-$(awk -v p="$PIECE_S" 'BEGIN { print p + 120 }')}
MIN_S=${MIN_S:-60}
RETURN_MIB=${RETURN_MIB:-100}
STATE=${STATE:-/tmp/symlib-paper-state}
LOCAL=${LOCAL:-/tmp/symlib-paper-local}
[ -z "${SKIP:-}" ] || one_chapter "piece with SKIP"
rm -rf "$STATE"
mkdir -p "$OUT" "$STATE"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD XDG_CACHE_HOME=/tmp/symlib-xdg
# the data a bare machine lacks, carried as tools/longruns/gpu_prepare.sh left it (Fashion-MNIST for 2b)
[ -d .paper-data/fashion-mnist ] && export SYMLIB_FASHION_MNIST=$PWD/.paper-data/fashion-mnist
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PWD:/tmp/site
fi
T0=$(date +%s.%N)
# every name checked before any device time goes to the first one (a typo in the second would
# otherwise surface only once the first had run); the same process names torch and the GPU for the
# log (one Python start less: each costs seconds of the piece)
torch_line=$("$PY" -c "import sys
from symlib.chapters import CHAPTERS
bad = [c for c in sys.argv[1:] if c not in CHAPTERS]
bad and sys.exit(f'gpu_piece.sh: unknown chapter(s) {\", \".join(bad)}; chapters: {\", \".join(CHAPTERS)}')
import torch
print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" \
  "${CHAPTERS[@]}") || exit 2
elapsed() { awk -v t0="$T0" -v t="$(date +%s.%N)" 'BEGIN { print t - t0 }'; }
pieces_digest() { sha256sum "$STATE/$1/results/pieces/$1.json" 2>/dev/null | cut -d' ' -f1; }
ran=()
{
  nvidia-smi -L
  echo "$torch_line"
  rc=0
  for ch in "${CHAPTERS[@]}"; do
    left=$(awk -v p="$PIECE_S" -v e="$(elapsed)" 'BEGIN { l = p - e; print (l > 1e-9 ? l : 1e-9) }')
    hard=$(awk -v h="$HARD_S" -v e="$(elapsed)" 'BEGIN { s = int(h - e); print (s < 1 ? 1 : s) }')
    if [ "${#ran[@]}" -gt 0 ]; then   # the first chapter always runs; later ones get what is left
      if [ "$rc" != 0 ]; then echo "$ch: waits for the next piece (${ran[-1]} did not finish: rc=$rc)"; continue; fi
      if awk -v l="$left" -v m="$MIN_S" 'BEGIN { exit !(l < m) }'; then
        echo "$ch: waits for the next piece (${left%.*} s left of PIECE_S, under MIN_S=$MIN_S)"; continue
      fi
    fi
    ran+=("$ch")
    export SYMLIB_CACHE=$STATE/$ch/cache SYMLIB_RESULTS=$STATE/$ch/results
    unpack "$ch" "$STATE/$ch"
    "$PY" -m tools.longruns.carry load "$ch"   # committed carry/: what the unpacked state lacks
    rm -f "$SYMLIB_RESULTS/dropped"          # what this piece drops for the way back, named afresh
    # a second piece on this same machine: the checkpoints its previous piece dropped for the way
    # back belong to exactly this state when its pieces file is the one that piece left
    digest=$(pieces_digest "$ch")
    if [ -n "$digest" ] && [ -f "$LOCAL/$ch/pieces.sha256" ] && [ "$(cat "$LOCAL/$ch/pieces.sha256")" = "$digest" ]; then
      mkdir -p "$SYMLIB_CACHE/checkpoints"
      for f in "$LOCAL/$ch"/dropped/*; do
        [ -f "$f" ] && mv "$f" "$SYMLIB_CACHE/checkpoints/" && echo "$ch: put back $(basename "$f"), dropped for the way back by the previous piece on this machine"
      done
    fi
    rm -rf "${LOCAL:?}/$ch"
    date -u +"$ch start %FT%TZ"
    skip=() && for s in ${SKIP:-}; do skip+=(--skip "$s"); done
    SYMLIB_BUDGET_S=$left timeout "$hard" "$PY" -m symlib.book.pipeline compute --profile "$PROFILE" --seed 0 \
      --device "$DEVICE" "${skip[@]}" "$ch"
    rc=$?
    echo "$ch compute rc=$rc"
    date -u +"$ch end %FT%TZ"
    find "$STATE/$ch" -type f -name '*.tmp' -delete
    # the checkpoints this run continues as this machine names them (its data decide part of the
    # name): the progress is read from those, and keep's `carry save` keeps them whatever this
    # checkout's machine would name them
    "$PY" -m tools.longruns.checkpoint_names "$ch" --profile "$PROFILE" --seed 0 --device "$DEVICE" > "$STATE/$ch/results/live-checkpoints"
    chains_progress "$ch" "$STATE/$ch" "$STATE/$ch/results/progress/$ch.chains.json"
  done
  # what comes back is at most 8 files of 16 MiB: piece.log and 7 parts of 15 MiB. A state past
  # RETURN_MIB (raw) would come back cut, and a cut archive loses every finished
  # entry with it, so the largest checkpoints of fits stopped at the budget go first (chapter 6's
  # digits gold standard stopped late: 113 MB; tools/longruns/carry_size_gold.py): their items start
  # again in the next piece, which must then finish them, unless it runs on this machine ($LOCAL)
  limit=$(( RETURN_MIB << 20 ))
  while [ "$(du -sb "$STATE" | cut -f1)" -gt "$limit" ]; do
    big=$(find "$STATE"/*/cache/checkpoints -type f -printf '%s %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)
    [ -n "$big" ] || { echo "WARNING: the state passes RETURN_MIB=$RETURN_MIB MiB without a checkpoint to drop"; break; }
    ch=$(basename "$(dirname "$(dirname "$(dirname "$big")")")")
    echo "dropped $(basename "$big") ($(( $(stat -c %s "$big") >> 20 )) MiB): over the $RETURN_MIB MiB that can come back; its item starts again in the next piece (here in $LOCAL/$ch/dropped, put back if that piece runs on this machine)"
    mkdir -p "$LOCAL/$ch/dropped" && mv "$big" "$LOCAL/$ch/dropped/" && basename "$big" >> "$STATE/$ch/results/dropped"
  done
  for ch in "${ran[@]}"; do mkdir -p "$LOCAL/$ch" && pieces_digest "$ch" > "$LOCAL/$ch/pieces.sha256"; done
  du -ah "$STATE" | sort -h | tail -20
  printf '%s\n' "${ran[@]}" > "$STATE/ran"
} 2>&1 | tee "$OUT/piece.log" | grep -v '^\s*$' | tail -"${TAIL:-40}"
# one archive of a folder per chapter run, in parts: their number follows the size alone
mapfile -t ran < "$STATE/ran"
tar -czf - -C "$STATE" "${ran[@]}" | split -b 15m -d - "$OUT/state.tgz."
ls -l "$OUT"
size=$(cat "$OUT"/state.tgz.* | wc -c)
if [ "$size" -gt $((52 << 20)) ]; then   # 64 MiB travel with the working tree and .whl
  echo "WARNING: the states weigh $((size >> 20)) MiB; near the 64 MiB that can travel to the next piece:" \
       "set a finished stage aside (gpu_piece.sh aside STAGE, then SKIP=STAGE)" | tee -a "$OUT/piece.log"
fi
