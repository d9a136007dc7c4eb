"""Calibration: size a preset's workload on its base cell before the matrix runs.

A comparison about a capacity edge (a 4 MB Redis against a 1 GB one) means something only if the edge cell
had the chance to show the symptom: LMCache has to attempt loads there. How much traffic that takes depends
on the machine and the model, so a preset may declare a ``Calibration`` (``plan.py``): its base cell runs at
the preset's sizes, then at the larger sizes of its ladder, until the exposure the verdict counts
(``evidence.exposure``, the same numbers, not a second parser) reaches the threshold. The matrix then runs
with the sizes of the last step, and the record (every step's sizes and exposure, whether the threshold was
reached, why it stopped) goes into ``plan.json`` and the verdict's notes. Calibration cells are sizing runs
at other sizes: they are kept under ``calibration/`` in the run folder and never counted in the verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from specdiag.repro.plan import Calibration, Cell, Plan, WorkloadSpec, size_words
from specdiag.repro.verdict import CellResult

#: (base cell, workload at this step's sizes, step index) → the finished cell
RunStep = Callable[[Cell, WorkloadSpec, int], CellResult]

#: why calibration stopped → the words the record and the notes use
STOP_WORDS = {
    "threshold": "threshold reached",
    "limits": "the largest sizes allowed were tried",
    "budget-minutes": "the time budget was spent",
    "cell-failed": "the base cell did not run to the end",
    "lmcache-degraded": "LMCache ran in degraded mode in the base cell (no connector: nothing stored or loaded)",
    "stopped": "the run was stopped",
}


def _step_exposure(res: CellResult, exposure: str) -> int | None:
    """The base cell's count of ``exposure`` (None when the cell failed or the count was not recorded)."""
    from specdiag.repro import evidence as ev

    if res.status != "ok":
        return None
    n = ev.exposure(res).get(exposure)
    return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None


def run_calibration(plan: Plan, run_step: RunStep, stop: threading.Event,
                    clock: Callable[[], float] = time.monotonic,
                    on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the base cell at each size of the ladder until its exposure reaches the threshold.

    Stops at the threshold, at the end of the ladder (``limits``), when ``budget_minutes`` have passed
    before a step would start (the first step always runs), when the base cell fails (a larger workload does
    not fix a server that does not run), when LMCache ran degraded in it (nor one that stores nothing) or
    when ``stop`` is set. Sets ``plan.workload`` to the sizes chosen
    and ``plan.calibrated`` to the record, which it also returns; after Ctrl-C the steps that finished are
    recorded (stopped) before the interrupt goes on.
    """
    if plan.calibration is None:
        raise ValueError("the plan declares no calibration")
    steps: list[dict[str, Any]] = []
    try:
        why = _climb(plan, plan.calibration, run_step, stop, clock, on_step, steps)
    except KeyboardInterrupt:
        _record(plan, plan.calibration, steps, "stopped")
        raise
    return _record(plan, plan.calibration, steps, why)


def _climb(plan: Plan, cal: Calibration, run_step: RunStep, stop: threading.Event, clock: Callable[[], float],
           on_step: Callable[[dict[str, Any]], None] | None, steps: list[dict[str, Any]]) -> str:
    """The steps themselves, appended to ``steps`` as each finishes; returns why calibration stopped."""
    base = plan.cells()[0]
    t0 = clock()
    for i, params in enumerate(cal.ladder(plan.workload.params)):
        if stop.is_set():
            return "stopped"
        if i and clock() - t0 >= 60 * cal.budget_minutes:
            return "budget-minutes"
        started = clock()
        res = run_step(base, WorkloadSpec(plan.workload.kind, dict(params)), i)
        step = {"step": i, "sizes": cal.sizes(params), "status": res.status,
                cal.exposure: _step_exposure(res, cal.exposure), "seconds": round(clock() - started, 1),
                "dir": res.dir}
        steps.append(step)
        if on_step:
            on_step(step)
        if res.status != "ok":
            return "cell-failed"
        if res.log.get("markers", {}).get("lmcache_degraded"):
            return "lmcache-degraded"  # no size gives a load when LMCache stores nothing
        if (step[cal.exposure] or 0) >= cal.threshold:
            return "threshold"
    return "limits"


def _record(plan: Plan, cal: Calibration, steps: list[dict[str, Any]], why: str) -> dict[str, Any]:
    """Write the outcome into the plan: the workload at the chosen sizes, and the record."""
    ladder = cal.ladder(plan.workload.params)
    chosen = _chosen(steps, cal.sizes(plan.workload.params))
    record = {**cal.to_dict(), "base_cell": plan.cells()[0].name, "ladder": [cal.sizes(p) for p in ladder],
              "result": {"steps": steps, "chosen": chosen, "reached": why == "threshold", "stopped": why}}
    plan.workload = WorkloadSpec(plan.workload.kind, {**plan.workload.params, **chosen})
    plan.calibrated = record
    return record


def _chosen(steps: list[dict[str, Any]], own: dict[str, Any]) -> dict[str, Any]:
    """The sizes the matrix runs with: the last step whose base cell ran to the end (the largest tried that
    worked), else the preset's own sizes."""
    ok = [s for s in steps if s["status"] == "ok"]
    return dict(ok[-1]["sizes"]) if ok else dict(own)


# ------------------------------------------------------------------------------------------ words
def plan_words(cal: dict[str, Any]) -> list[str]:
    """What calibration would do, for ``--dry-run``: the base cell, the threshold, the limits, each step."""
    ladder = [s for s in cal.get("ladder") or [] if isinstance(s, dict)]
    budget = cal.get("budget_minutes")
    budget_txt = f"{budget:g}" if isinstance(budget, (int, float)) else "?"
    lines = [f"calibration: the base cell {cal.get('base_cell', '?')} runs first, at up to {len(ladder)} "
             f"size(s), until {_what(cal)} >= {cal.get('threshold', '?')} (no step starts after {budget_txt} "
             "min); the matrix then runs with the sizes of the last step that ran"]
    lines += [f"  step {i}: {size_words(s)}" for i, s in enumerate(ladder)]
    return lines


def _what(cal: dict[str, Any]) -> str:
    return str(cal.get("exposure", "loads_attempted")).replace("_", " ")


def _step_words(step: dict[str, Any], exposure: str) -> str:
    n = step.get(exposure)
    got = f"{n}" if isinstance(n, int) else f"– ({step.get('status', '?')})"
    sizes = step.get("sizes")
    return f"{size_words(sizes) if isinstance(sizes, dict) else '?'} → {got}"


def record_words(cal: Any) -> str | None:
    """One line for the verdict's notes and the run's output: what was chosen and what it gave, or, when the
    threshold was not reached, a plain warning that the matrix may be under-exposed. None when the plan has
    no calibration record (never calibrated, or a plan.json written before calibration existed)."""
    if not isinstance(cal, dict) or not isinstance(cal.get("result"), dict):
        return None
    res = cal["result"]
    exposure = str(cal.get("exposure", "loads_attempted"))
    steps = [s for s in res.get("steps") or [] if isinstance(s, dict)]
    chosen = res.get("chosen") if isinstance(res.get("chosen"), dict) else {}
    what, base = _what(cal), cal.get("base_cell", "?")
    tried = "; ".join(_step_words(s, exposure) for s in steps) or "no step ran"
    if res.get("reached") is True and steps:
        return (f"calibrated: {size_words(chosen)} → {steps[-1].get(exposure)} {what} in the base cell ({base}); "
                f"steps: {tried}")
    why = STOP_WORDS.get(str(res.get("stopped")), str(res.get("stopped")))
    return (f"calibration did NOT reach {cal.get('threshold', '?')} {what} in the base cell ({base}): {why}; "
            f"the matrix runs with {size_words(chosen) or 'the preset sizes'} and MAY BE UNDER-EXPOSED (too few "
            f"chances for the symptom: an absent or undecided result clears nothing); steps: {tried}")
