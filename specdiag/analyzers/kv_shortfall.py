"""KV001 — LMCache retrieved fewer KV tokens than its lookup promised."""

from __future__ import annotations

import os
import re
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import cause
from specdiag.analyzers.kv_arith import LossViews, describe, loss_views, measurements
from specdiag.analyzers.kv_coverage import Coverage, CoverageTracker
from specdiag.analyzers.signals import PRESSURE_IDS, SignalWindow
from specdiag.context import Context
from specdiag.events import Event, template
from specdiag.events.rows import LookupRows, OriginCache, message_values, revive, rid_hash
from specdiag.findings import CauseBoard, Evidence, Finding, with_primary
from specdiag.fingerprints import version_tuple
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:tp|rank)[_-]?(\d+)(?!\d)", re.I)
MAX_TRACKED = 20_000  # lookups remembered per request id (LRU): a few minutes of traffic on a busy server


class LookupHistory:
    """The newest lookups as the column batches they arrived in (at least ``cap`` rows once that many came).

    Per row it keeps a 64-bit request-id hash, the line, the hit count and the raw line (for evidence):
    a few array slices and one list per batch, no per-row Python objects beyond the line itself. A
    shortfall finds its lookup with ``array.index`` (C) over at most ``cap`` hashes, newest batch first.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.rows = 0
        self.batches: deque[tuple] = deque()

    def add(self, rows: LookupRows) -> None:
        lo, hi = rows.lo, rows.hi
        self.batches.append((rows.rid_hash[lo:hi], rows.line[lo:hi], rows.hit[lo:hi], rows.kept_rows(), rows.path))
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
MAX_OCCURRENCES = 20_000


#: LMCache P2P backend lines (v1/storage_backend/p2p_backend.py, 0.5.6): P2P is on in this deployment
P2P_IDS = frozenset({"P2P1", "P2P2", "P2P3"})


def complete_retrieve(ev: Event) -> bool:
    """An R4 line with ``retrieved >= required`` by its numbers (the scanner hands on only short ones; a
    line the per-line stages read may be complete). False where the numbers cannot be read cheaply."""
    vals = message_values("R4", ev.rec.raw)
    return vals is not None and vals[0] >= vals[1]
#: vLLM's smallest KV block size (V1 attention blocks are 16 tokens or a multiple): ``vllm_cached`` is a multiple
MIN_BLOCK = 16

#: the causes KV001 weighs (their texts live in the shared catalog, analyzers/causes.py)
KV001_CAUSES = (
    "lookup-retrieve-eviction", "pin-accounting-bug", "pin-timeout", "remote-backend-loss", "backend-read-failure",
    "cpu-staging-exhausted", "adapter-token-accounting-bug", "p2p-retrieve-bug", "rank-disagreement",
    "hash-inconsistency", "async-loading-partial", "unfull-chunk-mismatch", "decode-cache-not-saved",
)
#: confidence ceilings by how much of the log the input covers (a two-line paste proves the arithmetic only)
CEILING = {"fragment": 0.6, "partial": 0.7}
#: LMCache's default ``pin_timeout_sec`` (v1/config.py, 0.3.12+)
DEFAULT_PIN_TIMEOUT_S = 300
#: how far back a lookup may lie to be tied to an id-less error pair by its numbers alone
NEED_TIE_WINDOW_S = 3 * DEFAULT_PIN_TIMEOUT_S


@dataclass
class Shortfall:
    """One rank's short load of one request, from whichever of LMCache's lines the input has.

    ``source`` says which line proves it: the adapter's error pair (``pair``), a ``Retrieved X out of Y``
    line with X < Y whose pair is not in the input (``retrieve``), or a failed-block report alone
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


def _loss_words(v: LossViews) -> str:
    """The verdict's size of the loss: whole chunks when the numbers show them, from LMCache's own view."""
    tokens = v.not_loaded if v.not_loaded is not None else v.missing
    if tokens is None:
        return "KV tokens missing"
    if v.aligned and tokens:
        return f"{tokens} tokens ({tokens // v.chunk} × {v.chunk}) missing"
    return f"{tokens} tokens missing"


def _chunk_measurements(ctx: Context, views: list[LossViews]) -> dict:
    """The chunk size and where it came from, and whether the loss is whole chunks (on which view's numbers)."""
    v0 = views[0]
    chunk = ctx.chunk_size or 256
    return {
        "chunk_size": chunk,
        "chunk_size_source": "log" if ctx.chunk_size is not None else "assumed default 256 (no config line in the input)",
        "missing_chunks": v0.lost_chunks,
        "chunk_aligned": all(v.aligned is not False for v in views),
        "chunk_alignment_basis": ("retrieve view (required − retrieved)" if v0.not_loaded is not None
                                  else "undecidable: nothing loaded and no retrieve line" if v0.aligned is None
                                  else "adapter view (expected − retrieved)"),
    }


def _headline(v0: LossViews, where: str, outcome: Event | None, requests: int) -> str:
    """The verdict line's clause: the loss, the ranks, vLLM's consequence, how many requests."""
    consequence = {"V2": "request failed", "V1": "recomputed"}.get(outcome.id if outcome else "", "")
    headline = f"{_loss_words(v0)} on {where}" + (f", {consequence}" if consequence else "")
    if requests > 1:
        headline += f", {requests} requests"
    return headline


@register
class RetrievalShortfall(Rule):
    """LMCache retrieved fewer KV tokens than its lookup promised.

    Detects: the LMCache error pair ``The number of retrieved tokens is less than the expected number of
    tokens!`` / ``Num retrieved tokens: R, num expected tokens: E`` on a worker; and, when an excerpt ends
    before that pair, a ``Retrieved X out of Y required tokens`` line (or the older ``… out of Y out of
    total Z``) with X < Y, a ``failed to load N tokens across M blocks`` report, or — with none of those —
    LMCache's own failed-read line (``… in the storage, but it can't be retrieved``, ``… Returning partial
    results``), on its own (warning: the loss is certain, its size is not in the input).
    Every occurrence is joined by request id across ranks with the scheduler's ``Reqid:`` lookup, the
    worker's retrieve line, the failed-block report and vLLM's recovery or failure line; repeats are
    folded. Without a request id (LMCache ≤ 0.3.9) the same numbers at the same moment on several ranks
    are one request.

    Arithmetic: ``expected = lmcache_cached − vllm_cached`` is not chunk-aligned, but the retrieve covers
    whole chunks from ``floor(vllm_cached / chunk) * chunk``; the finding states both views (the
    retrieve line's ``required`` and ``total`` give LMCache's own), so ``retrieved 0, expected 16`` with
    ``Retrieved 0 out of 256`` reads as one whole chunk lost, not an unaligned remainder.

    Partial input: on a fragment or excerpt (no startup lines, no config dump) lines that are not there
    are not counted against a cause, confidence is capped (0.6 for a paste, 0.7 for an excerpt), and the
    next steps name the lines or log level that would decide between the remaining causes.

    Why it matters: the lookup promised (and pinned) chunks that one rank could not load. From LMCache
    0.3.12 the failed blocks go back to vLLM, which recomputes them (cost) or fails the request
    (``kv_load_failure_policy=fail``, the default from vLLM 0.20: clients see errors). Before that the
    error was log-only and attention ran over unfilled blocks.

    Causes weighed: every cause id of the report contract — eviction between lookup and retrieve, pin
    accounting bugs, pin timeouts, remote-store loss, backend read failures, CPU staging exhaustion,
    adapter token accounting bugs, the P2P retrieve bug, rank disagreement, hash inconsistency, async
    loading partials, unfull-chunk mismatch, and ``decode-cache-not-saved`` (which only affects storing,
    so it explains misses, not a shortfall, and is argued against unless new evidence appears).

    Fix: depends on the top cause; each cause carries its fix and the experiment that would confirm it.

    References: LMCache ``integration/vllm/vllm_v1_adapter.py`` (``start_load_kv``, 0.5.6 lines 756-896),
    ``v1/cache_engine.py`` (``retrieve``), LMCache issues #889, #910, #1467, #1514, #1690, #1770, #2106;
    vLLM ``v1/core/sched/scheduler.py`` (KV load failure handling).
    """

    code = "KV001"
    name = "lmcache-retrieve-shortfall"
    title = "LMCache retrieved fewer KV tokens than its lookup promised"
    severity = "error"
    severity_note = ("warning when vLLM recomputed every affected request (kv_load_failure_policy=recompute), "
                     "error otherwise; 'specdiag check' fails on it under either policy")
    family = "KV"
    cause_ids = KV001_CAUSES
    defaults = {"window_s": 60.0}
    events = frozenset({
        "L6", "L8", "R1", "R2", "R3", "R4", "V1", "V2",
        "M5", "M6", "M7", "M8", "M9", "R7", "X1", "X2", "X3", "X4", "X5", "X6",
        "X7", "X8", "X9", "D3", "D4", "D5", "D6", "Z1", "L7", "M13", "R8", "C34",
    }) | PRESSURE_IDS | P2P_IDS
    tables = frozenset({"lookups"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        #: the last lookups, by request-id hash: (path, line, kept row, hit)
        self.lookups = LookupHistory(MAX_TRACKED)
        self.origins = OriginCache()
        self.pending_l6: dict[str, Event] = {}
        self.l6_for: OrderedDict[int, Event] = OrderedDict()  # request-id hash → the L6 line just before its lookup
        self.pending_r1: dict[str, Event] = {}
        self.r3: OrderedDict[str, Event] = OrderedDict()
        self.outcomes: list[Event] = []
        self.signals = SignalWindow()
        self.occurrences: list[Shortfall] = []
        self.dropped = 0
        self.l6_count = 0
        self.async_lengths: OrderedDict[str, int] = OrderedDict()
        self.stores_total = 0
        self.pending_r4: dict[str, list[Shortfall]] = {}
        self.seen = CoverageTracker()
        self._coverage: Coverage | None = None
        self.by_req: OrderedDict[str, Shortfall] = OrderedDict()
        self.req_short: OrderedDict[str, bool] = OrderedDict()  # request ids with a recorded shortfall
        self.p2p_lines = 0  # LMCache P2P backend lines: P2P is on even when the config dump is not shown

    # ---- observation ------------------------------------------------------------------------------
    @staticmethod
    def _remember(d: OrderedDict, key: str, value) -> None:
        d[key] = value
        d.move_to_end(key)
        if len(d) > MAX_TRACKED:
            d.popitem(last=False)

    def observe(self, ev: Event) -> None:
        tid = ev.id
        rec = ev.rec
        key = rec.origin.key
        self.seen.see(rec)
        if tid == "L6":
            self.pending_l6[key] = ev
            self.l6_count += 1
        elif tid == "L8":
            self._remember(self.async_lengths, ev.f["req_id"], ev.f["length"])
            self.signals.add(ev)
        elif tid == "R1":
            self.pending_r1[key] = ev
        elif tid == "R2":
            self._on_r2(ev)
        elif tid == "R4":
            self._on_r4(ev)
        elif tid == "R3":
            self._on_r3(ev)
        elif tid in P2P_IDS:
            self.p2p_lines += 1
        elif tid in ("V1", "V2"):
            if len(self.outcomes) < 10_000:
                self.outcomes.append(ev)
        else:
            self.signals.add(ev)

    def observe_rows(self, rows: LookupRows) -> None:
        """Remember each lookup (bounded) until a shortfall of its request asks for it; pair a pending L6."""
        lo, hi = rows.lo, rows.hi
        if self.pending_l6:
            for i in range(lo, hi):
                l6 = self.pending_l6.pop(rows.origin(i).key, None)
                if l6 is not None:
                    self._remember(self.l6_for, rows.rid_hash[i], l6)
                    if not self.pending_l6:
                        break
        self.lookups.add(rows)
        self.seen.see_rows(rows)

    def _lookup_event(self, kept: tuple) -> Event | None:
        path, line, row, _hit = kept
        return revive(row, path, line, self.origins)

    def _on_r4(self, ev: Event) -> None:
        """A short retrieve line: a shortfall even if its error pair never comes. (The scanner hands on only
        short ones; a wrapped line the Python path read may be complete: its numbers say so cheaply.)"""
        if complete_retrieve(ev):
            return
        r4 = self._r4_fields(ev)
        if r4 is None or r4.get("required") is None or r4["retrieved"] >= r4["required"]:
            return
        occ = self._new_occurrence(ev, r4.get("req_id"), None, None, None, r4, "retrieve")
        if occ is not None:
            pend = self.pending_r4.setdefault(ev.rec.origin.key, [])
            pend.append(occ)
            if len(pend) > 64:
                del pend[0]

    def _on_r3(self, ev: Event) -> None:
        """``failed to load N tokens across M blocks``: attach to its request's pair, or stand on its own."""
        req_id = (ev.f.get("req_id") or "").strip()
        occ = self.by_req.get(f"{req_id}|{ev.rec.origin.key}") if req_id else None
        if occ is not None and occ.r3 is None:
            occ.r3 = ev
            return
        if req_id:
            self._remember(self.r3, req_id, ev)
            if req_id in self.req_short:
                return  # another rank's report of a request whose shortfall is already recorded
        self._new_occurrence(ev, req_id or None, None, None, None, None, "failed-blocks", r3=ev)

    def _take_r4(self, ev: Event, retrieved: int) -> Shortfall | None:
        """The short retrieve line of this process just before an error pair (same numbers, same file)."""
        pend = self.pending_r4.get(ev.rec.origin.key)
        for i in range(len(pend or ()) - 1, -1, -1):
            occ = pend[i]
            r4ev = occ.r4["ev"]
            if occ.r4["retrieved"] == retrieved and r4ev.rec.path == ev.rec.path and 0 < ev.rec.line - r4ev.rec.line <= 50:
                del pend[i]
                return occ
        return None

    def _on_r2(self, ev: Event) -> None:
        rec = ev.rec
        key = rec.origin.key
        r1 = self.pending_r1.pop(key, None)
        if r1 is not None and (r1.rec.path != rec.path or rec.line - r1.rec.end_line > 3):
            r1 = None  # not the adjacent header of this pair
        retrieved, expected = ev.f["retrieved"], ev.f["expected"]
        if retrieved >= expected:
            return
        occ = self._take_r4(ev, retrieved)
        r4 = occ.r4 if occ is not None else None
        if r4 is None:
            last = self.run.event_before(rec.line, b"Retrieved ", key)
            # a full retrieve line is only counted by ingest: look back for this process's one just before the error
            r4 = self._r4_fields(Event("R4", last, None, template("R4")) if last is not None else None)
            if r4 is not None and r4["retrieved"] != retrieved:
                r4 = None
        req_id = (r1.f.get("req_id") if r1 is not None else None) or (r4 or {}).get("req_id")
        if occ is not None:  # the retrieve line already opened this occurrence: the pair completes it
            occ.r1, occ.r2, occ.expected, occ.retrieved, occ.source = r1, ev, expected, retrieved, "pair"
            if req_id and not occ.req_id:
                occ.req_id = req_id.strip()
                self._attach_lookup(occ)
            return
        self._new_occurrence(ev, req_id, r1, expected, retrieved, r4, "pair")

    def _new_occurrence(self, ev: Event, req_id: str | None, r1: Event | None, expected: int | None,
                        retrieved: int | None, r4: dict | None, source: str, r3: Event | None = None) -> Shortfall | None:
        """Record one rank's shortfall with the lookup and the signals of that process just before it."""
        rec = ev.rec
        if len(self.occurrences) >= MAX_OCCURRENCES:
            self.dropped += 1
            return None
        if retrieved is None and r4 is not None:
            retrieved = r4["retrieved"]
        occ = Shortfall(req_id=req_id.strip() if req_id else None, expected=expected, retrieved=retrieved,
                        rank=rec.origin.rank_label, proc_key=rec.origin.key, r1=r1,
                        r2=ev if source == "pair" else None, r4=r4, r3=r3, t=rec_time(rec), source=source)
        self._attach_lookup(occ)
        if occ.lookup is None and occ.l6 is None:
            occ.l6 = self._unpaired_l6(occ, rec)
            occ.l6_loose = occ.l6 is not None
        window_start = occ.lookup["t"] if occ.lookup and occ.lookup.get("t") else None
        window = self.options["window_s"]
        if window_start is not None and occ.t is not None:
            window = max(window, occ.t - window_start + 1.0)
        occ.signals = self.signals.before(rec.origin.key, occ.t, rec.line, rec.path, window)
        self.occurrences.append(occ)
        if occ.req_id:
            self._remember(self.by_req, f"{occ.req_id}|{occ.proc_key}", occ)
            self._remember(self.req_short, occ.req_id, True)
        return occ

    def _attach_lookup(self, occ: Shortfall) -> None:
        """Join the scheduler's lookup: by request id, or (no id before 0.3.12) by hit == the retrieve's total."""
        if occ.req_id:
            h = rid_hash(occ.req_id.encode())
            kept = self.lookups.get(h)
            ev = self._lookup_event(kept) if kept is not None else None
            if ev is not None and ev.f.get("req_id") == occ.req_id:  # not a hash collision
                occ.lookup = self._lookup_fields(ev)
                occ.l6 = self.l6_for.get(h)
            return
        if occ.r4 is None or occ.r4.get("total") is None:
            self._attach_lookup_by_need(occ)
            return
        for n, (h, kept) in enumerate(self.lookups.newest_first()):
            if kept[3] == occ.r4["total"]:
                ev = self._lookup_event(kept)
                lk = self._lookup_fields(ev)
                if lk is not None:
                    occ.req_id, occ.lookup, occ.l6 = ev.f.get("req_id"), lk, self.l6_for.get(h)
                    return
            if n > 2000:
                return

    def _attach_lookup_by_need(self, occ: Shortfall) -> None:
        """No request id and no retrieve line: the one recent lookup whose ``need to load`` is this ``expected``.

        The adapter's ``num_expected_tokens`` is ``lmcache_cached_tokens − vllm_cached_tokens`` of the request's
        load spec, the numbers the scheduler printed in its ``Reqid: …, need to load: N`` line (``need`` is one
        less on a full-prompt hit, the last token being recomputed): LMCache 0.5.6
        integration/vllm/vllm_v1_adapter.py ``get_num_new_matched_tokens`` and ``start_load_kv``; the same in
        0.3.x, whose R1 (and vLLM's vendored copy's) carries no request id. Only an unambiguous match among the
        newest lookups of the same input, at or before the error and at most ``NEED_TIE_WINDOW_S`` before it (a
        request may wait long between lookup and load: three default pin timeouts), is taken; the tie rests on
        numbers, so an L6 reached through it is weighed as a loose one.
        """
        expected, anchor = occ.expected, occ.anchor.rec
        if expected is None or expected <= 0:
            return
        found: dict[str, tuple] = {}
        for n, (h, kept) in enumerate(self.lookups.newest_first()):
            if n >= 64:
                break
            path, line, _row, hit = kept
            if path != anchor.path or line >= anchor.line or hit is None or hit < expected:
                continue
            lk = self._lookup_fields(self._lookup_event(kept))
            if lk is None or lk.get("need") is None:
                continue
            need = int(lk["need"])
            full_hit = lk["hit"] == lk["total"]  # the last token is recomputed: need is one less than loaded
            if expected != need and not (full_hit and expected == need + 1):
                continue
            if lk["t"] is not None and occ.t is not None and not 0 <= occ.t - lk["t"] <= NEED_TIE_WINDOW_S:
                continue
            found.setdefault(lk["ev"].f.get("req_id") or "", (h, lk))
            if len(found) > 1:
                return  # two requests fit: no tie
        if len(found) == 1:
            (rid, (h, lk)), = found.items()
            occ.req_id, occ.lookup = rid or None, lk
            occ.l6 = self.l6_for.get(h)
            occ.l6_loose = occ.l6 is not None

    def _unpaired_l6(self, occ: Shortfall, rec) -> Event | None:
        """A rank-disagreement warning with no lookup after it in the input, that can be this request's.

        The scheduler prints L6 right before the request's ``Reqid:`` line and takes the minimum over the ranks
        (LMCache 0.5.6 v1/lookup_client/lmcache_lookup_client.py:150), so that minimum is the hit: the retrieve
        line's total equals it, and the adapter's ``expected`` (hit − vLLM's cached tokens) cannot exceed it.
        When a paste lacks the lookup line, an L6 of the same input shortly before with such numbers stands in.
        """
        best = None
        for ev in self.pending_l6.values():
            if ev.rec.path != rec.path or ev.rec.line >= rec.line:
                continue
            t = rec_time(ev.rec)
            if t is not None and occ.t is not None and not 0 <= occ.t - t <= self.options["window_s"]:
                continue
            counts = [int(x) for x in re.findall(r"\d{1,12}", ev.f.get("results") or "")]
            if len(counts) < 2:
                continue
            total = (occ.r4 or {}).get("total")
            if (total is not None and total != min(counts)) or (occ.expected is not None and occ.expected > min(counts)):
                continue
            if best is None or ev.rec.line > best.rec.line:
                best = ev
        return best

    def _from_read_failure(self) -> None:
        """With no shortfall line in the input, LMCache's own report of a failed read is one.

        ``The cache block is in the storage, but it can't be retrieved`` (v1/cache_engine.py:1793, LMCache 0.5.6):
        a backend's ``get`` returned nothing for a chunk the lookup counted, and the retrieve drops that chunk and
        every later one, so it returns fewer tokens than expected. ``Memory allocation failed during async disk
        load … Returning partial results`` (local_disk_backend.py:629) and ``Failed to allocate memory during remote
        receive`` (redis_connector.py:296) cut the load the same way. The error pair with the numbers follows on
        the non-layerwise path; a paste that ends before it still shows the loss, without its size.
        """
        latest = None
        for (_key, fam), dq in self.signals.recent.items():
            if fam in ("read-miss", "staging-exhausted") and dq:
                ev = dq[-1][1]
                if latest is None or (ev.rec.path, ev.rec.line) > (latest.rec.path, latest.rec.line):
                    latest = ev
        if latest is None:
            return
        rec = latest.rec
        occ = Shortfall(req_id=None, expected=None, retrieved=None, rank=rec.origin.rank_label, proc_key=rec.origin.key,
                        r1=None, r2=None, t=rec_time(rec), source="read-failure", marker=latest)
        occ.signals = self.signals.before(rec.origin.key, occ.t, rec.line, rec.path, self.options["window_s"])
        self.occurrences.append(occ)

    @staticmethod
    def _lookup_fields(ev: Event | None) -> dict | None:
        if ev is None:
            return None
        f = ev.f
        if not f or f.get("hit") in (None, "None"):
            return None
        return {"total": f["total"], "hit": int(f["hit"]), "computed": f.get("vllm_computed"), "need": f.get("need"),
                "ev": ev, "t": rec_time(ev.rec)}

    @staticmethod
    def _r4_fields(ev: Event | None) -> dict | None:
        if ev is None or not ev.f:
            return None
        f = ev.f
        return {
            "req_id": f.get("req_id"), "retrieved": f["retrieved"],
            "required": f.get("required") if f.get("required") is not None else f.get("required2"),
            "total": f.get("total") if f.get("total") is not None else f.get("total2"), "ev": ev,
        }

    # ---- conclusions ------------------------------------------------------------------------------
    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.occurrences:
            self._from_read_failure()
        if not self.occurrences:
            return []
        self.stores_total = run.count("S1")
        for occ in self.occurrences:
            if occ.r3 is None and occ.req_id and occ.req_id in self.r3:
                occ.r3 = self.r3[occ.req_id]
            occ.outcome = self._match_outcome(occ)
        incidents = self._incidents()
        single_rank = self._single_rank(ctx)
        for occ in self.occurrences:
            if occ.rank is None and occ.proc_key in ctx.rank_by_proc:
                occ.rank = ctx.rank_by_proc[occ.proc_key]
        # fold incidents by the set of ranks that reported them: one finding per failure pattern
        groups: OrderedDict[frozenset, list[list[Shortfall]]] = OrderedDict()
        for occs in incidents:
            ranks = frozenset(self._rank(o, single_rank, ctx) for o in occs)
            groups.setdefault(ranks, []).append(occs)
        return [self._finding(ctx, incs, single_rank) for incs in groups.values()]

    def _incidents(self) -> list[list[Shortfall]]:
        """One incident per request: all ranks that reported it.

        Without a request id (LMCache ≤ 0.3.9 prints the pair without one) the same numbers printed within
        the same second by different processes are one request seen on several ranks, not several requests.
        """
        incidents: OrderedDict[str, list[Shortfall]] = OrderedDict()
        for i, occ in enumerate(self.occurrences):
            if occ.req_id:
                key = occ.req_id
            elif occ.t is not None:
                key = f"~{occ.expected}|{occ.retrieved}|{occ.missing}|{int(occ.t)}"
                n = 0
                while key in incidents and any(o.proc_key == occ.proc_key for o in incidents[key]):
                    n += 1  # this process already reported these numbers at this moment: another request
                    key = f"~{occ.expected}|{occ.retrieved}|{occ.missing}|{int(occ.t)}|{n}"
            else:
                key = f"#{i}"
            incidents.setdefault(key, []).append(occ)
        return list(incidents.values())

    @staticmethod
    def _single_rank(ctx: Context) -> bool:
        """True only when the log states one rank (TP=1, PP=1): a guessed TP size is a lower bound."""
        return (ctx.tensor_parallel_size == 1 and not ctx.tensor_parallel_size_inferred
                and (ctx.pipeline_parallel_size or 1) == 1)

    @classmethod
    def _one_rank(cls, ctx: Context, occs: list[Shortfall]) -> bool:
        """One rank stated (TP=1), or worker lines printed by the engine-core process (in-process model, TP=1)."""
        if cls._single_rank(ctx):
            return True
        return all(o.anchor.rec.origin.role == "EngineCore" and o.anchor.rec.origin.pid is not None
                   for o in occs) and not (ctx.tensor_parallel_size or 0) > 1

    @staticmethod
    def _tp_stated(ctx: Context) -> bool:
        return ctx.tensor_parallel_size is not None and not ctx.tensor_parallel_size_inferred

    def _tp_words(self, ctx: Context, ranks: list[str], stated: bool) -> str:
        tp = ctx.tensor_parallel_size
        if tp and tp > 1:
            return f" of TP={tp}" if stated else f" (TP ≥ {tp}: the log does not state the TP size)"
        return ""

    @staticmethod
    def _rank(o: Shortfall, single_rank: bool, ctx: Context | None = None) -> str:
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

    def _match_outcome(self, occ: Shortfall) -> Event | None:
        for out in self.outcomes:
            if out.id == "V2" and occ.req_id and occ.req_id in out.f.get("ids", ""):
                return out
        t = occ.t
        best = None
        for out in self.outcomes:
            if out.id != "V1":
                continue
            to = rec_time(out.rec)
            if t is not None and to is not None and 0 <= to - t <= 5:
                return out
            if out.rec.path == occ.anchor.rec.path and 0 < out.rec.line - occ.anchor.rec.line <= 40:
                best = best or out
        return best

    def _views(self, o: Shortfall, chunk: int) -> LossViews:
        return loss_views(chunk, o.expected, o.retrieved, o.r4, o.lookup, o.r3.f if o.r3 is not None else None)

    def _finding(self, ctx: Context, incidents: list[list[Shortfall]], single_rank: bool) -> Finding:
        """One finding for incidents reported by the same set of ranks: numbers of the first, causes of all."""
        first = incidents[0][0]
        all_occ = [o for inc in incidents for o in inc]
        chunk = ctx.chunk_size or 256
        views = [self._views(o, chunk) for o in all_occ]
        ranks = sorted({self._rank(o, single_rank, ctx) for o in all_occ})
        cov = self.coverage(ctx)
        meas = self._measurements(ctx, incidents, views, ranks, single_rank, cov)
        board = self._rank_causes(ctx, all_occ, views, chunk, cov)
        # the line that proves it (the ERROR "Num retrieved tokens: …" when present) is the primary location,
        # not the scheduler's INFO lookup
        anchor = first.anchor.rec
        evidence = with_primary(self._evidence(incidents), Evidence(anchor.path, anchor.line, anchor.display()))
        outcome = next((o.outcome for o in all_occ if o.outcome is not None), None)
        where = ", ".join(ranks)
        summary = self._summary(ctx, incidents, views[0], ranks, meas, cov, self._impact(ctx, all_occ, outcome))
        causes = board.ranked(ceiling=self._ceiling(all_occ, ctx, cov), cap={"decode-cache-not-saved": 0.05})
        return Finding(
            rule=self.code, severity=self._severity(ctx, all_occ, outcome), title=self.title, summary=summary,
            count=len(incidents), evidence=evidence, measurements=meas, causes=causes,
            next_steps=self._next_steps(ctx, all_occ, causes, single_rank, cov, board),
            identity=f"{where}|{first.expected}|{first.retrieved}|{first.req_id or ''}",
            first_seen=first.t, headline=_headline(views[0], where, outcome, len(incidents)),
        )

    def _measurements(self, ctx: Context, incidents: list[list[Shortfall]], views: list[LossViews],
                      ranks: list[str], single_rank: bool, cov: Coverage) -> dict:
        """The finding's numbers (report contract keys, in their documented order): the first occurrence's
        arithmetic, the chunk basis, who and how many, then the spread, the lookup and the parallelism."""
        first = incidents[0][0]
        all_occ = [o for inc in incidents for o in inc]
        v0 = views[0]
        meas = measurements(v0)
        meas.update(_chunk_measurements(ctx, views))
        meas.update({
            "ranks": ranks,
            "request_ids": [inc[0].req_id for inc in incidents if inc[0].req_id][:20],
            "occurrences": len(incidents),
            "error_lines": len(all_occ),
            "evidence_source": first.source,
        })
        if ctx.chunk_size is None and v0.chunk_consistent() is not None:
            meas["chunk_size_consistent_with_retrieve_line"] = v0.chunk_consistent()
        if len({(o.expected, o.retrieved) for o in all_occ}) > 1:
            meas.update(self._spread(ctx, all_occ, views, single_rank))
        if first.lookup:
            meas["lookup_hit_tokens"] = first.lookup["hit"]
            meas["lookup_total_tokens"] = first.lookup["total"]
            if first.lookup.get("t") and first.t:
                meas["lookup_to_retrieve_s"] = round(first.t - first.lookup["t"], 3)
        if self._tp_stated(ctx):
            meas["tensor_parallel_size"] = ctx.tensor_parallel_size
        elif ctx.tensor_parallel_size and ctx.tensor_parallel_size > 1:
            meas["tensor_parallel_size_at_least"] = ctx.tensor_parallel_size
        if self.dropped:
            meas["occurrences_not_tracked"] = self.dropped
        meas["input_coverage"] = cov.kind
        return meas

    def _spread(self, ctx: Context, occs: list[Shortfall], views: list[LossViews], single_rank: bool) -> dict:
        """When the occurrences' numbers differ: the range and total of missing tokens, and the first 20 rows."""
        miss = [v.missing or 0 for v in views]
        return {
            "missing_tokens_range": [min(miss), max(miss)],
            "total_missing_tokens": sum(miss),
            "per_request": [
                {"request_id": o.req_id, "rank": self._rank(o, single_rank, ctx), "expected": v.expected, "retrieved": v.retrieved}
                for o, v in list(zip(occs, views, strict=True))[:20]
            ],
        }

    @staticmethod
    def _severity(ctx: Context, occs: list[Shortfall], outcome: Event | None) -> str:
        """Error for the adapter's error pair; warning for a short retrieve line alone or when vLLM recomputed
        every affected request; info for a short CacheBlend retrieve (segments, not a promised prefix)."""
        severity = "error" if any(o.source == "pair" for o in occs) else "warning"
        if outcome is not None and outcome.id == "V1" and all(o.outcome is not None and o.outcome.id == "V1" for o in occs):
            severity = "warning"
        if severity == "warning" and ctx.cfg("enable_blending") is True and all(o.source == "retrieve" for o in occs):
            severity = "info"  # CacheBlend retrieves reusable segments, not a promised prefix: a short retrieve is normal
        return severity

    def _summary(self, ctx: Context, incidents: list[list[Shortfall]], v0: LossViews, ranks: list[str], meas: dict,
                 cov: Coverage, impact: str) -> str:
        """The arithmetic in words, where it happened, what it cost; then the other requests and the coverage."""
        first = incidents[0][0]
        chunk_note = "" if ctx.chunk_size is not None else " (assuming the default chunk_size 256: no config line in the input)"
        arith = describe(v0, chunk_note)
        if first.source == "retrieve":
            arith = "a retrieve line loaded less than it was asked for (the adapter's error pair is not in the input): " + arith
        elif first.source == "failed-blocks":
            arith = "a failed-block report without its error pair: " + arith
        elif first.source == "read-failure":
            arith = (f"LMCache reported a failed read ('{first.marker.rec.msg[:70]}'): the retrieve drops that chunk and "
                     "every later one, so it loaded less than the lookup promised; the error pair with the numbers "
                     "('Num retrieved tokens: …, num expected tokens: …') is not in the input")
        rank_word = "rank" if len(ranks) == 1 else "ranks"
        where = ", ".join(ranks)
        summary = f"{arith[:1].upper()}{arith[1:]}, on {rank_word} {where}{self._tp_words(ctx, ranks, self._tp_stated(ctx))}. {impact}"
        if len(incidents) > 1:
            summary += (f" {len(incidents)} requests affected on the same rank(s); numbers above are the first "
                        f"(missing {meas['missing_tokens_range'][0]}–{meas['missing_tokens_range'][1]} tokens, "
                        f"{meas['total_missing_tokens']} in all)." if "missing_tokens_range" in meas
                        else f" {len(incidents)} requests affected, all with the same numbers.")
        if cov.partial:
            summary += f" {cov.sentence()}"
        return summary

    def _impact(self, ctx: Context, occs: list[Shortfall], outcome: Event | None) -> str:
        if outcome is not None and outcome.id == "V2":
            return "vLLM failed the request (kv_load_failure_policy=fail): the client received an error."
        if outcome is not None and outcome.id == "V1":
            return "vLLM rescheduled it and recomputed the missing tokens (policy recompute): a latency cost, no error."
        v = version_tuple(ctx.vllm_version)
        if any(o.r3 is not None for o in occs):
            pol = ctx.kv_load_failure_policy
            if pol == "none":
                return (f"LMCache reported the failed blocks, but vLLM {ctx.vllm_version} ignores them: attention ran over "
                        "unfilled KV blocks (silent corruption risk).")
            if pol:
                return f"LMCache reported the failed blocks to vLLM (policy {pol}, {ctx.kv_load_failure_policy_source})."
            return "LMCache reported the failed blocks to vLLM (outcome line not in the log)."
        if v is not None and v < (0, 11, 2):
            return f"vLLM {ctx.vllm_version} has no load-failure handling: the missing KV was used unfilled (corruption risk)."
        return "No failed-block report or vLLM outcome line was found for it."

    def _ceiling(self, occs: list[Shortfall], ctx: Context, cov: Coverage) -> float:
        discriminating = any(o.signals or o.l6 is not None for o in occs)
        if discriminating:
            ceiling = 0.85
        elif any(o.lookup for o in occs) and ctx.lmcache_config:
            ceiling = 0.6
        else:
            ceiling = 0.45
        return min(ceiling, CEILING.get(cov.kind, 1.0))

    def coverage(self, ctx: Context) -> Coverage:
        if self._coverage is None:
            self._coverage = self.seen.assess(ctx)
        return self._coverage

    @staticmethod
    def _weigh_alignment(b: CauseBoard, views: list[LossViews], chunk: int, read_miss: bool) -> None:
        """Whole chunks lost (most causes) or a sub-chunk remainder (unfull chunk, adapter accounting)."""
        v = views[0]
        aligned = [x.aligned for x in views]
        if all(a is True for a in aligned):
            basis = "LMCache's retrieve view" if v.not_loaded is not None else "the adapter's numbers"
            b.oppose("unfull-chunk-mismatch", 30, f"the loss is a whole number of {chunk}-token chunks ({basis})")
            b.oppose("adapter-token-accounting-bug", 2, "the loss is chunk-aligned")
            b.note_for("lookup-retrieve-eviction", f"chunk-aligned loss ({chunk}-token chunks): whole chunks vanished")
        elif any(a is False for a in aligned):
            known_view = v.not_loaded is not None
            strong = known_view or (v.retrieved or 0) > 0
            sub_chunk = (v.not_loaded if known_view else v.missing or 0) < chunk
            why = (f"the retrieve lost {v.not_loaded} tokens, not a whole number of {chunk}-token chunks" if known_view
                   else f"missing tokens are not a multiple of chunk_size {chunk}")
            if read_miss:
                b.support("unfull-chunk-mismatch", 2, why)
                b.oppose("unfull-chunk-mismatch", 8, "a read failed ('can't be retrieved'): the chunk was asked for, "
                         "not cut off by a chunk-multiple slice")
            elif strong and sub_chunk:
                b.support("unfull-chunk-mismatch", 20, why + ", and less than one chunk short")
            else:
                b.support("unfull-chunk-mismatch", 3 if strong else 1.5, why)
            b.support("adapter-token-accounting-bug", (3 if sub_chunk else 6) if strong else 2, why)
            for cid in ("lookup-retrieve-eviction", "remote-backend-loss", "pin-timeout", "pin-accounting-bug"):
                b.oppose(cid, 3 if strong else 1.3, "chunk-level losses are multiples of chunk_size; this one is not")
        elif v.retrieved == 0 and (v.missing or 0) >= chunk:
            b.oppose("unfull-chunk-mismatch", 10, f"nothing of {v.missing} tokens was loaded ({v.missing // chunk} "
                     f"chunk(s) or more): an unfull last chunk loses less than one {chunk}-token chunk")
        else:
            b.note_for("unfull-chunk-mismatch", "retrieved 0 says nothing about alignment: the retrieve line "
                       "('Retrieved X out of Y required tokens') would decide")
        if v.hit_aligned is True and v.not_loaded is not None and v.not_loaded % chunk == 0:
            b.oppose("unfull-chunk-mismatch", 3, f"the lookup hit ({v.lmcache_cached} tokens) ends on a chunk boundary")
        elif v.hit_aligned is False:
            b.note_for("unfull-chunk-mismatch", f"the lookup hit ({v.lmcache_cached} tokens) ends mid-chunk: an unfull "
                       "last chunk was stored (save_unfull_chunk, PD or blending)")

    def _weigh_ranks(self, b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
        """Which ranks were short: a subset means a per-rank loss; every rank alike means a systematic cause."""
        ranks = sorted({self._rank(o, self._single_rank(ctx), ctx) for o in occs})
        known = [r for r in ranks if not r.startswith("unknown")]
        where = "/".join(ranks)
        tp = ctx.tensor_parallel_size or 0
        stated = self._tp_stated(ctx)
        same_numbers = len({(o.expected, o.retrieved) for o in occs}) == 1
        all_ranks = stated and tp > 1 and len(known) >= tp
        if (all_ranks or len(known) >= 2) and same_numbers and len(self._incidents_of(occs)) == 1:
            what = f"all {tp} ranks" if all_ranks else f"{len(known)} ranks ({where})"
            b.support("adapter-token-accounting-bug", 4 if all_ranks else 2.5,
                      f"{what} were short by exactly the same numbers at the same moment: a systematic cause "
                      "(accounting, configuration), not a per-rank loss")
            for cid in ("lookup-retrieve-eviction", "pin-accounting-bug", "pin-timeout", "rank-disagreement"):
                b.oppose(cid, 2.5 if all_ranks else 1.5, f"{what} lost the same tokens at once: ranks evict and pin "
                         "independently, so a per-rank loss would not repeat identically")
            if ctx.cfg("remote_url"):
                b.support("remote-backend-loss", 1.5, "one shared remote store can fail every rank at once")
            return
        if stated and tp > 1 and known and len(known) < tp and len(ctx.ranks_seen) >= tp:
            for cid in ("lookup-retrieve-eviction", "pin-accounting-bug", "remote-backend-loss", "rank-disagreement"):
                b.note_for(cid, f"only {where} of {tp} ranks reported it (all {tp} ranks' lines are in the input): "
                           "a per-rank loss")

    @staticmethod
    def _incidents_of(occs: list[Shortfall]) -> set:
        return {(o.req_id or f"~{o.expected}|{o.retrieved}|{int(o.t) if o.t is not None else id(o)}") for o in occs}

    # ---- cause ranking ----------------------------------------------------------------------------
    #: each cause's weight before any evidence: how often it explains a shortfall in practice
    PRIORS = {
        "lookup-retrieve-eviction": 1.0, "pin-accounting-bug": 0.45, "pin-timeout": 0.4,
        "remote-backend-loss": 0.3, "backend-read-failure": 0.45, "cpu-staging-exhausted": 0.2,
        "adapter-token-accounting-bug": 0.15, "p2p-retrieve-bug": 0.05, "rank-disagreement": 0.45,
        "hash-inconsistency": 0.06, "async-loading-partial": 0.1, "unfull-chunk-mismatch": 0.1,
        "decode-cache-not-saved": 0.02,
    }

    def _rank_causes(self, ctx: Context, occs: list[Shortfall], views: list[LossViews], chunk: int,
                     cov: Coverage) -> CauseBoard:
        """Weigh every KV001 cause against the lines of these occurrences.

        The weighing steps run in a fixed order: a board multiplies weights as evidence comes in, and the
        order of its reasons is the order a reader sees them in.
        """
        b = self._prior_board(cov)
        fams = _signal_families(occs)
        where = "/".join(sorted({self._rank(o, self._single_rank(ctx), ctx) for o in occs}))
        self._weigh_alignment(b, views, chunk, bool(fams.get("read-miss")))
        self._weigh_ranks(b, ctx, occs)
        self._weigh_pressure(b, ctx, fams, occs, where)
        self._weigh_pins(b, ctx.lmcache_config, fams, occs, where, ctx.lmcache_version)
        remote_cfg = self._weigh_backends(b, ctx.lmcache_config, fams)
        self._weigh_staging(b, ctx.lmcache_config, fams, where, remote_cfg)
        self._weigh_rank_disagreement(b, ctx, occs)
        self._weigh_features(b, ctx, occs)
        self._weigh_decode_cache(b, ctx, occs)  # the user's usual hunch
        return b

    def _prior_board(self, cov: Coverage) -> CauseBoard:
        """A board with every cause at its prior; on partial input a missing line is not counted against one."""
        b = CauseBoard()
        b.observable = not cov.partial
        for cid, prior in self.PRIORS.items():
            c = cause(cid)
            b.add(cid, prior, fix=c.fix, confirm_with=c.confirm)
        return b

    def _weigh_pressure(self, b: CauseBoard, ctx: Context, fams: dict[str, list[Event]], occs: list[Shortfall],
                        where: str) -> None:
        """Memory pressure is circumstantial for eviction; a line that names the mechanism explains it too.

        Before LMCache 0.3.3 only rank 0 pinned its looked-up chunks (PR #1101), so the other ranks' chunks
        could be evicted between lookup and retrieve; later versions pin on every rank.
        """
        pressure = fams.get("pressure", [])
        specific = self._specific_mechanism(fams, occs)
        if pressure and specific:
            b.support("lookup-retrieve-eviction", 1.3,
                      f"{len(pressure)} memory-pressure line(s) on {where} shortly before — but {specific[1]} names the "
                      f"mechanism ({specific[0]}), which explains the pressure as well")
            b.support("pin-timeout", 1.5, "the local cache was full, so force-unpinned chunks would be evicted at once")
        elif pressure:
            b.support("lookup-retrieve-eviction", 5,
                      f"{len(pressure)} memory-pressure line(s) on {where} shortly before "
                      f"(e.g. line {pressure[-1].rec.line}: {pressure[-1].rec.msg[:90]})")
            b.support("pin-timeout", 1.5, "the local cache was full, so force-unpinned chunks would be evicted at once")
        elif self.signals.totals.get("pressure"):
            b.support("lookup-retrieve-eviction", 1.5, f"{self.signals.totals['pressure']} memory-pressure line(s) elsewhere in the log")
        elif self.stores_total:
            b.absent("lookup-retrieve-eviction", 2.5, f"the log shows {self.stores_total} stores but no memory-pressure line "
                     "(eviction itself is only logged at DEBUG)")
        else:
            b.note_for("lookup-retrieve-eviction", "the most common cause; the log shows too little of this rank to confirm or exclude it")
        lmc_v = version_tuple(ctx.lmcache_version)
        if lmc_v is not None and lmc_v < (0, 3, 3):
            self._weigh_unpinned_ranks(b, ctx, occs)
        elif lmc_v is not None and not (fams.get("pin-negative") or fams.get("pin-timeout")):
            b.oppose("lookup-retrieve-eviction", 1.3, f"LMCache {ctx.lmcache_version} pins looked-up chunks on every rank; eviction needs a lost pin")

    def _weigh_unpinned_ranks(self, b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
        """Before LMCache 0.3.3 only rank 0's lookup server pinned (PR #1101): ranks ≠ 0 could evict freely.

        That explains a loss on a rank ≠ 0 only; rank 0 held its pins, so a short rank 0 needs another cause.
        """
        ranks = {self._rank(o, self._single_rank(ctx), ctx) for o in occs}
        rank0 = {r for r in ranks if r.endswith("TP0") and not r.startswith("unknown")}
        known = {r for r in ranks if not r.startswith("unknown")}
        v = ctx.lmcache_version
        if rank0:
            b.note_for("lookup-retrieve-eviction", f"LMCache {v} < 0.3.3 pinned only on rank 0 (PR #1101), but rank 0 "
                       "was short too: its pins held, so unpinned ranks do not explain it")
            return
        b.support("lookup-retrieve-eviction", 4 if known else 2,
                  f"LMCache {v} < 0.3.3: only rank 0 pinned at lookup (fixed by PR #1101)"
                  + (f"; {'/'.join(sorted(known))} did not pin" if known else ""))
        b.note_for("lookup-retrieve-eviction", "upgrade LMCache to ≥ 0.3.3 so every rank pins its looked-up chunks")

    def _weigh_pins(self, b: CauseBoard, cfg: dict | None, fams: dict[str, list[Event]], occs: list[Shortfall],
                    where: str, lmcache_version: str | None = None) -> None:
        """A double unpin (negative pin count) or the pin monitor's forced unpin made looked-up chunks evictable."""
        neg = fams.get("pin-negative", []) + fams.get("ref-negative", [])
        pto = fams.get("pin-timeout", [])
        if neg and pto and min((e.rec.path, e.rec.line) for e in pto) < max((e.rec.path, e.rec.line) for e in neg):
            # the pin monitor forced the count to 0; the request's own unpin then goes negative: a consequence
            b.support("pin-accounting-bug", 1.5, f"negative pin count at line {neg[-1].rec.line}, but after the pin monitor's forced unpin")
            b.note_for("pin-timeout", f"the negative pin count at line {neg[-1].rec.line} follows the forced unpin "
                       "(the request's own unpin after its retrieve)")
            neg = []
        elif neg:
            # the double unpin is the mechanism; eviction is how its chunks then disappear
            b.support("pin-accounting-bug", 30, f"'{neg[-1].rec.msg[:70]}…' on {where} at line {neg[-1].rec.line}: a double unpin made pinned chunks evictable")
            b.note_for("lookup-retrieve-eviction", "a lost pin lets eviction take looked-up chunks (see pin-accounting-bug)")
        elif self.signals.totals.get("pin-negative"):
            b.support("pin-accounting-bug", 2, f"{self.signals.totals['pin-negative']} negative pin-count warning(s) elsewhere in the log")
        elif not pto:
            b.absent("pin-accounting-bug", 2, "no 'Pin count of MemoryObj … is negative' warning in the log")
        self._weigh_pin_timeout(b, cfg, pto, occs, where, lmcache_version)

    @staticmethod
    def _weigh_pin_timeout(b: CauseBoard, cfg: dict | None, pto: list[Event], occs: list[Shortfall], where: str,
                           lmcache_version: str | None = None) -> None:
        """The pin monitor's forced unpin, or the lookup-to-retrieve gap against ``pin_timeout_sec``.

        Without the config the gap is held against the default: the PinMonitor (LMCache v1/pin_monitor.py,
        0.3.12+) force-unpins every object pinned longer than ``pin_timeout_sec`` (default 300 s, config key
        ``pin_timeout_sec`` / ``LMCACHE_PIN_TIMEOUT_SEC``), and the lookup pinned this request's chunks at its
        ``Reqid:`` line; a build older than 0.3.12 has no monitor, so a long wait cannot unpin anything there.
        """
        gap = next((o.t - o.lookup["t"] for o in occs if o.lookup and o.lookup.get("t") and o.t), None)
        pin_timeout = (cfg or {}).get("pin_timeout_sec")
        newest = version_tuple((lmcache_version or "").split("..")[-1]) if lmcache_version else None
        no_monitor = newest is not None and newest < (0, 3, 12)
        if pto:
            b.support("pin-timeout", 15, f"pin monitor force-unpinned objects on {where} before the retrieve (line {pto[-1].rec.line})")
            if (cfg or {}).get("save_decode_cache") is True:
                b.note_for("pin-timeout", "save_decode_cache: true adds decode-phase stores that evict force-unpinned chunks")
        elif gap is not None and isinstance(pin_timeout, (int, float)) and gap > pin_timeout:
            b.support("pin-timeout", 8, f"{gap:.1f} s between lookup and retrieve exceeds pin_timeout_sec={pin_timeout}")
        elif gap is not None and isinstance(pin_timeout, (int, float)):
            b.oppose("pin-timeout", 10, f"only {gap:.2f} s between lookup and retrieve, far below pin_timeout_sec={pin_timeout}")
        elif gap is not None and gap < 30:
            b.oppose("pin-timeout", 5, f"only {gap:.2f} s between lookup and retrieve (default pin_timeout_sec is 300)")
        elif gap is not None and gap > DEFAULT_PIN_TIMEOUT_S and no_monitor:
            b.oppose("pin-timeout", 3, f"{gap:.1f} s between lookup and retrieve, but LMCache {lmcache_version} predates "
                     "the pin monitor (0.3.12): nothing force-unpins there")
        elif gap is not None and gap > DEFAULT_PIN_TIMEOUT_S and pin_timeout is None:
            b.support("pin-timeout", 6, f"{gap:.1f} s between lookup and retrieve exceeds the default pin_timeout_sec of "
                      f"{DEFAULT_PIN_TIMEOUT_S} (the config is not in the input: its pin_timeout_sec, or a 'Pin timeout "
                      "detected' warning, would confirm it)")
        else:
            b.absent("pin-timeout", 1.5, "no 'Pin timeout detected' warning in the log")

    def _weigh_backends(self, b: CauseBoard, cfg: dict | None, fams: dict[str, list[Event]]) -> bool | None:
        """Remote-store loss and backend read failures; returns whether a remote tier is configured (None: no config)."""
        remote_cfg = self._weigh_remote_config(b, cfg)
        read_miss = fams.get("read-miss", [])
        redis_ev = fams.get("redis-evicted", [])
        remote_err = fams.get("remote-error", []) + fams.get("remote-timeout", [])
        api_err = fams.get("backend-api-error", [])
        disk_err = fams.get("disk-error", [])
        if not redis_ev and self.signals.totals.get("redis-evicted"):
            b.support("remote-backend-loss", 4, f"{self.signals.totals['redis-evicted']} Redis 'Key exists but KV cache "
                      "does not exist' warning(s) elsewhere in the log")
        if redis_ev:
            b.support("remote-backend-loss", 25, f"Redis: 'Key exists but KV cache does not exist' at line {redis_ev[-1].rec.line}: the store evicted the KV bytes after the lookup saw the key")
        if read_miss:
            b.support("backend-read-failure", 3, f"'The cache block is in the storage, but it can't be retrieved' at line {read_miss[-1].rec.line}")
            b.support("remote-backend-loss", 2 if remote_cfg else 1, "a key counted as present could not be read")
            b.oppose("lookup-retrieve-eviction", 3, "the key was found but its read failed (evicted keys vanish silently, without this warning)")
        if api_err:
            b.support("backend-read-failure", 12, f"backend call failed right before: '{api_err[-1].rec.msg[:80]}' (line {api_err[-1].rec.line})")
        if remote_err:
            b.support("backend-read-failure", 4, f"remote backend error/timeout before the retrieve (line {remote_err[-1].rec.line})")
            b.support("remote-backend-loss", 2, "remote backend errors around the retrieve")
        if disk_err:
            b.support("backend-read-failure", 6, f"disk read error before the retrieve (line {disk_err[-1].rec.line})")
        if not (read_miss or api_err or remote_err or disk_err):
            b.absent("backend-read-failure", 2, "no 'can't be retrieved' or backend error line before it")
        return remote_cfg

    @staticmethod
    def _weigh_remote_config(b: CauseBoard, cfg: dict | None) -> bool | None:
        """What the LMCache config says of a remote tier: none rules remote loss out; remote backends cannot pin."""
        if cfg is None:
            return None
        remote_cfg = bool(cfg.get("remote_url") or cfg.get("storage_plugins") or cfg.get("external_backends"))
        if not remote_cfg:
            b.rule_out("remote-backend-loss", "no remote_url or storage plugin in the LMCache config")
            return remote_cfg
        b.support("remote-backend-loss", 2, f"remote backend configured ({cfg.get('remote_url') or 'storage plugin'}); remote backends cannot pin")
        if cfg.get("local_cpu") is False and not cfg.get("local_disk"):
            b.oppose("lookup-retrieve-eviction", 6, "no local tier: chunks live only in the remote store, whose "
                     "evictions are remote-backend-loss")
        if cfg.get("local_cpu") is True:
            b.oppose("remote-backend-loss", 2, "a local CPU tier sits in front of the remote store")
        return remote_cfg

    def _weigh_staging(self, b: CauseBoard, cfg: dict | None, fams: dict[str, list[Event]], where: str,
                       remote_cfg: bool | None) -> None:
        """A disk or remote load needs a CPU staging buffer; without one the load returns partial results."""
        staging = fams.get("staging-exhausted", [])
        if staging:
            b.support("cpu-staging-exhausted", 30, f"no CPU staging buffer for a disk/remote load on {where} just before "
                      f"(line {staging[-1].rec.line}): the load returned partial results")
        elif self.signals.totals.get("staging-exhausted"):
            b.support("cpu-staging-exhausted", 3, f"{self.signals.totals['staging-exhausted']} staging-exhausted line(s) "
                      "elsewhere in the log")
        elif cfg is not None and not (cfg.get("local_disk") or remote_cfg):
            b.rule_out("cpu-staging-exhausted", "no disk or remote tier configured (staging is only needed for those)")

    def _weigh_rank_disagreement(self, b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
        """The scheduler's 'Lookup results … differ across ranks' warning, for this request or anywhere."""
        l6 = [o.l6 for o in occs if o.l6 is not None]
        tied = [o.l6 for o in occs if o.l6 is not None and not o.l6_loose]
        if tied:
            b.support("rank-disagreement", 10, f"the lookup of this request warned that ranks disagree: {tied[0].f['results']} (line {tied[0].rec.line})")
        elif l6:
            o = next(o for o in occs if o.l6 is not None)
            why = ("the error names no request, so it is tied to the 'Reqid:' line after that warning only by its "
                   f"numbers (need to load {o.lookup.get('need')} = expected {o.expected})" if o.lookup is not None else
                   "the 'Reqid:' line that would tie it to this request is not in the input")
            b.support("rank-disagreement", 5, f"ranks disagreed at a lookup just before (line {l6[0].rec.line}: "
                      f"{l6[0].f['results']}), whose minimum fits this load; {why}")
        elif self.l6_count:
            b.support("rank-disagreement", 1.5, f"{self.l6_count} 'Lookup results … differ across ranks' warning(s) in the log")
        elif not self._one_rank(ctx, occs):
            b.absent("rank-disagreement", 2, "no 'Lookup results … differ across ranks' warning before it",
                     observable=b.observable and any(o.lookup for o in occs))
        else:
            b.rule_out("rank-disagreement", "a single rank cannot disagree with itself")

    def _weigh_features(self, b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
        """Causes tied to an LMCache feature or version: P2P, async loading, hashing, adapter accounting."""
        cfg = ctx.lmcache_config
        self._weigh_p2p_precondition(b, cfg, occs)
        if cfg is not None:
            if cfg.get("enable_async_loading") is True:
                b.support("async-loading-partial", 6, "enable_async_loading: True")
            else:
                b.rule_out("async-loading-partial", "enable_async_loading is not enabled")
        elif self.async_lengths:
            # storage_manager.py:648 (LMCache 0.5.6) answers the scheduler's lookup only on the async path
            b.support("async-loading-partial", 4, "'Responding to scheduler … with retrieved length' is printed only "
                      "with asynchronous loading (enable_async_loading: True)")
        shorter = self._async_shorter(occs)
        if shorter:
            o, length = shorter[0]
            whose = f"of this very request ({o.req_id})" if o.req_id in self.async_lengths else "of this rank just before"
            b.support("async-loading-partial", 40, f"the async lookup {whose} answered "
                      f"{length} tokens, fewer than the {o.expected} later expected")
            b.oppose("lookup-retrieve-eviction", 3, "the async lookup already answered a shorter prefix: nothing had to "
                     "be evicted after it")
        if len(set(ctx.none_hashes)) > 1:
            b.support("hash-inconsistency", 3, "processes initialised different NONE_HASH values")
        b.oppose("hash-inconsistency", 3, "hash mismatches make lookups miss (0 hits); they do not make a promised chunk disappear")
        self._weigh_accounting(b, occs)
        lmc_v = version_tuple(ctx.lmcache_version)
        if lmc_v is not None and lmc_v <= (0, 3, 1):
            b.support("adapter-token-accounting-bug", 8, f"LMCache {ctx.lmcache_version} ≤ 0.3.1 had token-accounting bugs (issues #889, #910)")
        elif ctx.lmcache_version_note:
            b.support("adapter-token-accounting-bug", 1.5, "LMCache build matches no release (development or patched build)")
        if any(o.retrieved == 0 for o in occs):
            b.support("backend-read-failure", 1.5, "retrieved 0: the very first chunk failed")

    def _weigh_p2p_precondition(self, b: CauseBoard, cfg: dict | None, occs: list[Shortfall]) -> None:
        """``p2p-retrieve-bug`` needs P2P on: ``enable_p2p: True`` in the config dump, or the P2P backend's own
        lines (v1/storage_backend/p2p_backend.py, 0.5.6) when a fragment does not show the dump."""
        if cfg is not None and cfg.get("enable_p2p") is True:
            b.require("p2p-retrieve-bug", "P2P (enable_p2p: True)", True, "")
            self._weigh_p2p(b, occs, "enable_p2p: True")
        elif self.p2p_lines:
            b.require("p2p-retrieve-bug", f"P2P ({self.p2p_lines} P2P backend line(s))", True, "")
            self._weigh_p2p(b, occs, f"{self.p2p_lines} P2P backend line(s)")
        elif cfg is not None:
            b.rule_out("p2p-retrieve-bug", "enable_p2p is not enabled")
        else:
            b.require("p2p-retrieve-bug", "P2P (enable_p2p: True)", None,
                      "the LMCache config dump ('Creating LMCacheEngine with config', enable_p2p) or the P2P backend lines")

    @staticmethod
    def _weigh_p2p(b: CauseBoard, occs: list[Shortfall], basis: str = "enable_p2p: True") -> None:
        """With P2P on, exactly 0 retrieved is that path's bug, not a lost chunk.

        LMCache ~0.3.2 (issues #1094, #1055): the P2P branch of ``LMCacheEngine.retrieve`` filled the KV but
        never set the returned mask, so ``ret_mask.sum()`` was 0 whatever was loaded. A lost chunk instead
        ends the retrieve at the first hole, which leaves 0 only when the very first chunk is gone.
        """
        zero = [o for o in occs if o.retrieved == 0]
        if not zero:
            b.support("p2p-retrieve-bug", 3, basis)
            return
        b.support("p2p-retrieve-bug", 40, f"{basis} and retrieved exactly 0 of {zero[0].expected} expected: the "
                  "P2P retrieve path returned an empty mask (LMCache issues #1094, #1055)")
        b.oppose("lookup-retrieve-eviction", 2, "retrieved 0 with P2P on: the P2P path reports 0 without any chunk lost")

    @staticmethod
    def _weigh_accounting(b: CauseBoard, occs: list[Shortfall]) -> None:
        """The adapter's ``expected`` against what the lookup and vLLM's blocks allow.

        ``start_load_kv`` (LMCache 0.5.6 vllm_v1_adapter.py:756-896) expects ``lmcache_cached − vllm_cached``:
        the lookup's hit (whole chunks unless an unfull last chunk was stored) minus vLLM's own prefix hit
        (whole vLLM blocks, at least 16 tokens each). So ``expected`` is a multiple of 16, and equals the
        lookup line's ``hit − computed`` — unless the adapter subtracted or truncated tokens between lookup and
        retrieve (``skip_last_n_tokens``: issue #889 expected 253 of a 256-token hit; #910, fixed by PR #911).
        """
        for o in occs:
            if o.expected is None or o.expected <= 0:
                continue
            lk = o.lookup or {}
            hit, computed = lk.get("hit"), lk.get("computed")
            if computed is None and hit is not None and isinstance(lk.get("need"), int) and lk["need"] > 0:
                computed = hit - lk["need"] - (1 if hit == lk.get("total") else 0)  # before 0.3.15: from need
            if hit is not None and computed is not None and 0 < abs(hit - computed - o.expected) < MIN_BLOCK:
                b.support("adapter-token-accounting-bug", 6,
                          f"the adapter expected {o.expected} tokens but its lookup promised {hit} − {computed} = "
                          f"{hit - computed}: tokens were subtracted between lookup and retrieve (skip_last_n_tokens)")
                return
            if o.expected % MIN_BLOCK and (o.r4 or {}).get("total") is None and hit is None:
                b.support("adapter-token-accounting-bug", 5,
                          f"expected {o.expected} is not a multiple of {MIN_BLOCK}: a chunk-aligned hit minus whole "
                          "vLLM blocks cannot give it, so the adapter dropped a few tokens (or the hit ended mid-chunk)")
                b.support("unfull-chunk-mismatch", 1.5, f"expected {o.expected} is not a multiple of {MIN_BLOCK}: "
                          "the hit may end mid-chunk")
                return

    def _async_shorter(self, occs: list[Shortfall]) -> list[tuple[Shortfall, int]]:
        """Occurrences whose async lookup answer (L8) was shorter than the load later expected, with that length.

        By request id; without one (no ``Request …`` header in the input) the L8 of the same rank just before.
        """
        out = []
        for o in occs:
            if o.expected is None:
                continue
            length = self.async_lengths.get(o.req_id) if o.req_id else None
            if length is None and not o.req_id:
                length = next((e.f.get("length") for e in reversed(o.signals) if e.id == "L8"), None)
            if length is not None and length < o.expected:
                out.append((o, length))
        return out

    def _specific_mechanism(self, fams: dict[str, list[Event]], occs: list[Shortfall]) -> tuple[str, str] | None:
        """The cause named outright by a line of that rank just before (or of the same request), if any."""
        named = (("staging-exhausted", "cpu-staging-exhausted", "'… CPU staging pool may be exhausted'"),
                 ("redis-evicted", "remote-backend-loss", "Redis 'Key exists but KV cache does not exist'"),
                 ("pin-timeout", "pin-timeout", "the pin monitor's forced unpin"),
                 ("pin-negative", "pin-accounting-bug", "a negative pin count"))
        for fam, cid, words in named:
            if fams.get(fam):
                return cid, f"{words} (line {fams[fam][-1].rec.line})"
        if self._async_shorter(occs):
            return "async-loading-partial", "the async lookup's shorter answer"
        return None

    @staticmethod
    def _weigh_decode_cache(b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
        cid = "decode-cache-not-saved"
        sdc = ctx.cfg("save_decode_cache")
        if sdc is False:
            b.note_for(cid, "save_decode_cache is False in the LMCache config")
        elif sdc is True:
            b.rule_out(cid, "save_decode_cache is True: decode chunks are stored")
        if ctx.speculative and ctx.speculative.get("enabled"):
            b.note_for(cid, f"speculative decoding ({ctx.speculative.get('method')}) is on — context only")
        b.oppose(cid, 1, "save_decode_cache only changes what is *stored*; a lookup counts only chunks that exist, "
                         "so unsaved decode chunks cause misses (fewer hit tokens), never retrieved < expected "
                         "(LMCache vllm_v1_adapter.py: the flag is read only when building save metadata)")
        lk = next((o.lookup for o in occs if o.lookup), None)
        if lk is not None and lk["hit"] <= lk["total"]:
            b.oppose(cid, 1, f"the promised prefix ({lk['hit']} tokens) lies within the request's {lk['total']} tokens at lookup: "
                             "those chunks were stored and then lost, not skipped")

    # ---- evidence and advice ------------------------------------------------------------------------
    @staticmethod
    def _evidence(incidents: list[list[Shortfall]]) -> list[Evidence]:
        out: list[Evidence] = []
        seen: set[tuple[str, int]] = set()

        def add(ev: Event | None) -> None:
            if ev is None:
                return
            k = (ev.rec.path, ev.rec.line)
            if k not in seen and len(out) < 14:
                seen.add(k)
                out.append(Evidence(ev.rec.path, ev.rec.line, ev.rec.display()))

        first = incidents[0]
        o = first[0]
        if o.lookup:
            add(o.lookup["ev"])
        if o.l6 is not None:
            add(o.l6)
        by_family: dict[str, Event] = {}
        for s in o.signals:
            by_family[_family(s)] = s  # the latest of each kind, so one noisy kind does not crowd out the rest
        for s in sorted(by_family.values(), key=lambda e: (e.rec.path, e.rec.line))[-5:]:
            add(s)
        if o.r4:
            add(o.r4["ev"])
        for occ in first:
            add(occ.r1)
            add(occ.r2)
        if o.r2 is None:
            add(o.anchor)
        add(o.r3)
        add(o.outcome)
        for inc in incidents[1:4]:
            add(inc[0].anchor)
        return out

    def _next_steps(self, ctx: Context, occs: list[Shortfall], causes: list, single_rank: bool, cov: Coverage,
                    board: CauseBoard) -> list[str]:
        """What to collect next: for an excerpt, exactly the lines that would decide between the top causes."""
        steps = []
        top = causes[0].id if causes else None
        if cov.partial:
            live = [c.id for c in causes if c.confidence > 0.02 and c.id != "decode-cache-not-saved"][:4]
            for cid in live:
                steps.append(f"For {cid}: collect {cause(cid).collect}.")
        if not any(o.r4 for o in occs) and any(o.source == "pair" for o in occs):
            steps.append("Include the worker's 'Retrieved X out of Y required tokens (from Z total tokens)' line just "
                         "before the error (same process): it gives LMCache's own view (chunks asked for, chunks lost).")
        if not any(o.lookup for o in occs):
            steps.append("Include the engine-core (scheduler) log: its 'Reqid: … LMCache hit tokens' line shows what the lookup promised.")
        if not ctx.lmcache_config:
            steps.append("Include the LMCache config (the 'Creating LMCacheEngine with config' line, or pass --lmcache-config FILE.yaml).")
        tp = ctx.tensor_parallel_size
        if not self._tp_stated(ctx) and not self._one_rank(ctx, occs):
            steps.append("Include vLLM's startup line ('non-default args: … tensor_parallel_size') and every rank's log: "
                         "the TP size is not stated, so whether the other ranks loaded fully is unknown.")
        elif tp and not single_rank and len(ctx.ranks_seen) < tp:
            steps.append(f"Only {len(ctx.ranks_seen)} of {tp} ranks' logs were given: add the others to see whether they loaded fully.")
        if any(o.rank is None and o.anchor.rec.origin.pid is None for o in occs) and not single_rank:
            steps.append("These LMCache lines carry no worker prefix (vLLM ≥ 0.31 prefixes only its own records), so the "
                         "failing rank cannot be read from them: compare the per-rank 'Retrieved … out of …' lines of the "
                         "request, or log each worker to its own file.")
        if not any(o.signals for o in occs):
            steps.append("Set LMCACHE_LOG_LEVEL=DEBUG to log evictions ('Evicting N chunks'), and scrape lmcache:local_cpu_evict_count, "
                         "lmcache:pinned_memory_objs_count and lmcache:forced_unpin_count around the error.")
        if top:
            steps.append(f"To confirm {top}: {cause(top).confirm}.")
        return steps


def _family(ev: Event) -> str:
    from specdiag.analyzers.signals import SIGNAL_FAMILY

    return SIGNAL_FAMILY.get(ev.id, "other")


def _signal_families(occs: list[Shortfall]) -> dict[str, list[Event]]:
    """The signal lines before these occurrences, by family (pressure, pin-timeout, …), in occurrence order."""
    fams: dict[str, list[Event]] = {}
    for o in occs:
        for s in o.signals:
            fams.setdefault(_family(s), []).append(s)
    return fams
