"""Running a fleet: one task per deployment group on a process pool or a Ray cluster, merged here.

Tasks share nothing, so a group's result is the same wherever it ran; a task that fails (or whose worker
dies) is retried once and then kept as a row with its error — a deployment is never silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Any

from specdiag.deployments import InputGroup
from specdiag.engine import AnalyzeOptions, GroupResult, analyze_group
from specdiag.fleet.discover import discover
from specdiag.fleet.model import FleetReport, build_fleet_report, row_id
from specdiag.sanitize import error_text
from specdiag.workers import start_worker

RETRIES = 1
Outcome = tuple[InputGroup, GroupResult | None, str | None]


def run_fleet(roots: list[str], opts: AnalyzeOptions, *, executor: str = "local",
              ray_address: str | None = None) -> FleetReport:
    """Discover the roots' deployments, analyse each, and compare them."""
    groups = discover(roots)
    task_opts = replace(opts, jobs=1, paths=())
    if executor == "ray":
        outcomes = _run_ray(groups, task_opts, ray_address)
    else:
        outcomes = _run_local(groups, task_opts, opts.jobs or os.cpu_count() or 1)
    return build_fleet_report(outcomes)


def _run_local(groups: list[InputGroup], opts: AnalyzeOptions, jobs: int) -> list[Outcome]:
    if jobs <= 1 or len(groups) == 1:
        return [_serial(g, opts) for g in groups]
    results: dict[int, Outcome] = {}
    pending = list(range(len(groups)))
    for _attempt in range(RETRIES + 1):
        if not pending:
            break
        failed = []
        with ProcessPoolExecutor(max_workers=min(jobs, len(pending)), initializer=start_worker,
                                 initargs=(os.getpid(),)) as pool:
            futures = {i: pool.submit(analyze_group, groups[i], opts) for i in pending}
            for i, fut in futures.items():
                try:
                    results[i] = (groups[i], fut.result(), None)
                except BrokenProcessPool as e:
                    results[i] = (groups[i], None, f"worker died: {error_text(e, 300)}")
                    failed.append(i)
                except Exception as e:  # noqa: BLE001 - one deployment's failure is its row, not the fleet's
                    results[i] = (groups[i], None, error_text(e, 300))
                    failed.append(i)
        pending = failed
    return [results[i] for i in range(len(groups))]


def _serial(group: InputGroup, opts: AnalyzeOptions) -> Outcome:
    err = None
    for _attempt in range(RETRIES + 1):
        try:
            return group, analyze_group(group, opts), None
        except Exception as e:  # noqa: BLE001
            err = error_text(e, 300)
    return group, None, err


def _group_bytes(group: InputGroup) -> int:
    total = 0
    for p in group.paths:
        for dirpath, _dirs, files in os.walk(p) if os.path.isdir(p) else [(os.path.dirname(p), [], [os.path.basename(p)])]:
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(dirpath, f))
                except OSError:
                    pass
    return total


def _run_ray(groups: list[InputGroup], opts: AnalyzeOptions, address: str | None) -> list[Outcome]:
    """One Ray task per group, memory request sized from its bytes; Ray retries a lost task once."""
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("--executor ray needs the 'ray' package (pip install 'ray[default]')") from e
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    task: Callable[..., Any] = ray.remote(max_retries=RETRIES, retry_exceptions=True)(analyze_group)
    refs = []
    for g in groups:
        memory = 256 * 2**20 + min(_group_bytes(g) // 64, 2 * 2**30)  # engine RSS is flat; headroom for big pods
        refs.append(task.options(num_cpus=1, memory=memory).remote(g, opts))
    out: list[Outcome] = []
    for g, ref in zip(groups, refs, strict=True):
        try:
            out.append((g, ray.get(ref), None))
        except Exception as e:  # noqa: BLE001 - reported as the deployment's row
            out.append((g, None, error_text(e, 300)))
    return out


def run_fleet_from_events(store: str, opts: AnalyzeOptions) -> FleetReport:
    """The fleet report from an events store instead of raw logs (re-analysis after a rule change)."""
    from specdiag.deployments import StreamTally
    from specdiag.engine import deployment_runs
    from specdiag.store.reader import deployments_in, replay

    make = deployment_runs(replace(opts, jobs=1, paths=()))
    outcomes: list[Outcome] = []
    for dep_id in deployments_in(store):
        group = InputGroup(dep_id, (store,))
        try:
            result = replay(store, dep_id, make(dep_id))
        except Exception as e:  # noqa: BLE001 - a damaged partition is that deployment's row
            outcomes.append((group, None, error_text(e, 300)))
            continue
        stats = {"path": f"{store}:{dep_id}", "recognized": 1 if result.context or result.findings else 0}
        outcomes.append((group, GroupResult([result], [stats], StreamTally()), None))
    return build_fleet_report(outcomes)


def write_events(roots: list[str], out_dir: str, opts: AnalyzeOptions) -> list[str]:
    """Write the events store of every deployment under the roots; returns the deployment ids written."""
    from functools import partial

    from specdiag.events import CATALOG_EVENT, default_matcher
    from specdiag.store.reader import write_manifest

    all_events = frozenset(t.id for t in default_matcher().templates) | {CATALOG_EVENT}
    groups = discover(roots)
    ids: list[str] = []
    for group in groups:
        sink = partial(_sink_for_group, group.id, out_dir, all_events)
        result = analyze_group(group, replace(opts, jobs=1, paths=(), rules=False, observers=(sink,)))
        ids.extend(row_id(group.id, d.id) for d in result.deployments)
    write_manifest(out_dir, ids)
    return ids


def _sink_for_group(group_id: str, out_dir: str, all_events: frozenset[str], dep_id: str):
    from specdiag.store.writer import EventSink

    return EventSink(row_id(group_id, dep_id), out_dir, all_events)
