"""CLI habits users of other linters expect: rule listings that wrap on a terminal, errors that name every
rule family, --exit-zero on analyze, shell completion."""

from __future__ import annotations

import io
import sys

from typer.testing import CliRunner

from specdiag.cli import app


def test_explaining_an_unknown_code_lists_every_rule_family() -> None:
    res = CliRunner().invoke(app, ["explain", "KV099"])
    assert res.exit_code == 2
    for family in ("KV001–KV023", "LOG001–LOG002", "SD001", "SRV001"):
        assert family in res.output


def test_rules_wrap_at_word_boundaries_on_a_terminal(monkeypatch) -> None:
    import shutil

    from specdiag.cli import rules as rules_cli
    from specdiag.engine import select_rules
    from specdiag.ruledocs import rule_doc

    out = io.StringIO()
    out.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(0, 0): shutil.os.terminal_size((80, 24)))
    rules_cli._rule_lines([rule_doc(c) for c in select_rules()])
    lines = out.getvalue().splitlines()
    assert lines and all(len(line) <= 80 or len(line.split()) == 1 for line in lines)  # no word is broken
    words = out.getvalue().split()
    assert "kv_load_failure_policy=recompute)," in words or "(kv_load_failure_policy=recompute)," in words


def test_rules_piped_keep_one_line_per_rule() -> None:
    res = CliRunner().invoke(app, ["rules"])
    assert res.exit_code == 0 and all(line[:2].isalpha() for line in res.output.splitlines())


def test_analyze_exit_zero_keeps_reporting(tmp_path) -> None:
    log = tmp_path / "x.log"
    log.write_text("(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num "
                   "expected tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)\n")
    assert CliRunner().invoke(app, ["analyze", str(log), "-q"]).exit_code == 1
    res = CliRunner().invoke(app, ["analyze", str(log), "-q", "--exit-zero"])
    assert res.exit_code == 0 and "KV001" in res.output


def test_shell_completion_is_offered() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert "--install-completion" in res.output and "--show-completion" in res.output


def test_brief_sits_between_quiet_and_the_full_report() -> None:
    from pathlib import Path

    log = str(Path(__file__).resolve().parent.parent / "examples/tp8-shortfall/serve.log")
    env = {"NO_COLOR": "1", "COLUMNS": "100"}
    out = {lvl: CliRunner().invoke(app, ["analyze", log, "--fail-on", "never", *flag], env=env).output
           for lvl, flag in (("q", ["-q"]), ("brief", ["--brief"]), ("full", []))}
    assert len(out["q"].splitlines()) < len(out["brief"].splitlines()) < len(out["full"].splitlines())
    brief = out["brief"]
    assert "1. pin-accounting-bug" in brief and "2. lookup-retrieve-eviction" not in brief
    assert "── verdict" not in brief and "── verdict" in out["full"]
    res = CliRunner().invoke(app, ["analyze", log, "--brief", "-q"])
    assert res.exit_code == 2 and "one of -q, --brief, -v" in res.output
