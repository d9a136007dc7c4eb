"""SD008 — draft positions past some depth are never or rarely accepted: K is larger than the drafter sustains."""

from __future__ import annotations

from specdiag.analyzers.base import register
from specdiag.analyzers.sd_common import (
    DEFINITIONS,
    SpecSeriesRule,
    ev_of,
    kmax_of,
    method_of,
    method_text,
    num,
    pooled_length,
    pooled_rate,
    schedule_of,
    span,
)
from specdiag.context import Context
from specdiag.findings import Cause, Finding
from specdiag.metrics.series import Interval
from specdiag.observe import RunState


def pooled_positions(items: list[Interval]) -> tuple[list[float], int] | None:
    """Each draft position's acceptance rate over ``items``, weighted by the interval's drafts (``num_drafts``,
    the rate's own denominator), and the drafts counted; None when no interval printed per-position rates with
    a draft count, or their lengths differ (K changed)."""
    rows = [(iv.pos, iv.ndrafts) for iv in items if iv.pos and iv.ndrafts]
    if not rows or len({len(p) for p, _ in rows}) != 1:
        return None
    drafts = sum(n for _, n in rows)
    return [sum(p[i] * n for p, n in rows) / drafts for i in range(len(rows[0][0]))], round(drafts)


def dead_tail(rates: list[float], max_rate: float) -> int:
    """The first position of the run of positions at the end whose acceptance is at most ``max_rate`` (len
    when the last position is accepted above it)."""
    j = len(rates)
    while j > 0 and rates[j - 1] <= max_rate:
        j -= 1
    return j


@register
class DraftPositionsNeverAccepted(SpecSeriesRule):
    """Draft positions past some depth are never or rarely accepted: K is larger than the drafter sustains.

    Detects: a fixed K whose per-position acceptance rates (``Per-position acceptance rate: …`` on the
    SpecDecoding line, pooled over the intervals by their drafts) are at most ``max_rate`` for the last
    ``min_dead`` or more positions (or, said as rarely rather than never accepted and at a lower confidence, at most
    ``low_rate``), over at least ``min_drafts`` drafts, while the first position is accepted
    at least ``min_first_rate`` (a drafter that barely works at all is SD002's or SD004's). A position is accepted only when every
    earlier one was, so a dead tail stays dead: those tokens are drafted and verified at every step and never
    kept. Under a dynamic-K schedule the tail is biased low by steps that drafted fewer tokens (SD006), so
    the rule stays silent there.

    Why it matters: every step still runs the drafter for all K positions (a forward pass each for a draft
    model or an EAGLE/MTP head) and verifies K+1 tokens; the dead positions cost that work and return
    nothing. The mean acceptance length says how many tokens a step really gains.

    Causes weighed: ``k-beyond-acceptance``.

    Fix: set ``num_speculative_tokens`` to the first dead position (or one more), then compare Accepted/Drafted
    and throughput; for an ngram/suffix drafter the cost is in verification, so the gain is smaller.

    References: vLLM ``v1/spec_decode/metrics.py`` (per-position rate = accepted at position i / num_drafts);
    reference ``spec-decode.md`` §4.
    """

    code = "SD008"
    name = "spec-draft-positions-never-accepted"
    title = "Draft positions past some depth are never or rarely accepted: K is larger than the drafter sustains"
    severity = "info"
    cause_ids = ("k-beyond-acceptance",)
    defaults = {"max_rate": 0.01, "low_rate": 0.1, "min_dead": 2, "min_drafts": 50, "min_first_rate": 0.1}

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if schedule_of(ctx):
            return []
        out = []
        for label, items in self.engines():
            spec = [iv for iv in items if iv.dr]
            pooled = pooled_positions(spec)
            if pooled is None:
                continue
            rates, drafts = pooled
            if drafts < self.options["min_drafts"] or rates[0] < self.options["min_first_rate"]:
                continue  # too few drafts, or a drafter that barely works at all (SD002/SD004's)
            for limit in (self.options["max_rate"], self.options["low_rate"]):  # never accepted, else rarely
                first_dead = dead_tail(rates, limit)
                if len(rates) - first_dead >= self.options["min_dead"]:
                    out.append(self._finding(ctx, label, spec, rates, drafts, first_dead, limit))
                    break
        return out

    def _finding(self, ctx: Context, label: str, spec: list[Interval], rates: list[float], drafts: int,
                 first_dead: int, limit: float) -> Finding:
        k = len(rates)
        dead = k - first_dead
        rate, acc, dr = pooled_rate(spec)
        mal = pooled_length(spec)
        stated = kmax_of(ctx)
        never = limit <= self.options["max_rate"]
        against = [] if stated in (None, k) else [f"the configuration states K={stated}, the lines print {k} positions"]
        if not never:  # rarely, not never: whether such a position pays is the drafter's cost against its tokens
            against.append(f"accepted up to {limit:.0%}, not never: each such position still returns that share of a "
                           "token per step, and whether it pays depends on what drafting and verifying it costs (a "
                           "draft model's or MTP head's forward): throughput at the smaller K decides")
        fix = (f"Set num_speculative_tokens to {max(1, first_dead)} (or {first_dead + 1}) and compare Accepted/Drafted "
               "and throughput before and after.")
        cause = Cause("k-beyond-acceptance", (0.8 if len(spec) >= 3 else 0.6) if never else 0.5,
                      for_=[f"positions {first_dead + 1}–{k} accepted at most {limit:.0%} over "
                            f"{drafts} drafts; a position is accepted only after every earlier one"],
                      against=against + ([f"{len(spec)} interval(s) only: a later stretch of traffic may accept deeper"]
                                         if len(spec) < 3 else []),
                      fix=fix, confirm_with="rerun the same traffic with the smaller K; the mean acceptance length "
                                            "should stay the same while draft time drops")
        shown = ", ".join(f"{r:.3f}" for r in rates)
        return Finding(
            rule=self.code, severity="info", title=self.title,
            summary=(f"{label}: K={k}; positions {first_dead + 1}–{k} ({dead} of {k}) were accepted at most "
                     f"{limit:.0%} of {drafts} drafts ({span(spec)}; per-position rates {shown}). "
                     f"Accepted {acc} of {dr} drafted tokens ({rate:.1%}), mean acceptance length {num(mal)}: each "
                     f"step drafts and verifies {dead} tokens that are {'never' if never else 'rarely'} kept. "
                     f"{method_text(method_of(ctx)).capitalize()}. "
                     f"[{DEFINITIONS}]"),
            count=len(spec), evidence=[ev_of(spec[0])] + ([ev_of(spec[-1])] if len(spec) > 1 else []),
            causes=[cause], identity=f"{self.code}|{label}|{k}|{first_dead}", first_seen=spec[0].t,
            headline=(f"{label}: positions {first_dead + 1}–{k} of K={k} {'never' if never else 'rarely'} accepted "
                      f"(at most {limit:.0%})"),
            measurements={"engine": label, "k": k, "first_dead_position": first_dead + 1, "dead_positions": dead,
                          "per_position_rates": [round(r, 4) for r in rates], "drafts": drafts, "intervals": len(spec),
                          "accepted_tokens": acc, "drafted_tokens": dr, "mean_acceptance_length": mal and round(mal, 3)},
            next_steps=[fix, f"Confirm: {cause.confirm_with}"],
        )
