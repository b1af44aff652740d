#!/usr/bin/env bash
# The GPU checks and benchmarks, as one command on a bare GPU machine lent for minutes, from the
# repo root: the GPU agreement, reduced-precision and capture tests, then chapter 1's captured VI
# step, the captured-trajectory benchmark and the reduced-precision HMC benchmark
# (benchmarks/gpu_results/ keeps what they measured). A part whose time limit (TESTS_S, VI_S,
# CAPTURE_S, BENCH_S) is 0 is skipped.
# Everything worth keeping goes to $OUT (default /tmp/gpu-session): every part's whole output in
# session.log, each benchmark's JSON and markdown (7 files: at most 8 come back from the machine).
# Wheels for packages the machine lacks may sit in .whl/ and hamiltorch's checkout in
# .peers/hamiltorch (both untracked).
set -u
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD
export SYMLIB_CACHE=/tmp/symlib-cache XDG_CACHE_HOME=/tmp/symlib-xdg
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PWD:/tmp/site
fi
nvidia-smi -L
"$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
date -u +"start %FT%TZ"
step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, or skip when the limit is 0
  local name=$1 limit=$2; shift 2
  date -u +"$name %FT%TZ"
  if [ "$limit" = 0 ]; then echo "$name skipped"; return; fi
  timeout "$limit" "$@" 2>&1 | tee -a "$OUT/session.log" | tail -"${TAIL:-15}"
  echo "$name rc=${PIPESTATUS[0]}"
}
TESTS=${TESTS:-tests/chapters/test_gpu_agreement.py tests/inference/test_hmc_precision.py tests/inference/test_hmc.py tests/inference/test_capture.py tests/inference/test_mfvi_graph.py}
# shellcheck disable=SC2086
step tests "${TESTS_S:-240}" "$PY" -m pytest -q -p no:cacheprovider -n 5 -rfEs $TESTS
step vi_capture "${VI_S:-150}" "$PY" benchmarks/bench_vi_capture.py --device cuda --out "$OUT"
step capture "${CAPTURE_S:-180}" "$PY" benchmarks/bench_capture.py --device cuda --out "$OUT"
step precision "${BENCH_S:-300}" "$PY" benchmarks/bench_precision.py --device cuda --hamiltorch .peers/hamiltorch --out "$OUT"
date -u +"end %FT%TZ"
