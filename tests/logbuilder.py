"""Builds synthetic vLLM/LMCache log lines in the exact formats of each era (for tests)."""

from __future__ import annotations

ESC = "\x1b"


def lmc(msg: str, *, level: str = "INFO", ts: str = "2026-05-06 15:56:03,745", loc: str | None = "vllm_v1_adapter.py:882",
        logger: str = "lmcache.integration.vllm.vllm_v1_adapter", proc: str | None = None, color: bool = True,
        residue: bool = False) -> str:
    """An LMCache formatter line, optionally behind a vLLM process prefix, coloured as LMCache writes it."""
    colors = {"DEBUG": "[1m", "INFO": "[32;20m", "WARNING": "[33;20m", "ERROR": "[31;20m", "CRITICAL": "[31;1m"}
    esc = "" if residue else ESC
    suffix = f" {esc}[3m({loc}:{logger}){esc}[0m" if loc and color else (f" ({loc}:{logger})" if loc else "")
    if color:
        body = f"{esc}{colors[level]}[{ts}] LMCache {level}:{esc}[0m {msg}{suffix}"
    else:
        body = f"[{ts}] LMCache {level}: {msg}{suffix}"
    if proc:
        pre = f"{esc}[1;36m({proc}){esc}[0;0m " if color else f"({proc}) "
        body = pre + body
    return body


def vllm(msg: str, *, level: str = "INFO", ts: str = "05-06 15:56:03", loc: str = "scheduler.py:2656",
         proc: str | None = None) -> str:
    pre = f"({proc}) " if proc else ""
    return f"{pre}{level} {ts} [{loc}] {msg}"


def shortfall_pair(req: str | None, retrieved: int, expected: int, *, proc: str | None, r1: int = 878, r2: int = 884,
                   ts: str = "2026-05-06 15:56:03,745", **kw) -> list[str]:
    head = (f"Request {req}" if req else "") + ("The number of retrieved tokens is less than the expected number of "
                                                "tokens! This should not happen!")
    return [
        lmc(head, level="ERROR", loc=f"vllm_v1_adapter.py:{r1}", proc=proc, ts=ts, **kw),
        lmc(f"Num retrieved tokens: {retrieved}, num expected tokens: {expected}", level="ERROR",
            loc=f"vllm_v1_adapter.py:{r2}", proc=proc, ts=ts, **kw),
    ]


def lookup(req: str, total: int, hit: int, computed: int = 0, *, proc: str | None = "EngineCore_DP0 pid=203",
           ts: str = "2026-05-06 15:56:03,500", loc: str = "vllm_v1_adapter.py:1476", **kw) -> str:
    need = max(hit - computed - (1 if hit == total else 0), 0)
    return lmc(f"Reqid: {req}, Total tokens {total}, Inference Engine computed tokens: {computed}, "
               f"LMCache hit tokens: {hit}, need to load: {need}", loc=loc, proc=proc, ts=ts, **kw)


def retrieve(req: str, retrieved: int, required: int, total: int, *, proc: str, ts: str = "2026-05-06 15:56:03,744",
             **kw) -> str:
    return lmc(f"[req_id={req}] Retrieved {retrieved} out of {required} required tokens (from {total} total tokens). "
               "size: 0.7813 gb, cost 41.2210 ms, throughput: 18.9531 GB/s;", loc="cache_engine.py:985",
               logger="lmcache.v1.cache_engine", proc=proc, ts=ts, **kw)


def config_dump(proc: str | None, **overrides) -> str:
    cfg = {"chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 5.0, "local_disk": None, "remote_url": None,
           "save_decode_cache": False, "enable_p2p": False, "enable_async_loading": False, "save_unfull_chunk": False,
           "pin_timeout_sec": 300, "use_layerwise": False}
    cfg.update(overrides)
    body = "{" + ", ".join(f"'{k}': {v!r}" for k, v in cfg.items()) + ", 'pd_allocation_timeout_sec': inf}"
    return lmc(f"Creating LMCacheEngine with config: {body}", loc="cache_engine.py:109", logger="lmcache.v1.cache_engine",
               proc=proc)


#: a line that is neither LMCache's nor a rule's: pads a synthetic log past the length of a paste (50 lines)
ACCESS_LINE = '(APIServer pid=1) INFO:     127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK'


def write(path, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return str(path)
