"""KV011 — LMCache's pin or reference accounting went negative, with no shortfall in the input."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.kv_shortfall import complete_retrieve
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Evidence, Finding
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: a short load is in the input: KV001 weighs these warnings as that rank's signals instead
SHORTFALL_EVENTS = frozenset({"R2", "R3", "R4", "V1", "V2"})


@register
class NegativeAccounting(Rule):
    """LMCache's pin or reference count of a memory object went negative.

    Detects: ``Pin count of MemoryObj … is negative: N. Double unpin occurred somewhere`` and ``Ref count of
    MemoryObj … is negative: N. Double free occurred somewhere``, per rank, when the input holds no short
    load (with one, KV001 weighs them as that rank's signals).

    Why it matters: LMCache clamps the count back to 0 and goes on, so a chunk that a pending retrieve still
    needs is no longer pinned and can be evicted (or, for the reference count, freed and reused) before the
    load: a later ``Num retrieved tokens … num expected tokens`` error on that rank. The warning itself loses
    nothing yet, so a pasted warning alone is a warning, not a shortfall.

    Causes weighed: ``pin-accounting-bug`` (a double unpin / double free on the layerwise, blending or
    async-loading paths).

    Fix: upgrade LMCache (the pin fixes listed with the cause); collect that rank's retrieve lines and errors
    to see whether loads came up short.

    References: LMCache 0.3.3+ ``v1/memory_management.py`` (0.5.6 :846 pin, :787 ref; the clamp to 0 follows
    the warning).
    """

    code = "KV011"
    name = "lmcache-negative-accounting"
    title = "LMCache's pin or reference count went negative (double unpin / double free)"
    severity = "warning"
    family = "KV"
    cause_ids = ("pin-accounting-bug",)
    events = frozenset({"M5", "M6"}) | SHORTFALL_EVENTS

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.examples: list[Event] = []
        self.counts = {"M5": 0, "M6": 0}
        self.by_rank: dict[str, int] = {}
        self.shortfall = False

    def observe(self, ev: Event) -> None:
        if ev.id in SHORTFALL_EVENTS:
            if ev.id == "R4" and complete_retrieve(ev):
                return
            self.shortfall = True
            return
        self.counts[ev.id] += 1
        rank = ev.rec.origin.rank_label or "unknown"
        self.by_rank[rank] = self.by_rank.get(rank, 0) + 1
        if len(self.examples) < 4:
            self.examples.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        n = sum(self.counts.values())
        if not n or self.shortfall:
            return []
        b = CauseBoard()
        b.add("pin-accounting-bug", 0.6, **fix_and_confirm("pin-accounting-bug"))
        what = [f"{self.counts['M5']} negative pin count(s) (double unpin)"] if self.counts["M5"] else []
        what += [f"{self.counts['M6']} negative reference count(s) (double free)"] if self.counts["M6"] else []
        b.support("pin-accounting-bug", 3, f"{' and '.join(what)}: LMCache's own warning names the bug")
        b.oppose("pin-accounting-bug", 2, "no short load in the input: nothing is proven lost yet")
        ranks = ", ".join(f"{r}: {k}" for r, k in sorted(self.by_rank.items()))
        summary = (f"{' and '.join(what)} (by rank: {ranks}); LMCache set the count back to 0, so chunks a pending "
                   "retrieve needs can be evicted before their load. No short load is in the input; collect that "
                   "rank's 'Retrieved X out of Y' lines and 'Num retrieved tokens' errors to see whether loads came up short.")
        evidence = [Evidence(e.rec.path, e.rec.line, e.rec.display()[:600]) for e in self.examples]
        return [Finding(rule=self.code, severity="warning", title=self.title, summary=summary, count=n,
                        evidence=evidence, measurements={"negative_pin_counts": self.counts["M5"],
                                                         "negative_ref_counts": self.counts["M6"], "by_rank": self.by_rank},
                        causes=b.ranked(ceiling=0.6), identity=f"negative-accounting|{sorted(self.by_rank)}",
                        first_seen=rec_time(self.examples[0].rec))]
