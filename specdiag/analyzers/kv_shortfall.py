"""KV001 — LMCache retrieved fewer KV tokens than its lookup promised."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.signals import SignalWindow
from specdiag.context import Context
from specdiag.events import Event, template
from specdiag.findings import CauseBoard, Evidence, Finding, with_primary
from specdiag.fingerprints import version_tuple
from specdiag.timeutil import rec_time

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:tp|rank)[_-]?(\d+)(?!\d)", re.I)
MAX_TRACKED = 20_000  # lookups remembered per request id (LRU): a few minutes of traffic on a busy server
MAX_OCCURRENCES = 20_000

CAUSES = {
    "lookup-retrieve-eviction": (
        "Give the local CPU tier room (max_local_cpu_size) or reduce concurrent long distinct prefixes so looked-up "
        "chunks are not evicted before the load.",
        "specdiag repro --preset eviction",
    ),
    "pin-accounting-bug": (
        "Upgrade LMCache (pin fixes: PRs #3004, #4346, #5095, #5098, #5120); avoid layerwise/async paths known to "
        "double-unpin until then.",
        "watch lmcache:pinned_memory_objs_count and the 'Pin count of MemoryObj ... is negative' warning",
    ),
    "pin-timeout": (
        "Raise pin_timeout_sec above the longest lookup→load wait, or relieve vLLM KV-block pressure that keeps "
        "looked-up requests waiting.",
        "specdiag repro --toggle pin_timeout_sec=1,300",
    ),
    "remote-backend-loss": (
        "Remote backends cannot pin: size the remote store so it does not evict (Redis maxmemory/noeviction), or put "
        "a local CPU tier in front of it (local_cpu: true).",
        "specdiag repro --preset remote-eviction",
    ),
    "backend-read-failure": (
        "Fix the backend read path named in the preceding backend error (API mismatch, I/O errors, timeouts: "
        "blocking_timeout_secs).",
        "reproduce the backend error in isolation; compare with the backend disabled (local_cpu only)",
    ),
    "cpu-staging-exhausted": (
        "Increase max_local_cpu_size so disk/remote loads can be staged; check unpin leaks.",
        "specdiag repro --toggle max_local_cpu_size=0.01,1",
    ),
    "adapter-token-accounting-bug": (
        "Upgrade LMCache past 0.3.1 (PR #911); remove skip_last_n_tokens.",
        "compare expected vs hit − computed in the Reqid line of the same request",
    ),
    "p2p-retrieve-bug": ("Upgrade LMCache (P2P retrieve reimplemented as a storage backend) or disable enable_p2p.",
                         "specdiag repro --toggle enable_p2p=true,false"),
    "rank-disagreement": (
        "Find why ranks hold different chunks (per-rank eviction, remote loss); give every rank the same capacity; "
        "collect every rank's log.",
        "compare the per-rank hit counts in 'Lookup results ... differ across ranks' with each rank's pressure lines",
    ),
    "hash-inconsistency": ("Set PYTHONHASHSEED identically for every process, or use a sha256-based hash algorithm.",
                           "restart with PYTHONHASHSEED=0 and compare hit rates"),
    "async-loading-partial": ("Disable enable_async_loading or upgrade LMCache (PRs #2559, #1665).",
                              "specdiag repro --toggle enable_async_loading=true,false"),
    "unfull-chunk-mismatch": ("Use the same save_unfull_chunk / discard_partial_chunks on every writer and reader.",
                              "compare the settings of every instance sharing the store"),
    "decode-cache-not-saved": (
        "No change needed for this error: save_decode_cache only decides whether decode-phase chunks are stored.",
        "specdiag repro --preset save-decode-cache (the shortfall rate should not change)",
    ),
}


@dataclass
class Shortfall:
    req_id: str | None
    expected: int
    retrieved: int
    rank: str | None
    proc_key: str
    r1: Event | None
    r2: Event
    r4: dict | None = None
    lookup: dict | None = None
    signals: list[Event] = field(default_factory=list)
    l6: Event | None = None
    r3: Event | None = None
    outcome: Event | None = None
    t: float | None = None

    @property
    def missing(self) -> int:
        return self.expected - self.retrieved


@register
class RetrievalShortfall(Rule):
    """LMCache retrieved fewer KV tokens than its lookup promised.

    Detects: the LMCache error pair ``The number of retrieved tokens is less than the expected number of
    tokens!`` / ``Num retrieved tokens: R, num expected tokens: E`` on a worker. Every occurrence is joined
    by request id across ranks with the scheduler's ``Reqid:`` lookup, the worker's ``Retrieved … out of …``
    line, the failed-block report and vLLM's recovery or failure line; repeats are folded.

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
    cause_ids = tuple(CAUSES)
    defaults = {"window_s": 60.0}
    events = frozenset({
        "L1", "L6", "L8", "R1", "R2", "R3", "V1", "V2",
        "M1", "M3", "M4", "S4", "S5", "M5", "M6", "M7", "M8", "M9", "R7", "X1", "X2", "X3", "X4", "X5", "X6",
        "X7", "X8", "X9", "D3", "D4", "D5", "D6", "Z1", "L7", "M13", "R8", "C34",
    })

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.lookups: OrderedDict[str, Event] = OrderedDict()
        self.pending_l6: dict[str, Event] = {}
        self.l6_for: OrderedDict[str, Event] = OrderedDict()
        self.pending_r1: dict[str, Event] = {}
        self.r3: OrderedDict[str, Event] = OrderedDict()
        self.outcomes: list[Event] = []
        self.signals = SignalWindow()
        self.occurrences: list[Shortfall] = []
        self.dropped = 0
        self.l6_count = 0
        self.async_lengths: OrderedDict[str, int] = OrderedDict()
        self.stores_total = 0

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
        if tid == "L1":
            raw = ev.rec.raw  # "Reqid: <id>, Total tokens …": the id is all we need until a shortfall
            end = raw.find(b",", 7)
            if end < 0:
                return
            req_id = raw[7:end].decode("utf-8", "replace")
            self._remember(self.lookups, req_id, ev)
            l6 = self.pending_l6.pop(key, None) if self.pending_l6 else None
            if l6 is not None:
                self._remember(self.l6_for, req_id, l6)
        elif tid == "L6":
            self.pending_l6[key] = ev
            self.l6_count += 1
        elif tid == "L8":
            self._remember(self.async_lengths, ev.f["req_id"], ev.f["length"])
            self.signals.add(ev)
        elif tid == "R1":
            self.pending_r1[key] = ev
        elif tid == "R2":
            self._on_r2(ev)
        elif tid == "R3":
            self._remember(self.r3, ev.f["req_id"], ev)
        elif tid in ("V1", "V2"):
            if len(self.outcomes) < 10_000:
                self.outcomes.append(ev)
        else:
            self.signals.add(ev)

    def _on_r2(self, ev: Event) -> None:
        rec = ev.rec
        key = rec.origin.key
        r1 = self.pending_r1.pop(key, None)
        if r1 is not None and (r1.rec.path != rec.path or rec.line - r1.rec.end_line > 3):
            r1 = None  # not the adjacent header of this pair
        retrieved, expected = ev.f["retrieved"], ev.f["expected"]
        if retrieved >= expected:
            return
        last = self.lookback(rec.line, b"Retrieved ", key)
        # retrieve lines are only counted by ingest: look back for this process's one just before the error
        r4 = self._r4_fields(Event("R4", last, None, template("R4")) if last is not None else None)
        if r4 is not None and r4["retrieved"] != retrieved:
            r4 = None
        req_id = (r1.f.get("req_id") if r1 is not None else None) or (r4 or {}).get("req_id")
        if req_id:
            req_id = req_id.strip()
        lookup = self._lookup_fields(self.lookups.get(req_id)) if req_id else None
        if lookup is None and not req_id and r4 is not None:
            # pre-0.3.12: no id on the error; find the latest lookup whose hit equals the retrieve's total
            for n, (rid, lev) in enumerate(reversed(self.lookups.items())):
                lk = self._lookup_fields(lev)
                if lk is not None and lk["hit"] == r4["total"]:
                    req_id, lookup = rid, lk
                    break
                if n > 2000:
                    break
        t = rec_time(rec)
        window_start = lookup["t"] if lookup and lookup.get("t") else None
        window = self.options["window_s"]
        if window_start is not None and t is not None:
            window = max(window, t - window_start + 1.0)
        sig = self.signals.before(key, t, rec.line, rec.path, window)
        if len(self.occurrences) >= MAX_OCCURRENCES:
            self.dropped += 1
            return
        self.occurrences.append(Shortfall(
            req_id=req_id, expected=expected, retrieved=retrieved, rank=rec.origin.rank_label, proc_key=key,
            r1=r1, r2=ev, r4=r4, lookup=lookup, signals=sig, l6=self.l6_for.get(req_id) if req_id else None, t=t,
        ))

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
    def finish(self, ctx: Context) -> list[Finding]:
        if not self.occurrences:
            return []
        self.stores_total = ctx.event_counts.get("S1", 0)
        for occ in self.occurrences:
            if occ.req_id and occ.req_id in self.r3:
                occ.r3 = self.r3[occ.req_id]
            occ.outcome = self._match_outcome(occ)
        # one incident per request id (all ranks that reported it), then fold identical incidents
        incidents: OrderedDict[str, list[Shortfall]] = OrderedDict()
        for i, occ in enumerate(self.occurrences):
            incidents.setdefault(occ.req_id or f"#{i}", []).append(occ)
        single_rank = (ctx.tensor_parallel_size or 1) == 1 and (ctx.pipeline_parallel_size or 1) == 1
        for occ in self.occurrences:
            if occ.rank is None and occ.proc_key in ctx.rank_by_proc:
                occ.rank = ctx.rank_by_proc[occ.proc_key]
        # fold incidents by the set of ranks that reported them: one finding per failure pattern
        groups: OrderedDict[frozenset, list[list[Shortfall]]] = OrderedDict()
        for occs in incidents.values():
            ranks = frozenset(self._rank(o, single_rank) for o in occs)
            groups.setdefault(ranks, []).append(occs)
        return [self._finding(ctx, incs, single_rank) for incs in groups.values()]

    @staticmethod
    def _rank(o: Shortfall, single_rank: bool) -> str:
        if o.rank:
            return o.rank
        if single_rank:
            return "TP0"
        # one file per worker without process prefixes: the file name often carries the rank
        m = _RANK_IN_NAME.search(os.path.basename(o.r2.rec.path))
        return f"TP{int(m.group(1))}" if m else "unknown"

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
            if out.rec.path == occ.r2.rec.path and 0 < out.rec.line - occ.r2.rec.line <= 40:
                best = best or out
        return best

    def _finding(self, ctx: Context, incidents: list[list[Shortfall]], single_rank: bool) -> Finding:
        first = incidents[0][0]
        all_occ = [o for inc in incidents for o in inc]
        chunk = ctx.chunk_size or 256
        chunk_known = ctx.chunk_size is not None
        missing = first.missing
        aligned = all(o.missing % chunk == 0 for o in all_occ)
        ranks = sorted({self._rank(o, single_rank) for o in all_occ})
        req_ids = [inc[0].req_id for inc in incidents if inc[0].req_id][:20]
        meas = {
            "expected_tokens": first.expected,
            "retrieved_tokens": first.retrieved,
            "missing_tokens": missing,
            "chunk_size": chunk,
            "chunk_size_source": "log" if chunk_known else "assumed default (no config line in the log)",
            "missing_chunks": missing // chunk if aligned else round(missing / chunk, 2),
            "chunk_aligned": aligned,
            "ranks": ranks,
            "request_ids": req_ids,
            "occurrences": len(incidents),
            "error_lines": len(all_occ),
        }
        if len({(o.expected, o.retrieved) for o in all_occ}) > 1:
            miss = [o.missing for o in all_occ]
            meas["missing_tokens_range"] = [min(miss), max(miss)]
            meas["total_missing_tokens"] = sum(miss)
            meas["per_request"] = [
                {"request_id": o.req_id, "rank": self._rank(o, single_rank), "expected": o.expected, "retrieved": o.retrieved}
                for o in all_occ[:20]
            ]
        if first.r4 and first.r4.get("total") is not None:
            vllm_cached = first.r4["total"] - first.expected
            meas["vllm_cached_tokens"] = vllm_cached
            meas["lmcache_cached_tokens"] = first.r4["total"]
        if first.lookup:
            meas["lookup_hit_tokens"] = first.lookup["hit"]
            meas["lookup_total_tokens"] = first.lookup["total"]
            if first.lookup.get("t") and first.t:
                meas["lookup_to_retrieve_s"] = round(first.t - first.lookup["t"], 3)
        if ctx.tensor_parallel_size:
            meas["tensor_parallel_size"] = ctx.tensor_parallel_size
        if self.dropped:
            meas["occurrences_not_tracked"] = self.dropped

        board = self._rank_causes(ctx, all_occ, aligned, chunk)
        # the ERROR line ("Num retrieved tokens: …") is the primary location, not the scheduler's INFO lookup
        r2 = first.r2.rec
        evidence = with_primary(self._evidence(incidents), Evidence(r2.path, r2.line, r2.display()))
        outcome = next((o.outcome for o in all_occ if o.outcome is not None), None)
        severity = "error"
        impact = self._impact(ctx, all_occ, outcome)
        if outcome is not None and outcome.id == "V1" and all(o.outcome is not None and o.outcome.id == "V1" for o in all_occ):
            severity = "warning"
        where = ", ".join(ranks)
        arith = (f"expected {first.expected} − retrieved {first.retrieved} = {missing} missing tokens"
                 + (f" = {missing // chunk} chunks of {chunk}" if aligned else f", not a multiple of chunk_size {chunk}"))
        if aligned and first.retrieved > 0:
            arith += f": the last {missing // chunk} chunks of the promised prefix"
        elif first.retrieved == 0:
            arith += ": nothing was loaded (the first chunk already failed)"
        tp = f" of TP={ctx.tensor_parallel_size}" if ctx.tensor_parallel_size and ctx.tensor_parallel_size > 1 else ""
        summary = f"{arith}, on {where}{tp}. {impact}"
        if len(incidents) > 1:
            summary += (f" {len(incidents)} requests affected on the same rank(s); numbers above are the first "
                        f"(missing {meas['missing_tokens_range'][0]}–{meas['missing_tokens_range'][1]} tokens, "
                        f"{meas['total_missing_tokens']} in all)." if "missing_tokens_range" in meas
                        else f" {len(incidents)} requests affected, all with the same numbers.")
        causes = board.ranked(ceiling=self._ceiling(all_occ, ctx), cap={"decode-cache-not-saved": 0.05})
        next_steps = self._next_steps(ctx, all_occ, causes[0].id if causes else None, single_rank)
        identity = f"{where}|{first.expected}|{first.retrieved}|{first.req_id or ''}"
        size = f"{missing} tokens ({missing // chunk} × {chunk})" if aligned else f"{missing} tokens"
        consequence = {"V2": "request failed", "V1": "recomputed"}.get(outcome.id if outcome else "", "")
        headline = f"{size} missing on {where}" + (f", {consequence}" if consequence else "")
        if len(incidents) > 1:
            headline += f", {len(incidents)} requests"
        return Finding(
            rule=self.code, severity=severity, title=self.title, summary=summary, count=len(incidents),
            evidence=evidence, measurements=meas, causes=causes, next_steps=next_steps, identity=identity,
            first_seen=first.t, headline=headline,
        )

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

    def _ceiling(self, occs: list[Shortfall], ctx: Context) -> float:
        discriminating = any(o.signals or o.l6 is not None for o in occs)
        if discriminating:
            return 0.85
        if any(o.lookup for o in occs) and ctx.lmcache_config:
            return 0.6
        return 0.45

    # ---- cause ranking ----------------------------------------------------------------------------
    def _rank_causes(self, ctx: Context, occs: list[Shortfall], aligned: bool, chunk: int) -> CauseBoard:
        b = CauseBoard()
        priors = {
            "lookup-retrieve-eviction": 1.0, "pin-accounting-bug": 0.45, "pin-timeout": 0.4,
            "remote-backend-loss": 0.3, "backend-read-failure": 0.45, "cpu-staging-exhausted": 0.2,
            "adapter-token-accounting-bug": 0.15, "p2p-retrieve-bug": 0.05, "rank-disagreement": 0.45,
            "hash-inconsistency": 0.06, "async-loading-partial": 0.1, "unfull-chunk-mismatch": 0.1,
            "decode-cache-not-saved": 0.02,
        }
        for cid, prior in priors.items():
            fix, confirm = CAUSES[cid]
            b.add(cid, prior, fix=fix, confirm_with=confirm)
        cfg = ctx.lmcache_config
        fams: dict[str, list[Event]] = {}
        for o in occs:
            for s in o.signals:
                fams.setdefault(_family(s), []).append(s)
        ranks = sorted({o.rank or "unknown rank" for o in occs})
        where = "/".join(ranks)
        lmc_v = version_tuple(ctx.lmcache_version)
        tp = ctx.tensor_parallel_size or 1

        # chunk alignment
        if aligned:
            b.oppose("unfull-chunk-mismatch", 30, f"the missing count is a whole number of {chunk}-token chunks")
            b.oppose("adapter-token-accounting-bug", 2, "the missing count is chunk-aligned")
            b.note_for("lookup-retrieve-eviction", f"chunk-aligned loss ({chunk}-token chunks): whole chunks vanished")
        else:
            b.support("unfull-chunk-mismatch", 20, f"missing tokens are not a multiple of chunk_size {chunk}")
            b.support("adapter-token-accounting-bug", 6, f"missing tokens are not a multiple of chunk_size {chunk}")
            for cid in ("lookup-retrieve-eviction", "remote-backend-loss", "pin-timeout", "pin-accounting-bug"):
                b.oppose(cid, 3, "chunk-level losses are multiples of chunk_size; this one is not")
        # which ranks
        if tp > 1 and len(ranks) < tp and "unknown" not in ranks:
            for cid in ("lookup-retrieve-eviction", "pin-accounting-bug", "remote-backend-loss", "rank-disagreement"):
                b.note_for(cid, f"only {where} of {tp} ranks reported it: a per-rank loss")
        # memory pressure
        pressure = fams.get("pressure", [])
        if pressure:
            b.support("lookup-retrieve-eviction", 5,
                      f"{len(pressure)} memory-pressure line(s) on {where} shortly before "
                      f"(e.g. line {pressure[-1].rec.line}: {pressure[-1].rec.msg[:90]})")
            b.support("pin-timeout", 1.5, "the local cache was full, so force-unpinned chunks would be evicted at once")
        elif self.signals.totals.get("pressure"):
            b.support("lookup-retrieve-eviction", 1.5, f"{self.signals.totals['pressure']} memory-pressure line(s) elsewhere in the log")
        elif self.stores_total:
            b.oppose("lookup-retrieve-eviction", 2.5, f"the log shows {self.stores_total} stores but no memory-pressure line "
                     "(eviction itself is only logged at DEBUG)")
        else:
            b.note_for("lookup-retrieve-eviction", "the most common cause; the log shows too little of this rank to confirm or exclude it")
        if lmc_v is not None and lmc_v < (0, 3, 3):
            b.support("lookup-retrieve-eviction", 4, f"LMCache {ctx.lmcache_version} < 0.3.3: only rank 0 pinned at lookup (fixed by PR #1101)")
            b.note_for("lookup-retrieve-eviction", "upgrade LMCache to ≥ 0.3.3 so every rank pins its looked-up chunks")
        elif lmc_v is not None and not (fams.get("pin-negative") or fams.get("pin-timeout")):
            b.oppose("lookup-retrieve-eviction", 1.3, f"LMCache {ctx.lmcache_version} pins looked-up chunks on every rank; eviction needs a lost pin")
        # pins
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
            b.oppose("pin-accounting-bug", 2, "no 'Pin count of MemoryObj … is negative' warning in the log")
        gap = next((o.t - o.lookup["t"] for o in occs if o.lookup and o.lookup.get("t") and o.t), None)
        pin_timeout = (cfg or {}).get("pin_timeout_sec")
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
        else:
            b.oppose("pin-timeout", 1.5, "no 'Pin timeout detected' warning in the log")
        # backends
        remote_cfg = None
        if cfg is not None:
            remote_cfg = bool(cfg.get("remote_url") or cfg.get("storage_plugins") or cfg.get("external_backends"))
        read_miss = fams.get("read-miss", [])
        redis_ev = fams.get("redis-evicted", [])
        remote_err = fams.get("remote-error", []) + fams.get("remote-timeout", [])
        api_err = fams.get("backend-api-error", [])
        disk_err = fams.get("disk-error", [])
        staging = fams.get("staging-exhausted", [])
        if remote_cfg is False:
            b.rule_out("remote-backend-loss", "no remote_url or storage plugin in the LMCache config")
        elif remote_cfg:
            b.support("remote-backend-loss", 2, f"remote backend configured ({cfg.get('remote_url') or 'storage plugin'}); remote backends cannot pin")
            if cfg.get("local_cpu") is False and not cfg.get("local_disk"):
                b.oppose("lookup-retrieve-eviction", 6, "no local tier: chunks live only in the remote store, whose "
                         "evictions are remote-backend-loss")
            if cfg.get("local_cpu") is True:
                b.oppose("remote-backend-loss", 2, "a local CPU tier sits in front of the remote store")
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
            b.oppose("backend-read-failure", 2, "no 'can't be retrieved' or backend error line before it")
        if staging:
            b.support("cpu-staging-exhausted", 15, f"no CPU staging buffer for a disk/remote load (line {staging[-1].rec.line})")
        elif cfg is not None and not (cfg.get("local_disk") or remote_cfg):
            b.rule_out("cpu-staging-exhausted", "no disk or remote tier configured (staging is only needed for those)")
        # rank disagreement
        l6 = [o.l6 for o in occs if o.l6 is not None]
        if l6:
            b.support("rank-disagreement", 10, f"the lookup of this request warned that ranks disagree: {l6[0].f['results']} (line {l6[0].rec.line})")
        elif self.l6_count:
            b.support("rank-disagreement", 1.5, f"{self.l6_count} 'Lookup results … differ across ranks' warning(s) in the log")
        elif tp > 1:
            b.oppose("rank-disagreement", 2, "no 'Lookup results … differ across ranks' warning before it")
        else:
            b.rule_out("rank-disagreement", "a single rank cannot disagree with itself")
        # p2p, async, hash, adapter
        if cfg is not None:
            if cfg.get("enable_p2p") is True:
                b.support("p2p-retrieve-bug", 10 if any(o.retrieved == 0 for o in occs) else 3, "enable_p2p: True")
            else:
                b.rule_out("p2p-retrieve-bug", "enable_p2p is not enabled")
            if cfg.get("enable_async_loading") is True:
                b.support("async-loading-partial", 6, "enable_async_loading: True")
            else:
                b.rule_out("async-loading-partial", "enable_async_loading is not enabled")
        shorter = [o for o in occs if o.req_id in self.async_lengths and self.async_lengths[o.req_id] < o.expected]
        if shorter:
            b.support("async-loading-partial", 8, "the async lookup answered a shorter length than later expected")
        if len(set(ctx.none_hashes)) > 1:
            b.support("hash-inconsistency", 3, "processes initialised different NONE_HASH values")
        b.oppose("hash-inconsistency", 3, "hash mismatches make lookups miss (0 hits); they do not make a promised chunk disappear")
        if lmc_v is not None and lmc_v <= (0, 3, 1):
            b.support("adapter-token-accounting-bug", 8, f"LMCache {ctx.lmcache_version} ≤ 0.3.1 had token-accounting bugs (issues #889, #910)")
        elif ctx.lmcache_version_note:
            b.support("adapter-token-accounting-bug", 1.5, "LMCache build matches no release (development or patched build)")
        if any(o.retrieved == 0 for o in occs):
            b.support("backend-read-failure", 1.5, "retrieved 0: the very first chunk failed")
        # the user's usual hunch
        self._weigh_decode_cache(b, ctx, occs)
        return b

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
        add(o.r3)
        add(o.outcome)
        for inc in incidents[1:4]:
            add(inc[0].r2)
        return out

    @staticmethod
    def _next_steps(ctx: Context, occs: list[Shortfall], top: str | None, single_rank: bool) -> list[str]:
        steps = []
        if not any(o.lookup for o in occs):
            steps.append("Include the engine-core (scheduler) log: its 'Reqid: … LMCache hit tokens' line shows what the lookup promised.")
        if not ctx.lmcache_config:
            steps.append("Include the LMCache config (the 'Creating LMCacheEngine with config' line, or pass --lmcache-config FILE.yaml).")
        if not single_rank and len(ctx.ranks_seen) < (ctx.tensor_parallel_size or 1):
            steps.append(f"Only {len(ctx.ranks_seen)} of {ctx.tensor_parallel_size} ranks' logs were given: add the others to see whether they loaded fully.")
        if any(o.rank is None and o.r2.rec.origin.pid is None for o in occs) and not single_rank:
            steps.append("These LMCache lines carry no worker prefix (vLLM ≥ 0.31 prefixes only its own records), so the "
                         "failing rank cannot be read from them: compare the per-rank 'Retrieved … out of …' lines of the "
                         "request, or log each worker to its own file.")
        if not any(o.signals for o in occs):
            steps.append("Set LMCACHE_LOG_LEVEL=DEBUG to log evictions ('Evicting N chunks'), and scrape lmcache:local_cpu_evict_count, "
                         "lmcache:pinned_memory_objs_count and lmcache:forced_unpin_count around the error.")
        if top and top in CAUSES:
            steps.append(f"To confirm {top}: {CAUSES[top][1]}.")
        return steps


def _family(ev: Event) -> str:
    from specdiag.analyzers.signals import SIGNAL_FAMILY

    return SIGNAL_FAMILY.get(ev.id, "other")
