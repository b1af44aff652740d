"""Where a profile's time goes: each chapter's stages run from an empty cache, one chapter after
the other, with each stage's wall time.

No peer and no ratio: it answers "which stages would a smaller `quick` profile have to shrink"
(the whole `quick` book is meant to take at most 15 minutes on 2 cores from a fresh clone). Each
chapter runs as the book's kernel runs it (``CHAPTER.run_stages`` on the profile, seed 0, the
CPU, torch on one thread unless ``OMP_NUM_THREADS`` says otherwise), in a cache of its own that is
removed afterwards, so nothing is served from an earlier run. Two processes of this script side
by side, each given half the chapters, are what ``make book``'s two lanes do.

A stage's time is that of its cache call (``cached``, for a plain stage) or of its fan-out (every
item, each cached on its own); a stage that is not cached (a few seconds: chapter 3's ``cost``,
chapter 6's ``benchmarks``) is counted in the chapter's total only, as ``uncached``. Stan's
programs are compiled once per machine (httpstan's cache); a compile that happens here is inside
chapter 4's ``compile`` stage.

    python benchmarks/quick_stages.py [--profile quick] [--out DIR] [CHAPTER ...]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as the book's quick kernels: before torch starts
    os.environ.setdefault(_variable, "1")

import harness  # puts this checkout's symlib on sys.path  # isort: skip

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch


def time_stages(chapter: str, profile: str) -> dict:
    """``{"total": s, "stages": {stage: s}, "uncached": s}`` for one chapter's run from an empty cache."""
    from symlib.book import chapter as contract
    from symlib.book.pipeline import _environ
    from symlib.chapters import chapter_module, get_profile

    declared = chapter_module(chapter).CHAPTER
    times: dict[str, float] = {}
    plain_cached, plain_fan_out = contract.cached, contract.Chapter._fan_out
    in_fan_out = False  # a fan-out's items go through `cached` too: count them once, as the stage

    @contextlib.contextmanager
    def timed(name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            times[name] = times.get(name, 0.0) + time.perf_counter() - start

    def cached(experiment, *args, **kwargs):
        if in_fan_out:
            return plain_cached(experiment, *args, **kwargs)
        # run_stages hands a plain stage's `cached` partial(stage.compute, ctx): the stage is ctx's
        compute = args[2] if len(args) > 2 else kwargs.get("compute")
        ctx = next(iter(getattr(compute, "args", ())), None)
        with timed(getattr(getattr(ctx, "stage", None), "name", experiment)):
            return plain_cached(experiment, *args, **kwargs)

    def fan_out(self, stage, ctx, *, refresh):
        nonlocal in_fan_out
        in_fan_out = True
        try:
            with timed(stage.name):
                return plain_fan_out(self, stage, ctx, refresh=refresh)
        finally:
            in_fan_out = False

    folder = tempfile.mkdtemp(prefix="quick-stages-")
    contract.cached, contract.Chapter._fan_out = cached, fan_out
    start = time.perf_counter()
    try:
        with _environ("SYMLIB_CACHE", folder):
            declared.run_stages(get_profile(chapter, profile), seed=0, device="cpu")
    finally:
        total = time.perf_counter() - start
        contract.cached, contract.Chapter._fan_out = plain_cached, plain_fan_out
        shutil.rmtree(folder, ignore_errors=True)
    stages = {name: round(times.get(name, 0.0), 1) for name in (s.name for s in declared.stages)}
    return {"total": round(total, 1), "stages": stages, "uncached": round(total - sum(times.values()), 1)}


def main(argv=None) -> dict:
    from symlib.book.workers import use_env_aware_workers
    from symlib.chapters import CHAPTERS

    use_env_aware_workers()   # a cache per chapter: with SYMLIB_JOBS > 1, workers must not keep the first

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("chapters", nargs="*", help=f"default: all ({', '.join(CHAPTERS)})")
    p.add_argument("--profile", default="quick")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    names = args.chapters or list(CHAPTERS)
    unknown = [n for n in names if n not in CHAPTERS]
    if unknown:
        raise SystemExit(f"unknown chapter(s) {', '.join(unknown)}; chapters: {', '.join(CHAPTERS)}")
    meta = harness.metadata(quick=False, peers=harness.Peers({}))
    meta |= {"profile": args.profile, "torch_threads": torch.get_num_threads()}
    chapters = {}
    for name in names:
        chapters[name] = timed = time_stages(name, args.profile)
        print(f"{name}: {timed['total']:.0f} s  " + ", ".join(f"{k} {v:.0f}" for k, v in timed["stages"].items()),
              flush=True)
    meta["loadavg_end"] = list(os.getloadavg())
    result = {"meta": meta, "chapters": chapters}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quick_stages.json").write_text(json.dumps(result, indent=1))
    (args.out / "quick_stages.md").write_text(markdown(meta, chapters))
    return result


def markdown(meta: dict, chapters: dict) -> str:
    """One row per chapter: its total and its stages of half a second or more."""
    head = (f"{meta['date']}, commit `{meta['commit'][:12]}`, {meta['cpu']} ({meta['cpu_count']} cores), "
            f"torch on {meta['torch_threads']} thread(s); load average {meta['loadavg_start'][0]:.2f} at start, "
            f"{meta['loadavg_end'][0]:.2f} at end.")
    lines = [f"# Stage wall times, profile {meta['profile']}, from an empty cache", "", head, "",
             "| chapter | total (s) | stages (s) |", "| --- | --- | --- |"]
    for name, t in chapters.items():
        parts = [f"{k} {v:.0f}" for k, v in t["stages"].items() if v >= 0.5]
        if t["uncached"] >= 0.5:
            parts.append(f"uncached {t['uncached']:.0f}")
        lines.append(f"| {name} | {t['total']:.0f} | {', '.join(parts)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
