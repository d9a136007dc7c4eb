#!/usr/bin/env python3
"""Generate a synthetic fleet: one folder per pod, each a gzip'd TP=8 server log, a few pods with incidents.

    python scripts/gen_fleet.py bench-data/fleet --pods 32 --size-mb 256 [--kv001 3] [--collapse 1]

* ``--kv001`` pods get retrieval shortfalls AND share two attributes the other pods do not have: another
  LMCache build (``0.5.7.dev12-g0a1b2c3d``) and ``max_local_cpu_size: 20``;
* ``--collapse`` pods (after those) see their speculative acceptance collapse half-way through the run;
* all other pods are healthy (no incident), with the majority's build and config.

The pods' expected findings are printed as JSON at the end (stdout). Built on ``gen_bench_log.generate``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_bench_log  # noqa: E402
from gen_example_logs import tp8_server  # noqa: E402

AFFECTED_VERSION = "0.5.7.dev12-g0a1b2c3d"


class CollapsingAcceptance:
    """Per-position acceptance that drops to a tenth after ``after`` stats intervals (read once per interval)."""

    def __init__(self, base: tuple[float, ...], after: int) -> None:
        self.base, self.after, self.n = base, after, 0

    def __iter__(self):
        self.n += 1
        factor = 1.0 if self.n <= self.after else 0.1
        return iter([a * factor for a in self.base])


def pod_server(kind: str, intervals: int):
    s = tp8_server()
    if kind == "kv001":
        return dataclasses.replace(s, lmc_version=AFFECTED_VERSION, max_cpu_gb=20.0)
    if kind == "collapse":
        return dataclasses.replace(s, accept=CollapsingAcceptance(s.accept, intervals // 2))
    return s


def write_pod(folder: Path, kind: str, size_mb: float, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    size = int(size_mb * 2**20)
    intervals = max(4, int(size / (18 * 10 * 2300)))  # ~18 req/s, ~2.3 kB per request: stats every 10 s
    original = gen_bench_log.tp8_server
    gen_bench_log.tp8_server = lambda: pod_server(kind, intervals)
    try:
        with gzip.open(folder / "serve.log.gz", "wb", compresslevel=1) as out:
            gen_bench_log.generate(out, size, seed, 3 if kind == "kv001" else 0)
    finally:
        gen_bench_log.tp8_server = original


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--pods", type=int, default=32)
    ap.add_argument("--size-mb", type=float, default=256.0, help="uncompressed size per pod (MiB)")
    ap.add_argument("--kv001", type=int, default=3)
    ap.add_argument("--collapse", type=int, default=1)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args(argv)
    plan = {}
    for i in range(a.pods):
        kind = "kv001" if i < a.kv001 else "collapse" if i < a.kv001 + a.collapse else "healthy"
        name = f"pod-{i:02d}"
        write_pod(a.out / name, kind, a.size_mb, a.seed + i)
        plan[name] = kind
        print(f"{name}: {kind}", file=sys.stderr)
    print(json.dumps({"affected_version": AFFECTED_VERSION, "pods": plan}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
