"""Compiling a Stan program: symlib's flags (``-g0`` last) against setuptools' default (``-g``).

The work: chapter 4's ``constrained`` program (``symlib/inference/stan_models``), compiled by
``symlib.inference.stan_build.compiled`` into an empty private httpstan cache, in a child Python
(a compile is a process of its own: ``stan_build`` starts g++ in one), one core. The two
contenders differ only in the flags the compile's child hands setuptools:

- ``default``: ``sysconfig``'s ``CFLAGS`` as they are (``-DNDEBUG -g -fwrapv -O3 -Wall``): what
  httpstan compiled with before symlib passed its own flags;
- ``-g0``: :func:`symlib.inference.stan_build.compile_flags` (the same, then ``-g0``).

Timing: alternated rounds (``default``, ``-g0``, ``default``, ...), one ratio per round
(``default time / -g0 time``), median and range; no warm-up round (each round compiles from
nothing, which is the cost being measured). A round's time includes starting the child Python
and importing httpstan (about a second, the same for both).

Same numbers: from the last round's two modules, (1) the disassembled machine code of each
module's ``.text`` section (``objdump -d``) compared line for line, addresses included, and (2)
4 chains of NUTS (200 warm-up, 200 draws) on the same data (a 2-input, 3-unit net on 30 points,
:func:`symlib.nn.constrained.stan_data`) and seed, every draw compared exactly. Both must be
identical; the result says which are.

Run: ``python benchmarks/bench_stan_compile.py [--quick] [--out DIR] [--tag TAG]``; writes
``<out>/<date>_stan_compile[_TAG].json`` and ``.md`` (default ``benchmarks/cpu_results``).
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

from symlib.inference import stan_build

NAME = "stan_compile"
PROGRAM = "constrained"

_CHILD = """
import sys
import numpy as np
from symlib.inference import stan as st
from symlib.inference import stan_build

mode, out = sys.argv[1], sys.argv[2]
if mode == "default":   # the flags as they were before compile_flags: setuptools' own
    import sysconfig
    stan_build.compile_flags = lambda: sysconfig.get_config_var("CFLAGS")
code = st.program(%(program)r)
with stan_build.compiled(%(program)r, code):
    pass
if out:
    from symlib.nn.constrained import stan_data
    rng = np.random.default_rng(0)
    x = rng.standard_normal((30, 2))
    data = stan_data(%(program)r, x, np.tanh(x @ [1.0, -0.5]) + 0.1 * rng.standard_normal(30), hidden=3)
    fit = st.build(%(program)r, data, seed=11, code=code).sample(chains=4, warmup=200, draws=200)
    np.savez(out, **{k: np.asarray(v) for k, v in fit.draws.items()})
print(stan_build.model_directory(code))
"""


def _compile(mode: str, xdg: Path, draws: Path | None) -> tuple[float, Path]:
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg), "PYTHONPATH": str(harness.ROOT)}
    script = _CHILD % {"program": PROGRAM}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script, mode, str(draws or "")], env=env, check=True,
                          capture_output=True, text=True)
    return time.perf_counter() - t0, Path(done.stdout.strip().splitlines()[-1])


def _text(directory: Path) -> list[str]:
    """The module's ``.text`` disassembly, header (which names the file) dropped."""
    module = next(directory.glob("*.so"))
    out = subprocess.run(["objdump", "-d", "--section=.text", "--no-show-raw-insn", str(module)],
                         check=True, capture_output=True, text=True).stdout
    return out.splitlines()[3:]


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    repeats = 2 if quick else 3
    times: dict[str, list[float]] = {"default": [], "-g0": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for r in range(repeats):
            for mode, series in times.items():
                series.append(_compile(mode, tmp / f"{mode}-{r}", None)[0])
        # the last round's modules, found in their caches (no compile): machine code and draws
        dirs = {mode: _compile(mode, tmp / f"{mode}-{repeats - 1}", tmp / f"{mode}.npz")[1] for mode in times}
        sizes = {mode: next(dirs[mode].glob("*.so")).stat().st_size for mode in times}
        same_code = _text(dirs["default"]) == _text(dirs["-g0"])
        a, b = np.load(tmp / "default.npz"), np.load(tmp / "-g0.npz")
        same_draws = sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    case = f"chapter 4's {PROGRAM!r} program, empty cache, one compile per contender and round"
    return [harness.row(
        NAME, case, "-g0 (compile_flags)", "default (-g)", subject_s=times["-g0"], reference_s=times["default"],
        ratio=harness.ratios(times["default"], times["-g0"]), ratio_is="speed-up (default time / -g0 time)",
        metrics={"module MB (-g0)": sizes["-g0"] / 1e6, "module MB (default)": sizes["default"] / 1e6,
                 "identical .text machine code": same_code, "identical draws (4 chains x 200)": same_draws,
                 "flags": stan_build.compile_flags(), "default flags": sysconfig.get_config_var("CFLAGS")},
        note="machine code and draws compared on the last round's two modules")]


def main(argv=None) -> None:
    harness.main_dated(run, NAME, __doc__.splitlines()[0], argv, one_thread=False)


if __name__ == "__main__":
    main()
