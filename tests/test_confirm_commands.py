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
