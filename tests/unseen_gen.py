"""Synthetic vLLM / LMCache logs written from the shared reference's documented formats (not corpus copies).

Per LMCache version the printed ``file:line`` of the key messages (``version-fingerprints.md`` §2) and the
text variant of that era (``log-formats.md`` §3-§4: the mismatch line without a request id before 0.3.12, the
lookup line without ``Inference Engine computed tokens`` before 0.3.15, the retrieve line's three shapes).
Per cause of ``mismatch-causes.md`` §3 a minimal incident built from its documented signature, and the paste
transformations users apply (indentation, ``grep -n``, kubectl ``--prefix``, an 80-column wrap, CRLF).

Every id, pid, time and number here is invented.
"""

from __future__ import annotations

from dataclasses import dataclass

ESC = "\x1b"
ADAPTER = "lmcache.integration.vllm.vllm_v1_adapter"
ENGINE = "lmcache.v1.cache_engine"


@dataclass(frozen=True)
class Era:
    """Where one LMCache release prints its key lines, and which text variant it uses."""

    version: str
    r1: int
    r2: int
    l1: int
    r4: int | None  # None: the retrieve line is DEBUG in that release
    r7: int | None
    r3: int | None
    c13: int
    l6: int | None
    m8: int | None
    rid_in_r1: bool  # ``Request %s`` before the mismatch text (0.3.12+)
    computed_in_l1: bool  # ``Inference Engine computed tokens`` (0.3.15+)
    r4_shape: str  # "old" 0.3.3-0.3.5, "plain" 0.3.9-0.3.12, "req" 0.3.15+


ERAS = {
    "0.3.1": Era("0.3.1", 569, 573, 833, None, None, None, 87, None, None, False, False, "old"),
    "0.3.3": Era("0.3.3", 513, 517, 803, 500, None, None, 76, None, None, False, False, "old"),
    "0.3.5": Era("0.3.5", 751, 755, 1048, 499, 1087, None, 93, None, None, False, False, "old"),
    "0.3.9": Era("0.3.9", 891, 895, 1206, 513, 1180, None, 87, 177, None, False, False, "plain"),
    "0.3.12": Era("0.3.12", 1083, 1089, 1602, 742, 1492, 1176, 101, 253, 139, True, False, "plain"),
    "0.3.15": Era("0.3.15", 845, 851, 1310, 873, 1625, 933, 104, 246, 168, True, True, "req"),
    "0.4.4": Era("0.4.4", 854, 860, 1327, 886, 1664, 942, 104, 139, 168, True, True, "req"),
    "0.4.7": Era("0.4.7", 872, 878, 1461, 939, 1734, 960, 105, 147, 179, True, True, "req"),
    "0.5.1": Era("0.5.1", 875, 881, 1473, 953, 1759, 963, 106, 147, 179, True, True, "req"),
    "0.5.5": Era("0.5.5", 868, 874, 1466, 958, 1764, 956, 109, 150, 179, True, True, "req"),
    "0.5.6": Era("0.5.6", 876, 882, 1476, 985, 1793, 964, 109, 150, 179, True, True, "req"),
    "post-0.5.6": Era("post-0.5.6", 878, 884, 1478, 985, 1788, 966, 109, 150, 179, True, True, "req"),
}

LEVEL_COLOR = {"DEBUG": "[1m", "INFO": "[32;20m", "WARNING": "[33;20m", "ERROR": "[31;20m", "CRITICAL": "[31;1m"}


def lmcache_line(msg: str, *, level: str = "INFO", ts: str = "2026-03-14 09:27:01,004", loc: str | None = None,
                 logger: str = ADAPTER, proc: str | None = None, color: bool = True) -> str:
    """One record in LMCache's formatter (lmcache/logging.py), behind a vLLM ≤0.30 process prefix if ``proc``."""
    suffix = ""
    if loc:
        suffix = f" {ESC}[3m({loc}:{logger}){ESC}[0m" if color else f" ({loc}:{logger})"
    head = f"{ESC}{LEVEL_COLOR[level]}[{ts}] LMCache {level}:{ESC}[0m" if color else f"[{ts}] LMCache {level}:"
    line = f"{head} {msg}{suffix}"
    if proc:
        line = (f"{ESC}[1;36m({proc}){ESC}[0;0m " if color else f"({proc}) ") + line
    return line


def vllm_line(msg: str, *, level: str = "INFO", ts: str = "03-14 09:27:01", loc: str = "scheduler.py:2656",
              proc: str | None = None) -> str:
    """One record in vLLM's formatter (``LEVEL MM-DD HH:MM:SS [file:line] msg``): no year."""
    return (f"({proc}) " if proc else "") + f"{level} {ts} [{loc}] {msg}"


class Log:
    """Builds one incident in one LMCache era; ``proc`` names follow vLLM 0.10.2-0.30 (``Worker_TP<n>``)."""

    def __init__(self, version: str = "0.5.6", *, tp: int = 2, prefixed: bool = True, color: bool = False) -> None:
        self.era = ERAS[version]
        self.tp = tp
        self.prefixed = prefixed
        self.color = color
        self.lines: list[str] = []

    # ---- process names -----------------------------------------------------------------------------------
    def worker(self, rank: int) -> str | None:
        if not self.prefixed:
            return None
        return f"Worker_TP{rank} pid={5117 + rank}" if self.tp > 1 else "Worker pid=5117"

    def core(self) -> str | None:
        return "EngineCore_DP0 pid=2210" if self.prefixed else None

    def add(self, msg: str, *, proc: str | None, level: str = "INFO", ts: str, loc: str | None,
            logger: str = ADAPTER) -> Log:
        self.lines.append(lmcache_line(msg, level=level, ts=ts, loc=loc, logger=logger, proc=proc, color=self.color))
        return self

    # ---- documented lines ----------------------------------------------------------------------------------
    def config(self, ts: str = "2026-03-14 09:20:11,302", rank: int = 0, **overrides) -> Log:
        """C13: the config dict repr, one per worker (v1/cache_engine.py)."""
        cfg = {"chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 5.0, "local_disk": None,
               "max_local_disk_size": 0.0, "remote_url": None, "save_decode_cache": False, "save_unfull_chunk": False,
               "enable_p2p": False, "enable_async_loading": False, "use_layerwise": False, "pin_timeout_sec": 300}
        cfg.update(overrides)
        body = "{" + ", ".join(f"'{k}': {v!r}" for k, v in cfg.items()) + "}"
        return self.add(f"Creating LMCacheEngine with config: {body}", proc=self.worker(rank), ts=ts,
                        loc=f"cache_engine.py:{self.era.c13}", logger=ENGINE)

    def lookup(self, req: str, total: int, hit: int, computed: int = 0, ts: str = "2026-03-14 09:27:00,871") -> Log:
        """L1 (scheduler, engine core)."""
        need = max(hit - computed - (1 if hit == total else 0), 0)
        mid = f"Inference Engine computed tokens: {computed}, " if self.era.computed_in_l1 else ""
        msg = f"Reqid: {req}, Total tokens {total}, {mid}LMCache hit tokens: {hit}, need to load: {need}"
        return self.add(msg, proc=self.core(), ts=ts, loc=f"vllm_v1_adapter.py:{self.era.l1}")

    def retrieve(self, req: str, rank: int, retrieved: int, required: int, total: int,
                 ts: str = "2026-03-14 09:27:01,002") -> Log:
        """R4 in the shape of the era (v1/cache_engine.py)."""
        e = self.era
        if e.r4 is None:
            return self
        if e.r4_shape == "old":
            msg = f"Retrieved {retrieved} out of {required} out of total {total} tokens"
        else:
            msg = (f"Retrieved {retrieved} out of {required} required tokens (from {total} total tokens). "
                   "size: 0.7813 gb, cost 41.2210 ms, throughput: 18.9531 GB/s;")
            if e.r4_shape == "req":
                msg = f"[req_id={req}] " + msg
        return self.add(msg, proc=self.worker(rank), ts=ts, loc=f"cache_engine.py:{e.r4}", logger=ENGINE)

    def mismatch(self, req: str, rank: int, retrieved: int, expected: int, ts: str = "2026-03-14 09:27:01,004") -> Log:
        """R1 + R2, back to back from the same worker."""
        e = self.era
        head = (f"Request {req}" if e.rid_in_r1 else "") + \
            "The number of retrieved tokens is less than the expected number of tokens! This should not happen!"
        self.add(head, proc=self.worker(rank), level="ERROR", ts=ts, loc=f"vllm_v1_adapter.py:{e.r1}")
        return self.add(f"Num retrieved tokens: {retrieved}, num expected tokens: {expected}", proc=self.worker(rank),
                        level="ERROR", ts=ts, loc=f"vllm_v1_adapter.py:{e.r2}")

    def failed_blocks(self, req: str, rank: int, tokens: int, blocks: int, ts: str = "2026-03-14 09:27:01,010") -> Log:
        """R3 (0.3.12+)."""
        if self.era.r3 is None:
            return self
        return self.add(f"Request {req} failed to load {tokens} tokens across {blocks} blocks", proc=self.worker(rank),
                        level="WARNING", ts=ts, loc=f"vllm_v1_adapter.py:{self.era.r3}")

    def cant_retrieve(self, rank: int, ts: str = "2026-03-14 09:27:01,000") -> Log:
        """R7 (0.3.5+)."""
        loc = f"cache_engine.py:{self.era.r7}" if self.era.r7 else None
        return self.add("The cache block is in the storage, but it can't be retrieved", proc=self.worker(rank),
                        level="WARNING", ts=ts, loc=loc, logger=ENGINE)

    def warn(self, msg: str, rank: int | None, loc: str, logger: str, ts: str, level: str = "WARNING") -> Log:
        proc = self.worker(rank) if rank is not None else self.core()
        return self.add(msg, proc=proc, level=level, ts=ts, loc=loc, logger=logger)

    def disagreement(self, results: list[int], ts: str = "2026-03-14 09:27:00,860") -> Log:
        """L6 (scheduler); 0.3.9 says ``tensor parallel ranks``."""
        where = "tensor parallel ranks" if self.era.version == "0.3.9" else "(TP and PP) ranks"
        loc = f"lmcache_lookup_client.py:{self.era.l6}" if self.era.l6 else None
        return self.warn(f"Lookup results (number of hit tokens) differ across {where}: {results}.", None, loc or "",
                         "lmcache.v1.lookup_client.lmcache_lookup_client", ts)


# ---- paste transformations ---------------------------------------------------------------------------------
def indented(lines: list[str]) -> list[str]:
    return ["    " + s for s in lines]


def grep_n(lines: list[str], first: int = 123) -> list[str]:
    return [f"{first + i}:{s}" for i, s in enumerate(lines)]


def kubectl_prefix(lines: list[str], pod: str = "pod/vllm-0/vllm") -> list[str]:
    return [f"[{pod}] {s}" for s in lines]


def wrapped(lines: list[str], width: int = 80) -> list[str]:
    """A terminal's hard wrap: every physical line cut into ``width``-column rows."""
    out = []
    for s in lines:
        out.extend(s[i:i + width] for i in range(0, max(len(s), 1), width))
    return out


def crlf(lines: list[str]) -> list[str]:
    return [s + "\r" for s in lines]


def md_quote(lines: list[str]) -> list[str]:
    """Pasted into a GitHub comment as a quote."""
    return ["> " + s for s in lines]


def md_bullets(lines: list[str]) -> list[str]:
    """One markdown list item a line (``- ``), as chat and issue excerpts often come."""
    return ["- " + s for s in lines]


def md_numbered(lines: list[str]) -> list[str]:
    return [f"{i}. {s}" for i, s in enumerate(lines, 1)]


PASTES = {"indented": indented, "grep-n": grep_n, "kubectl-prefix": kubectl_prefix, "wrapped-80": wrapped, "crlf": crlf,
          "md-quote": md_quote, "md-bullets": md_bullets, "md-numbered": md_numbered}


def write_lines(path, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("\n".join(lines) + "\n")
    return str(path)


# ---- one minimal incident per cause of mismatch-causes.md §3 ---------------------------------------------
REQ = "cmpl-0b9d2c71a4e35f08-0-91d4e6aa"
CPU_BACKEND = ("local_cpu_backend.py:724", "lmcache.v1.storage_backend.local_cpu_backend")
MEMORY = "lmcache.v1.memory_management"


def _short_load(log: Log, *, rank: int = 1, retrieved: int = 6400, expected: int = 8448, total: int = 9472,
                computed: int = 1024, req: str = REQ, ts: str = "2026-03-14 09:27:01,004") -> Log:
    """The lookup, a complete load on rank 0 and a short one on ``rank`` (R4, R1/R2, R3)."""
    log.lookup(req, total + 259, total, computed)
    for r in range(log.tp):
        if r != rank:
            log.retrieve(req, r, expected, expected, total)
    log.retrieve(req, rank, retrieved, expected, total, ts=ts)
    log.mismatch(req, rank, retrieved, expected, ts=ts)
    return log.failed_blocks(req, rank, expected - retrieved, -(-(expected - retrieved) // 16))


def eviction(version: str = "0.5.6", **kw) -> Log:
    """Pressure lines of the short rank before the load (M1, M4), no R7, whole chunks missing."""
    log = Log(version, **kw).config()
    for ts in ("2026-03-14 09:27:00,100", "2026-03-14 09:27:00,600"):
        log.warn("No eviction candidates found in local cpu backend. Local cpu memory is under pressure. Waiting for "
                 "0.1 seconds before retrying.", 1, *CPU_BACKEND, ts)
    log.warn("Failed to batched allocate 8 memory blocks of size 262144 because no enough memory is available (short "
             "by 3 blocks)", 1, "memory_management.py:1540", MEMORY, "2026-03-14 09:27:00,700")
    return _short_load(log)


def pin_accounting(version: str = "0.5.6", **kw) -> Log:
    """M5 (double unpin) on the short rank shortly before its load."""
    log = Log(version, **kw).config()
    log.warn("Pin count of MemoryObj 0x7f3a10c0is negative: -1.Double unpin occurred somewhere.Setting pin count back "
             "to 0 as a hack but please find the bug.", 1, "memory_management.py:846", MEMORY, "2026-03-14 09:27:00,950")
    return _short_load(log)


def pin_timeout(version: str = "0.5.6", **kw) -> Log:
    """The lookup 6 minutes before the load; M8/M9 of the pin monitor in between."""
    log = Log(version, **kw).config(pin_timeout_sec=300)
    log.lookup(REQ, 9731, 9472, 1024, ts="2026-03-14 09:21:00,871")
    log.warn("Pin timeout detected for MemoryObj 0x7f3a10c0. Pin count: 1, Elapsed time: 300.41s. Forcing unpin to 0.",
             1, "pin_monitor.py:179", "lmcache.v1.pin_monitor", "2026-03-14 09:26:01,300")
    log.warn("Force unpinned 36 timeout objects in 40 pinned_objects within 300 seconds", 1, "pin_monitor.py:151",
             "lmcache.v1.pin_monitor", "2026-03-14 09:26:01,301")
    log.retrieve(REQ, 0, 8448, 8448, 9472)
    log.retrieve(REQ, 1, 6400, 8448, 9472)
    return log.mismatch(REQ, 1, 6400, 8448)


def remote_loss(version: str = "0.5.6", **kw) -> Log:
    """Redis as the only tier: key present, value gone (X8), R7, short load."""
    log = Log(version, **kw).config(local_cpu=False, remote_url="redis://10.0.0.5:6379", remote_serde="naive")
    log.warn("Key exists but KV cache does not exist.Might happen when the cache is evicted by redis.", 1,
             "redis_connector.py:308", "lmcache.v1.storage_backend.connector.redis_connector", "2026-03-14 09:27:00,990")
    log.cant_retrieve(1, ts="2026-03-14 09:27:00,991")
    return _short_load(log)


def read_failure(version: str = "0.5.6", **kw) -> Log:
    """Local disk tier: the read fails (D4), R7, nothing retrieved."""
    log = Log(version, **kw).config(local_disk="file:///var/cache/lmcache/", max_local_disk_size=100.0)
    log.warn("Failed to load chunk from disk for key 5c2e9a17: [Errno 5] Input/output error", 1,
             "local_disk_backend.py:590", "lmcache.v1.storage_backend.local_disk_backend", "2026-03-14 09:27:00,990",
             level="ERROR")
    log.cant_retrieve(1, ts="2026-03-14 09:27:00,991")
    return _short_load(log, retrieved=0)


def staging(version: str = "0.5.6", **kw) -> Log:
    """Disk tier with a tiny CPU pool: D5 and M3 before R7."""
    log = Log(version, **kw).config(local_disk="file:///var/cache/lmcache/", max_local_disk_size=100.0,
                                    max_local_cpu_size=0.5)
    log.warn("Failed to allocate memory block of size 262144 because no memory is available", 1,
             "memory_management.py:1452", MEMORY, "2026-03-14 09:27:00,980")
    log.warn("Memory allocation failed during async disk load for key 5c2e9a17. CPU staging pool may be exhausted "
             "(unpin() not called after a previous retrieve). Returning partial results.", 1,
             "local_disk_backend.py:629", "lmcache.v1.storage_backend.local_disk_backend", "2026-03-14 09:27:00,985",
             level="ERROR")
    log.cant_retrieve(1, ts="2026-03-14 09:27:00,991")
    return _short_load(log)


def adapter_accounting(**kw) -> Log:
    """LMCache 0.3.1 (issue #889/#910 era): expected not chunk-aligned, nothing retrieved on every rank."""
    log = Log("0.3.1", **kw).config()
    log.lookup(REQ, 260, 256, 0)
    for r in range(log.tp):
        log.mismatch(REQ, r, 0, 253)
    return log


def p2p(**kw) -> Log:
    """``enable_p2p: True`` (~0.3.3 tree): 0 retrieved, R4 says 0 out of the expected."""
    log = Log("0.3.3", **kw).config(enable_p2p=True)
    log.lookup(REQ, 4352, 4096, 0)
    for r in range(log.tp):
        log.retrieve(REQ, r, 0, 4096, 4096)
        log.mismatch(REQ, r, 0, 4096)
    return log


def disagreement(version: str = "0.5.6", **kw) -> Log:
    """L6 at the lookup, then one rank short."""
    log = Log(version, **kw).config()
    log.disagreement([9472, 7168])
    return _short_load(log, retrieved=4096, expected=6144, total=7168)


def async_partial(version: str = "0.5.6", **kw) -> Log:
    """``enable_async_loading: True``: L8 answers a shorter prefix than the load later expects."""
    log = Log(version, **kw).config(enable_async_loading=True)
    log.warn(f"Responding to scheduler for lookup id {REQ} with retrieved length 7424", 1, "storage_manager.py:648",
             "lmcache.v1.storage_backend.storage_manager", "2026-03-14 09:27:00,700", level="INFO")
    return _short_load(log)


def unfull_chunk(version: str = "0.5.6", **kw) -> Log:
    """A hit that ends mid-chunk (unfull last chunk stored by another writer): missing < one chunk."""
    log = Log(version, **kw).config(save_unfull_chunk=False, local_disk="file:///shared/lmcache/")
    return _short_load(log, retrieved=8192, expected=8300, total=9324, computed=1024)


INCIDENTS = {
    "lookup-retrieve-eviction": eviction,
    "pin-accounting-bug": pin_accounting,
    "pin-timeout": pin_timeout,
    "remote-backend-loss": remote_loss,
    "backend-read-failure": read_failure,
    "cpu-staging-exhausted": staging,
    "adapter-token-accounting-bug": adapter_accounting,
    "p2p-retrieve-bug": p2p,
    "rank-disagreement": disagreement,
    "async-loading-partial": async_partial,
    "unfull-chunk-mismatch": unfull_chunk,
}


# ---- vLLM periodic lines of every era (vllm/log-formats.md §5-§6) ----------------------------------------
#: (era, stats-line location, SpecDecoding location, process prefix of the API server)
VLLM_ERAS = {
    "0.8.5": ("loggers.py:111", "metrics.py:82", None),
    "0.9.2": ("loggers.py:118", "metrics.py:87", None),
    "0.10.1.1": ("loggers.py:123", "metrics.py:87", "APIServer pid=4410"),
    "0.11.0": ("loggers.py:127", "metrics.py:96", "APIServer pid=4410"),
    "0.13.0": ("loggers.py:248", "metrics.py:100", "APIServer pid=4410"),
    "0.20.0": ("loggers.py:271", "metrics.py:101", "APIServer pid=4410"),
    "0.28.0": ("loggers.py:310", "metrics.py:120", "APIServer pid=4410"),
    "0.32.0": ("loggers.py:335", "metrics.py:120", "APIServer pid=4410"),
}


def _era_key(era: str) -> tuple[int, ...]:
    return tuple(int(x) for x in era.split("."))


def stats_line(era: str, ts: str, running: int = 3, waiting: int = 0, cache: float = 41.8) -> str:
    """``Engine 000: Avg prompt throughput …`` in the era's shape (Preemptions 0.11.2+, CPU/GPU label 0.30+)."""
    loc, _, proc = VLLM_ERAS[era]
    body = (f"Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 96.0 tokens/s, "
            f"Running: {running} reqs, Waiting: {waiting} reqs, ")
    if _era_key(era) >= (0, 11, 2):
        body += "Preemptions: 2, "
    body += f"GPU KV cache usage: 37.3%, Prefix cache hit rate: {cache}%"
    return vllm_line(body, ts=ts, loc=loc, proc=proc)


def spec_line(era: str, ts: str, accepted: int, drafted: int, per_pos: list[float], drafts: int) -> str:
    """``SpecDecoding metrics: …`` in the era's template (0.8.5-0.10.1 vs 0.10.2+)."""
    _, loc, proc = VLLM_ERAS[era]
    rate = 100.0 * accepted / drafted if drafted else float("nan")
    mal = 1 + accepted / drafts if drafts else 0.0
    pos = ", ".join(f"{p:.3f}" for p in per_pos)
    if _era_key(era) < (0, 10, 2):
        body = (f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mal:.2f}, "
                f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {pos}")
    else:
        body = (f"SpecDecoding metrics: Mean acceptance length: {mal:.2f}, Accepted throughput: {accepted / 10:.2f} "
                f"tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: "
                f"{drafted} tokens, Per-position acceptance rate: {pos}, Avg Draft acceptance rate: {rate:.1f}%")
    return vllm_line(body, ts=ts, loc=loc, proc=proc)


def spec_series(era: str, rates: list[float], k: int = 3, drafts: int = 400) -> list[str]:
    """One stats line and one SpecDecoding line per 10-s interval, acceptance ``rates`` (0-1) in turn."""
    out = []
    for i, r in enumerate(rates):
        ts = f"03-14 09:{15 + i // 6:02d}:{(i % 6) * 10:02d}"
        drafted = drafts * k
        accepted = int(round(r * drafted))
        per_pos = [min(1.0, r * (1.3 - 0.3 * j)) for j in range(k)]
        out.append(stats_line(era, ts))
        out.append(spec_line(era, ts, accepted, drafted, per_pos, drafts))
    return out


def hash_seed_unset(version: str = "0.5.6", *, repeats: int = 4, **kw) -> Log:
    """Builtin hash without PYTHONHASHSEED (C22), stores of every prompt, then 0 hits on each repeat of it."""
    log = Log(version, **kw).config()
    log.warn("Using builtin hash without PYTHONHASHSEED set. For production environments (non-testing scenarios), you "
             "MUST set PYTHONHASHSEED to ensure consistent hashing across processes. Example: export PYTHONHASHSEED=0",
             0, "token_database.py:170", "lmcache.v1.token_database", "2026-03-14 09:20:11,400")
    n = 0
    for rep in range(repeats):
        for total in (4113, 6170, 8227):
            n += 1
            ts = f"2026-03-14 09:{27 + rep:02d}:{n % 60:02d},100"
            log.lookup(f"cmpl-{n:04x}a7-0", total, 0, 0, ts=ts)
            for r in range(log.tp):
                log.add(f"[req_id=cmpl-{n:04x}a7-0] Stored {total // 256 * 256} out of total {total // 256 * 256} "
                        "tokens. size: 0.5000 GB, cost 12.0000 ms, throughput: 41.6667 GB/s; offload_time: 10.0000 ms, "
                        "put_time: 2.0000 ms", proc=log.worker(r), ts=ts, loc="cache_engine.py:588", logger=ENGINE)
    return log
