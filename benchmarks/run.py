"""Run the benchmarks and write one JSON file and one markdown table of all their results.

    python benchmarks/run.py [--quick] [--out DIR] [--peers DIR] [--device DEV] [names...]

Names (default: all): hmc, mmd, batched_training, sgm_vs_mfvi, ortho_skip, gpu. See
benchmarks/README.md for the protocol and for how to fetch the peers.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import time

import bench_batched
import bench_capture
import bench_gpu
import bench_hmc
import bench_mmd
import bench_orthoskip
import bench_precision
import bench_sgm
import bench_stan
import bench_stan_compile
import bench_vi_capture

BENCHMARKS = {m.NAME: m for m in (bench_hmc, bench_mmd, bench_batched, bench_sgm, bench_orthoskip, bench_gpu,
                                    bench_precision, bench_capture, bench_stan, bench_vi_capture,
                                    bench_stan_compile)}


def main(argv=None) -> None:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument(
        "names",
        nargs="*",
        metavar="name",
        help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}",
    )
    args = p.parse_args(argv)
    harness.use_device_option(args)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    harness.single_thread()
    peers = harness.Peers.from_args(args)
    meta = harness.metadata(args.quick, peers)
    rows = []
    for name in args.names or BENCHMARKS:
        start = time.perf_counter()
        rows += BENCHMARKS[name].run(args.quick, peers)
        print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
    json_path, md_path = harness.write(args.out, "benchmarks", meta, rows)
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
