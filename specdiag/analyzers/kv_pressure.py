"""KV007/KV008 — LMCache CPU-tier pressure and rank disagreement, when they did not (yet) cause a shortfall."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Evidence, Finding
from specdiag.timeutil import rec_time


@register
class CpuTierPressure(Rule):
    """LMCache's local CPU tier is full: allocations fail and stores are cut short.

    Detects: ``Failed to allocate memory block …``, ``Failed to batched allocate …``, ``Local cpu memory
    under pressure so choosing to store only N total chunks`` / ``… to not store``, ``No eviction
    candidates found in local cpu backend``, per rank.

    Why it matters: prompts are stored partially or not at all, so later requests miss (lower hit rate);
    when nothing can be evicted (every chunk pinned by pending lookups) allocations busy-wait. It is the
    soil in which eviction-driven shortfalls (KV001) grow.

    Causes weighed: ``cache-too-small`` (working set larger than ``max_local_cpu_size``),
    ``pinned-chunks-block-eviction`` (no eviction candidates: chunks pinned by lookups that wait).

    Fix: raise ``max_local_cpu_size`` (check the ``Adjusted CPU memory size`` line for what LMCache really
    got), add a disk/remote tier, or lower concurrency of long distinct prefixes.

    References: LMCache ``v1/storage_backend/local_cpu_backend.py`` (0.5.6 :724), ``v1/cache_engine.py:519``,
    ``v1/memory_management.py:1452``.
    """

    code = "KV007"
    name = "lmcache-cpu-tier-pressure"
    title = "LMCache CPU tier under memory pressure: stores cut short or dropped"
    severity = "warning"
    family = "KV"
    cause_ids = ("cache-too-small", "pinned-chunks-block-eviction")
    defaults = {"min_events": 3}
    events = frozenset({"M1", "M3", "M4", "S4", "S5", "C27"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.counts: dict[str, int] = {}
        self.by_rank: dict[str, int] = {}
        self.examples: dict[str, Event] = {}
        self.adjusted: Event | None = None
        self.first_t: float | None = None

    def observe(self, ev: Event) -> None:
        if ev.id == "C27":
            self.adjusted = self.adjusted or ev
            return
        self.counts[ev.id] = self.counts.get(ev.id, 0) + 1
        rank = ev.rec.origin.rank_label or "unknown rank"
        self.by_rank[rank] = self.by_rank.get(rank, 0) + 1
        if ev.id not in self.examples:
            self.examples[ev.id] = ev
            if self.first_t is None:
                self.first_t = rec_time(ev.rec)

    def finish(self, ctx: Context) -> list[Finding]:
        total = sum(self.counts.values())
        if total < self.options["min_events"]:
            return []
        b = CauseBoard()
        size = ctx.cfg("max_local_cpu_size")
        b.add("cache-too-small", 1.0, fix="Raise max_local_cpu_size (GB per worker) or add a disk/remote tier.",
              confirm_with="specdiag repro --toggle max_local_cpu_size=<small>,<large>")
        b.add("pinned-chunks-block-eviction", 0.4, fix="Lower pin_timeout_sec moderately or relieve the vLLM block "
              "pressure that keeps looked-up requests (and their pins) waiting.",
              confirm_with="watch lmcache:pinned_memory_objs_count during the pressure")
        if size is not None:
            b.note_for("cache-too-small", f"max_local_cpu_size = {size} GB")
        if self.adjusted is not None:
            b.support("cache-too-small", 2, f"LMCache shrank the CPU tier: {self.adjusted.rec.msg[:100]}")
        if self.counts.get("M1"):
            b.support("pinned-chunks-block-eviction", 5, f"{self.counts['M1']} 'No eviction candidates' line(s): everything was pinned")
        else:
            b.oppose("pinned-chunks-block-eviction", 2, "no 'No eviction candidates' line")
        parts = []
        names = {"M3": "failed allocations", "M4": "failed batched allocations", "S4": "partial stores",
                 "S5": "dropped stores", "M1": "no-eviction-candidate waits"}
        for k, label in names.items():
            if self.counts.get(k):
                parts.append(f"{self.counts[k]} {label}")
        ranks = ", ".join(f"{r}: {n}" for r, n in sorted(self.by_rank.items()))
        evidence = [Evidence(e.rec.path, e.rec.line, e.rec.display()) for e in list(self.examples.values())[:4]]
        return [Finding(rule=self.code, severity="warning", title=self.title,
                        summary=f"{', '.join(parts)} (by rank: {ranks}). Later requests will miss what was not stored.",
                        count=total, evidence=evidence,
                        measurements={**{f"count_{k}": v for k, v in self.counts.items()}, "by_rank": self.by_rank,
                                      "max_local_cpu_size_gb": size},
                        causes=b.ranked(ceiling=0.85), identity=f"pressure|{sorted(self.by_rank)}", first_seen=self.first_t)]


@register
class RankDisagreement(Rule):
    """TP/PP ranks report different LMCache hit counts for the same lookup.

    Detects: ``Lookup results (number of hit tokens) differ across (TP and PP) ranks: [...]`` from the
    scheduler's lookup client.

    Why it matters: ranks hold different chunk sets (per-rank eviction, a remote store that lost one
    rank's keys). The lookup takes the minimum, so hits are lower than they could be, and a rank that
    loses more after the lookup produces a retrieval shortfall (KV001).

    Causes weighed: ``per-rank-eviction`` (ranks evict independently), ``remote-backend-loss``.

    Fix: give every rank the same cache capacity, check the per-rank pressure lines, and collect every
    rank's log.

    References: LMCache ``v1/lookup_client/lmcache_lookup_client.py:150`` (0.5.6); PR #1426; issue #1770.
    """

    code = "KV008"
    name = "lmcache-rank-disagreement"
    title = "TP/PP ranks disagree on LMCache lookup hits"
    severity = "info"
    family = "KV"
    cause_ids = ("per-rank-eviction", "remote-backend-loss")
    events = frozenset({"L6"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.n = 0
        self.examples: list[Event] = []
        self.lost_tokens = 0

    def observe(self, ev: Event) -> None:
        self.n += 1
        if len(self.examples) < 3:
            self.examples.append(ev)
        try:
            vals = [int(x) for x in ev.f["results"].strip("[]").split(",") if x.strip()]
            self.lost_tokens += max(vals) - min(vals)
        except ValueError:
            pass

    def finish(self, ctx: Context) -> list[Finding]:
        if not self.n:
            return []
        b = CauseBoard()
        b.add("per-rank-eviction", 1.0, fix="Give every rank the same cache capacity; compare per-rank pressure lines.",
              confirm_with="count memory-pressure lines per rank (KV007)")
        b.add("remote-backend-loss", 0.5, fix="Check the remote store for evictions of one rank's keys.",
              confirm_with="specdiag repro --preset remote-eviction")
        if not (ctx.cfg("remote_url") or ctx.cfg("storage_plugins")):
            b.rule_out("remote-backend-loss", "no remote backend configured") if ctx.lmcache_config else None
        return [Finding(rule=self.code, severity="info", title=self.title,
                        summary=f"{self.n} lookup(s) where ranks disagreed; the lookup used the minimum, forgoing "
                                f"{self.lost_tokens} hit tokens in all.",
                        count=self.n, evidence=[Evidence(e.rec.path, e.rec.line, e.rec.display()) for e in self.examples],
                        measurements={"disagreements": self.n, "hit_tokens_forgone": self.lost_tokens},
                        causes=b.ranked(ceiling=0.7), identity="rank-disagreement")]
