"""Where cells run: one after another on this machine, or as Ray tasks across a cluster.

The local executor is the default and the tested one. The Ray executor submits each (cell, repeat) as a
task with ``num_gpus`` = the cell's TP size (0 on CPU) and ``num_cpus`` = 1; every task runs the same
``run_cell`` on whichever node Ray picks, so ``--out`` must be a path every node can write (a shared
filesystem). Ray is imported only when ``--executor ray`` is chosen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
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
