"""The one format table (``specdiag/report/formats.py``): every format renders through both commands, a name
means the same output on both, jsonl is one finding per line and escapes like json, and an unknown format
is the contract's usage error listing the table's names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.report.formats import FORMATS, Renderer

ROOT = Path(__file__).resolve().parent.parent
TP8 = str(ROOT / "examples" / "tp8-shortfall" / "serve.log")


def invoke(*args: str):
    return CliRunner().invoke(app, [*args, "--no-config", "-q"], env={"NO_COLOR": "1", "GITHUB_ACTIONS": ""})


@pytest.fixture(scope="module")
def tp8_findings() -> int:
    r = invoke("analyze", TP8, "-f", "json")
    return len(json.loads(r.stdout)["findings"])


def test_the_table_holds_every_format_and_each_is_a_renderer() -> None:
    assert set(FORMATS) == {"text", "lines", "json", "jsonl", "markdown", "sarif", "github", "junit", "gitlab",
                            "html"}
    for name, r in FORMATS.items():
        assert isinstance(r, Renderer) and r.name == name
        assert r.description and r.extension.startswith(".") and not r.binary


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_renders_tp8_through_analyze(tmp_path, name) -> None:
    out = tmp_path / f"r{FORMATS[name].extension}"
    r = invoke("analyze", TP8, "-f", name, "-o", str(out))
    assert r.exit_code == 1, r.stderr  # the example's KV001 is an error
    assert out.read_text(encoding="utf-8").strip()
    on_stdout = invoke("analyze", TP8, "-f", name)
    assert on_stdout.exit_code == 1 and on_stdout.stdout.strip()


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_renders_tp8_through_check(tmp_path, name) -> None:
    out = tmp_path / f"r{FORMATS[name].extension}"
    r = invoke("check", TP8, "-f", f"{name}:{out}")
    assert r.exit_code == 1, r.stderr
    assert out.read_text(encoding="utf-8").strip()


@pytest.mark.parametrize("name", [n for n in FORMATS if n != "text"])  # text: check adds its gate line
def test_a_name_means_the_same_output_on_both_commands(tmp_path, name) -> None:
    a, c = tmp_path / "a", tmp_path / "c"
    invoke("analyze", TP8, "-f", name, "-o", str(a))
    invoke("check", TP8, "-f", f"{name}:{c}")
    strip = re.compile(r'"(?:startTimeUtc|endTimeUtc|timestamp)":\s*"[^"]*"|time="[^"]*"|timestamp="[^"]*"|took [\d.]+ s')
    assert strip.sub("", a.read_text(encoding="utf-8")) == strip.sub("", c.read_text(encoding="utf-8"))


TIMING = re.compile(r" in [\d.]+ s\.")


def test_text_on_check_is_the_analyze_report_plus_the_gate_line(tmp_path) -> None:
    """``--format text`` is one renderer on both commands — the terminal report without colour, verdict first
    and last — and ``check`` ends it with its gate line (how many findings reach --fail-on)."""
    a, c = tmp_path / "a.txt", tmp_path / "c.txt"
    # no -q: on analyze it means the verdict alone (on check, no notes on stderr)
    CliRunner().invoke(app, ["analyze", TP8, "-f", "text", "-o", str(a), "--no-config"], env={"NO_COLOR": "1"})
    invoke("check", TP8, "-f", f"text:{c}")
    at, ct = (TIMING.sub(" in N s.", p.read_text(encoding="utf-8")) for p in (a, c))
    errors = sum(f["severity"] == "error" for f in json.loads(invoke("analyze", TP8, "-f", "json").stdout)["findings"])
    assert errors > 0
    assert ct == at + f"specdiag check: {errors} findings at or above --fail-on error: the gate fails\n"
    assert at.startswith("specdiag: ") and "\x1b" not in ct and "╭─ deployment" in at
    on_stdout = invoke("check", TP8, "-f", "text")
    assert TIMING.sub(" in N s.", on_stdout.stdout) == ct


def test_the_gate_line_follows_fail_on() -> None:
    healthy = str(ROOT / "examples" / "healthy-ngram" / "serve.log")
    r = invoke("check", healthy, "-f", "text")
    assert r.exit_code == 0 and r.stdout.endswith("specdiag check: 0 findings at or above --fail-on error: "
                                                  "the gate passes\n")
    r = invoke("check", TP8, "-f", "text", "--fail-on", "never")
    assert r.exit_code == 0 and r.stdout.endswith("specdiag check: --fail-on never: no finding fails the gate\n")


def test_check_writes_lines_by_default_and_for_auto() -> None:
    """The CI layout (one ``path:line: severity CODE title`` line per finding) is ``lines``: check's default."""
    lines = invoke("check", TP8, "-f", "lines").stdout
    assert lines.startswith(TP8.replace(str(ROOT) + "/", "")) or ": error KV" in lines.splitlines()[0]
    assert invoke("check", TP8).stdout == lines == invoke("check", TP8, "-f", "auto").stdout
    assert "╭" not in lines and lines.rstrip().endswith("; fail-on error")


@pytest.mark.parametrize("command", ["analyze", "check"])
def test_jsonl_is_one_parseable_finding_per_line(command, tp8_findings) -> None:
    r = invoke(command, TP8, "-f", "jsonl")
    lines = r.stdout.splitlines()
    assert len(lines) == tp8_findings > 0
    report = json.loads(invoke("analyze", TP8, "-f", "json").stdout)
    for line, finding in zip(lines, report["findings"], strict=True):
        doc = json.loads(line)
        assert doc["schema"] == report["schema"] and doc["tool"] == report["tool"]
        assert {k: v for k, v in doc.items() if k not in ("schema", "tool")} == finding


@pytest.mark.parametrize("command", ["analyze", "check"])
def test_an_unknown_format_is_one_line_exit_2_naming_the_table(command) -> None:
    r = invoke(command, TP8, "-f", "yaml")
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("specdiag: error: unknown --format 'yaml'")
    for name in FORMATS:
        assert re.search(rf"\b{name}\b", line), name


def test_html_option_still_writes_beside_the_chosen_format(tmp_path) -> None:
    page = tmp_path / "r.html"
    r = invoke("analyze", TP8, "-f", "jsonl", "--html", str(page))
    assert r.exit_code == 1 and page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert all(json.loads(line) for line in r.stdout.splitlines())


def test_jsonl_escapes_hostile_text_like_json(tmp_path) -> None:
    from logbuilder import vllm

    from specdiag.engine import analyze
    from specdiag.report.json_report import render_json, render_jsonl

    evil = ("HOSTILE\x1b]0;T\x07 \u2028sep\u2029para\x85nel \ud800 <script> \x01\x0b \r\n"
            "::warning::fake")
    log = tmp_path / "serve.log"
    lines = [vllm("EngineCore failed to start.", level="ERROR", loc="core.py:1510", proc="EngineCore_DP0 pid=9"),
             "(EngineCore_DP0 pid=9) Traceback (most recent call last):",
             '(EngineCore_DP0 pid=9)   File "x.py", line 1, in <module>',
             "(EngineCore_DP0 pid=9) RuntimeError: " + evil]
    log.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    report = analyze([str(log)])
    out = render_jsonl(report)
    assert "HOSTILE" in out, "the hostile text must reach a finding, or the test proves nothing"
    out.encode("utf-8")  # no lone surrogate
    assert len(out.splitlines()) == len(out.split("\n")) - 1 == len(report.findings)  # no separator splits a line
    assert not re.search("[\x00-\x1f\x7f\x85\u2028\u2029]", out.replace("\n", ""))
    whole = json.loads(render_json(report))
    assert [json.loads(line)["rule"] for line in out.splitlines()] == [f["rule"] for f in whole["findings"]]
    for line, finding in zip(out.splitlines(), whole["findings"], strict=True):
        doc = json.loads(line)
        assert {k: v for k, v in doc.items() if k not in ("schema", "tool")} == finding


@pytest.mark.parametrize("fmt,html,built", [("json", False, 0), ("sarif", False, 0), ("text", False, 1),
                                             ("html", False, 1), ("json", True, 1)])
def test_the_timeline_is_built_only_for_a_report_that_draws_it(tmp_path, monkeypatch, fmt, html, built) -> None:
    """The terminal and HTML reports draw the timeline; building it for JSON or a CI format only cost time and
    memory (on a log of 64 engines, more than the series it comes from)."""
    from specdiag.metrics.collector import MetricsCollector

    calls = []
    real = MetricsCollector.timeline

    def counted(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(MetricsCollector, "timeline", counted)
    args = ["analyze", str(TP8), "-f", fmt, "-o", str(tmp_path / "out"), "-j", "1"]
    if html:
        args += ["--html", str(tmp_path / "r.html")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (0, 1), res.output
    assert len(calls) == built
    calls.clear()  # check: the formats it writes decide, on stdout or to files
    specs = [f"{fmt}:{tmp_path / 'c.out'}"] + ([f"html:{tmp_path / 'c.html'}"] if html else [])
    res = CliRunner().invoke(app, ["check", str(TP8), "-j", "1", "--no-config", *(f for s in specs for f in ("-f", s))])
    assert res.exit_code in (0, 1), res.output
    assert len(calls) == built
    assert {n for n, r in FORMATS.items() if r.timeline} == {"text", "html"}
