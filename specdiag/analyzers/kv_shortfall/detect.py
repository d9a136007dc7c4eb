"""KV001 detection: the lines that prove a short load, joined per request across ranks.

The tracker observes the error pair (R1/R2), short retrieve lines (R4), failed-block reports (R3), vLLM's
outcome lines (V1/V2), the rank-disagreement warnings (L6) and the signal lines, and keeps the newest
lookups as columns; each short load becomes a ``Shortfall`` with its lookup, L6 and the signals of that
process just before it. It only observes and joins: what the lines argue for is ``evidence*.py``'s job,
and the ranking and the finding text are ``rank.py``'s and ``finding.py``'s.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from specdiag.analyzers.kv_coverage import Coverage, CoverageTracker
from specdiag.analyzers.kv_shortfall.shortfall import (
    MAX_OCCURRENCES,
    MAX_TRACKED,
    NEED_TIE_WINDOW_S,
    P2P_IDS,
    LookupHistory,
    Shortfall,
    complete_retrieve,
)
from specdiag.analyzers.signals import SignalWindow
from specdiag.catalog.wording import BYTES
from specdiag.context import Context
from specdiag.events import Event, template
from specdiag.events.rows import LookupRows, OriginCache, revive, rid_hash
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: the newest shortfalls kept to be completed by a retrieve line printed after their pair
RECENT = 8


class ShortfallTracker:
    """The bounded state of one run's short loads and the lines they are joined with.

    Kept apart from the rule class so that the evidence families read a plain state object (signal
    totals, L6 count, async answers, P2P lines, stores) rather than the rule.
    """

    def __init__(self, window_s: float) -> None:
        #: how far back (s) a signal line counts as "just before" a shortfall (the rule's ``window_s``)
        self.window_s = window_s
        self.run: RunState | None = None
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
        #: the newest shortfalls, kept or only counted: a retrieve line printed after its pair completes one
        self.recent: list[Shortfall] = []  # at most RECENT (a list: a deque costs 0.7 KiB a deployment)
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

    @staticmethod
    def _remember(d: OrderedDict, key: str, value) -> None:
        """Insert as newest and drop the oldest past ``MAX_TRACKED``: every per-request map stays bounded."""
        d[key] = value
        d.move_to_end(key)
        if len(d) > MAX_TRACKED:
            d.popitem(last=False)

    def observe(self, ev: Event) -> None:
        """Dispatch one line by template id; anything not a KV001 line of its own is a signal for the window."""
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
            self._on_r1(ev)
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
        """A kept lookup row as its Event again (built only when a shortfall asks for it)."""
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
        if self._completes_pair(ev, r4):
            return
        occ = self._new_occurrence(ev, r4.get("req_id"), None, None, None, r4, "retrieve")
        if occ is not None:
            pend = self.pending_r4.setdefault(ev.rec.origin.key, [])
            pend.append(occ)
            if len(pend) > 64:
                del pend[0]

    def _on_r1(self, ev: Event) -> None:
        """The adapter's error line just after this process's short retrieve line: the adapter itself says the
        load fell short, even when its numbers line (R2) is cut from a paste. The occurrence stays pending, so
        an R2 that follows still completes it as a pair."""
        pend = self.pending_r4.get(ev.rec.origin.key)
        if not pend:
            return
        occ = pend[-1]
        r4ev = occ.r4["ev"]
        if occ.r1 is None and r4ev.rec.path == ev.rec.path and 0 < ev.rec.line - r4ev.rec.line <= 3:
            occ.r1, occ.source = ev, "error-line"

    def _completes_pair(self, ev: Event, r4: dict) -> bool:
        """A short retrieve line just after this process's error pair with the same numbers (a paste that put
        the adapter's error first; LMCache prints the retrieve line first): the pair's own, not a second
        request."""
        rec = ev.rec
        for occ in reversed(self.recent):
            r2 = occ.r2
            if (r2 is not None and occ.r4 is None and occ.proc_key == rec.origin.key and r2.rec.path == rec.path
                    and 0 < rec.line - r2.rec.line <= 50 and occ.retrieved == r4["retrieved"]
                    and (not occ.req_id or not r4.get("req_id") or occ.req_id == r4["req_id"].strip())):
                occ.r4 = r4
                return True
        return False

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
        """The adapter's error pair: complete the retrieve line's occurrence, or open one with its header's id."""
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
            last = self.run.event_before(rec.line, BYTES.RETRIEVED, key)
            # a full retrieve line is only counted by ingest: look back for this process's one just before the error
            r4 = self._r4_fields(Event("R4", last, None, template("R4")) if last is not None else None)
            if r4 is not None and r4["retrieved"] != retrieved:
                r4 = None
        req_id = (r1.f.get("req_id") if r1 is not None else None) or (r4 or {}).get("req_id")
        if occ is not None:  # the retrieve line already opened this occurrence: the pair completes it
            occ.r1, occ.r2, occ.expected, occ.retrieved, occ.source = r1, ev, expected, retrieved, "pair"
            if req_id and not occ.req_id and occ.tracked:
                occ.req_id = req_id.strip()
                self._attach_lookup(occ)
            return
        self._new_occurrence(ev, req_id, r1, expected, retrieved, r4, "pair")

    def _new_occurrence(self, ev: Event, req_id: str | None, r1: Event | None, expected: int | None,
                        retrieved: int | None, r4: dict | None, source: str, r3: Event | None = None) -> Shortfall | None:
        """Record one rank's shortfall with the lookup and the signals of that process just before it."""
        rec = ev.rec
        if retrieved is None and r4 is not None:
            retrieved = r4["retrieved"]
        occ = Shortfall(req_id=req_id.strip() if req_id else None, expected=expected, retrieved=retrieved,
                        rank=rec.origin.rank_label, proc_key=rec.origin.key, r1=r1,
                        r2=ev if source == "pair" else None, r4=r4, r3=r3, t=rec_time(rec), source=source)
        self.recent.append(occ)
        if len(self.recent) > RECENT:
            del self.recent[0]
        if len(self.occurrences) >= MAX_OCCURRENCES:
            return self._untracked(occ)
        self._attach_lookup(occ)
        if occ.lookup is None and occ.l6 is None:
            occ.l6 = self._unpaired_l6(occ, rec)
            occ.l6_loose = occ.l6 is not None
        window_start = occ.lookup["t"] if occ.lookup and occ.lookup.get("t") else None
        window = self.window_s
        if window_start is not None and occ.t is not None:
            window = max(window, occ.t - window_start + 1.0)
        occ.signals = self.signals.before(rec.origin.key, occ.t, rec.line, rec.path, window)
        self.occurrences.append(occ)
        if occ.req_id:
            self._remember(self.by_req, f"{occ.req_id}|{occ.proc_key}", occ)
            self._remember(self.req_short, occ.req_id, True)
        return occ

    def _untracked(self, occ: Shortfall) -> Shortfall:
        """A shortfall past ``MAX_OCCURRENCES``: counted once (its retrieve line and its error pair are one
        shortfall, so it is still handed back for the pair to complete) but neither kept nor joined, so that
        memory stays bounded on a log where every request falls short."""
        occ.tracked = False
        self.dropped += 1
        if occ.req_id:
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
            if t is not None and occ.t is not None and not 0 <= occ.t - t <= self.window_s:
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
        occ.signals = self.signals.before(rec.origin.key, occ.t, rec.line, rec.path, self.window_s)
        self.occurrences.append(occ)

    @staticmethod
    def _lookup_fields(ev: Event | None) -> dict | None:
        """The numbers of a lookup line that the arithmetic and the weighing read (None: no usable hit)."""
        if ev is None:
            return None
        f = ev.f
        if not f or f.get("hit") in (None, "None"):
            return None
        return {"total": f["total"], "hit": int(f["hit"]), "computed": f.get("vllm_computed"), "need": f.get("need"),
                "ev": ev, "t": rec_time(ev.rec)}

    @staticmethod
    def _r4_fields(ev: Event | None) -> dict | None:
        """A retrieve line's numbers under one name whichever of its eras printed it (``required2``/``total2``)."""
        if ev is None or not ev.f:
            return None
        f = ev.f
        return {
            "req_id": f.get("req_id"), "retrieved": f["retrieved"],
            "required": f.get("required") if f.get("required") is not None else f.get("required2"),
            "total": f.get("total") if f.get("total") is not None else f.get("total2"), "ev": ev,
        }


    def settle(self, run: RunState) -> list[list[Shortfall]]:
        """At the end of the run: the read-failure fallback, the late joins (R3, outcome); then the incidents."""
        if not self.occurrences:
            self._from_read_failure()
        if not self.occurrences:
            return []
        self.stores_total = run.count("S1")
        for occ in self.occurrences:
            if occ.r3 is None and occ.req_id and occ.req_id in self.r3:
                occ.r3 = self.r3[occ.req_id]
            occ.outcome = self._match_outcome(occ)
        return self._incidents()

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

    def _match_outcome(self, occ: Shortfall) -> Event | None:
        """vLLM's failure line naming this request, else a recovery line within 5 s or 40 lines after it."""
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

    def coverage(self, ctx: Context) -> Coverage:
        """How much of the log the input covers (assessed once, on first ask)."""
        if self._coverage is None:
            self._coverage = self.seen.assess(ctx)
        return self._coverage
