"""Hostile strings from a log through every renderer: each output channel gets its own sanitiser.

The log is a real corpus case plus lines carrying terminal escapes (OSC 0 title, OSC 52 clipboard, clear
screen), a markdown image and ``javascript:`` link, raw HTML, a bidi override, ``]]>``, C0 controls,
``%0A::warning::`` and a spreadsheet formula — in a config value and in the exception of an engine crash,
so they reach findings, evidence and context. The files are named ``::warning title=x::all-clear.log`` and
``bad-<0xff>.log`` (not valid UTF-8).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from corpus_paths import CORPUS
from logbuilder import lmc, vllm

from specdiag.engine import analyze

MARK = "HOSTILE"
EVIL = (f"{MARK}\x1b]0;TITLE\x07\x1b[2J\x1b]52;c;aGVsbG8=\x07 ![img](http://evil.example/x.png) "
        "[click](javascript:alert(1)) <script>alert(1)</script> \u202eevil\u202c ]]> \x01\x0b "
        "%0A::warning::fake =HYPERLINK(\"http://evil\")")
WORKFLOW_NAME = "::warning title=x::all-clear.log"
BAD_NAME = b"bad-\xff.log"
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
C0 = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def _hostile_log() -> bytes:
    good = "".join(p.read_text() for p in sorted((CORPUS / "tp4-cpu-eviction-vllm011").glob("*.log")))
    extra = [
        lmc("Creating LMCacheEngine with config: {'chunk_size': 256, 'remote_url': 'redis://x" + EVIL + "'}",
            loc="cache_engine.py:80", proc="Worker_TP0 pid=11"),
        vllm("EngineCore failed to start.", level="ERROR", loc="core.py:1510", proc="EngineCore_DP0 pid=9"),
        "(EngineCore_DP0 pid=9) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=9)   File "x.py", line 1, in <module>',
        "(EngineCore_DP0 pid=9) RuntimeError: " + EVIL,
    ]
    return (good + "\n".join(extra) + "\n").encode("utf-8") + b"junk \xff\xfe bytes\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    data = _hostile_log()
    (d / WORKFLOW_NAME).write_bytes(data)
    try:
        with open(os.path.join(os.fsencode(d), BAD_NAME), "wb") as fh:
            fh.write(data)
    except OSError:  # a file system that refuses non-UTF-8 names
        pass
    cwd = os.getcwd()
    os.chdir(d)
    try:
        report = analyze(sorted(os.listdir(".")))
        yield d, report
    finally:
        os.chdir(cwd)


def _reaches(out: str) -> None:
    assert MARK in out, "the hostile text must reach this output, or the test proves nothing"


def _no_controls(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out
    assert not BIDI.search(out), "bidi override reaches the output"
    assert not C0.search(out), "C0 control reaches the output"
    out.encode("utf-8")  # no lone surrogate


def _no_workflow_command(out: str) -> None:
    for line in out.splitlines():
        assert not line.lstrip().startswith("::"), line


def test_terminal_shows_log_text_without_escapes_or_bidi(hostile) -> None:
    from specdiag.report.terminal import render_terminal

    buf = io.StringIO()
    render_terminal(hostile[1], verbose=True, color=False, file=buf)
    out = buf.getvalue()
    _reaches(out)
    _no_controls(out)


def test_terminal_keeps_its_own_styling_only(hostile) -> None:
    from rich.console import Console

    from specdiag.report import terminal

    buf = io.StringIO()
    real = terminal.Console
    terminal.Console = lambda **kw: Console(**{**kw, "force_terminal": True, "color_system": "standard"})
    try:
        terminal.render_terminal(hostile[1], verbose=True, color=True, file=buf)
    finally:
        terminal.Console = real
    out = buf.getvalue()
    _reaches(out)
    escapes = re.findall("\x1b[^m]{0,20}m?", out)
    assert escapes and all(re.fullmatch("\x1b\\[[0-9;]*m", e) for e in escapes), set(escapes) - {""}
    assert "\x07" not in out and not BIDI.search(out)


def test_json_is_valid_utf8_without_nan(hostile) -> None:
    from specdiag.report.json_report import render_json

    out = render_json(hostile[1])
    _reaches(out)
    doc = json.loads(out.encode("utf-8"))
    assert "NaN" not in out and "Infinity" not in out
    assert len(doc["inputs"]) == len(os.listdir(hostile[0]))


def test_markdown_has_no_raw_html_links_images_or_commands(hostile) -> None:
    from specdiag.report.markdown import render_markdown

    out = render_markdown(hostile[1])
    _reaches(out)
    _no_controls(out)
    _no_workflow_command(out)
    prose = re.sub(r"(?s)(`{3,})text\n.*?\n\1", "", out)  # fenced evidence blocks render literally
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", prose)  # so do code spans
    assert "<script" not in prose and "<img" not in prose
    assert "](" not in prose.replace("\\](", "").replace("\\]\\(", ""), "a live link or image"
    assert "![" not in prose.replace("\\!\\[", "")


def test_html_has_no_bidi_controls_or_log_markup(hostile) -> None:
    from specdiag.report.html import render_html

    out = render_html(hostile[1])
    _reaches(out)
    assert "<script>alert(1)" not in out
    assert not BIDI.search(out) and "\x1b" not in out and "\x07" not in out
    out.encode("utf-8")


def test_sarif_is_valid_and_names_the_undecodable_file_by_its_bytes(hostile) -> None:
    import jsonschema

    from specdiag.report.sarif import render_sarif

    out = render_sarif(hostile[1])
    _reaches(out)
    doc = json.loads(out.encode("utf-8"))
    schema = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(doc, schema)
    from specdiag.report.sarif import artifact_uri

    assert artifact_uri(os.fsdecode(BAD_NAME)) == "bad-%FF.log"  # the real bytes, percent-encoded
    assert artifact_uri(WORKFLOW_NAME).startswith("%3A%3Awarning")


def test_junit_is_well_formed_xml_1_0(hostile) -> None:
    from specdiag.report.junit import render_junit

    out = render_junit(hostile[1])
    _reaches(out)
    root = ET.fromstring(out.encode("utf-8"))
    assert root.tag == "testsuites"
    assert "\x1b" not in out and not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", out)
    assert "]]>" not in out


def test_github_annotations_are_one_command_per_line_with_escaped_properties(hostile) -> None:
    from specdiag.report.github import render_github

    out = render_github(hostile[1])
    _reaches(out)
    _no_controls(out)
    for line in out.splitlines():
        m = re.match(r"::(error|warning|notice)( [^:]*)?::", line)
        assert m, line
        assert "::" not in (m.group(2) or ""), "a file name broke out of its property"
    assert "%250A::warning::fake" in out  # the message's own %0A is not decoded by the runner


def test_gitlab_is_valid_utf8_json(hostile) -> None:
    from specdiag.report.gitlab import render_gitlab

    out = render_gitlab(hostile[1])
    _reaches(out)
    assert isinstance(json.loads(out.encode("utf-8")), list)


def test_text_format_and_stderr_carry_no_workflow_command(hostile, run_cli) -> None:
    d = hostile[0]
    code, out, err = run_cli("check", "--format", "text", WORKFLOW_NAME, cwd=str(d))
    assert code == 1, err
    _reaches(out)
    _no_workflow_command(out)
    _no_workflow_command(err)
    assert "\x1b" not in out and "\x07" not in out
    code, out, err = run_cli("check", "--format", "text", "::error::missing.log", cwd=str(d))
    assert code == 2 and "Traceback" not in err
    _no_workflow_command(err)


def test_csv_cells_never_start_a_formula() -> None:
    import pandas as pd

    from specdiag.metrics.frames import csv_text

    df = pd.DataFrame({"source": ["=HYPERLINK(\"http://evil\")", "+1+1", "-cmd", "@SUM(A1)", "\tx", "ok"],
                       "value": [1.0, -2.0, 3.0, 4.0, 5.0, 6.0]})
    rows = list(csv.reader(io.StringIO(csv_text(df))))
    for cell in (r[0] for r in rows[1:]):
        assert not cell.startswith(("=", "+", "-", "@", "\t")), cell
    assert [r[1] for r in rows[1:]][:2] == ["1.0", "-2.0"]  # numbers stay numbers


def test_metrics_csv_from_a_log_named_like_a_formula(tmp_path, run_cli) -> None:
    src = CORPUS / "spec-zero-acceptance-kv-consumer" / "decode.log"
    name = "=HYPERLINK(\"http:evil\").log"
    (tmp_path / name).write_bytes(src.read_bytes())
    code, out, err = run_cli("metrics", "--format", "csv", name, cwd=str(tmp_path))
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows) > 1
    for r in rows[1:]:
        for cell in r:
            if cell and cell[0] in "=+-@":
                float(cell)  # only numbers may start with a sign


def test_an_error_about_a_hostile_file_name_is_one_safe_line(run_cli, tmp_path) -> None:
    name = "x\n::warning::fake\x1b]0;T\x07.log"
    code, out, err = run_cli("analyze", name, cwd=str(tmp_path))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "\x1b" not in err and "\x07" not in err
    _no_workflow_command(err)
