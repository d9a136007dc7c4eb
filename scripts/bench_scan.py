#!/usr/bin/env python3
"""Throughput of ``scan_block`` (compiled, Python fallback, reference) beside ``grep -c LMCache``.

    python scripts/bench_scan.py LOG [--block-mb 4] [--repeat 3] [--python-mb 200] [--threads 2] [--json]
    python scripts/bench_scan.py /tmp/tp1.log --write-lookup-heavy 250   # writes the TP=1 shape first

Figures are MB (10^6 bytes) per CPU-second of the scan calls alone (``time.thread_time`` around each
call; reading the file is not counted), the median of ``--repeat`` runs (one run for the reference). ``grep -c`` runs as a child
whose user+sys CPU comes from ``os.wait4``; its stdout goes to a pipe (GNU grep short-circuits when
stdout is /dev/null). ``--threads N`` also scans the blocks on N threads at once and reports wall-clock
MB/s, which only scales if the compiled loop really releases the GIL. The file is read once first so
every tool sees a warm page cache.

``--against OTHER.so`` loads a second build of the extension (e.g. the previous commit's, copied aside) and
scans the same blocks with both alternately, pass by pass, so that both see the same neighbours on a shared
machine: the figure to compare two builds by CPU time (instruction counts: ``valgrind --tool=callgrind
--toggle-collect=py_scan``, see docs/scanner.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
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
    res: dict = {"file": str(path), "bytes": size, "block_mb": args.block_mb, "implementation": scan.IMPLEMENTATION,
                 "loop": getattr(scan._compiled, "LOOP", None)}
    grep = [time_grep(path) for _ in range(args.repeat)]
    res["grep"] = {"mb_per_cpu_s": statistics.median(size / 1e6 / max(c, 1e-9) for c, _w, _n in grep),
                   "mb_per_s": statistics.median(size / 1e6 / w for _c, w, _n in grep), "count": grep[0][2]}
    impls = [("fallback", scan_block_fast), ("reference", scan.scan_block_py)]
    if scan.IMPLEMENTATION == "c":
        impls.insert(0, ("c", scan.scan_block_c))
    for name, fn in impls:
        sub = blocks if name == "c" or args.python_mb is None else _first_mb(blocks, args.python_mb)
        nbytes = sum(len(b) for b, _ in sub)
        runs = [time_scan(fn, sub) for _ in range(1 if name == "reference" else args.repeat)]
        res[name] = {"bytes": nbytes, "hot_lines": runs[0][2],
                     "mb_per_cpu_s": statistics.median(nbytes / 1e6 / c for c, _w, _h in runs),
                     "mb_per_s": statistics.median(nbytes / 1e6 / w for _c, w, _h in runs)}
        if name == "c" and args.against:
            res["ab"] = compare_builds(sub, args.against, max(args.repeat, 5))
        if name == "c" and args.threads > 1:
            wall = statistics.median(time_threads(fn, sub, args.threads) for _ in range(args.repeat))
            res[name][f"mb_per_s_{args.threads}_threads"] = nbytes / 1e6 / wall
    return res


def load_build(path: str):
    """Another build of ``specdiag.ingest._scan`` (a .so file), as its own module object."""
    spec = importlib.util.spec_from_file_location("specdiag.ingest._scan", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"bench_scan: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare_builds(blocks: list[tuple[bytes, int]], other: str, passes: int) -> dict:
    """The installed compiled scanner and ``other`` over the same blocks, alternating pass by pass; both
    must return the same result on the first blocks. MB per CPU-second, median and best of ``passes``."""
    mod = load_build(other)

    def theirs(b: bytes, n: int) -> scan.ScanResult:
        return scan.assemble(*mod.scan(b, n))

    for b, n in blocks[:3]:
        if theirs(b, n) != scan.scan_block_c(b, n):
            raise SystemExit(f"bench_scan: {other} and the installed build disagree")
    nbytes = sum(len(b) for b, _ in blocks)
    cpu: dict[str, list[float]] = {"c": [], "against": []}
    for _ in range(passes):
        for name, fn in (("c", scan.scan_block_c), ("against", theirs)):
            cpu[name].append(time_scan(fn, blocks)[0])
    return {name: {"mb_per_cpu_s": nbytes / 1e6 / statistics.median(t), "best": nbytes / 1e6 / min(t)}
            for name, t in cpu.items()} | {"against_path": other, "passes": passes}


def _first_mb(blocks: list[tuple[bytes, int]], mb: float) -> list[tuple[bytes, int]]:
    out, total = [], 0
    for b in blocks:
        if total >= mb * 1e6:
            break
        out.append(b)
        total += len(b[0])
    return out


def write_lookup_heavy(path: Path, size_mb: float, seed: int = 3) -> int:
    """A TP=1-shaped log (vLLM 0.25, one engine, one worker): 30 % scheduler lookups with unique request
    ids, 10 % stats / SpecDecoding lines, 20 % stores, 15 % retrieves, 15 % access lines, 10 % request
    logs. The hot-line mix of issue 9's second shape, for the scanner alone (it has no incident)."""
    rng = random.Random(seed)
    c, r = "\x1b[32;20m", "\x1b[0m"
    core, api, wk = "(EngineCore pid=2210) ", "(APIServer pid=2100) ", "(Worker pid=2300) "
    sfx = {k: f" \x1b[3m({v})\x1b[0m" for k, v in (
        ("l1", "vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter"),
        ("r4", "cache_engine.py:985:lmcache.v1.cache_engine"), ("s1", "cache_engine.py:588:lmcache.v1.cache_engine"))}
    size = n = 0
    buf: list[str] = []
    with open(path, "w") as out:
        while size < size_mb * 1e6:
            n += 1
            ts = f"2026-05-06 08:{(n // 600) % 60:02d}:{(n // 10) % 60:02d},{n % 1000:03d}"
            vts = f"05-06 08:{(n // 600) % 60:02d}:{(n // 10) % 60:02d}"
            rid = f"cmpl-{rng.getrandbits(64):016x}-0-{rng.getrandbits(32):08x}"
            x = rng.random()
            if x < 0.30:
                t = rng.randint(100, 9000)
                h = t // 256 * 256 * rng.randint(0, 1)
                line = (f"{core}{c}[{ts}] LMCache INFO:{r} Reqid: {rid}, Total tokens {t}, Inference Engine computed "
                        f"tokens: 0, LMCache hit tokens: {h}, need to load: {h}{sfx['l1']}")
            elif x < 0.35:
                line = (f"{api}INFO {vts} [loggers.py:273] Engine 000: Avg prompt throughput: {rng.uniform(0, 900):.1f} "
                        f"tokens/s, Avg generation throughput: {rng.uniform(0, 90):.1f} tokens/s, Running: "
                        f"{rng.randint(0, 40)} reqs, Waiting: {rng.randint(0, 9)} reqs, GPU KV cache usage: "
                        f"{rng.uniform(0, 99):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")
            elif x < 0.40:
                line = (f"{api}INFO {vts} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted "
                        f"throughput: 58.20 tokens/s, Drafted throughput: 121.10 tokens/s, Accepted: {rng.randint(0, 900)} "
                        "tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253, Avg Draft "
                        "acceptance rate: 48.1%")
            elif x < 0.60:
                line = (f"{wk}{c}[{ts}] LMCache INFO:{r} [req_id={rid}] Stored 512 out of total 512 tokens. size: 0.0625 "
                        f"GB, cost 3.0 ms, throughput: 20.8 GB/s; offload_time: 2.0 ms, put_time: 1.0 ms{sfx['s1']}")
            elif x < 0.75:
                line = (f"{wk}{c}[{ts}] LMCache INFO:{r} [req_id={rid}] Retrieved 1024 out of 1024 required tokens (from "
                        f"1100 total tokens). size: 0.125 gb, cost 6.0 ms, throughput: 20.8 GB/s;{sfx['r4']}")
            elif x < 0.90:
                line = f'{api}INFO:     10.0.0.{n % 250}:{40000 + n % 20000} - "POST /v1/completions HTTP/1.1" 200 OK'
            else:
                line = (f"{api}INFO {vts} [logger.py:39] Received request {rid}: params: SamplingParams(n=1, "
                        "temperature=0.7, max_tokens=256), prompt_token_ids: None")
            buf.append(line)
            if len(buf) >= 10000:
                text = "\n".join(buf) + "\n"
                out.write(text)
                size += len(text)
                buf.clear()
        if buf:
            text = "\n".join(buf) + "\n"
            out.write(text)
            size += len(text)
    return size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--block-mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python-mb", type=float, default=None, help="scan only the first N MB with the Python scanners")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--against", metavar="SO", help="also time this other build of _scan, alternating with this one")
    ap.add_argument("--write-lookup-heavy", type=float, metavar="MB",
                    help="first write a lookup-heavy TP=1-shaped log of about MB to LOG")
    args = ap.parse_args(argv)
    if args.write_lookup_heavy:
        write_lookup_heavy(Path(args.log), args.write_lookup_heavy)
    res = run(args)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    loop = f", compiled line loop: {res['loop']}" if res["loop"] else ""
    print(f"{res['file']}: {res['bytes'] / 1e6:,.0f} MB, blocks of {args.block_mb} MiB{loop}")
    print(f"  grep -c LMCache      {res['grep']['mb_per_cpu_s']:8,.0f} MB/CPU-s  {res['grep']['mb_per_s']:8,.0f} MB/s")
    for name in ("c", "fallback", "reference"):
        if name in res:
            r = res[name]
            extra = "".join(f"  {v:,.0f} MB/s on {k.split('_')[3]} threads" for k, v in r.items() if "threads" in k)
            print(f"  scan_block ({name:9}) {r['mb_per_cpu_s']:8,.0f} MB/CPU-s  {r['mb_per_s']:8,.0f} MB/s"
                  f"  ({r['bytes'] / 1e6:,.0f} MB, {r['hot_lines']:,} hot lines){extra}")
    if "ab" in res:
        ab = res["ab"]
        print(f"  alternating, {ab['passes']} passes each: this build {ab['c']['mb_per_cpu_s']:,.0f} MB/CPU-s "
              f"(best {ab['c']['best']:,.0f}), {ab['against_path']} {ab['against']['mb_per_cpu_s']:,.0f} "
              f"(best {ab['against']['best']:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
