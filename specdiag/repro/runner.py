"""Run one cell end to end and keep everything it produced in its folder.

Cell folder (``<out>/cells/<cell>-r<k>/``): ``vllm.log`` (server output, what ``specdiag analyze`` reads),
``redis.log``, ``lmcache.yaml``, ``command.json`` (argument list + environment additions), ``metrics.prom``
(final ``/metrics``), ``workload.json`` and ``cell.json`` (the verdict inputs). Every process is stopped and
the cell's temp area removed in ``finally``, whatever happened — including Ctrl-C.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdiag.repro import server as srv
from specdiag.repro.materialise import CellSpec, DeviceSpec, RuntimeValues, materialise
from specdiag.repro.plan import Cell, WorkloadSpec
from specdiag.repro.verdict import CellResult, build_cell_result

if TYPE_CHECKING:
    from specdiag.repro.workload import WorkloadResult

ProgressFn = Callable[[str, dict[str, Any]], None]


@dataclass
class RunOptions:
    health_timeout_s: float = 420.0
    #: after the workload, wait so vLLM logs one more stats interval (VLLM_LOG_STATS_INTERVAL below)
    settle_s: float = 6.0
    stop_grace_s: float = 20.0
    use_engine: bool = True
    #: test hook: raise/do something while the server is up (e.g. simulate Ctrl-C)
    during_cell: Callable[[], None] | None = None


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


@dataclass
class _CellRun:
    """What a cell has started and measured so far. ``run_cell``'s ``finally`` reads it whatever failed, so a
    process is recorded here the moment it starts and the startup time the moment it is known."""

    procs: list[srv.ManagedProcess] = field(default_factory=list)
    startup_s: float | None = None
    wl: WorkloadResult | None = None
    redis_evicted_keys: int | None = None


def _prepare_cell(cell: Cell, repeat: int, device: DeviceSpec, cell_dir: Path,
                  tmp: srv.TempArea) -> tuple[CellSpec, int, int]:
    """Pick the cell's ports, materialise its command and write ``lmcache.yaml`` and ``command.json``.

    Returns the spec, the vLLM port and the Redis port (0 when the cell has no Redis).
    """
    port = srv.free_port()
    needs_redis = cell.settings.get("redis_maxmemory", "off") != "off"
    redis_port = srv.free_port() if needs_redis else 0
    rt = RuntimeValues(port=str(port), redis_port=str(redis_port), tmpdir=str(tmp.root),
                       cell_dir=str(cell_dir))
    spec = materialise(cell, device, rt)
    if spec.lmcache_yaml is not None and spec.lmcache_yaml_path:
        Path(spec.lmcache_yaml_path).write_text(spec.lmcache_yaml)
    _write_json(cell_dir / "command.json", {"cell": cell.name, "toggled": cell.toggled,
                                            "settings": cell.settings, "repeat": repeat, **spec.to_dict()})
    return spec, port, redis_port


def _start_servers(cell: Cell, spec: CellSpec, port: int, redis_port: int, cell_dir: Path, tmp: srv.TempArea,
                   opts: RunOptions, say: ProgressFn, run: _CellRun) -> None:
    """Start Redis (if wanted) and then vLLM, each recorded in ``run.procs`` as soon as it is up, and wait
    until vLLM answers /health."""
    if spec.redis:
        say("redis", {"cell": cell.name, "port": redis_port})
        redis = srv.ManagedProcess("redis", spec.redis.argv, dict(os.environ), cell_dir / "redis.log",
                                   cwd=str(tmp.root)).start()
        run.procs.append(redis)
        srv.wait_redis(redis_port, redis)
    env = dict(os.environ)
    env.update(spec.env)
    say("start", {"cell": cell.name, "port": port})
    vllm = srv.ManagedProcess("vllm", spec.argv, env, cell_dir / "vllm.log", cwd=str(tmp.root)).start()
    run.procs.append(vllm)
    run.startup_s = srv.wait_http_ok(f"http://127.0.0.1:{port}/health", vllm, opts.health_timeout_s)
    say("healthy", {"cell": cell.name, "startup_s": round(run.startup_s, 1)})


def _drive_workload(cell: Cell, workload: WorkloadSpec, port: int, cell_dir: Path, opts: RunOptions,
                    say: ProgressFn, stop: threading.Event | None, run: _CellRun, redis_port: int = 0) -> None:
    """Run the workload against the healthy server, let one more stats interval land in the log, then keep
    the final ``/metrics`` and the workload record."""
    if opts.during_cell:
        opts.during_cell()
    from specdiag.repro.workload import Client, run_workload

    run.wl = run_workload(workload, f"http://127.0.0.1:{port}", stop)
    say("workload", {"cell": cell.name, **run.wl.summary()})
    time.sleep(opts.settle_s)
    (cell_dir / "metrics.prom").write_text(Client(f"http://127.0.0.1:{port}").metrics_text())
    if redis_port:
        run.redis_evicted_keys = srv.redis_evicted_keys(redis_port)
    _write_json(cell_dir / "workload.json", run.wl.to_dict())


def _tear_down(cell: Cell, repeat: int, cell_dir: Path, tmp: srv.TempArea, status: str, opts: RunOptions,
               run: _CellRun) -> int | None:
    """Stop every started process (last started first), remove the temp area, and after Ctrl-C leave a
    ``cell.json`` saying so. Returns the vLLM log's size before stopping: what vLLM prints while being
    stopped is not a symptom."""
    log_path = cell_dir / "vllm.log"
    stop_offset: int | None = None
    if log_path.exists():
        stop_offset = log_path.stat().st_size
    # after Ctrl-C the user is waiting: a short grace, then SIGKILL
    grace = min(opts.stop_grace_s, 5.0) if status == "interrupted" else opts.stop_grace_s
    for p in reversed(run.procs):
        p.stop(grace_s=grace)
    tmp.cleanup()
    if status == "interrupted":
        _write_json(cell_dir / "cell.json", {"cell": cell.name, "repeat": repeat, "status": status})
    return stop_offset


def run_cell(cell: Cell, repeat: int, workload: WorkloadSpec, device: DeviceSpec, out_dir: Path,
             opts: RunOptions | None = None, progress: ProgressFn | None = None,
             stop: threading.Event | None = None) -> CellResult:
    """Start Redis (if the cell wants it) and vLLM, drive the workload, scrape /metrics, tear down, count."""
    opts = opts or RunOptions()
    say = progress or (lambda _k, _d: None)
    cell_dir = out_dir / "cells" / f"{cell.slug}-r{repeat}"
    cell_dir.mkdir(parents=True, exist_ok=True)
    tmp = srv.TempArea.create()
    run = _CellRun()
    status, error = "error", ""
    stop_offset: int | None = None
    try:
        spec, port, redis_port = _prepare_cell(cell, repeat, device, cell_dir, tmp)
        _start_servers(cell, spec, port, redis_port, cell_dir, tmp, opts, say, run)
        _drive_workload(cell, workload, port, cell_dir, opts, say, stop, run, redis_port)
        status = "ok"
    except srv.ServerError as e:
        status, error = "server-failed", str(e)
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted"
        raise
    except Exception as e:  # keep the cell's folder and the other cells going
        status, error = "error", f"{type(e).__name__}: {e}"
    finally:
        stop_offset = _tear_down(cell, repeat, cell_dir, tmp, status, opts, run)
    say("stopped", {"cell": cell.name, "status": status})
    result = build_cell_result(cell.name, cell.toggled, repeat, cell_dir, status, error, run.startup_s, run.wl,
                               stop_offset, use_engine=opts.use_engine)
    if run.redis_evicted_keys is not None:
        result.log["redis_evicted_keys"] = run.redis_evicted_keys
    _write_json(cell_dir / "cell.json", result.to_dict())
    return result
