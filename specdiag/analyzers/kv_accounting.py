"""KV011 — LMCache's pin or reference accounting went negative, with no shortfall in the input.

One rule of the precursor family (``kv_precursors``): the lines prove a lost pin, not a lost load.
"""

from __future__ import annotations

from specdiag.analyzers.base import register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.kv_precursors import FORCED_UNPIN, LoadWatch, PrecursorRule
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard


@register
class NegativeAccounting(PrecursorRule):
    """LMCache's pin or reference count of a memory object went negative.

    Detects: ``Pin count of MemoryObj … is negative: N. Double unpin occurred somewhere`` and ``Ref count of
    MemoryObj … is negative: N. Double free occurred somewhere``, per rank, when the input holds no short
    load (with one, KV001 weighs them as that rank's signals). A negative pin count after the pin monitor's
    forced unpin on the same rank is left to KV012: the monitor set the count to 0, so the request's own
    unpin after its load goes below it — the timeout's consequence, not a double unpin.

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
    cause_ids = ("pin-accounting-bug",)
    precursors = frozenset({"M5", "M6"})
    measure = {"M5": "negative_pin_counts", "M6": "negative_ref_counts"}
    measure_zeros = True
    events = precursors | LoadWatch.events | FORCED_UNPIN

    def accept(self, ev: Event) -> bool:
        """A negative pin count after the pin monitor's forced unpin is that timeout's consequence (KV012)."""
        if ev.id in FORCED_UNPIN:
            self.note_forced(ev)
            return False
        return not (ev.id == "M5" and self.follows_forced(ev))

    def weigh(self, b: CauseBoard, ctx: Context) -> None:
        b.add("pin-accounting-bug", 0.6, **fix_and_confirm("pin-accounting-bug"))
        b.support("pin-accounting-bug", 3, f"{self._what()}: LMCache's own warning names the bug")

    def _what(self) -> str:
        what = [f"{self.counts['M5']} negative pin count(s) (double unpin)"] if self.counts["M5"] else []
        what += [f"{self.counts['M6']} negative reference count(s) (double free)"] if self.counts["M6"] else []
        return " and ".join(what)

    def describe(self) -> str:
        return self._what()

    def consequence(self) -> str:
        return ("LMCache set the count back to 0, so chunks a pending retrieve needs can be evicted before their load, "
                "which then comes up short on that rank.")
