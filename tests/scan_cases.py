"""Generated adversarial log blocks for the scanner tests and the fuzz target (deterministic per seed).

Real hot lines (stores, retrieves in every shape, lookups, access lines, vLLM stats and SpecDecoding lines,
near-miss variants of those) behind real and broken process prefixes and colour codes, then mutated: odd bytes, invalid UTF-8, NULs, CRs, stray ESC and residue,
truncation, digit runs thousands long, over-long lines, and free-text prompts that quote a hot line.
"""

from __future__ import annotations

import random

ENV = b"[2026-03-14 09:26:53,589] LMCache INFO: "
#: the envelopes a hot line is built with: INFO mostly, DEBUG (hot too), and levels the grammar leaves rare
ENVS = (ENV,) * 5 + (ENV.replace(b"INFO", b"DEBUG"),) * 2 + (ENV.replace(b"INFO", b"WARNING"),
        ENV.replace(b"INFO:", b"DEBUG :"), ENV.replace(b"INFO", b"DEBU"))
SUFFIX = {
    "store": b" (cache_engine.py:588:lmcache.v1.cache_engine)",
    "retrieve": b" (cache_engine.py:985:lmcache.v1.cache_engine)",
    "lookup": b" (vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter)",
}
MESSAGES = [
    ("store", b"[req_id=cmpl-7f3a-0] Stored 4096 out of total 4096 tokens. size: 0.5000 GB, cost 12.0000 ms, "
              b"throughput: 41.6667 GB/s; offload_time: 10.0000 ms, put_time: 2.0000 ms"),
    ("store", b"Stored 256 out of total 512 tokens. size: 0.0312 gb, cost 1.0 ms, throughput: 3.0 GB/s"),
    ("retrieve", b"[req_id=cmpl-0b9d] Retrieved 6400 out of 8448 required tokens (from 9472 total tokens). "
                 b"size: 0.7813 gb, cost 41.2210 ms, throughput: 18.9531 GB/s;"),
    ("retrieve", b"Retrieved 8448 out of 8448 required tokens (from 9472 total tokens)."),
    ("retrieve", b"Retrieved 512 out of 1024 out of total 1024 tokens"),
    ("retrieve", b"[req_id=x] Retrieved 512 out of total 1024 out of total 2048 tokens"),
    ("retrieve", b"Retrieved 4096 tokens"),
    ("lookup", b"Reqid: cmpl-7f3a19c2e4b0d861-0-5c2e9a17, Total tokens 4113, Inference Engine computed tokens: 0, "
               b"LMCache hit tokens: 3840, need to load: 3840"),
    ("lookup", b"Reqid: cmpl-1, Total tokens 100, LMCache hit tokens: None"),
    ("lookup", b"Reqid: a,b,, Total tokens 7, LMCache hit tokens: 0, but need to load: -3"),
    ("lookup", b"Reqid: r, Total tokens 9, LMCache hit tokens: 5, need to load: "),
    ("lookup", b"Reqid: r, Total tokens 9, LMCache hit tokens: 5, need to load: -1234567890123456789"),
    ("lookup", b"Reqid: r, Total tokens 9, LMCache hit tokens: 5, need to load: 123456789012345678"),
]
#: vLLM's formatter header (``vllm/logger.py``) and the stats / SpecDecoding messages behind it
VLLM_HEAD = {"stats": b"INFO 03-14 09:15:02 [loggers.py:335] ", "spec": b"INFO 03-14 09:15:02 [metrics.py:120] "}
VLLM = [
    ("stats", b"Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 96.0 tokens/s, Running: 3 reqs, "
              b"Waiting: 5 reqs, Preemptions: 2, CPU KV cache usage: 97.3%, Prefix cache hit rate: 41.8%, "
              b"External prefix cache hit rate: 22.5%"),
    ("stats", b"Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
              b"Waiting: 0 reqs, GPU KV cache usage: 0.78125%, Prefix cache hit rate: 0.0%"),
    ("stats", b"Engine 001: Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 345.6 tokens/s, "
              b"Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 55.5%"),
    ("stats", b"3 Engines Aggregated: Avg prompt throughput: nan tokens/s, Avg generation throughput: 9.0 tokens/s, "
              b"Running: 999999999999999999 reqs, Waiting: 123456789012345678 reqs, GPU KV cache usage: nan%, "
              b"Prefix cache hit rate: 100.0%, External prefix cache hit rate: 0.0%"),
    ("stats", b"Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, "
              b"Waiting: 2 reqs, Deferred: 1 reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 4.0%"),
    ("stats", b"Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, "
              b"Waiting: 2 reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 4.0%, Corrupted: 1 reqs"),
    ("stats", b"Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, "
              b"Pending: 0 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%."),
    ("spec", b"SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 58.20 tokens/s, Drafted throughput: "
             b"121.10 tokens/s, Accepted: 582 tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, "
             b"0.253, Avg Draft acceptance rate: 48.1%"),
    ("spec", b"SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: "
             b"0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: nan, nan, "
             b"Avg Draft acceptance rate: nan%"),
    ("spec", b"SpecDecoding metrics: Mean acceptance length: nan, Accepted throughput: 1.50 tokens/s, Drafted throughput: "
             b"3.00 tokens/s, Accepted: 15 tokens, Drafted: 30 tokens, Per-position acceptance rate: 0.500, "
             b"Avg Draft acceptance rate: nan%"),
    ("spec", b"SpecDecoding metrics: Draft acceptance rate: 48.1%, Mean acceptance length: 2.41, Accepted: 582 tokens, "
             b"Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253"),
]
ACCESS = [
    b'INFO:     10.42.0.17:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    b'INFO:     127.0.0.1:58634 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    b'INFO:     127.0.0.1:1 - "GET /metrics HTTP/1.1" 404 Not Found',
    b'INFO:   1.2.3.4:5 - "-" 503 Service Unavailable',
    b'INFO: x - "GET / HTTP/1.1" 600 Odd',
    b'INFO:     10.0.0.1:9 - "GET /health HTTP/1.1" 101 Switching',
]
PREFIXES = [
    b"", b"", b"(Worker_TP3 pid=5120) ", b"(EngineCore_DP0 pid=2210) (RayWorkerWrapper pid=731, ip=10.4.0.17) ",
    b"(APIServer pid=1)", b"(a pid=1x pid=2) ", b"( pid=1) ", b"(A pid=) ", b"(A(B) pid=1) ",
    b"(A pid=1, ip=x(y)) ", b"(A pid=1) " * 5, b"(VllmWorker rank=0 pid=9) ", b"(A pid=1", b"(A pid=1) (",
]
OTHER = [
    b"(APIServer pid=1) INFO 05-06 08:00:00 [logger.py:39] Received request cmpl-1: prompt: 'Stored 5 out of total 5 tokens'",
    b"[2026-03-14 09:26:53,589] LMCache WARNING: Request cmpl-1 failed to load 2048 tokens across 128 blocks "
    b"(vllm_v1_adapter.py:964:lmcache.integration.vllm.vllm_v1_adapter)",
    b"(Worker_TP0 pid=5) INFO 05-06 08:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s",
    b"2026-03-14T08:27:01.004518223Z [2026-03-14 09:26:53,589] LMCache INFO: Stored 5 out of total 5 tokens (a.py:1:b)",
    b'{"log":"[2026-03-14 09:26:53,589] LMCache INFO: Stored 5 out of total 5 tokens (a.py:1:b)\\n","stream":"stderr"}',
    b"Traceback (most recent call last):", b"", b"   ",
]
INSERTS = [b"\x00", b"\xff", b"\xc3\xa9", b"\x1b", b"\x1b[", b"\x1b[0m", b"\x1b[32;20m", b"[0m", b"[32;20m", b"[1234m",
           b"[1;m", b"\r", b"\t", b"(", b")", b" (", b":", b"]", b"] ", b"-", b" ", b",", b"\x7f", b"\x80", b"9" * 5000,
           b"1" * 18, b"1" * 19, b"\x01", b"\x1f", b"\x0b", b".py", b" pid=", b"INFO: ", b"DEBUG: ", b"nan", b"inf", b"%", b"1e5",
           b".", b", ", b"0.5, ", b"Preemptions: 3, ", b"Waiting: 1 reqs, ", b"9" * 17 + b".", b"."+ b"9" * 19, b"x: 1%"]


def hot_line(rng: random.Random) -> bytes:
    """One well-formed hot line (or near-hot variant), optionally coloured as LMCache/vLLM print it."""
    prefix = rng.choice(PREFIXES)
    r = rng.random()
    if r < 0.2:
        body = rng.choice(ACCESS)
        line = prefix + body
    elif r < 0.4:
        kind, msg = rng.choice(VLLM)
        head = VLLM_HEAD[kind]
        colour = rng.random()
        if colour < 0.2:  # ColoredFormatter (0.15+): the level and the file info coloured
            head = b"\x1b[32mINFO\x1b[0m" + head[4:20] + b"\x1b[2m" + head[20:-1] + b"\x1b[0m "
        elif colour < 0.3:  # a colour code (or its residue) in the middle of the message
            cut = rng.randint(0, len(msg))
            msg = msg[:cut] + rng.choice([b"\x1b[0m", b"[0m", b"\x1b[1;31m"]) + msg[cut:]
        elif colour < 0.4:
            head = head[:19] + b"." + b"123456"[: rng.randint(1, 6)] + head[19:]
        line = prefix + head + msg
    else:
        kind, msg = rng.choice(MESSAGES)
        suffix = SUFFIX[kind]
        env = rng.choice(ENVS)
        colour = rng.random()
        if colour < 0.3:
            line = (prefix + b"\x1b[32;20m" + env[:-1] + b"\x1b[0m " + msg + b" \x1b[3m" + suffix[1:] + b"\x1b[0m")
        elif colour < 0.5:
            line = prefix + b"[32;20m" + env[:-1] + b"[0m " + msg + b" [3m" + suffix[1:] + b"[0m"
        else:
            line = prefix + env + msg + (suffix if rng.random() < 0.9 else b"")
        if prefix and rng.random() < 0.3:
            line = b"\x1b[1;36m" + prefix.rstrip() + b"\x1b[0;0m " + line[len(prefix):]
    if rng.random() < 0.1:
        line += b"\r"
    return line


def mutate(rng: random.Random, line: bytes) -> bytes:
    """One random damage: insert an odd token, cut, delete a slice or blow up a digit run."""
    r = rng.random()
    pos = rng.randint(0, len(line))
    if r < 0.45:
        return line[:pos] + rng.choice(INSERTS) + line[pos:]
    if r < 0.6:
        return line[:pos]
    if r < 0.75:
        return line[:pos] + line[pos + rng.randint(1, 12):]
    if r < 0.85:
        digits = [i for i, c in enumerate(line) if 0x30 <= c <= 0x39]
        if digits:
            i = rng.choice(digits)
            return line[:i] + rng.choice([b"9" * 5000, b"0" * 30, b"12345678901234567890", b"1234567890123456789",
                                         b"999999999999999999"]) + line[i + 1:]
        return line
    if r < 0.92:
        return line + b"x" * rng.choice([100, 16384 - len(line), 16385 - len(line), 20000])
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) + line


def adversarial_block(seed: int, n_lines: int = 400) -> bytes:
    """A block of mixed clean, mutated and free-text lines; ends on ``\\n`` most of the time."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.45:
            line = hot_line(rng)
        elif r < 0.85:
            line = hot_line(rng)
            for _ in range(rng.randint(1, 3)):
                line = mutate(rng, line)
        elif r < 0.95:
            line = rng.choice(OTHER)
            if rng.random() < 0.5:
                line = line.replace(b"prompt: '", b"prompt: '" + hot_line(rng))
        else:
            line = mutate(rng, rng.choice(OTHER))
        lines.append(line.replace(b"\n", b""))
    block = b"\n".join(lines)
    return block if rng.random() < 0.1 else block + b"\n"
