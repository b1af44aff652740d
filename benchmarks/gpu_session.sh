#!/usr/bin/env bash
# One GPU session's checks (issue 30), as one command on a bare GPU machine, from the repo root:
# the GPU agreement, reduced-precision and capture tests, then the reduced-precision HMC benchmark
# and the captured-trajectory benchmark.
# Everything worth keeping goes to $OUT (default /tmp/gpu-session). Wheels for packages the
# machine lacks may sit in .whl/ and hamiltorch's checkout in .peers/hamiltorch (both untracked).
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
TESTS=${TESTS:-tests/chapters/test_gpu_agreement.py tests/inference/test_hmc_precision.py tests/inference/test_hmc.py tests/inference/test_capture.py}
# shellcheck disable=SC2086
timeout "${TESTS_S:-240}" "$PY" -m pytest -q -p no:cacheprovider -n 5 -rfEs $TESTS \
  2>&1 | tee "$OUT/tests.log" | tail -40
echo "tests rc=${PIPESTATUS[0]}"
date -u +"bench %FT%TZ"
timeout "${BENCH_S:-300}" "$PY" benchmarks/bench_precision.py --device cuda --hamiltorch .peers/hamiltorch --out "$OUT" \
  2>&1 | tail -30
echo "bench rc=${PIPESTATUS[0]}"
date -u +"capture %FT%TZ"
timeout "${CAPTURE_S:-180}" "$PY" benchmarks/bench_capture.py --device cuda --out "$OUT" 2>&1 | tail -12
echo "capture rc=${PIPESTATUS[0]}"
date -u +"end %FT%TZ"
