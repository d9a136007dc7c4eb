"""KV007/KV008 — LMCache CPU-tier pressure and rank disagreement, when they did not (yet) cause a shortfall."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.kv_coverage import input_kind
from specdiag.analyzers.kv_precursors import LoadWatch, load_check_step, rank_words
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


@register
class CpuTierPressure(Rule):
    """LMCache's local CPU tier is full: allocations fail and stores are cut short.

    Detects: ``Failed to allocate memory block …``, ``Failed to batched allocate …``, ``Local cpu memory
    under pressure so choosing to store only N total chunks`` / ``… to not store`` (LMCache 0.3.1–0.3.3:
    ``Failed to allocate memory for the KV cache. The KV cache will not be stored.``), ``No eviction
    candidates found in local cpu backend``, and the NIXL/PD receiver's ``Failed to allocate memory object,
    retrying...`` busy-loop (its transfer buffer is full; LMCache ``v1/storage_backend/pd_backend.py``, 0.3.x
    ``connector/nixl_connector_v3.py``), per rank.

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

    def observe(self, ev: Event) -> None:
        if self.loads.see(ev):
            return
        self.max_line = max(self.max_line, ev.rec.line)
        if ev.id == "C27":
            self.adjusted = self.adjusted or ev
            return
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
        if total < self.options["min_events"] and not pasted:
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
        if self.counts.get("M14"):
            b.support("cache-too-small", 3, f"{self.counts['M14']} allocation retr(ies) of the NIXL/PD receive buffer: "
                      "the transfer buffer (pd_buffer_size / nixl_buffer_size) is smaller than the KV in flight")
        parts = []
        names = {"M3": "failed allocations", "M4": "failed batched allocations", "S4": "partial stores",
                 "S5": "dropped stores", "M1": "no-eviction-candidate waits",
                 "M14": "allocation retries ('Failed to allocate memory object, retrying...': the NIXL/PD receive "
                        "buffer is full, the receiver busy-waits)"}
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
        if self.counts.get("M14"):
            steps.append("NIXL/PD allocation retries: raise pd_buffer_size (or nixl_buffer_size) or lower the concurrent "
                         "long prompts sent to this receiver; collect the sender's log to see whether transfers stalled.")
        return [Finding(rule=self.code, severity="warning", title=self.title, summary=summary,
                        count=total, evidence=evidence,
                        measurements={**{f"count_{k}": v for k, v in self.counts.items()}, "by_rank": self.by_rank,
                                      "max_local_cpu_size_gb": size, **({"input_coverage": "fragment"} if pasted else {})},
                        causes=b.ranked(ceiling=0.6 if pasted else 0.85), next_steps=steps,
                        identity=f"pressure|{sorted(self.by_rank)}", first_seen=self.first_t)]

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
