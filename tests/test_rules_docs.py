"""Rule documentation: docs/rules/ is generated from the registry and must not be stale; `rules`, `explain`."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.analyzers.base import all_rules
from specdiag.cli import app
from specdiag.ruledocs import SECTIONS, generate_docs, parse_docstring, rule_doc

ROOT = Path(__file__).resolve().parent.parent


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_rule_docs", ROOT / "scripts" / "gen_rule_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(args):
    return CliRunner().invoke(app, args)


def test_docs_rules_is_fresh():
    stale = _gen_module().stale_files()
    assert not stale, f"docs/rules/ is stale ({', '.join(stale)}): run python scripts/gen_rule_docs.py"


def test_docs_cover_every_rule():
    files = generate_docs()
    for code in all_rules():
        assert f"{code}.md" in files
        assert f"[{code}]({code}.md)" in files["README.md"]


@pytest.mark.parametrize("code", list(all_rules()))
def test_every_rule_documents_itself(code):
    cls = all_rules()[code]
    d = rule_doc(cls)
    assert re.fullmatch(r"[A-Z]+\d{3}", code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", cls.name), "rule name must be kebab-case"
    assert cls.title and cls.severity in ("error", "warning", "info")
    assert not d.missing_sections(), f"{code} docstring lacks: {', '.join(d.missing_sections())}"


def test_parse_docstring():
    doc = """Summary line
    continues here.

    Detects: the thing
    over two lines.

    Second paragraph of detects.

    Fix: do ``this``.
    """
    summary, sections = parse_docstring(doc)
    assert summary == "Summary line continues here."
    assert sections["Detects"] == "The thing over two lines.\n\nSecond paragraph of detects."
    assert sections["Fix"] == "Do ``this``."


def test_gen_script_check_and_write(tmp_path):
    mod = _gen_module()
    assert set(mod.stale_files(tmp_path)) == set(generate_docs())
    (tmp_path / "OLD999.md").write_text("gone rule")
    mod.write(tmp_path)
    assert mod.stale_files(tmp_path) == []
    assert not (tmp_path / "OLD999.md").exists()


def test_rules_command_lists_every_rule():
    r = run(["rules"])
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == list(all_rules())
    for ln, cls in zip(lines, all_rules().values(), strict=True):
        tail = f"  [severity: {cls.severity_note}]" if cls.severity_note else ""  # policy-dependent severity
        assert ln.split()[1] == cls.severity and ln.rstrip().endswith(cls.title + tail)
    r = run(["rules", "--select", "KV", "--format", "json"])
    import json

    assert all(x["code"].startswith("KV") for x in json.loads(r.stdout))


def test_explain():
    r = run(["explain", "kv001"])
    assert r.exit_code == 0
    for s in SECTIONS:
        assert f"\n{s}:\n" in r.stdout
    assert "lookup-retrieve-eviction" in r.stdout
    by_name = run(["explain", all_rules()["KV001"].name])
    assert by_name.stdout == r.stdout
    md = run(["explain", "KV001", "--format", "markdown"])
    assert md.stdout == generate_docs()["KV001.md"]
    bad = run(["explain", "KV999"])
    assert bad.exit_code == 2 and "unknown rule" in bad.stderr
