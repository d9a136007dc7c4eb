"""Calibration: the base cell sizes the workload (loads attempted >= threshold) before the matrix runs.

Cells are run by fakes whose loads attempted are a function of the workload they are given (what a real
edge cell does: more prompts and more reuse give LMCache more chances to load), so every expectation
below follows from the ladder and the fake, not from a recorded result.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.repro.calibrate import record_words, run_calibration
from specdiag.repro.plan import Calibration, PlanError, build_plan, size_words
from specdiag.repro.verdict import CellResult

MODEL = "/models/m"
PY = "/opt/venv/bin/python"


def loads_of(params: dict) -> int:
    """The fake edge cell: loads attempted grow with prompts x reuse, and shorter prompts help."""
    return (params.get("prompts", 16) * params.get("repeats_back_to_back", 2) * 560
            // params.get("prompt_words", 560) // 4)


def result(cell, params: dict, rep: int = 0, status: str = "ok", loads: int | None = None,
           folder: str = "") -> CellResult:
    n = loads_of(params) if loads is None else loads
    return CellResult(cell=cell.name, toggled=cell.toggled, repeat=rep, status=status, dir=folder,
                      log={"lines": 40, "lookups": n, "loads": n, "shortfalls": 0, "markers": {}},
                      workload={"requests": 64, "ok": 64, "failed": 0})


def stepper(status_at: dict[int, str] | None = None, loads: int | None = None):
    """A fake executor for calibration steps: records (cell, sizes, step) and answers with ``result``."""
    calls: list[tuple[str, dict, int]] = []

    def run_step(cell, workload, k: int) -> CellResult:
        calls.append((cell.name, dict(workload.params), k))
        return result(cell, workload.params, status=(status_at or {}).get(k, "ok"), loads=loads,
                      folder=f"calibration/step{k}")
    return run_step, calls


# ------------------------------------------------------------------------------------------ the ladder
def test_ladder_doubles_halves_and_stops_at_the_limits() -> None:
    cal = Calibration(grow={"prompts": 2, "repeats_back_to_back": 2, "prompt_words": 0.5},
                      limits={"prompts": 40, "repeats_back_to_back": 3, "prompt_words": 300}, max_steps=9)
    sizes = [cal.sizes(p) for p in cal.ladder({"prompts": 16, "repeats_back_to_back": 2, "prompt_words": 560,
                                               "concurrency": 4})]
    assert sizes == [{"prompts": 16, "repeats_back_to_back": 2, "prompt_words": 560},
                     {"prompts": 32, "repeats_back_to_back": 3, "prompt_words": 300},
                     {"prompts": 40, "repeats_back_to_back": 3, "prompt_words": 300}]  # then nothing moves


def test_ladder_never_has_more_than_max_steps_and_keeps_the_other_parameters() -> None:
    cal = Calibration(grow={"prompts": 2}, limits={"prompts": 10**6}, max_steps=3)
    ladder = cal.ladder({"prompts": 5, "concurrency": 4})
    assert [p["prompts"] for p in ladder] == [5, 10, 20]
    assert all(p["concurrency"] == 4 for p in ladder)


# ------------------------------------------------------------------------------------------ stepping
def test_calibration_stops_at_the_first_step_that_reaches_the_threshold() -> None:
    plan = build_plan("remote-eviction")
    run_step, calls = stepper()
    rec = run_calibration(plan, run_step, threading.Event())
    ladder = plan.calibration.ladder(build_plan("remote-eviction").workload.params)
    first_enough = next(i for i, p in enumerate(ladder) if loads_of(p) >= 50)
    assert 0 < first_enough < len(ladder) - 1  # the fake leaves steps unrun: the stop is the threshold's
    assert [k for _, _, k in calls] == list(range(first_enough + 1))
    assert {name for name, _, _ in calls} == {"redis_maxmemory=4mb,save_decode_cache=false"}  # the base cell
    res = rec["result"]
    assert res["reached"] is True and res["stopped"] == "threshold"
    assert res["chosen"] == plan.calibration.sizes(ladder[first_enough])
    assert plan.workload.params == ladder[first_enough]  # the matrix runs at the chosen sizes
    assert plan.to_dict()["calibration"] == rec


def test_calibration_records_every_step_with_its_sizes_and_exposure() -> None:
    plan = build_plan("eviction")
    run_step, calls = stepper()
    steps = run_calibration(plan, run_step, threading.Event())["result"]["steps"]
    assert [s["sizes"] for s in steps] == [plan.calibration.sizes(p) for _, p, _ in calls]
    assert [s["loads_attempted"] for s in steps] == [loads_of(p) for _, p, _ in calls]
    assert [s["dir"] for s in steps] == [f"calibration/step{k}" for _, _, k in calls]
    assert all(s["status"] == "ok" and s["seconds"] >= 0 for s in steps)


def test_calibration_stops_at_the_largest_size_and_says_the_matrix_may_be_under_exposed() -> None:
    plan = build_plan("remote-eviction")
    ladder = plan.calibration.ladder(plan.workload.params)
    run_step, calls = stepper(loads=3)  # an edge cell that never loads enough
    rec = run_calibration(plan, run_step, threading.Event())
    assert len(calls) == len(ladder)
    assert rec["result"]["reached"] is False and rec["result"]["stopped"] == "limits"
    assert plan.workload.params == ladder[-1]  # goes on with the largest size tried
    words = record_words(rec)
    assert "did NOT reach 50 loads attempted" in words and "MAY BE UNDER-EXPOSED" in words
    assert "64 prompts, reuse 8, words per prompt 280" in words


def test_calibration_spends_no_more_than_its_time_budget_but_always_runs_one_step() -> None:
    plan = build_plan("eviction")
    now = [0.0]

    def clock() -> float:
        now[0] += 60.0 * plan.calibration.budget_minutes  # each look: a whole budget later
        return now[0]

    run_step, calls = stepper(loads=0)
    rec = run_calibration(plan, run_step, threading.Event(), clock=clock)
    assert len(calls) == 1 and rec["result"]["stopped"] == "budget-minutes"
    assert rec["result"]["chosen"] == plan.calibration.sizes(calls[0][1])


def test_a_base_cell_that_fails_stops_calibration_at_the_last_size_that_ran() -> None:
    plan = build_plan("eviction")
    run_step, calls = stepper({1: "server-failed"}, loads=0)
    rec = run_calibration(plan, run_step, threading.Event())
    assert len(calls) == 2 and rec["result"]["stopped"] == "cell-failed"
    assert rec["result"]["steps"][1]["loads_attempted"] is None  # a failed cell counted nothing, not 0
    assert rec["result"]["chosen"] == plan.calibration.sizes(calls[0][1])
    assert "did not run to the end" in record_words(rec)


def test_lmcache_in_degraded_mode_stops_calibration_at_once() -> None:
    """A base cell where LMCache found no connector stores nothing: no larger workload can give a load."""
    plan = build_plan("eviction")
    run_step, calls = stepper(loads=0)

    def degraded(cell, workload, k):  # type: ignore[no-untyped-def]
        res = run_step(cell, workload, k)
        res.log["markers"] = {"lmcache_degraded": 2}
        return res

    rec = run_calibration(plan, degraded, threading.Event())
    assert len(calls) == 1 and rec["result"]["stopped"] == "lmcache-degraded"
    assert "degraded mode" in record_words(rec)


def test_a_run_whose_calibration_finds_lmcache_degraded_stops_with_the_fix(tmp_path: Path, monkeypatch) -> None:
    from specdiag.repro import runner

    calls = fake_run(monkeypatch, loads=0)
    real = runner.run_cell

    def degraded(*a, **k):  # type: ignore[no-untyped-def]
        res = real(*a, **k)
        res.log["markers"] = {"lmcache_degraded": 1}
        return res

    monkeypatch.setattr(runner, "run_cell", degraded)
    r = run_cli(tmp_path, "--preset", "eviction")
    assert r.exit_code == 2, r.output
    assert "LMCache ran in degraded mode" in r.stderr and "specdiag repro setup --device cpu" in r.stderr
    assert len(calls) == 1  # the matrix never started
    assert "Traceback" not in r.output


def test_ctrl_c_during_calibration_keeps_the_steps_that_finished() -> None:
    plan = build_plan("eviction")
    done: list[int] = []

    def run_step(cell, workload, k: int) -> CellResult:
        if k == 1:
            raise KeyboardInterrupt
        done.append(k)
        return result(cell, workload.params, loads=1)

    with pytest.raises(KeyboardInterrupt):
        run_calibration(plan, run_step, threading.Event())
    assert plan.calibrated["result"]["stopped"] == "stopped"
    assert [s["step"] for s in plan.calibrated["result"]["steps"]] == done == [0]


# ------------------------------------------------------------------------------------------ plans
def test_presets_without_calibration_are_unchanged() -> None:
    for name in ("save-decode-cache", "dynamic-k", "pin-timeout"):
        plan = build_plan(name)
        assert plan.calibration is None and "calibration" not in plan.to_dict()
    with pytest.raises(PlanError, match="--calibrate: this plan declares no calibration"):
        build_plan("pin-timeout", calibrate=True)


def test_no_calibrate_and_a_plan_files_own_workload_keep_the_sizes_as_given() -> None:
    assert build_plan("eviction", calibrate=False).calibration is None
    own = build_plan(plan_yaml="preset: eviction\nworkload: {kind: distinct_prefixes, prompts: 8}\n")
    assert own.calibration is None and own.workload.params == {"prompts": 8}
    assert build_plan(plan_yaml="preset: eviction\nrepeat: 2\n").calibration is not None


# ------------------------------------------------------------------------------------------ command line
def dry(*args: str) -> CliRunner:
    r = CliRunner().invoke(app, ["repro", "--device", "cuda", "--model", MODEL, "--python", PY, "--out", "/runs/x",
                                 "--dry-run", *args])
    assert r.exit_code == 0, r.output
    return r


def test_dry_run_prints_the_calibration_plan_and_runs_nothing() -> None:
    out = dry("--preset", "remote-eviction").stdout
    assert ("# calibration: the base cell redis_maxmemory=4mb,save_decode_cache=false runs first, at up to 3 "
            "size(s), until loads attempted >= 50") in out
    assert "#   step 0: 16 prompts, reuse 2, words per prompt 560\n" in out
    assert "#   step 2: 64 prompts, reuse 8, words per prompt 280\n" in out
    data = json.loads(dry("--preset", "remote-eviction", "--format", "json").stdout)
    assert data["plan"]["calibration"]["result"] is None
    assert data["plan"]["calibration"]["ladder"][1] == {"prompts": 32, "repeats_back_to_back": 4, "prompt_words": 280}


def test_dry_run_without_calibration_says_nothing_of_it() -> None:
    assert "calibration" not in dry("--preset", "eviction", "--no-calibrate").stdout
    assert "calibration" not in dry("--preset", "pin-timeout").stdout
    r = CliRunner().invoke(app, ["repro", "--preset", "pin-timeout", "--calibrate", "--device", "cuda", "--model",
                                 MODEL, "--dry-run"])
    assert r.exit_code == 2 and "declares no calibration" in r.output


def test_from_run_shows_the_recorded_calibration(tmp_path: Path) -> None:
    plan = build_plan("eviction")
    run_step, _ = stepper()
    run_calibration(plan, run_step, threading.Event())
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_dict()))
    for cell in plan.cells():
        d = tmp_path / "cells" / f"{cell.slug}-r0"
        d.mkdir(parents=True)
        d.joinpath("cell.json").write_text(json.dumps(result(cell, plan.workload.params).to_dict()))
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path), "--format", "json"])
    assert r.exit_code == 0, r.output
    note = json.loads(r.stdout)["notes"][0]
    chosen = size_words(plan.calibration.sizes(plan.workload.params))
    assert note.startswith(f"calibrated: {chosen} → {loads_of(plan.workload.params)} loads attempted in the base "
                           "cell (max_local_cpu_size=0.004); steps: 16 prompts, reuse 2 → 8; ")
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path)])
    assert f"calibrated: {chosen}" in " ".join(r.stdout.split())
    assert f"calibrated: {chosen}" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("damaged", [{"result": "x"}, {"result": {"steps": "x", "chosen": 3}}, {"result": {}},
                                     {"result": {"reached": True, "steps": [{"sizes": "x"}, 7], "chosen": {"a": []}}}])
def test_from_run_with_a_damaged_calibration_record_still_reports(tmp_path: Path, damaged: dict) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"name": "eviction", "toggles": {"x": ["1", "2"]},
                                                    "calibration": damaged}))
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path), "--format", "json"])
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------------------------ a whole run
def fake_run(monkeypatch, loads: int | None = None) -> list[tuple[str, str, dict]]:
    """Replace the server-starting parts of a run: every cell is answered by ``result``."""
    from specdiag.repro import backends, executors, runner

    calls: list[tuple[str, str, dict]] = []

    def run_cell(cell, repeat, workload, device, out_dir, opts=None, progress=None, stop=None):
        calls.append((Path(out_dir).name, cell.name, dict(workload.params)))
        return result(cell, workload.params, repeat, loads=loads, folder=str(out_dir))

    monkeypatch.setattr(backends, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(backends, "ensure_model", lambda *a, **k: None)
    monkeypatch.setattr(runner, "run_cell", run_cell)
    monkeypatch.setattr(executors, "run_cell", run_cell)
    return calls


def run_cli(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["repro", *args, "--device", "cuda", "--model", MODEL, "--python", PY, "--out",
                                    str(tmp_path / "run"), "--format", "json", "--no-engine"])


def test_a_run_calibrates_first_prints_it_and_runs_the_matrix_at_the_chosen_sizes(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    calls = fake_run(monkeypatch)
    r = run_cli(tmp_path, "--preset", "eviction")
    assert r.exit_code == 0, r.output
    cal = [c for c in calls if c[0].startswith("step")]
    matrix = [c for c in calls if not c[0].startswith("step")]
    assert cal and calls[:len(cal)] == cal  # every calibration step before the first matrix cell
    assert all(params == cal[-1][2] for _, _, params in matrix) and len(matrix) == 2
    assert "calibration step 0: 16 prompts, reuse 2 → 8 loads attempted" in r.stderr
    assert "calibrated: 32 prompts, reuse 4 → 32 loads attempted" not in r.stderr  # 32 < 50: one more step
    assert f"calibrated: 64 prompts, reuse 8 → {loads_of(cal[-1][2])} loads attempted" in r.stderr
    saved = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert saved["workload"]["params"]["prompts"] == 64 and saved["calibration"]["result"]["reached"] is True
    verdict = json.loads((tmp_path / "run" / "verdict.json").read_text())
    assert verdict["notes"][0].startswith("calibrated: 64 prompts, reuse 8")
    assert len(verdict["results"]) == 2  # calibration cells are never counted in the verdict


def test_an_under_exposed_run_says_so_before_and_after_the_matrix(tmp_path: Path, monkeypatch) -> None:
    fake_run(monkeypatch, loads=2)
    r = run_cli(tmp_path, "--preset", "eviction")
    assert r.exit_code == 0, r.output
    warned = r.stderr.index("warning: calibration did NOT reach 50 loads attempted")
    assert "MAY BE UNDER-EXPOSED" in r.stderr[warned:].splitlines()[0]
    assert warned < r.stderr.index("max_local_cpu_size=0.004 r0: ok")  # said before the matrix's first cell
    assert "MAY BE UNDER-EXPOSED" in json.loads(r.stdout)["notes"][0]


def test_a_run_without_calibration_runs_only_the_matrix(tmp_path: Path, monkeypatch) -> None:
    calls = fake_run(monkeypatch)
    for args in (("--preset", "pin-timeout"), ("--preset", "eviction", "--no-calibrate")):
        calls.clear()
        r = run_cli(tmp_path, *args)
        assert r.exit_code == 0, r.output
        assert [c[0] for c in calls] == ["run"] * len(calls) and "calibration" not in r.stderr
        assert "calibration" not in json.loads((tmp_path / "run" / "plan.json").read_text())
