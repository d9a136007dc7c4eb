#!/usr/bin/env python3
"""Throughput of ``scan_block`` (compiled, Python fallback, reference) beside ``grep -c LMCache``.

    python scripts/bench_scan.py LOG [--block-mb 4] [--repeat 3] [--python-mb 200] [--threads 2] [--json]

Figures are MB (10^6 bytes) per CPU-second of the scan calls alone (``time.thread_time`` around each
call; reading the file is not counted), the median of ``--repeat`` runs. ``grep -c`` runs as a child
whose user+sys CPU comes from ``os.wait4``; its stdout goes to a pipe (GNU grep short-circuits when
stdout is /dev/null). ``--threads N`` also scans the blocks on N threads at once and reports wall-clock
MB/s, which only scales if the compiled loop really releases the GIL. The file is read once first so
every tool sees a warm page cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdiag.ingest import scan  # noqa: E402
from specdiag.ingest.scan_fast import scan_block_fast  # noqa: E402


def read_blocks(path: Path, block_bytes: int, limit: int | None = None) -> list[tuple[bytes, int]]:
    """Whole-line blocks of about ``block_bytes`` with their base line numbers (in memory, for timing)."""
    blocks: list[tuple[bytes, int]] = []
    base = 0
    carry = b""
    total = 0
    with open(path, "rb") as fh:
        while limit is None or total < limit:
            data = fh.read(block_bytes)
            if not data:
                break
            data = carry + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                continue
            block, carry = data[:cut], data[cut:]
            blocks.append((block, base))
            base += block.count(b"\n")
            total += len(block)
    if carry and (limit is None or total < limit):
        blocks.append((carry, base))
    return blocks


def time_scan(fn, blocks: list[tuple[bytes, int]]) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, hot lines) of ``fn`` over the blocks on this thread."""
    cpu = 0.0
    hot = 0
    w0 = time.perf_counter()
    for block, base in blocks:
        t0 = time.thread_time()
        res = fn(block, base)
        cpu += time.thread_time() - t0
        hot += sum(res.counts.values())
    return cpu, time.perf_counter() - w0, hot


def time_threads(fn, blocks: list[tuple[bytes, int]], threads: int) -> float:
    """Wall seconds to scan all blocks, split round-robin over ``threads`` threads."""
    parts = [blocks[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=lambda p=p: [fn(b, n) for b, n in p]) for p in parts]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0


def time_grep(path: Path) -> tuple[float, float, str]:
    """(cpu seconds, wall seconds, count) of ``grep -c LMCache PATH`` with stdout to a pipe."""
    t0 = time.perf_counter()
    p = subprocess.Popen(["grep", "-c", "LMCache", str(path)], stdout=subprocess.PIPE)
    out = p.stdout.read() if p.stdout else b""
    _pid, _status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime, time.perf_counter() - t0, out.decode().strip()


def run(args: argparse.Namespace) -> dict:
    path = Path(args.log)
    size = path.stat().st_size
    blocks = read_blocks(path, int(args.block_mb * 2**20))
    res: dict = {"file": str(path), "bytes": size, "block_mb": args.block_mb, "implementation": scan.IMPLEMENTATION}
    grep = [time_grep(path) for _ in range(args.repeat)]
    res["grep"] = {"mb_per_cpu_s": statistics.median(size / 1e6 / max(c, 1e-9) for c, _w, _n in grep),
                   "mb_per_s": statistics.median(size / 1e6 / w for _c, w, _n in grep), "count": grep[0][2]}
    impls = [("fallback", scan_block_fast), ("reference", scan.scan_block_py)]
    if scan.IMPLEMENTATION == "c":
        impls.insert(0, ("c", scan.scan_block_c))
    for name, fn in impls:
        sub = blocks if name == "c" or args.python_mb is None else _first_mb(blocks, args.python_mb)
        nbytes = sum(len(b) for b, _ in sub)
        runs = [time_scan(fn, sub) for _ in range(args.repeat if name == "c" else 1)]
        res[name] = {"bytes": nbytes, "hot_lines": runs[0][2],
                     "mb_per_cpu_s": statistics.median(nbytes / 1e6 / c for c, _w, _h in runs),
                     "mb_per_s": statistics.median(nbytes / 1e6 / w for _c, w, _h in runs)}
        if name == "c" and args.threads > 1:
            wall = statistics.median(time_threads(fn, sub, args.threads) for _ in range(args.repeat))
            res[name][f"mb_per_s_{args.threads}_threads"] = nbytes / 1e6 / wall
    return res


def _first_mb(blocks: list[tuple[bytes, int]], mb: float) -> list[tuple[bytes, int]]:
    out, total = [], 0
    for b in blocks:
        if total >= mb * 1e6:
            break
        out.append(b)
        total += len(b[0])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--block-mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python-mb", type=float, default=None, help="scan only the first N MB with the Python scanners")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{res['file']}: {res['bytes'] / 1e6:,.0f} MB, blocks of {args.block_mb} MiB")
    print(f"  grep -c LMCache      {res['grep']['mb_per_cpu_s']:8,.0f} MB/CPU-s  {res['grep']['mb_per_s']:8,.0f} MB/s")
    for name in ("c", "fallback", "reference"):
        if name in res:
            r = res[name]
            extra = "".join(f"  {v:,.0f} MB/s on {k.split('_')[3]} threads" for k, v in r.items() if "threads" in k)
            print(f"  scan_block ({name:9}) {r['mb_per_cpu_s']:8,.0f} MB/CPU-s  {r['mb_per_s']:8,.0f} MB/s"
                  f"  ({r['bytes'] / 1e6:,.0f} MB, {r['hot_lines']:,} hot lines){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
