"""Every ``specdiag repro`` command that ``specdiag analyze`` prints (a cause's "Confirm:" experiment) runs as
printed on this machine: each is planned with ``--dry-run`` (nothing started) and must exit 0."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

import specdiag.analyzers as analyzers_pkg
from specdiag.analyzers.causes import CATALOG
from specdiag.cli import app

_CMD = re.compile(r"specdiag repro[^()\"]*")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose about repro is not a printed command)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def printed_commands() -> list[str]:
    """The repro commands in the rules' strings (fix and confirm texts, next steps) and the cause catalog."""
    found: set[str] = {c.confirm for c in CATALOG.values() if c.confirm.startswith("specdiag repro")}
    for path in Path(analyzers_pkg.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                found.update(m.group(0).strip().rstrip(".,;:") for m in _CMD.finditer(node.value))
    return sorted(found)


def test_the_rules_print_repro_commands_at_all() -> None:
    cmds = printed_commands()
    assert len(cmds) >= 10 and "specdiag repro --preset remote-eviction" in cmds


@pytest.mark.parametrize("cmd", printed_commands())
def test_each_printed_repro_command_plans_with_dry_run(cmd: str, tmp_path: Path) -> None:
    argv = shlex.split(cmd)
    assert argv[:2] == ["specdiag", "repro"] and not any("<" in a for a in argv), f"placeholder in {cmd!r}"
    r = CliRunner().invoke(app, argv[1:] + ["--dry-run", "--format", "json", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, f"{cmd!r}: {r.output}"
    plan = json.loads(r.stdout)
    assert plan["cells"] and plan["device"] in ("cpu", "cuda")


# ------------------------------------------------------------------------------------------ from analyze's output
TESTS = Path(__file__).parent
#: a printed command: ``specdiag repro`` and its flags with their values, up to the prose or box edge after it
_PRINTED = re.compile(r"specdiag repro(?: +--[\w-]+(?:[ =](?!--)[^\s|│;()\"']+)?)*")


def _inputs() -> list[list[str]]:
    """Every corpus case, pasted fragment and shipped example: the logs analyze is given for each."""
    cases = [sorted(str(p) for p in case.iterdir() if p.name != "expected.json" and not p.name.startswith("."))
             for folder in ("corpus", "fragments") for case in sorted((TESTS / folder).iterdir()) if case.is_dir()]
    cases += [[str(p)] for p in sorted((TESTS / "fragments_causes").glob("*.log"))]
    cases += [[str(p)] for p in sorted((TESTS.parent / "examples").glob("*/*.log"))]
    return [c for c in cases if c]


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def commands_analyze_prints() -> dict[str, str]:
    """The repro commands in analyze's JSON report and its wide terminal report, for every input, with the first
    input that printed each one."""
    runner, found = CliRunner(), {}
    for logs in _inputs():
        for fmt in ("json", "text"):
            r = runner.invoke(app, ["analyze", *logs, "--format", fmt], env={"COLUMNS": "2000", "NO_COLOR": "1"})
            assert r.exit_code in (0, 1), f"analyze {logs}: {r.output[-400:]}"
            texts = _strings(json.loads(r.stdout)) if fmt == "json" else r.stdout.splitlines()
            for text in texts:
                for m in _PRINTED.finditer(text):
                    found.setdefault(m.group(0).rstrip(".,;:"), Path(logs[0]).parent.name)
    return found


def test_every_repro_command_analyze_prints_on_the_corpus_runs_with_dry_run(tmp_path: Path) -> None:
    """Not the rules' source but what a user reads: each command analyze printed on a corpus case, a fragment
    or an example is run as printed, with ``--dry-run``, and must exit 0 and plan at least one cell."""
    printed = commands_analyze_prints()
    assert len(printed) >= 6 and "specdiag repro --preset remote-eviction" in printed, sorted(printed)
    failures = []
    for i, (cmd, case) in enumerate(sorted(printed.items())):
        argv = shlex.split(cmd)
        r = CliRunner().invoke(app, argv[1:] + ["--dry-run", "--format", "json", "--out", str(tmp_path / f"r{i}")])
        if r.exit_code != 0 or not json.loads(r.stdout or "{}").get("cells"):
            failures.append(f"{cmd!r} (printed for {case}): exit {r.exit_code}: {r.output[-300:]}")
    assert not failures, "\n".join(failures)
