"""docs/ci.md: its YAML parses, its pre-commit hook matches .pre-commit-hooks.yaml, and the documented
``specdiag check`` command lines run as written (on a corpus log)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specdiag.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ci.md"


from corpus_paths import corpus_root  # noqa: E402


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_yaml_blocks_parse():
    ys = [yaml.safe_load(b) for b in blocks("yaml")]
    assert len(ys) >= 4
    gha = next(y for y in ys if isinstance(y, dict) and "jobs" in y)
    steps = next(iter(gha["jobs"].values()))["steps"]
    assert any("specdiag check" in str(s.get("run", "")) for s in steps)
    assert any(str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif") for s in steps)
    gl = next(y for y in ys if isinstance(y, dict) and "specdiag" in y)
    assert set(gl["specdiag"]["artifacts"]["reports"]) == {"codequality", "junit"}


def test_pre_commit_hook_matches_the_docs():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "specdiag-check" and hook["entry"] == "specdiag check"
    assert hook["language"] == "python"
    documented = next(y for y in (yaml.safe_load(b) for b in blocks("yaml"))
                      if isinstance(y, list) and y and y[0].get("id") == "specdiag-check")[0]
    for k, v in documented.items():
        assert hook[k] == v, k
    assert re.search(hook["files"], "logs/serve.log") and re.search(hook["files"], "logs/serve.log.gz")


def _commands() -> list[list[str]]:
    """The arguments after ``specdiag check logs/`` in every documented CI command (YAML run/script values
    and shell blocks)."""
    texts: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and node.strip().startswith("specdiag check logs/"):
            texts.append(node)

    for b in blocks("yaml"):
        walk(yaml.safe_load(b))
    for b in blocks("sh"):
        texts += [c for c in b.replace("\\\n", " ").splitlines() if c.startswith("specdiag check logs/")]
    out = []
    for t in texts:
        out.append(shlex.split(t.strip()[len("specdiag check logs/"):], comments=True))
    return out


@pytest.mark.skipif(not corpus_root().is_dir(), reason="corpus not found")
def test_documented_commands_run(tmp_path, monkeypatch):
    cmds = _commands()
    assert len(cmds) >= 2
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "serve.log").write_bytes((corpus_root() / "seed-minimal-variant" / "snippet.log").read_bytes())
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    for args in cmds:
        r = CliRunner().invoke(app, ["check", "logs/", "--no-config", *args],
                               env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"})
        assert r.exit_code in (0, 1), (args, r.output)
    for name in ("specdiag.sarif", "specdiag.json", "gl-code-quality.json", "specdiag-junit.xml"):
        assert (tmp_path / name).is_file(), name
    assert summary.read_text().startswith("## ")


@pytest.mark.skipif(not corpus_root().is_dir(), reason="corpus not found")
def test_problem_matcher_matches_text_output(monkeypatch):
    import json

    (matcher,) = [json.loads(b) for b in blocks("json") if "problemMatcher" in b]
    pat = matcher["problemMatcher"][0]["pattern"][0]
    rx = re.compile(pat["regexp"])
    monkeypatch.chdir(corpus_root())
    r = CliRunner().invoke(app, ["check", "tp4-cpu-eviction-vllm011", "tp2-lookup-disagreement-vllm025",
                                 "--no-config"])
    heads = [ln for ln in r.stdout.splitlines() if re.match(r"^\S+:\d+: (error|warning|info) ", ln)]
    assert heads
    for ln in heads:
        m = rx.match(ln)
        if " info " in ln.split(":", 2)[2][:7]:
            assert m is None
            continue
        assert m, ln
        assert (corpus_root() / m.group(pat["file"])).is_file()
        assert int(m.group(pat["line"])) >= 1 and m.group(pat["severity"]) in ("error", "warning")
