"""Ctrl-C in the middle of a cell leaves no process, listening port or temp file behind.

A fake "vLLM server" (tests/repro_fixtures/fakepkgs/vllm/entrypoints/openai/api_server.py) is started through
the very same code path as the real one (materialise → ManagedProcess → health → workload): it spawns a
child that ignores SIGTERM and listens on a second port, writes a file into its TMPDIR and a socket-like
file named like LMCache's into the system temp dir.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from specdiag.repro import server as srv
from specdiag.repro.materialise import DeviceSpec
from specdiag.repro.plan import build_plan
from specdiag.repro.runner import RunOptions, run_cell

FAKEPKGS = Path(__file__).parent / "repro_fixtures" / "fakepkgs"


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


@pytest.fixture
def systmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private stand-in for /tmp so the test never touches the real one."""
    d = tmp_path / "systmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def wait_for(path: Path, timeout: float = 20.0, count: int = 1) -> list[dict]:
    """Wait until ``path`` (one JSON object per line, appended by the fake server) has ``count`` records."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            try:
                recs = [json.loads(ln) for ln in lines]
            except json.JSONDecodeError:
                recs = []
            if len(recs) >= count:
                return recs
        time.sleep(0.05)
    raise AssertionError(f"{path} never had {count} records")


def assert_nothing_left(state: Path, systmp: Path, servers: int = 1) -> None:
    for info in wait_for(state / "server.json", count=servers) + wait_for(state / "child.json", count=servers):
        assert not pid_alive(info["pid"]), f"pid {info['pid']} survived"
        assert not srv.port_is_listening(info["port"]), f"port {info['port']} still listening"
    assert list(systmp.iterdir()) == [], f"left in temp: {list(systmp.iterdir())}"


def fake_plan(state: Path, systmp: Path, delay: float = 0.5):  # type: ignore[no-untyped-def]
    return build_plan(sets=[
        "lmcache=off", f"env.PYTHONPATH={FAKEPKGS}", f"env.FAKE_STATE_DIR={state}", f"env.FAKE_SYSTMP={systmp}",
        f"env.FAKE_DELAY_S={delay}",
    ])


def test_keyboard_interrupt_mid_cell_leaves_nothing(tmp_path: Path, systmp: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    plan = fake_plan(state, systmp)
    device = DeviceSpec("cuda", sys.executable, "/nonexistent-model")

    def interrupt() -> None:
        wait_for(state / "child.json")  # the grandchild is up and listening
        raise KeyboardInterrupt

    opts = RunOptions(health_timeout_s=30, settle_s=0, stop_grace_s=2, use_engine=False, during_cell=interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_cell(plan.cells()[0], 0, plan.workload, device, tmp_path / "out", opts)
    assert_nothing_left(state, systmp)
    cell_dirs = list((tmp_path / "out" / "cells").iterdir())
    assert len(cell_dirs) == 1
    assert json.loads((cell_dirs[0] / "cell.json").read_text())["status"] == "interrupted"
    assert "fake server up" in (cell_dirs[0] / "vllm.log").read_text()


def test_normal_cell_runs_workload_and_cleans_up(tmp_path: Path, systmp: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    plan = fake_plan(state, systmp, delay=0.0)
    plan.workload = type(plan.workload)("distinct_prefixes", {"prompts": 2, "prompt_words": 20, "rounds": 1,
                                                              "repeats_back_to_back": 2, "concurrency": 2})
    device = DeviceSpec("cuda", sys.executable, "/nonexistent-model")
    opts = RunOptions(health_timeout_s=30, settle_s=0, stop_grace_s=2, use_engine=False)
    res = run_cell(plan.cells()[0], 0, plan.workload, device, tmp_path / "out", opts)
    assert res.status == "ok", res.error
    assert res.workload["requests"] == 4 and res.workload["failed"] == 0
    assert res.log["lookups"] == 4 and res.log["lookup_hit_tokens"] == 4 * 256
    assert res.metrics["prefix_cache_hit_pct"] == 50.0
    assert_nothing_left(state, systmp)


def test_server_exiting_early_is_reported_not_hung(tmp_path: Path, systmp: Path) -> None:
    mp = srv.ManagedProcess("bad", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
                            dict(os.environ), tmp_path / "bad.log").start()
    with pytest.raises(srv.ServerError, match="exited with code 3"):
        srv.wait_http_ok(f"http://127.0.0.1:{srv.free_port()}/health", mp, timeout_s=30, interval_s=0.1)
    mp.stop(grace_s=1)
    assert "boom" in (tmp_path / "bad.log").read_text()


def test_sigint_to_the_cli_mid_cell_leaves_nothing(tmp_path: Path) -> None:
    """The real thing: `specdiag repro` in its own process; cell 0 completes, SIGINT arrives while cell 1's
    workload is running. Both servers' trees must be gone and the verdict must keep cell 0."""
    state, systmp, out = tmp_path / "state", tmp_path / "systmp", tmp_path / "out"
    state.mkdir()
    systmp.mkdir()
    env = dict(os.environ, PYTHONPATH=f"{FAKEPKGS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               TMPDIR=str(systmp))
    model = tmp_path / "model"
    model.mkdir()
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"""
set: {{lmcache: "off", env.FAKE_STATE_DIR: "{state}", env.FAKE_SYSTMP: "{systmp}"}}
toggles:
  env.FAKE_DELAY_S: [0, 3]
workload: {{kind: distinct_prefixes, prompts: 4, prompt_words: 10, rounds: 2, repeats_back_to_back: 2,
           concurrency: 2, max_tokens: 2}}
""")
    cmd = [sys.executable, "-m", "specdiag", "repro", "--plan", str(plan), "--device", "cuda", "--model",
           str(model), "--python", sys.executable, "--out", str(out), "--no-engine", "--health-timeout", "30", "--stop-grace", "2"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(state / "child.json", timeout=60, count=2)  # the second cell's server tree is up
        time.sleep(1.0)  # inside cell 1's workload (each request takes 3 s)
        p.send_signal(signal.SIGINT)
        output, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, output.decode()
    assert_nothing_left(state, systmp, servers=2)
    verdict = json.loads((out / "verdict.json").read_text())
    assert any("interrupted" in n for n in verdict["notes"])
    assert [(r["cell"], r["status"]) for r in verdict["results"]] == [("env.FAKE_DELAY_S=0", "ok")]
    assert verdict["results"][0]["workload"]["requests"] == 16


def test_stop_is_idempotent_and_threads_can_stop_workload(tmp_path: Path) -> None:
    mp = srv.ManagedProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ),
                            tmp_path / "s.log").start()
    pid = mp.pid
    ev = threading.Event()
    ev.set()
    mp.stop(grace_s=2)
    mp.stop(grace_s=2)
    assert not pid_alive(pid)
    assert mp not in srv._LIVE


def test_multi_turn_appends_exact_output_token_ids(tmp_path: Path, systmp: Path) -> None:
    """Turn t+1 = turn t's token ids + the generated token ids + the new text's ids (no re-tokenisation)."""
    from specdiag.repro.plan import WorkloadSpec
    from specdiag.repro.workload import text

    state = tmp_path / "state"
    state.mkdir()
    plan = fake_plan(state, systmp, delay=0.0)
    wl = WorkloadSpec("multi_turn", {"conversations": 1, "turns": 3, "concurrency": 1, "prefix_words": 5,
                                     "turn_words": 3, "max_tokens": 2})
    device = DeviceSpec("cuda", sys.executable, "/nonexistent-model")
    res = run_cell(plan.cells()[0], 0, wl, device, tmp_path / "out",
                   RunOptions(health_timeout_s=30, settle_s=0, stop_grace_s=2, use_engine=False))
    assert res.status == "ok", res.error
    prompts = [json.loads(line) for line in (state / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 3 and all(isinstance(p, list) for p in prompts)
    first = [1] + [len(w) for w in (text(1, 5) + "\n" + text(100, 3)).split()]
    assert prompts[0] == first
    assert prompts[1] == first + [7, 8] + [len(w) for w in text(1000, 3).split()]
    assert prompts[2][: len(prompts[1]) + 2] == prompts[1] + [7, 8]
