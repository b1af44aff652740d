"""What every benchmark shares: one thread, alternated timing, the matmul rate, peers, output.

Import this module first in a benchmark script: it puts the checkout that holds this folder at
the front of ``sys.path``, so the benchmarks always measure the ``symlib`` next to them (not
whichever copy happens to be installed).

Timing protocol. The machines these run on are shared and noisy, so the code under test and
its comparison are timed in ONE process, ALTERNATED: after untimed warm-up rounds, each round
runs every contender once (A, B, A, B, ...). Each round gives one ratio; the report is the
median and the min-max range of those per-round ratios, which cancels slow drifts of the
machine's load better than comparing two separate medians.

Matmul-bound rate. Where a benchmark reports "share of the matmul rate", a square matmul
(``2 n^3`` flops) is one more contender of the same rounds; its rate that round is the
machine's attainable single-thread rate, and the share is
``(flops of the work / time of the work) / matmul rate``. The work's flops are counted by
``torch.utils.flop_counter.FlopCounterMode`` (matmuls and convolutions, forward and backward).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch.utils.flop_counter import FlopCounterMode

DEFAULT_OUT = ROOT / "benchmarks" / "results"
DEVICE_ENV = "SYMLIB_BENCH_DEVICE"
"""Where the ``gpu`` benchmark runs (``--device``); the others always time one CPU thread."""

PEER_ENV = {
    "hamiltorch": "HAMILTORCH_SRC",
    "mmdagg": "MMDAGG_SRC",
    "laurent": "LAURENT_SRC",
}
"""Environment variable naming each peer's source folder (a checkout of its repository)."""

PEER_DIRNAME = {
    "hamiltorch": "hamiltorch",
    "mmdagg": "mmdagg",
    "laurent": "bayes_posterior_symmetry_exploration",
}
"""Folder name of each peer under ``--peers DIR`` (or ``$SYMLIB_PEERS``)."""


# --------------------------------------------------------------------------- setup


def single_thread() -> None:
    """One thread for torch and for every BLAS/OpenMP pool numpy or scipy may use."""
    torch.set_num_threads(1)
    threadpool_limits(1)


def summary(values: Sequence[float]) -> dict:
    """``{"median", "min", "max", "n"}`` of a list of numbers."""
    vals = [float(v) for v in values]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def alternate(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Wall times of each callable, run in rounds ``A, B, ..., A, B, ...``.

    Args:
        fns: name -> a callable doing one unit of work (its result is discarded).
        repeats: timed rounds.
        warmup: untimed rounds first (allocator, caches, lazy initialisation).

    Returns:
        name -> ``repeats`` wall times in seconds, in round order (so index ``i`` of two
        contenders belongs to the same round).
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            gc.collect()  # a collection inside a timed call would bill one contender for another's garbage
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def ratios(numerator: Sequence[float], denominator: Sequence[float]) -> dict:
    """Summary of the per-round ratios ``numerator[i] / denominator[i]``."""
    return summary([a / b for a, b in zip(numerator, denominator)])


def matmul_probe(dtype: torch.dtype, n: int = 1024) -> tuple[Callable[[], object], float]:
    """A square ``n x n`` matmul to time alongside the work, and its flop count ``2 n^3``."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen, dtype=dtype)
    b = torch.randn(n, n, generator=gen, dtype=dtype)
    return (lambda: torch.mm(a, b)), 2.0 * n**3


def matmul_share(
    work_flops: float, work_times: Sequence[float], probe_flops: float, probe_times: Sequence[float]
) -> dict:
    """Per round: the work's flop rate over the matmul probe's rate (1 = matmul-bound)."""
    return summary([(work_flops / t) / (probe_flops / p) for t, p in zip(work_times, probe_times)])


def count_flops(fn: Callable[[], object]) -> float:
    """Flops of one call, as ``FlopCounterMode`` counts them (matmuls, convolutions)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


# --------------------------------------------------------------------------- peers


@dataclass
class Peers:
    """Where each peer's source lives; a peer with no folder is skipped, with the reason."""

    paths: dict[str, Path | None] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Peers:
        """``--NAME`` beats ``$NAME_SRC``, which beats ``--peers DIR`` / ``$SYMLIB_PEERS``."""
        root = args.peers or os.environ.get("SYMLIB_PEERS")
        paths = {}
        for name, env in PEER_ENV.items():
            given = getattr(args, name, None) or os.environ.get(env)
            if given is None and root:
                given = Path(root) / PEER_DIRNAME[name]
            paths[name] = Path(given).expanduser().resolve() if given else None
        return cls(paths)

    def locate(self, name: str, relative: str) -> tuple[Path | None, str | None]:
        """``(root, None)`` if ``root / relative`` exists, else ``(None, why it is skipped)``."""
        root = self.paths.get(name)
        if root is None:
            return None, (
                f"peer '{name}' not given (--{name} DIR, ${PEER_ENV[name]} or "
                f"--peers DIR holding {PEER_DIRNAME[name]}/)"
            )
        if not (root / relative).is_file():
            return None, f"peer '{name}': {root / relative} not found"
        return root, None


def load_file_module(name: str, path: Path) -> types.ModuleType:
    """Import one source file as a module (without importing its package's ``__init__``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def import_hamiltorch(root: Path) -> types.ModuleType:
    """``import hamiltorch`` from a checkout; a stub stands in for ``termcolor`` if missing.

    hamiltorch imports ``termcolor.colored`` only to colour its progress messages.
    """
    try:
        importlib.import_module("termcolor")
    except ImportError:
        stub = types.ModuleType("termcolor")
        stub.colored = lambda text, *args, **kwargs: text
        sys.modules["termcolor"] = stub
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("hamiltorch")
    finally:
        sys.path.remove(str(root))


# --------------------------------------------------------------------------- results


def row(
    benchmark: str,
    case: str,
    subject: str,
    reference: str,
    *,
    subject_s: Sequence[float] | None = None,
    reference_s: Sequence[float] | None = None,
    ratio: dict | None = None,
    ratio_is: str = "",
    share: dict | None = None,
    metrics: dict | None = None,
    note: str = "",
    skipped: str | None = None,
) -> dict:
    """One line of the results: ``subject`` measured against ``reference`` on one case."""
    return {
        "benchmark": benchmark,
        "case": case,
        "subject": subject,
        "reference": reference,
        "subject_s": summary(subject_s) if subject_s else None,
        "reference_s": summary(reference_s) if reference_s else None,
        "ratio": ratio,
        "ratio_is": ratio_is,
        "matmul_share": share,
        "metrics": metrics or {},
        "note": note,
        "skipped": skipped,
    }


def skipped_row(benchmark: str, case: str, subject: str, reference: str, why: str) -> dict:
    return row(benchmark, case, subject, reference, skipped=why)


def metadata(quick: bool, peers: Peers) -> dict:
    """Machine, versions and load, to read the numbers against."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "quick": quick,
        "commit": commit,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "loadavg_start": list(os.getloadavg()),
        "peers": {k: (str(v) if v else None) for k, v in peers.paths.items()},
    }


def _fmt_s(s: dict | None) -> str:
    if not s:
        return ""
    m = s["median"]
    return f"{m * 1e3:.1f} ms" if m < 1 else f"{m:.2f} s"


def _fmt_range(s: dict | None, pct: bool = False) -> str:
    if not s:
        return ""
    if pct:
        return f"{100 * s['median']:.1f} % [{100 * s['min']:.1f}–{100 * s['max']:.1f}]"
    return f"{s['median']:.2f} [{s['min']:.2f}–{s['max']:.2f}]"


def markdown(meta: dict, rows: list[dict]) -> str:
    """The results as a markdown table, preceded by the machine and the protocol."""
    lines = [
        "# symlib benchmarks",
        "",
        (
            f"{meta['date']}, commit `{meta['commit'][:12]}`, {meta['cpu']} "
            f"({meta['cpu_count']} cores), torch {meta['torch']}, numpy {meta['numpy']}, 1 thread, "
            f"{'--quick' if meta['quick'] else 'default'} mode; load average "
            f"{meta['loadavg_start'][0]:.2f} at start, {meta['loadavg_end'][0]:.2f} at end."
        ),
        "",
        "Alternated rounds; times are medians; ratios and shares: median [min–max] over rounds.",
        "",
        (
            "| benchmark | case | subject | time | reference | time | ratio | ratio is | "
            "share of matmul rate | notes |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        notes = r["note"]
        if r["skipped"]:
            notes = f"skipped: {r['skipped']}"
        elif r["metrics"]:
            shown = "; ".join(f"{k} {_fmt_metric(v)}" for k, v in r["metrics"].items())
            notes = f"{shown}. {notes}".strip()
        lines.append(
            f"| {r['benchmark']} | {r['case']} | {r['subject']} | {_fmt_s(r['subject_s'])} | "
            f"{r['reference']} | {_fmt_s(r['reference_s'])} | {_fmt_range(r['ratio'])} | "
            f"{r['ratio_is']} | {_fmt_range(r['matmul_share'], pct=True)} | {notes} |"
        )
    return "\n".join(lines) + "\n"


def _fmt_metric(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def write(out: Path, stem: str, meta: dict, rows: list[dict]) -> tuple[Path, Path]:
    """Write ``stem.json`` and ``stem.md`` under ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {**meta, "loadavg_end": list(os.getloadavg())}
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    md_path.write_text(markdown(meta, rows))
    return json_path, md_path


def parser(description: str) -> argparse.ArgumentParser:
    """The options every entry point shares: ``--quick``, ``--out``, the peers' folders."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, a few seconds per benchmark")
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for the JSON and markdown results (default {DEFAULT_OUT})",
    )
    p.add_argument("--peers", help="folder holding the peers' checkouts (default $SYMLIB_PEERS)")
    p.add_argument("--device", help="device of the gpu benchmark: cuda, cuda:N or cpu (default: "
                   f"${DEVICE_ENV}, else the GPU when torch sees one)")
    for name, env in PEER_ENV.items():
        p.add_argument(f"--{name}", help=f"{name}'s checkout (default ${env})")
    return p


def use_device_option(args: argparse.Namespace) -> None:
    """Pass ``--device`` on to the ``gpu`` benchmark through ``$SYMLIB_BENCH_DEVICE``."""
    if args.device:
        os.environ[DEVICE_ENV] = args.device


def main_for(
    run: Callable[[bool, Peers], list[dict]],
    name: str,
    description: str,
    argv: Sequence[str] | None = None,
) -> None:
    """Command line of one benchmark script: run it, print and write its table."""
    args = parser(description).parse_args(argv)
    use_device_option(args)
    single_thread()
    json_path, md_path = _run_and_write(run, args, name)
    print(f"wrote {json_path} and {md_path}")


def _run_and_write(run: Callable[[bool, Peers], list[dict]], args: argparse.Namespace, stem: str,
                   note: str | None = None) -> tuple[Path, Path]:
    """Run a benchmark under the parsed ``args``, write its table to ``<args.out>/<stem>.*`` (with
    ``note`` in its metadata), print it and say where it went."""
    peers = Peers.from_args(args)
    meta = metadata(args.quick, peers)
    if note is not None:
        meta["note"] = note
    rows = run(args.quick, peers)
    json_path, md_path = write(args.out, stem, meta, rows)
    print(md_path.read_text())
    return json_path, md_path


CPU_RESULTS = ROOT / "benchmarks" / "cpu_results"
"""Where a dated benchmark (:func:`main_dated`) writes by default: committed results."""


def main_dated(
    run: Callable[[bool, Peers], list[dict]],
    name: str,
    description: str,
    argv: Sequence[str] | None = None,
    *,
    one_thread: bool = True,
) -> None:
    """Command line of a benchmark whose results are committed: ``<out>/<date>_<name>[_TAG]``
    (``--out`` defaults to :data:`CPU_RESULTS`; ``--tag`` names a second run of the same day),
    with a note that the machine is shared and the load average before and after.
    ``one_thread=False`` leaves this process's threads as they are (the work runs in children)."""
    p = parser(description)
    p.set_defaults(out=CPU_RESULTS)
    p.add_argument("--tag", help="suffix of the output files' names (a second run of the same day)")
    args = p.parse_args(argv)
    if one_thread:
        single_thread()
    stem = f"{datetime.date.today().isoformat()}_{name}" + (f"_{args.tag}" if args.tag else "")
    json_path, md_path = _run_and_write(
        run, args, stem, note="shared 2-core machine: other jobs ran during the rounds (see loadavg_start/end); "
                              "ratios are per alternated round, so a slow drift of the load cancels")
    print(f"wrote {json_path} and {md_path} (load average now {os.getloadavg()})")
