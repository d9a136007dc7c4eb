"""Where cells run: one after another on this machine, or as Ray tasks across a cluster.

The local executor is the default and the tested one. The Ray executor submits each (cell, repeat) as a
task with ``num_gpus`` = the cell's TP size (0 on CPU) and ``num_cpus`` = 1; every task runs the same
``run_cell`` on whichever node Ray picks, so ``--out`` must be a path every node can write (a shared
filesystem). Ray is imported only when ``--executor ray`` is chosen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specdiag.repro.materialise import DeviceSpec
from specdiag.repro.plan import Cell, Plan
from specdiag.repro.runner import ProgressFn, RunOptions, run_cell
from specdiag.repro.verdict import CellResult

Job = tuple[Cell, int]


def jobs(plan: Plan) -> list[Job]:
    """Repeats interleaved (all cells once, then again) so a slow drift in the machine hits every cell."""
    return [(c, r) for r in range(plan.repeat) for c in plan.cells()]


def run_local(plan: Plan, device: DeviceSpec, out: Path, opts: RunOptions, progress: ProgressFn,
              on_result: Callable[[CellResult], None], stop: threading.Event) -> list[CellResult]:
    results = []
    for cell, rep in jobs(plan):
        if stop.is_set():
            break
        res = run_cell(cell, rep, plan.workload, device, out, opts, progress, stop)
        results.append(res)
        on_result(res)
    return results


def run_ray(plan: Plan, device: DeviceSpec, out: Path, opts: RunOptions, progress: ProgressFn,
            on_result: Callable[[CellResult], None], stop: threading.Event,
            address: str | None = None) -> list[CellResult]:
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("--executor ray needs the 'ray' package (extra 'repro')") from e
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)

    def _task(cell: Cell, rep: int) -> CellResult:
        return run_cell(cell, rep, plan.workload, device, out, RunOptions(
            health_timeout_s=opts.health_timeout_s, settle_s=opts.settle_s, use_engine=opts.use_engine))

    refs = {}
    for cell, rep in jobs(plan):
        gpus = int(cell.settings.get("tp", "1")) if device.kind == "cuda" else 0
        remote = ray.remote(num_gpus=gpus, num_cpus=1)(_task)
        refs[remote.remote(cell, rep)] = (cell, rep)
        progress("queued", {"cell": cell.name, "repeat": rep, "num_gpus": gpus})
    results = []
    try:
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in done:
                res = ray.get(ref)
                results.append(res)
                on_result(res)
            if stop.is_set():
                for ref in pending:
                    ray.cancel(ref, force=True)  # force kills the worker; its finally may not run
                break
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    return results


# ------------------------------------------------------------------------------------------ --repeat auto
@dataclass
class AutoBudget:
    """When ``--repeat auto`` stops adding rounds: at most ``runs`` cell runs and ``minutes`` of wall time
    (None = no limit of that kind); a round is every cell once, so a round is never cut in half."""

    runs: int | None = None
    minutes: float | None = None


def run_auto(cells: list[Cell], run_one: Callable[[Cell, int], CellResult], decided: Callable[[list[CellResult]], bool],
             budget: AutoBudget, stop: threading.Event, clock: Callable[[], float] = time.monotonic,
             max_rounds: int = 1000) -> tuple[list[CellResult], str]:
    """Run every cell once per round until ``decided(results)`` holds or the budget is spent.

    Returns the results and why it stopped: ``decided``, ``budget-runs``, ``budget-minutes``, ``stopped`` or
    ``max-rounds``. The first round always runs (a budget smaller than one round still gets one look).
    """
    results: list[CellResult] = []
    t0 = clock()
    for rnd in range(max_rounds):
        if rnd and budget.runs is not None and len(results) + len(cells) > budget.runs:
            return results, "budget-runs"
        if rnd and budget.minutes is not None and clock() - t0 >= 60 * budget.minutes:
            return results, "budget-minutes"
        for cell in cells:
            if stop.is_set():
                return results, "stopped"
            results.append(run_one(cell, rnd))
        if decided(results):
            return results, "decided"
    return results, "max-rounds"


def decisive(plan_dict: dict, results: list[CellResult]) -> bool:  # type: ignore[type-arg]
    """``--repeat auto``'s stopping rule: every suspect toggle (the preset's mapped toggles, else all) has a
    count-symptom comparison that decides it — it follows the toggle (p < ALPHA), is rejected, or appears with
    both values."""
    from specdiag.repro.verdict import build_verdict

    v = build_verdict(plan_dict, {}, [], results)
    toggles = [k for k, vs in (plan_dict.get("toggles") or {}).items() if len(vs) >= 2]
    suspects = [k for k in toggles if k in (plan_dict.get("causes") or {})] or toggles
    done = {d["toggle"] for d in v["differential"] if d.get("decision") in ("follows", "rejected", "not-necessary")}
    return bool(suspects) and all(k in done for k in suspects)
