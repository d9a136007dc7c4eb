"""KV007/KV008/KV019 — LMCache CPU-tier pressure, rank disagreement and a full P/D transfer buffer, when they did
not (yet) cause a shortfall."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.kv_coverage import input_kind
from specdiag.analyzers.kv_precursors import LoadWatch, load_check_step, rank_words
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


@register
class CpuTierPressure(Rule):
    """LMCache's local CPU tier is full: allocations fail and stores are cut short.

    Detects: ``Failed to allocate memory block …``, ``Failed to batched allocate …``, ``Local cpu memory
    under pressure so choosing to store only N total chunks`` / ``… to not store`` (LMCache 0.3.1–0.3.3:
    ``Failed to allocate memory for the KV cache. The KV cache will not be stored.``), ``No eviction
    candidates found in local cpu backend``, per rank (the P/D receiver's ``Failed to allocate memory object,
    retrying...`` is KV019's: its transfer buffer, not the CPU tier).

    Why it matters: prompts are stored partially or not at all, so later requests miss (lower hit rate);
    when nothing can be evicted (every chunk pinned by pending lookups) allocations busy-wait. It is the
    soil in which eviction-driven shortfalls (KV001) grow.

    Causes weighed: ``cache-too-small`` (working set larger than ``max_local_cpu_size``),
    ``pinned-chunks-block-eviction`` (no eviction candidates: chunks pinned by lookups that wait),
    ``rank-local-leak`` (only one rank of several under pressure: TP ranks store the same tokens with the
    same capacity, so one rank alone filling up means its pins or reference counts are not released).

    Pasted fragment: in a log, a line or two of pressure is a passing moment (``min_events``, default 3); a
    paste of a few lines (no startup, at most 50 lines) is what the user chose to show, so there one line is
    enough when the paste holds no short load (beside one, KV001 weighs it). The finding then also says
    what the pressure risks — chunks a lookup counted evicted before their load (``lookup-retrieve-eviction``,
    reported by KV001) — caps confidence at 0.6 and says which lines would show whether a load came up short.

    Fix: raise ``max_local_cpu_size`` (check the ``Adjusted CPU memory size`` line for what LMCache really
    got), add a disk/remote tier, or lower concurrency of long distinct prefixes.

    References: LMCache ``v1/storage_backend/local_cpu_backend.py`` (0.5.6 :724), ``v1/cache_engine.py:519``,
    ``v1/memory_management.py:1452``; 0.3.3 ``v1/cache_engine.py:221`` (0.3.1 :198), replaced by the
    ``… choosing to not store`` warning in 0.3.5.
    """

    code = "KV007"
    name = "lmcache-cpu-tier-pressure"
    title = "LMCache CPU tier under memory pressure: stores cut short or dropped"
    severity = "warning"
    family = "KV"
    cause_ids = ("cache-too-small", "pinned-chunks-block-eviction", "rank-local-leak")
    defaults = {"min_events": 3}
    events = PRESSURE_IDS | frozenset({"C27", "M5", "M6", "M7"}) | LoadWatch.events
    LEAK_SIGNS = frozenset({"M5", "M6", "M7"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.counts: dict[str, int] = {}
        self.by_rank: dict[str, int] = {}
        self.examples: dict[str, Event] = {}
        self.adjusted: Event | None = None
        self.first_t: float | None = None
        self.leak_signs: dict[str, int] = {}
        self.loads = LoadWatch()
        self.max_line = 0
        self.first_lines: list[Event] = []  # a paste's evidence: its own lines, in order
        self.staging_loads = 0  # loads from disk that got no CPU staging buffer (KV001's cpu-staging-exhausted)

    def observe(self, ev: Event) -> None:
        self.staging_loads += ev.id == "D5"
        if self.loads.see(ev):
            return
        self.max_line = max(self.max_line, ev.rec.line)
        if ev.id == "C27":
            self.adjusted = self.adjusted or ev
            return
        if ev.id == "M14":
            return  # the P/D receiver's transfer buffer, not the CPU tier: KV019
        rank = ev.rec.origin.rank_label or "unknown"
        if ev.id in self.LEAK_SIGNS:
            self.leak_signs[rank] = self.leak_signs.get(rank, 0) + 1
            return
        tid = "S5" if ev.id == "S5b" else ev.id  # LMCache 0.3.1-0.3.3's words for a store dropped under pressure
        self.counts[tid] = self.counts.get(tid, 0) + 1
        self.by_rank[rank] = self.by_rank.get(rank, 0) + 1
        if len(self.first_lines) < 4:
            self.first_lines.append(ev)
        if ev.id not in self.examples:
            self.examples[ev.id] = ev
            if self.first_t is None:
                self.first_t = rec_time(ev.rec)

    def _weigh_single_rank(self, b: CauseBoard, ctx: Context) -> None:
        """Pressure on one rank while the input shows the others: a leak there, not a cache too small for all."""
        pressured = [r for r in self.by_rank if r != "unknown"]
        others = [r for r in ctx.ranks_seen if r not in self.by_rank]
        if len(pressured) != 1 or not others or "unknown" in self.by_rank:
            if len(pressured) > 1:
                b.support("cache-too-small", 1.5, f"{len(pressured)} ranks under pressure alike ({', '.join(sorted(pressured))})")
            b.oppose("rank-local-leak", 3, "the pressure is not confined to one rank of several in the input")
            return
        rank = pressured[0]
        if ctx.use_mla and rank.endswith("TP0"):
            b.oppose("rank-local-leak", 3, "with MLA only the first rank stores ('save only first rank'): pressure there alone is expected")
            return
        b.support("rank-local-leak", 12, f"only {rank} is under pressure while {', '.join(others)} — whose lines are in "
                  "the input and which store the same tokens with the same capacity — are not: its chunks stay pinned or "
                  "referenced (unevictable)")
        b.oppose("cache-too-small", 4, f"a cache too small for the working set would fill on every rank, not on {rank} alone")
        if ctx.lmcache_configs_differ:
            b.support("cache-too-small", 2, "the ranks' LMCache configs differ (one may have a smaller CPU tier)")
        if self.leak_signs.get(rank):
            b.support("rank-local-leak", 3, f"{self.leak_signs[rank]} negative pin/ref count or garbage-collected-while-"
                      f"referenced warning(s) on {rank}")

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        total = sum(self.counts.values())
        pasted = total > 0 and not self.loads.short and input_kind(ctx, run.lines_read, self.max_line) == "fragment"
        if total < self.options["min_events"] and not pasted or self._all_load_staging():
            return []
        b = CauseBoard()
        size = ctx.cfg("max_local_cpu_size")
        for cid, prior in (("cache-too-small", 1.0), ("pinned-chunks-block-eviction", 0.4), ("rank-local-leak", 0.15)):
            b.add(cid, prior, **fix_and_confirm(cid))
        if size is not None:
            b.note_for("cache-too-small", f"max_local_cpu_size = {size} GB")
        if self.adjusted is not None:
            b.support("cache-too-small", 2, f"LMCache shrank the CPU tier: {self.adjusted.rec.msg[:100]}")
        if self.counts.get("M1"):
            b.support("pinned-chunks-block-eviction", 5, f"{self.counts['M1']} 'No eviction candidates' line(s): everything was pinned")
        else:
            b.oppose("pinned-chunks-block-eviction", 2, "no 'No eviction candidates' line")
        self._weigh_single_rank(b, ctx)
        parts = []
        names = {"M3": "failed allocations", "M4": "failed batched allocations", "S4": "partial stores",
                 "S5": "dropped stores", "M1": "no-eviction-candidate waits"}
        for k, label in names.items():
            if self.counts.get(k):
                parts.append(f"{self.counts[k]} {label}")
        shown = self.first_lines if pasted else list(self.examples.values())[:4]
        evidence = [evidence_of(e, None) for e in shown]
        summary = f"{', '.join(parts)} ({rank_words(self.by_rank)}). Later requests will miss what was not stored."
        steps: list[str] = []
        if pasted:
            summary += (" Under this pressure a chunk a lookup counted can be evicted before its load, which then comes "
                        "up short (lookup-retrieve-eviction, reported by KV001). " + self.loads.sentence(run.count("R4")))
            steps = self._paste_steps()
        return [Finding(rule=self.code, severity="warning", title=self.title, summary=summary,
                        count=total, evidence=evidence,
                        measurements={**{f"count_{k}": v for k, v in self.counts.items()}, "by_rank": self.by_rank,
                                      "max_local_cpu_size_gb": size, **({"input_coverage": "fragment"} if pasted else {})},
                        causes=b.ranked(ceiling=0.6 if pasted else 0.85), next_steps=steps,
                        identity=f"pressure|{sorted(self.by_rank)}", first_seen=self.first_t)]

    def _all_load_staging(self) -> bool:
        """Whether every failed allocation is a load's: the allocator's 'Failed to allocate memory for tensor …'
        lines come one per 'Memory allocation failed during (a)sync disk load' (the load asked for the staging
        buffer), and nothing says a store was cut. Those loads came up short; no store was dropped (KV001)."""
        return bool(self.counts) and set(self.counts) == {"M3"} and self.counts["M3"] <= self.staging_loads

    def _paste_steps(self) -> list[str]:
        return [load_check_step(self.by_rank) + ".",
                "To size the tier: collect the startup lines ('Creating LMCacheEngine with config' for "
                "max_local_cpu_size, 'Adjusted CPU memory size') and every rank's pressure lines."]


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

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.n:
            return []
        b = CauseBoard()
        b.add("per-rank-eviction", 1.0, **fix_and_confirm("per-rank-eviction"))
        b.add("remote-backend-loss", 0.5, **fix_and_confirm("remote-backend-loss"))
        if not (ctx.cfg("remote_url") or ctx.cfg("storage_plugins")):
            b.rule_out("remote-backend-loss", "no remote backend configured") if ctx.lmcache_config else None
        return [Finding(rule=self.code, severity="info", title=self.title,
                        summary=f"{self.n} lookup(s) where ranks disagreed; the lookup used the minimum, forgoing "
                                f"{self.lost_tokens} hit tokens in all.",
                        count=self.n, evidence=[evidence_of(e, None) for e in self.examples],
                        measurements={"disagreements": self.n, "hit_tokens_forgone": self.lost_tokens},
                        causes=b.ranked(ceiling=0.7), identity="rank-disagreement")]


@register
class PdBufferFull(Rule):
    """The P/D receiver's transfer buffer is full: KV transfers wait for memory.

    Detects: LMCache's ``Failed to allocate memory object, retrying...`` (``v1/storage_backend/pd_backend.py``
    0.3.7+, ``connector/nixl_connector_v3.py`` 0.3.3–0.3.6), per rank. The receiving instance (the decoder)
    allocates each incoming transfer's memory objects from its P/D buffer (``pd_buffer_size``; 0.3.x's
    ``nixl_buffer_size``) in its allocation loop, and retries every 10 ms or less (with no limit in the
    ``nixl_connector_v3`` and ``pd_backend`` code read) until transfers in flight free it: one line per try.

    Why it matters: the sender's transfer, and the request behind it, wait while the lines go on: latency
    spikes under load, and a hang when nothing frees the buffer (a buffer too small for one prompt's KV, or
    memory objects never released). Nothing is dropped: this is not the CPU tier (KV007), and
    ``max_local_cpu_size`` does not size it.

    Causes weighed: ``pd-buffer-full``.

    Fix: size ``pd_buffer_size`` (per rank, on the receiver) to the KV of the prompts in flight at once, or
    lower the concurrency of long prompts sent to it; if the retries never stop, the buffer is not being freed.

    References: LMCache ``v1/storage_backend/pd_backend.py`` (0.3.9 :489, 0.5.6 :943, reached from
    ``_mem_alloc_loop``), ``v1/storage_backend/connector/nixl_connector_v3.py`` (0.3.3 :567); LMCache issues
    #1030, #1337, #1990.
    """

    code = "KV019"
    name = "pd-buffer-full"
    title = "The P/D receiver's transfer buffer is full: KV transfers wait for memory"
    severity = "warning"
    family = "KV"
    cause_ids = ("pd-buffer-full",)
    events = frozenset({"M14"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.lines: list[Event] = []
        self.count = 0
        self.by_rank: dict[str, int] = {}
        self.first_t: float | None = None
        self.last_t: float | None = None

    def observe(self, ev: Event) -> None:
        self.count += 1
        rank = ev.rec.origin.rank_label or "unknown"
        self.by_rank[rank] = self.by_rank.get(rank, 0) + 1
        t = rec_time(ev.rec)
        if t is not None:
            self.first_t = t if self.first_t is None else self.first_t
            self.last_t = t
        if len(self.lines) < 3:
            self.lines.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.count:
            return []
        size = ctx.cfg("pd_buffer_size")
        span = (self.last_t - self.first_t) if self.first_t is not None and self.last_t is not None else None
        waited = f" over {span:,.1f} s" if span else ""
        cause = Cause("pd-buffer-full", 0.75,
                      for_=[f"{self.count} allocation retr(ies){waited} ({rank_words(self.by_rank)})"]
                      + ([f"pd_buffer_size = {size}"] if size is not None else []),
                      against=["whether the retries stopped (the buffer freed) is not in the input: the lines after the "
                               "last retry say"], **fix_and_confirm("pd-buffer-full"))
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"{self.count} 'Failed to allocate memory object, retrying...' line(s){waited} "
                     f"({rank_words(self.by_rank)}): the receiver's P/D buffer could not hold an incoming transfer, "
                     "which waited (a try every 10 ms or less) while the request behind it stalled. Nothing was dropped."),
            count=self.count, evidence=[evidence_of(e, 400) for e in self.lines],
            causes=[cause], identity=f"{self.code}|{sorted(self.by_rank)}", first_seen=self.first_t,
            measurements={"retries": self.count, "by_rank": self.by_rank, "span_s": span,
                          "pd_buffer_size": size},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
