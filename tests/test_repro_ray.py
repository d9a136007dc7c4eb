"""`--executor ray` on a local Ray instance, with the fake server (skipped when Ray is not installed).

Ray is not a test dependency of the project; run this with an environment that has it, e.g.
``/work/repro-cache/ray-venv/bin/python -m pytest tests/test_repro_ray.py``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from specdiag.repro.executors import run_ray
from specdiag.repro.materialise import DeviceSpec
from specdiag.repro.plan import WorkloadSpec, build_plan
from specdiag.repro.runner import RunOptions

ray = pytest.importorskip("ray")

FAKEPKGS = Path(__file__).parent / "repro_fixtures" / "fakepkgs"


def test_ray_executor_runs_every_cell_and_repeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ray's session dir holds AF_UNIX sockets (path limit 107 bytes): a short private dir, removed afterwards
    ray_tmp = tempfile.mkdtemp(prefix="sdray-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    state = tmp_path / "state"
    state.mkdir()
    plan = build_plan(
        sets=["lmcache=off", f"env.PYTHONPATH={FAKEPKGS}", f"env.FAKE_STATE_DIR={state}", "env.FAKE_DELAY_S=0"],
        toggles=["enforce_eager=true,false"], repeat=2)
    plan.workload = WorkloadSpec("distinct_prefixes", {"prompts": 2, "prompt_words": 10, "rounds": 1,
                                                       "repeats_back_to_back": 1, "concurrency": 2})
    device = DeviceSpec("cpu", sys.executable, "/nonexistent-model")
    seen = []
    try:
        results = run_ray(plan, device, tmp_path / "out", RunOptions(health_timeout_s=60, settle_s=0,
                                                                     use_engine=False),
                          lambda k, d: None, seen.append, threading.Event(), address="local")
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert sorted((r.cell, r.repeat) for r in results) == [
        ("enforce_eager=false", 0), ("enforce_eager=false", 1), ("enforce_eager=true", 0), ("enforce_eager=true", 1)]
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    assert all(r.workload["requests"] == 2 for r in results)
    assert len(seen) == 4
    assert len(list((tmp_path / "out" / "cells").iterdir())) == 4
