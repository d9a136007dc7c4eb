"""Exposure before effect, then statistics, then words: how a repro's cells become a verdict.

A cell counts as evidence about a symptom only if it had the chance to show it: a shortfall needs a load
that was attempted (a lookup that promised ``need to load`` > 0 tokens), a failed request needs a request.
Cells that failed to start, errored or were interrupted are *excluded*; cells that ran but had no chance are
*not exposed*; both are named in the verdict and never counted either way. Between cells that differ in one
toggle (the other toggles held fixed), Fisher's exact test over exposed runs decides whether the symptom
follows the toggle; below ``ALPHA`` the words say "follows", otherwise "undecided" with the numbers and
the number of runs that would decide it if the rates held. The mechanism named with a decision is the
cause catalog's own text (``specdiag/analyzers/causes.py``), so repro and analyze tell one story.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specdiag.stats import ALPHA, describe_p, fisher_exact, wilson

if TYPE_CHECKING:
    from specdiag.repro.verdict import CellResult

#: the largest number of runs per value that "runs needed" looks at (beyond it: "more than 50")
MAX_RUNS_NEEDED = 50


# ------------------------------------------------------------------------------------------ exposure
def _int_or_none(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def exposure(r: CellResult) -> dict[str, Any]:
    """The cell's denominators, each None when its log or client record cannot give it.

    Loads attempted are lookups with ``need to load`` > 0 (LMCache logs one ``Reqid: …`` line per lookup);
    tokens retrieved come from ``Retrieved X out of Y`` lines when present, else promised minus the tokens the
    shortfall lines say were missing (a load that came up short is the only one LMCache reports).
    """
    log = r.log or {}
    has_log = bool(log.get("lines"))
    loads = _int_or_none(log, "loads") if has_log else None
    promised = _int_or_none(log, "lookup_need_load") if loads is not None else None
    if promised is None:
        retrieved = None
    elif log.get("retrieve_lines"):
        retrieved = _int_or_none(log, "retrieved_tokens")
    else:
        retrieved = max(0, promised - int(log.get("missing_tokens") or 0))
    return {
        "requests_sent": _int_or_none(r.workload, "requests"),
        "requests_served": _int_or_none(r.workload, "ok"),
        "lookups": _int_or_none(log, "lookups") if has_log else None,
        "lookups_with_hits": _int_or_none(log, "lookups_with_hits") if has_log else None,
        "loads_attempted": loads,
        "tokens_promised": promised,
        "tokens_retrieved": retrieved,
        "draft_tokens_by_phase": [p.get("drafted") for p in r.phases] if r.phases else None,
    }


def _opportunity(r: CellResult, sym: str) -> tuple[int | None, str]:
    """How many chances the cell had to show ``sym`` and what they are called (None: not recorded)."""
    exp = exposure(r)
    if sym == "shortfalls":
        return exp["loads_attempted"], "loads attempted"
    if sym == "failed_requests":
        return exp["requests_sent"], "requests sent"
    return 1, "started server"  # engine_crash: a server that started could crash


@dataclass(frozen=True)
class RunClass:
    """One run's standing for one symptom: ``excluded`` (failed/unstarted/condition failed), ``not-exposed``
    (no opportunity), or ``exposed`` with ``present`` saying whether the symptom appeared."""

    kind: str
    reason: str = ""
    present: bool = False


def classify(r: CellResult, sym: str) -> RunClass:
    """Excluded before not exposed before exposed: a failed cell says nothing, whatever it counted."""
    if r.status != "ok":
        return RunClass("excluded", r.status + (f" ({r.error[:80]})" if r.error else ""))
    failed = [c for c in (r.conditions or []) if c.get("ok") is False and c.get("scope", "cell") == "cell"]
    if failed:
        return RunClass("excluded", "condition failed: " + "; ".join(c["detail"] for c in failed))
    n, what = _opportunity(r, sym)
    if n is None:
        return RunClass("not-exposed", f"{what} not recorded")
    if n == 0:
        return RunClass("not-exposed", f"0 {what}")
    v = r.symptom(sym)
    return RunClass("exposed", present=bool(v and v > 0))


def cell_rate(rs: list[CellResult], sym: str) -> dict[str, Any]:
    """Per cell: symptom events per opportunity over its exposed runs, with the Wilson interval."""
    hits = n = 0
    for r in rs:
        if classify(r, sym).kind != "exposed":
            continue
        opp, _ = _opportunity(r, sym)
        hits += min(int(r.symptom(sym) or 0), opp or 0)
        n += opp or 0
    rate = wilson(hits, n)
    return {"events": hits, "opportunities": n, "low": round(rate.low, 4), "high": round(rate.high, 4),
            "text": rate.describe()}


# ------------------------------------------------------------------------------------------ comparison
@dataclass
class Arm:
    """One toggle value within one context: exposed runs, those with the symptom, and the runs left out."""

    value: str
    present: int = 0
    exposed: int = 0
    left_out: list[str] = field(default_factory=list)

    def words(self, key: str) -> str:
        return f"{self.present}/{self.exposed} exposed runs with {key}={self.value}"


def runs_needed(a: Arm, b: Arm) -> int | None:
    """Exposed runs per value that would make the difference decisive if the observed rates held; None when
    an arm has no exposed run (no rate to project) or the rates are equal (no run count decides it)."""
    if not a.exposed or not b.exposed:
        return None
    pa, pb = a.present / a.exposed, b.present / b.exposed
    if pa == pb:
        return None
    for n in range(max(a.exposed, b.exposed, 2), MAX_RUNS_NEEDED + 1):
        x, y = round(pa * n), round(pb * n)
        if fisher_exact(x, n - x, y, n - y) < ALPHA:
            return n
    return MAX_RUNS_NEEDED + 1


def _common_with_both(a: Arm, b: Arm) -> bool:
    """The toggle is rejected as a cause, not merely "not necessary", when flipping it left the symptom as
    common as before: present in at least half the exposed runs of each value, with at least two exposed runs
    per value (one run each way shows presence, not how common it stays)."""
    return all(x.exposed >= 2 and 2 * x.present >= x.exposed for x in (a, b))


def compare(key: str, a: Arm, b: Arm) -> dict[str, Any]:
    """Fisher's exact test over the exposed runs of two values; the decision and its words."""
    p = fisher_exact(a.present, a.exposed - a.present, b.present, b.exposed - b.present)
    hi, lo = (a, b) if (a.present * max(b.exposed, 1)) >= (b.present * max(a.exposed, 1)) else (b, a)
    nums = f"present in {hi.words(key)}, {lo.words(key)} ({describe_p(p)})"
    if not a.exposed and not b.exposed:
        decision, text = "undecided", f"no exposed run with either value of {key}"
    elif not a.exposed or not b.exposed:
        missing = a if not a.exposed else b
        decision, text = "undecided", (f"undecided: {nums}; no exposed run with {key}={missing.value}, so no "
                                       "comparison yet")
    elif p < ALPHA:
        decision, text = "follows", f"follows {key}={hi.value}: {nums}"
    elif a.present and b.present and _common_with_both(a, b):
        decision, text = "rejected", (f"rejected: {nums} — it stays with {key}={lo.value}, so {key}={hi.value} "
                                      "is not necessary for it")
    elif a.present and b.present:
        decision, text = "not-necessary", (f"appears with both values: {nums} — {key}={hi.value} is not necessary "
                                           "for it")
    elif not (a.present or b.present):
        decision, text = "absent", f"absent: {nums}"
    else:
        need = runs_needed(a, b)
        more = (f"about {need} exposed runs per value would decide it if these rates held"
                if need and need <= MAX_RUNS_NEEDED else "more than 50 exposed runs per value would be needed")
        decision, text = "undecided", f"undecided: {nums}; {more}"
    return {"values": [a.value, b.value], "p": round(p, 4), "decision": decision, "words": text,
            "higher": hi.value, "arms": {x.value: {"present": x.present, "exposed": x.exposed,
                                                   "left_out": x.left_out} for x in (a, b)}}


def arms_by_context(results: list[CellResult], key: str, sym: str) -> dict[tuple, dict[str, Arm]]:
    """Runs grouped by the other toggles' values (the context), then by this toggle's value."""
    out: dict[tuple, dict[str, Arm]] = {}
    for r in results:
        if key not in r.toggled:
            continue
        ctx = tuple(sorted((k, x) for k, x in r.toggled.items() if k != key))
        arm = out.setdefault(ctx, {}).setdefault(r.toggled[key], Arm(r.toggled[key]))
        c = classify(r, sym)
        if c.kind == "exposed":
            arm.exposed += 1
            arm.present += c.present
        else:
            arm.left_out.append(f"{r.cell} r{r.repeat}: {'excluded, ' if c.kind == 'excluded' else 'not exposed, '}"
                                f"{c.reason}")
    return out


def ctx_words(ctx: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in ctx)


# ------------------------------------------------------------------------------------------ mechanism
def mechanism(cause_id: str | None) -> dict[str, str] | None:
    """The cause catalog's row for the preset's mechanism: the id and the words analyze prints for it."""
    if not cause_id:
        return None
    from specdiag.analyzers.causes import CATALOG

    row = CATALOG.get(cause_id)
    return {"id": cause_id, "mechanism": row.mechanism} if row else None
