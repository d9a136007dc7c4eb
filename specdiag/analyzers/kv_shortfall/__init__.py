"""KV001 — LMCache retrieved fewer KV tokens than its lookup promised.

The rule class below is the registered rule and its docstring the rule's documentation; the work is split
by stage: ``detect.py`` observes the lines and joins them per request (``shortfall.py`` holds the data),
``evidence.py`` and ``evidence_memory.py`` are the evidence families that weigh the causes (with the
weight tiers of ``weights.py``), ``rank.py`` holds the priors, ceilings and the weighing order, and
``finding.py`` the finding's numbers and text.
"""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.kv_shortfall.detect import ShortfallTracker
from specdiag.analyzers.kv_shortfall.finding import build_finding
from specdiag.analyzers.kv_shortfall.rank import CEILING, KV001_CAUSES, PRIORS
from specdiag.analyzers.kv_shortfall.shortfall import (
    DEFAULT_PIN_TIMEOUT_S,
    MAX_OCCURRENCES,
    MAX_TRACKED,
    MIN_BLOCK,
    NEED_TIE_WINDOW_S,
    P2P_IDS,
    LookupHistory,
    Shortfall,
    complete_retrieve,
    rank_of,
    single_rank,
)
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.events.rows import LookupRows
from specdiag.findings import Finding
from specdiag.observe import RunState

__all__ = [
    "CEILING", "DEFAULT_PIN_TIMEOUT_S", "KV001_CAUSES", "MAX_OCCURRENCES", "MAX_TRACKED", "MIN_BLOCK",
    "NEED_TIE_WINDOW_S", "P2P_IDS", "PRIORS", "LookupHistory", "RetrievalShortfall", "Shortfall",
    "complete_retrieve",
]


@register
class RetrievalShortfall(Rule):
    """LMCache retrieved fewer KV tokens than its lookup promised.

    Detects: the LMCache error pair ``The number of retrieved tokens is less than the expected number of
    tokens!`` / ``Num retrieved tokens: R, num expected tokens: E`` on a worker; and, when an excerpt ends
    before that pair, a ``Retrieved X out of Y required tokens`` line (or the older ``… out of Y out of
    total Z``) with X < Y, a ``failed to load N tokens across M blocks`` report, or — with none of those —
    LMCache's own failed-read line (``… in the storage, but it can't be retrieved``, ``… Returning partial
    results``), on its own (warning: the loss is certain, its size is not in the input). A short retrieve
    line followed by the pair's first line alone (a paste cut before the numbers) is an error: the adapter
    itself says the load fell short (``evidence_source`` ``error-line``).
    Every occurrence is joined by request id across ranks with the scheduler's ``Reqid:`` lookup, the
    worker's retrieve line, the failed-block report and vLLM's recovery or failure line; repeats are
    folded. Without a request id (LMCache ≤ 0.3.9) the same numbers at the same moment on several ranks
    are one request. On a log where every request falls short, the first 5,000 rank-level reports are
    kept and joined; each later one is counted once (``occurrences_not_tracked``) and the summary says the
    figures are the first ones', so memory stays bounded.

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

    #: each cause's weight before any evidence (``rank.PRIORS``)
    PRIORS = PRIORS

    def __init__(self, options=None) -> None:
        super().__init__(options)
        #: what detection keeps of the run: lookups, pending lines, occurrences, signal window, coverage
        self.tracker = ShortfallTracker(self.options["window_s"])

    def start(self, run: RunState) -> None:
        super().start(run)
        self.tracker.run = run  # a pair's retrieve line may only have been counted: the run's look-back has it

    def observe(self, ev: Event) -> None:
        self.tracker.observe(ev)

    def observe_rows(self, rows: LookupRows) -> None:
        self.tracker.observe_rows(rows)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """One finding per set of ranks that reported a shortfall (one failure pattern), causes weighed."""
        incidents = self.tracker.settle(run)
        if not incidents:
            return []
        single = single_rank(ctx)
        for occ in self.tracker.occurrences:
            if occ.rank is None and occ.proc_key in ctx.rank_by_proc:
                occ.rank = ctx.rank_by_proc[occ.proc_key]
        # fold incidents by the set of ranks that reported them: one finding per failure pattern
        groups: dict[frozenset, list[list[Shortfall]]] = {}
        for occs in incidents:
            ranks = frozenset(rank_of(o, single, ctx) for o in occs)
            groups.setdefault(ranks, []).append(occs)
        return [build_finding(self.code, self.title, self.tracker, ctx, incs, single) for incs in groups.values()]
