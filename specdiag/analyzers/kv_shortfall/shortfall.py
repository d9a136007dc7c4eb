"""KV001's data: one rank's short load (``Shortfall``), the lookups kept for it, and whose rank it was.

Detection (``detect.py``), the evidence families (``evidence*.py``) and the ranking and finding text
(``rank.py``, ``finding.py``) all read these; keeping them here lets each of those import only the data,
not each other.
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass, field

from specdiag.context import Context
from specdiag.events import Event
from specdiag.events.rows import LookupRows, message_values
from specdiag.patterns import lazy

_RANK_IN_NAME = lazy(r"(?:^|[^a-z])(?:tp|rank)[_-]?(\d+)(?!\d)", re.I)
MAX_TRACKED = 20_000  # lookups remembered per request id (LRU): a few minutes of traffic on a busy server


#: rows a batch of lookups read one by one grows to before a new one starts (``LookupHistory.add``)
MERGED_ROWS = 256


class LookupHistory:
    """The newest lookups as the column batches they arrived in (at least ``cap`` rows once that many came).

    Per row it keeps a 64-bit request-id hash, the line, the hit count and the raw line (for evidence):
    a few array slices and one list per batch, no per-row Python objects beyond the line itself. A
    shortfall finds its lookup with ``array.index`` (C) over at most ``cap`` hashes, newest batch first.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.rows = 0
        self.batches: deque[tuple] | tuple = ()  # a deque from the first rows on: one costs 0.7 KiB a deployment

    def add(self, rows: LookupRows) -> None:
        lo, hi = rows.lo, rows.hi
        kept = rows.kept_rows()
        if not isinstance(self.batches, deque):
            self.batches = deque()
        last = self.batches[-1] if self.batches else None
        if (type(kept) is list and last is not None and type(last[3]) is list and last[4] == rows.path
                and len(last[0]) < MERGED_ROWS):
            # a row read on its own (deployments interleaved line by line: every lookup comes alone) joins
            # the batch before: one tuple, three arrays and a list per row took ≈ 330 bytes beside the row
            last[0].extend(rows.rid_hash[lo:hi])
            last[1].extend(rows.line[lo:hi])
            last[2].extend(rows.hit[lo:hi])
            last[3].extend(kept)
        else:
            self.batches.append((rows.rid_hash[lo:hi], rows.line[lo:hi], rows.hit[lo:hi], kept, rows.path))
        self.rows += hi - lo
        while self.rows - len(self.batches[0][0]) >= self.cap:
            self.rows -= len(self.batches.popleft()[0])

    def get(self, h: int) -> tuple | None:
        """(path, line, kept row, hit) of the newest lookup with this hash."""
        for rid, line, hit, kept, path in reversed(self.batches):
            if h in rid:
                i = len(rid) - 1 - rid[::-1].index(h)
                return path, line[i], kept[i], hit[i]
        return None

    def newest_first(self):
        """``(hash, (path, line, kept row, hit))``, newest first."""
        for rid, line, hit, kept, path in reversed(self.batches):
            for i in range(len(rid) - 1, -1, -1):
                yield rid[i], (path, line[i], kept[i], hit[i])
#: rank-level shortfalls kept with their lines (≈ 5 KB each); later ones are only counted, so that a log where
#: every request falls short stays under 100 MiB (20,000 kept took 159 MiB on a 234 MB error flood)
MAX_OCCURRENCES = 5_000

#: LMCache P2P backend lines (v1/storage_backend/p2p_backend.py, 0.5.6): P2P is on in this deployment
P2P_IDS = frozenset({"P2P1", "P2P2", "P2P3"})


#: the last event ``complete_retrieve`` answered for, with its answer (one tuple, replaced whole): KV001 and the
#: precursor rule ask in turn of each R4 line
_last_retrieve: tuple[Event | None, bool] = (None, False)


def complete_retrieve(ev: Event) -> bool:
    """An R4 line with ``retrieved >= required`` by its numbers (the scanner hands on only short ones; a
    line the per-line stages read may be complete). False where the numbers cannot be read cheaply."""
    global _last_retrieve
    last = _last_retrieve
    if last[0] is ev:
        return last[1]
    vals = message_values("R4", ev.rec.raw)
    answer = vals is not None and vals[0] >= vals[1]
    _last_retrieve = (ev, answer)
    return answer
#: vLLM's smallest KV block size (V1 attention blocks are 16 tokens or a multiple): ``vllm_cached`` is a multiple
MIN_BLOCK = 16
#: LMCache's default ``pin_timeout_sec`` (v1/config.py, 0.3.12+)
DEFAULT_PIN_TIMEOUT_S = 300
#: how far back a lookup may lie to be tied to an id-less error pair by its numbers alone
NEED_TIE_WINDOW_S = 3 * DEFAULT_PIN_TIMEOUT_S


@dataclass
class Shortfall:
    """One rank's short load of one request, from whichever of LMCache's lines the input has.

    ``source`` says which line proves it: the adapter's error pair (``pair``), a ``Retrieved X out of Y``
    line with X < Y whose pair is not in the input (``retrieve``), such a line followed by the pair's error line
    without its numbers line (``error-line``: a paste cut after it), or a failed-block report alone
    (``failed-blocks``). ``expected``/``retrieved`` are the adapter's numbers when the pair is present.
    """

    req_id: str | None
    expected: int | None
    retrieved: int | None
    rank: str | None
    proc_key: str
    r1: Event | None
    r2: Event | None
    r4: dict | None = None
    lookup: dict | None = None
    signals: list[Event] = field(default_factory=list)
    l6: Event | None = None
    l6_loose: bool = False  # the L6 was not tied through the lookup line (not in the input) but by time and numbers
    r3: Event | None = None
    outcome: Event | None = None
    t: float | None = None
    source: str = "pair"
    marker: Event | None = None  # source "read-failure": LMCache's own failed-read line
    tracked: bool = True  # False: past MAX_OCCURRENCES, only counted (ShortfallTracker.dropped)

    @property
    def anchor(self) -> Event:
        """The line that proves the shortfall (for evidence, paths and ranks)."""
        if self.r2 is not None:
            return self.r2
        if self.r4 is not None:
            return self.r4["ev"]
        if self.r3 is None:
            assert self.marker is not None
            return self.marker
        return self.r3

    @property
    def missing(self) -> int:
        """Adapter view: ``expected − retrieved`` (``lmcache_cached − vllm_cached`` minus what was loaded)."""
        if self.expected is not None and self.retrieved is not None:
            return self.expected - self.retrieved
        if self.r4 is not None and self.r4.get("required") is not None:
            return self.r4["required"] - self.r4["retrieved"]
        if self.r3 is not None:
            return int(self.r3.f.get("tokens") or 0)
        return 0


def single_rank(ctx: Context) -> bool:
    """True only when the log states one rank (TP=1, PP=1): a guessed TP size is a lower bound."""
    return (ctx.tensor_parallel_size == 1 and not ctx.tensor_parallel_size_inferred
            and (ctx.pipeline_parallel_size or 1) == 1)


def one_rank(ctx: Context, occs: list[Shortfall]) -> bool:
    """One rank stated (TP=1), or worker lines printed by the engine-core process (in-process model, TP=1)."""
    if single_rank(ctx):
        return True
    return all(o.anchor.rec.origin.role == "EngineCore" and o.anchor.rec.origin.pid is not None
               for o in occs) and not (ctx.tensor_parallel_size or 0) > 1


def tp_stated(ctx: Context) -> bool:
    """Whether the log states the TP size (not one guessed from the ranks seen, a lower bound)."""
    return ctx.tensor_parallel_size is not None and not ctx.tensor_parallel_size_inferred


def rank_of(o: Shortfall, single_rank: bool, ctx: Context | None = None) -> str:
    """The rank that printed it, only from what the input says; otherwise ``unknown (file)``."""
    if o.rank:
        return o.rank
    if single_rank:
        return "TP0"
    origin = o.anchor.rec.origin
    if origin.role == "EngineCore" and origin.pid is not None:
        # worker-side line printed by the engine-core process: the model runs in-process (TP=1). Not a Ray
        # worker nested in it (``(EngineCore_DP0 pid=…) (RayWorkerWrapper pid=…, ip=…)``): its rank is unknown
        return "TP0"
    # one file per worker without process prefixes: the file name often carries the rank
    m = _RANK_IN_NAME.search(os.path.basename(o.anchor.rec.path))
    if m:
        return f"TP{int(m.group(1))}"
    if ctx is not None and len(ctx.ranks_seen) == 1 and not (ctx.tensor_parallel_size or 0) > 1:
        return ctx.ranks_seen[0]  # the only worker the input shows
    return f"unknown ({os.path.basename(o.anchor.rec.path)})"


def incidents_of(occs: list[Shortfall]) -> set:
    """Distinct requests among these occurrences: by id, else by numbers and second (one request, many ranks)."""
    return {(o.req_id or f"~{o.expected}|{o.retrieved}|{int(o.t) if o.t is not None else id(o)}") for o in occs}


def family(ev: Event) -> str:
    """The signal family of a line (pressure, pin-timeout, …); imported late to keep the import graph flat."""
    from specdiag.analyzers.signals import SIGNAL_FAMILY

    return SIGNAL_FAMILY.get(ev.id, "other")


def signal_families(occs: list[Shortfall]) -> dict[str, list[Event]]:
    """The signal lines before these occurrences, by family (pressure, pin-timeout, …), in occurrence order."""
    fams: dict[str, list[Event]] = {}
    for o in occs:
        for s in o.signals:
            fams.setdefault(family(s), []).append(s)
    return fams
