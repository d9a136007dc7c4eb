#!/usr/bin/env python3
"""Fleet throughput: the single-process engine on one pod, then the whole fleet on the local pool (and Ray).

    python scripts/gen_fleet.py bench-data/fleet --pods 32 --size-mb 256
    python scripts/bench_fleet.py bench-data/fleet [--jobs 2] [--ray]

Prints GB/s of decompressed log (the bytes the engine reads), deployments per minute, the ratio of the
fleet's GB/s to ``jobs ×`` the single-process GB/s, peak RSS of the largest pool worker, and the contrast
found. Figures go to docs/fleet.md.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdiag.engine import AnalyzeOptions, analyze_group  # noqa: E402
from specdiag.fleet.discover import discover  # noqa: E402
from specdiag.fleet.run import run_fleet  # noqa: E402


def decompressed_bytes(paths) -> int:
    """What the engine reads: the size of each log after decompression (counted outside the timings)."""
    import gzip
    import os

    total = 0
    for p in paths:
        for dirpath, _dirs, files in os.walk(p):
            for f in files:
                full = os.path.join(dirpath, f)
                opener = gzip.open if f.endswith(".gz") else open
                with opener(full, "rb") as fh:
                    while block := fh.read(1 << 24):
                        total += len(block)
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ray", action="store_true", help="also run --executor ray on a local Ray cluster")
    a = ap.parse_args(argv)
    groups = discover([a.root])
    opts = AnalyzeOptions(paths=(), jobs=1)

    analyze_group(groups[-1], opts)  # warm-up: imports, compiled patterns, page cache
    sample = groups[: min(4, len(groups))]
    t0 = time.perf_counter()
    for g in sample:
        analyze_group(g, opts)
    single_s = time.perf_counter() - t0
    pod_bytes = decompressed_bytes([p for g in sample for p in g.paths])
    single_gbs = pod_bytes / single_s / 1e9
    print(f"single process, {len(sample)} pods one after another: {pod_bytes / 1e9:.2f} GB in {single_s:.1f} s = "
          f"{single_gbs:.3f} GB/s")

    t0 = time.perf_counter()
    rep = run_fleet([a.root], replace(opts, jobs=a.jobs))
    fleet_s = time.perf_counter() - t0
    total = decompressed_bytes([p for g in groups for p in g.paths])
    gbs = total / fleet_s / 1e9
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"local pool -j {a.jobs}: {len(groups)} pods, ~{total / 1e9:.1f} GB in {fleet_s:.1f} s = {gbs:.3f} GB/s, "
          f"{len(groups) / fleet_s * 60:.1f} deployments/min; {gbs / (single_gbs * a.jobs):.0%} of {a.jobs} x single; "
          f"peak RSS of the largest worker {rss:.0f} MiB")
    for rc in rep.contrast_rules:
        print("  contrast:", rc.heading())
        for line in rc.lines():
            print("    ", line)
    affected = sorted({r.id for r in rep.deployments for f in r.findings if f.rule in ("KV001", "SD001")})
    print("  pods with KV001 or SD001:", ", ".join(affected))
    if a.ray:
        import ray

        ray.init(num_cpus=a.jobs, include_dashboard=False, log_to_driver=False)
        t0 = time.perf_counter()
        rrep = run_fleet([a.root], replace(opts, jobs=a.jobs), executor="ray")
        ray_s = time.perf_counter() - t0
        same = [r.to_dict() | {"sources": None} for r in rrep.deployments] == [
            r.to_dict() | {"sources": None} for r in rep.deployments]
        print(f"ray ({a.jobs} CPUs): {ray_s:.1f} s = {total / ray_s / 1e9:.3f} GB/s; identical report: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
