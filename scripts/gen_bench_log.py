#!/usr/bin/env python3
"""Stream a large synthetic vLLM + LMCache log (TP=8, EAGLE-3) for throughput benchmarks.

    python scripts/gen_bench_log.py bench-data/bench-1g.log --size-mb 1024 [--seed 7] [--incidents 5]
    python scripts/gen_bench_log.py bench-data/tp1.log --size-mb 256 --shape tp1 [--kubectl-from 0.5]

``--shape tp1`` writes the lookup-heavy, metric-dense TP=1 shape instead (see ``generate_tp1``).

The file is written in large batches and never held in memory. Proportions follow a busy TP=8
server (vLLM 0.25.0 with coloured process prefixes, LMCache post-0.5.6 tree):

* startup: vLLM logo, ``non-default args``, engine config dump, per-worker LMCache config dumps;
* per request: one uvicorn access line, one engine-core ``Reqid:`` lookup line, 8 per-rank
  ``Stored`` lines (when there are new full chunks) and, for LMCache hits (~60 %), 8 ``Retrieved`` lines;
* every 10 s of simulated time: a stats line and a ``SpecDecoding metrics`` line, a ``/metrics`` scrape;
* occasionally: CPU memory pressure on one rank (``Failed to allocate …`` + ``… store only  N total
  chunks``), rarely a double-unpin warning;
* ``--incidents`` retrieval shortfalls (R4 short + R1/R2 + R3 on one rank, vLLM ``Failing … KV load
  failure``) spread evenly through the file. Their request ids are printed at the end (stderr).

Deterministic for a given ``--seed`` and ``--size-mb``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_example_logs import (  # noqa: E402
    LMC_COLOR,
    LMC_ITALIC,
    LMC_LINES,
    LMC_LOGGER,
    LMC_RESET,
    VLLM_LINES,
    Events,
    Fmt,
    emit_startup,
    tp8_server,
)

BATCH_BYTES = 8 << 20



def _drain(out, buf: list[str], at: int = 1) -> int:
    """Write and empty ``buf`` once it holds ``at`` lines or more; the bytes written (the generator's one writer)."""
    if len(buf) < at or not buf:
        return 0
    data = "".join(buf).encode()
    buf.clear()
    out.write(data)
    return len(data)

def suffix(tree: str, key: str) -> str:
    f, n = LMC_LINES[tree][key]
    return f" {LMC_ITALIC}({f}:{n}:{LMC_LOGGER[key]}){LMC_RESET}"


def _startup(out, server, rng: random.Random):
    """Write the server's startup block (built with the example generator); (format, start time, bytes)."""
    fmt = Fmt(2026, color_prefix=True, lmc_tree=server.lmc_tree)
    ev = Events()
    t0 = emit_startup(ev, fmt, server, dt.datetime(2026, 5, 6, 8, 0, 0), rng)
    head = ev.render().encode()
    out.write(head)
    return fmt, t0, len(head)


def generate(out, size_bytes: int, seed: int, incidents: int, ids: array | None = None) -> dict:  # noqa: PLR0915 - predates the 60-statement limit (pyproject); a log generator written as one sequence
    """The TP=8 shape; ``ids`` (when given) collects the 64-bit random head of every request id."""
    rng = random.Random(seed)
    s = tp8_server()
    tree = s.lmc_tree
    fmt, t0, written = _startup(out, s, rng)

    api = fmt.prefix("APIServer", s.api_pid)
    core = fmt.prefix("EngineCore", s.core_pid)
    workers = [fmt.prefix(f"Worker_TP{r}", p) for r, p in enumerate(s.worker_pids)]
    info, warn, err = LMC_COLOR["INFO"], LMC_COLOR["WARNING"], LMC_COLOR["ERROR"]
    R = LMC_RESET
    sx = {k: suffix(tree, k) for k in ("l1", "r4", "s1", "s4", "m3", "m5", "r1", "r2", "r3")}
    vstats = "[{}:{}]".format(*VLLM_LINES["stats"])
    vspec = "[{}:{}]".format(*VLLM_LINES["spec"])
    vfail = "[{}:{}]".format(*VLLM_LINES["v2"])
    chunk, block, cb = s.chunk, s.block, s.chunk_bytes
    gb_per_chunk = cb / 2**30
    tp = s.tp
    ranks = list(range(tp))

    # pools of pre-formatted numbers keep the hot loop cheap
    ips = [f"10.42.{rng.randint(0, 15)}.{rng.randint(2, 250)}" for _ in range(512)]
    jit = [rng.uniform(0.85, 1.3) for _ in range(997)]
    ji = 0

    utc = dt.timezone.utc
    t = t0.replace(tzinfo=utc).timestamp()   # naive wall-clock time, no local-zone/DST effects
    sec_cache = -1
    lsec = vsec = ""
    next_stats = (int(t) // 10 + 1) * 10 - 1
    window_prompt = window_gen = 0
    hist_tot = hist_hit = 0
    pending_incident = [size_bytes * (k + 1) // (incidents + 1) for k in range(incidents)]
    incident_ids: list[str] = []
    n_req = n_lines = 0
    convs: list[int] = []
    buf: list[str] = []

    def stamp(x: float) -> tuple[str, str]:
        d = dt.datetime.fromtimestamp(x, utc)
        return d.strftime("%Y-%m-%d %H:%M:%S"), d.strftime("%m-%d %H:%M:%S")

    while written < size_bytes:
        t += rng.expovariate(18.0)
        isec = int(t)
        if isec != sec_cache:
            sec_cache = isec
            lsec, vsec = stamp(isec)
        msec = int((t - isec) * 1000)
        ts = f"{lsec},{msec:03d}"

        # ---- periodic stats ----
        if isec >= next_stats:
            _, vs = stamp(next_stats)
            hr = 100.0 * hist_hit / hist_tot if hist_tot else 0.0
            running = rng.randint(8, 40)
            buf.append(
                f"{api}INFO {vs} {vstats} Engine 000: Avg prompt throughput: {window_prompt / 10:.1f} tokens/s, "
                f"Avg generation throughput: {window_gen / 10:.1f} tokens/s, Running: {running} reqs, "
                f"Waiting: {rng.randint(0, 6)} reqs, GPU KV cache usage: {rng.uniform(20, 90):.1f}%, "
                f"Prefix cache hit rate: {rng.uniform(5, 25):.1f}%, External prefix cache hit rate: {hr:.1f}%\n")
            acc = [a * rng.uniform(0.93, 1.05) for a in s.accept]
            drafted = int(window_gen / (1 + sum(acc)) * s.spec_k) or 3
            accepted = int(drafted / s.spec_k * sum(acc))
            buf.append(
                f"{api}INFO {vs} {vspec} SpecDecoding metrics: Mean acceptance length: "
                f"{1 + accepted / max(1, drafted // s.spec_k):.2f}, Accepted throughput: {accepted / 10:.2f} tokens/s, "
                f"Drafted throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} "
                f"tokens, Per-position acceptance rate: {', '.join(f'{a:.3f}' for a in acc)}, Avg Draft acceptance "
                f"rate: {100.0 * accepted / drafted:.1f}%\n")
            buf.append(f"{api}INFO:     10.42.0.17:{rng.randint(40000, 60000)} - \"GET /metrics HTTP/1.1\" 200 OK\n")
            n_lines += 3
            window_prompt = window_gen = 0
            next_stats += 10

        # ---- one request ----
        n_req += 1
        head = rng.getrandbits(64)
        rid = f"chatcmpl-{head:016x}-{rng.getrandbits(32):08x}"
        if ids is not None:
            ids.append(head)
        if convs and rng.random() < 0.6:
            i = rng.randrange(len(convs))
            hit = convs[i]
            total = hit + rng.randint(300, 3000)
            if total > 120000:
                total = rng.randint(800, 9000)
                hit = 0
            convs[i] = total // chunk * chunk
        else:
            total = int(rng.lognormvariate(8.3, 0.9)) + 100
            if total > 120000:
                total = 120000
            hit = 0
            if len(convs) < 4096:
                convs.append(total // chunk * chunk)
            else:
                convs[rng.randrange(4096)] = total // chunk * chunk
        computed = 0
        need = hit
        hist_tot += total
        hist_hit += hit
        if hist_tot > 50_000_000:
            hist_tot //= 2
            hist_hit //= 2
        out_tok = rng.randint(40, 900)
        window_prompt += total - hit
        window_gen += out_tok
        buf.append(
            f"{core}{info}[{ts}] LMCache INFO:{R} Reqid: {rid}, Total tokens {total}, Inference Engine computed "
            f"tokens: {computed}, LMCache hit tokens: {hit}, need to load: {need}{sx['l1']}\n")
        n_lines += 1
        incident = bool(pending_incident) and written >= pending_incident[0] and hit >= 8 * chunk
        if need:
            size = hit / chunk * gb_per_chunk
            base = size / 20.0 * 1000
            bad = rng.randrange(tp) if incident else -1
            for r in ranks:
                ji = (ji + 1) % 997
                cost = base * jit[ji]
                got = hit
                if r == bad:
                    got = hit - rng.randint(1, hit // chunk - 1) * chunk
                sz = got / chunk * gb_per_chunk
                buf.append(
                    f"{workers[r]}{info}[{ts}] LMCache INFO:{R} [req_id={rid}] Retrieved {got} out of {hit} required "
                    f"tokens (from {hit} total tokens). size: {sz:.4f} gb, cost {cost:.4f} ms, throughput: "
                    f"{sz / cost * 1000:.4f} GB/s;{sx['r4']}\n")
                if r == bad:
                    miss = hit - got
                    buf.append(
                        f"{workers[r]}{err}[{ts}] LMCache ERROR:{R} Request {rid}The number of retrieved tokens is "
                        f"less than the expected number of tokens! This should not happen!{sx['r1']}\n")
                    buf.append(
                        f"{workers[r]}{err}[{ts}] LMCache ERROR:{R} Num retrieved tokens: {got}, num expected "
                        f"tokens: {hit}{sx['r2']}\n")
                    buf.append(
                        f"{workers[r]}{warn}[{ts}] LMCache WARNING:{R} Request {rid} failed to load {miss} tokens "
                        f"across {-(-miss // block)} blocks{sx['r3']}\n")
                    buf.append(
                        f"{core}ERROR {vsec} {vfail} Failing 1 request(s) due to KV load failure (failure_policy=fail, "
                        f"{miss} tokens affected). Request IDs: {{'{rid}'}}\n")
                    n_lines += 4
            n_lines += tp
        if incident:
            pending_incident.pop(0)
            incident_ids.append(rid)
            buf.append(f"{api}INFO:     {ips[n_req & 511]}:{rng.randint(32768, 60999)} - "
                       "\"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error\n")
            n_lines += 1
        else:
            new = total // chunk * chunk - hit
            if new > 0:
                size = new / chunk * gb_per_chunk
                pressure_rank = rng.randrange(tp) if rng.random() < 0.004 else -1
                for r in ranks:
                    stored = new
                    if r == pressure_rank:
                        kept = rng.randint(0, new // chunk - 1) if new > chunk else 0
                        stored = kept * chunk
                        buf.append(
                            f"{workers[r]}{warn}[{ts}] LMCache WARNING:{R} Failed to allocate memory block of size "
                            f"{cb} because no memory is available{sx['m3']}\n")
                        buf.append(
                            f"{workers[r]}{warn}[{ts}] LMCache WARNING:{R} Local cpu memory under pressure so "
                            f"choosing to store only  {kept} total chunks of KV cache.{sx['s4']}\n")
                        n_lines += 2
                        if rng.random() < 0.02:
                            buf.append(
                                f"{workers[r]}{warn}[{ts}] LMCache WARNING:{R} Pin count of MemoryObj "
                                f"{cb * rng.randint(1, 4000)}is negative: -1.Double unpin occurred somewhere."
                                f"Setting pin count back to 0 as a hack but please find the bug.{sx['m5']}\n")
                            n_lines += 1
                        if not kept:
                            continue
                    ji = (ji + 1) % 997
                    cost = size / 22.0 * 1000 * jit[ji]
                    off = cost * 0.68
                    ssz = stored / chunk * gb_per_chunk
                    buf.append(
                        f"{workers[r]}{info}[{ts}] LMCache INFO:{R} [req_id={rid}] Stored {stored} out of total {new} "
                        f"tokens. size: {ssz:.4f} GB, cost {cost:.4f} ms, throughput: {ssz / cost * 1000:.4f} GB/s; "
                        f"offload_time: {off:.4f} ms, put_time: {cost - off:.4f} ms{sx['s1']}\n")
                    n_lines += 1
            buf.append(f"{api}INFO:     {ips[n_req & 511]}:{rng.randint(32768, 60999)} - "
                       "\"POST /v1/chat/completions HTTP/1.1\" 200 OK\n")
            n_lines += 1
        written += _drain(out, buf, 4096)
    written += _drain(out, buf)
    return {"bytes": written, "requests": n_req, "lines_approx": n_lines, "incidents": incident_ids}


def tp1_server():
    """A TP=1 EAGLE-3 server (the lookup-heavy, metric-dense shape)."""
    from dataclasses import replace

    return replace(tp8_server(), model="meta-llama/Llama-3.1-8B-Instruct", served="llama-8b", tp=1, num_layer=33,
                   kv_heads_per_gpu=8, worker_pids=[765])


def generate_tp1(out, size_bytes: int, seed: int, incidents: int, kubectl_from: float | None = None,  # noqa: PLR0915 - predates the 60-statement limit (pyproject); a log generator written as one sequence
                 ids: array | None = None) -> dict:
    """The lookup-heavy, metric-dense TP=1 shape: ~30 % ``Reqid:`` lookups with unique request ids, ~10 %
    stats / ``SpecDecoding metrics`` lines (a short ``VLLM_LOG_STATS_INTERVAL`` on a busy server), one
    retrieve for the ~60 % of requests with a hit, one store, one access line per request.

    ``kubectl_from`` (0..1): from that fraction of the file on, every line carries a kubectl
    ``--timestamps`` wrapper — a collector that changed format mid-file, with the incidents behind it.
    ``ids`` (when given) collects the 64-bit random head of every request id (see :func:`distinct`).
    """
    rng = random.Random(seed)
    s = tp1_server()
    tree = s.lmc_tree
    fmt, t0, written = _startup(out, s, rng)
    api = fmt.prefix("APIServer", s.api_pid)
    core = fmt.prefix("EngineCore", s.core_pid)
    worker = fmt.prefix("Worker", s.worker_pids[0])
    info, err, R = LMC_COLOR["INFO"], LMC_COLOR["ERROR"], LMC_RESET
    sx = {k: suffix(tree, k) for k in ("l1", "r4", "s1", "r1", "r2", "r3")}
    vstats = "[{}:{}]".format(*VLLM_LINES["stats"])
    vspec = "[{}:{}]".format(*VLLM_LINES["spec"])
    vfail = "[{}:{}]".format(*VLLM_LINES["v2"])
    chunk, block, gb = s.chunk, s.block, s.chunk_bytes / 2**30
    utc = dt.timezone.utc
    t = t0.replace(tzinfo=utc).timestamp()
    pending = [size_bytes * (k + 1) // (incidents + 1) for k in range(incidents)]
    wrap_at = None if kubectl_from is None else int(size_bytes * kubectl_from)
    incident_ids: list[str] = []
    convs: list[int] = []
    buf: list[str] = []
    n_req = 0
    while written < size_bytes:
        t += rng.expovariate(40.0)
        d = dt.datetime.fromtimestamp(t, utc)
        ts = d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"
        vs = d.strftime("%m-%d %H:%M:%S")
        n_req += 1
        head = rng.getrandbits(64)
        rid = f"chatcmpl-{head:016x}-{rng.getrandbits(32):08x}"   # unique: no id repeats
        if ids is not None:
            ids.append(head)
        if convs and rng.random() < 0.6:
            i = rng.randrange(len(convs))
            hit = convs[i]
            total = min(hit + rng.randint(300, 3000), 120000)
            convs[i] = total // chunk * chunk
        else:
            total, hit = int(rng.lognormvariate(8.3, 0.9)) + 100, 0
            (convs.append if len(convs) < 4096 else (lambda v: convs.__setitem__(rng.randrange(4096), v)))(
                total // chunk * chunk)
        hit = min(hit, total // chunk * chunk)
        req = [f"{core}{info}[{ts}] LMCache INFO:{R} Reqid: {rid}, Total tokens {total}, Inference Engine computed "
               f"tokens: 0, LMCache hit tokens: {hit}, need to load: {hit}{sx['l1']}\n"]
        incident = bool(pending) and written >= pending[0] and hit >= 8 * chunk
        if hit:
            got = hit - rng.randint(1, hit // chunk - 1) * chunk if incident else hit
            sz = got / chunk * gb
            req.append(f"{worker}{info}[{ts}] LMCache INFO:{R} [req_id={rid}] Retrieved {got} out of {hit} required "
                       f"tokens (from {hit} total tokens). size: {sz:.4f} gb, cost 12.5000 ms, throughput: "
                       f"{sz / 0.0125:.4f} GB/s;{sx['r4']}\n")
            if incident:
                miss = hit - got
                pending.pop(0)
                incident_ids.append(rid)
                req += [f"{worker}{err}[{ts}] LMCache ERROR:{R} Request {rid}The number of retrieved tokens is less "
                        f"than the expected number of tokens! This should not happen!{sx['r1']}\n",
                        f"{worker}{err}[{ts}] LMCache ERROR:{R} Num retrieved tokens: {got}, num expected tokens: "
                        f"{hit}{sx['r2']}\n",
                        f"{worker}{LMC_COLOR['WARNING']}[{ts}] LMCache WARNING:{R} Request {rid} failed to load {miss} "
                        f"tokens across {-(-miss // block)} blocks{sx['r3']}\n",
                        f"{core}ERROR {vs} {vfail} Failing 1 request(s) due to KV load failure (failure_policy=fail, "
                        f"{miss} tokens affected). Request IDs: {{'{rid}'}}\n"]
        new = total // chunk * chunk - hit
        if new > 0 and not incident and rng.random() < 0.4:   # stores of new full chunks (≈40 % of requests)
            ssz = new / chunk * gb
            req.append(f"{worker}{info}[{ts}] LMCache INFO:{R} [req_id={rid}] Stored {new} out of total {new} tokens. "
                       f"size: {ssz:.4f} GB, cost 9.0000 ms, throughput: {ssz / 0.009:.4f} GB/s; offload_time: "
                       f"6.1000 ms, put_time: 2.9000 ms{sx['s1']}\n")
        code = "500 Internal Server Error" if incident else "200 OK"
        req.append(f"{api}INFO:     10.42.0.{n_req % 250}:{32768 + n_req % 28000} - \"POST /v1/chat/completions "
                   f"HTTP/1.1\" {code}\n")
        if n_req % 6 == 0:
            acc = [a * rng.uniform(0.93, 1.05) for a in s.accept]
            req.append(f"{api}INFO {vs} {vstats} Engine 000: Avg prompt throughput: {rng.uniform(1e3, 9e3):.1f} "
                       f"tokens/s, Avg generation throughput: {rng.uniform(100, 900):.1f} tokens/s, Running: "
                       f"{rng.randint(8, 40)} reqs, Waiting: {rng.randint(0, 6)} reqs, GPU KV cache usage: "
                       f"{rng.uniform(20, 90):.1f}%, Prefix cache hit rate: {rng.uniform(5, 25):.1f}%, External "
                       f"prefix cache hit rate: {rng.uniform(20, 60):.1f}%\n")
            drafted = rng.randint(900, 3000)
            accepted = int(drafted / s.spec_k * sum(acc))
            req.append(f"{api}INFO {vs} {vspec} SpecDecoding metrics: Mean acceptance length: "
                       f"{1 + accepted / max(1, drafted // s.spec_k):.2f}, Accepted throughput: {accepted / 10:.2f} "
                       f"tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, "
                       f"Drafted: {drafted} tokens, Per-position acceptance rate: {', '.join(f'{a:.3f}' for a in acc)}, "
                       f"Avg Draft acceptance rate: {100.0 * accepted / drafted:.1f}%\n")
        if wrap_at is not None and written >= wrap_at:
            stamp = d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond:06d}123Z "
            req = [stamp + ln for ln in req]
        buf += req
        written += _drain(out, buf, 4096)
    written += _drain(out, buf)
    return {"bytes": written, "requests": n_req, "lines_approx": 0, "incidents": incident_ids}


def distinct(ids: array) -> int:
    """How many distinct values ``ids`` holds: a lower bound on the distinct request ids written (an id is
    its 64-bit head plus 32 more random bits), exact when it equals the request count.

    Sorts ``ids`` in place (its order is not needed afterwards), so the count costs the 8 bytes per
    request already held plus 1 byte per request for the comparison: 117 MB at 13 M requests, in this
    process, never in the analyzer's. (``numpy.unique`` peaked at ~770 MB more on the same 13 M.)
    """
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with pandas, a specdiag dependency
        return len(set(ids))
    a = np.frombuffer(ids, dtype=np.uint64)   # a writable view of the array's own buffer: no copy
    a.sort()
    return int(a.size and 1 + np.count_nonzero(a[1:] != a[:-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Stream a large synthetic TP=8 vLLM + LMCache log.")
    ap.add_argument("out", type=Path, help="output file ('-' for stdout)")
    ap.add_argument("--size-mb", type=float, default=1024.0, help="target size in MiB (default 1024)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--incidents", type=int, default=5, help="number of R1/R2 shortfalls to scatter (default 5)")
    ap.add_argument("--shape", choices=("tp8", "tp1"), default="tp8",
                    help="tp8: busy TP=8 server (default); tp1: lookup-heavy, metric-dense TP=1 server")
    ap.add_argument("--kubectl-from", type=float, default=None, metavar="FRACTION",
                    help="tp1 only: lines after this fraction of the file carry kubectl --timestamps")
    ap.add_argument("--count-ids", action="store_true",
                    help="count the distinct request ids written (8 bytes per request in this process)")
    ap.add_argument("--stats-json", type=Path, default=None, metavar="PATH",
                    help="also write the statistics (bytes, requests, incident ids, distinct ids) as JSON")
    args = ap.parse_args(argv)
    size = int(args.size_mb * 2**20)
    ids = array("Q") if args.count_ids else None
    t = time.perf_counter()
    def gen(fh) -> dict:
        if args.shape == "tp1":
            return generate_tp1(fh, size, args.seed, args.incidents, args.kubectl_from, ids=ids)
        return generate(fh, size, args.seed, args.incidents, ids=ids)

    if str(args.out) == "-":
        stats = gen(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "wb", buffering=BATCH_BYTES) as fh:
            stats = gen(fh)
    el = time.perf_counter() - t
    if ids is not None:
        stats["distinct_request_ids"] = distinct(ids)
    stats.update(shape=args.shape, seed=args.seed, seconds=round(el, 3))
    if args.stats_json:
        args.stats_json.write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    uniq = f", {stats['distinct_request_ids']} distinct request ids" if ids is not None else ""
    print(f"wrote {args.out}: {stats['bytes'] / 2**20:.1f} MiB, {stats['requests']} requests{uniq}, "
          f"~{stats['lines_approx']} lines in {el:.1f} s ({stats['bytes'] / 2**20 / el:.0f} MiB/s); "
          f"incidents: {', '.join(stats['incidents']) or 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
