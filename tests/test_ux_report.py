"""The terminal report as an on-call engineer meets it: the verdict first and last, an honest status when
nothing was found, a layout that fits narrow terminals, and no log text that can drive the terminal."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from logbuilder import lookup, shortfall_pair, write

from specdiag.analyzers.base import all_rules
from specdiag.engine import analyze
from specdiag.report.terminal import render_terminal
from specdiag.report.verdict import code_ranges, headline, shorten

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples/tp8-shortfall/serve.log")
HEALTHY = str(ROOT / "examples/healthy-ngram/serve.log")
DYNAMIC_K = str(ROOT / "examples/dynamic-k-stale-draft/serve.log")
SHORTFALL_VERDICT = "KV001 error — 6144 tokens (24 × 256) missing on TP2, request failed; most likely pin-accounting-bug"


def _render(paths: list[str], width: int = 120, **kw) -> str:
    buf = io.StringIO()
    render_terminal(analyze(paths, **kw), color=False, file=buf, width=width)
    return buf.getvalue()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_readme_first_command_shows_the_verdict_in_the_first_five_lines(run_cli) -> None:
    readme = (ROOT / "README.md").read_text()
    cmd = re.search(r"specdiag analyze (\S+)([^\n`]*)", readme)
    assert cmd, "the README's first screen runs specdiag analyze"
    args = ["analyze", cmd.group(1), *cmd.group(2).split()]
    code, out, err = run_cli(*args, cwd=str(ROOT))
    assert code in (0, 1), err
    assert SHORTFALL_VERDICT in _flat("\n".join(out.splitlines()[:5]))


def test_the_verdict_is_repeated_at_the_end() -> None:
    out = _render([EXAMPLE])
    tail = _flat("\n".join(out.rstrip().splitlines()[-12:]))
    assert SHORTFALL_VERDICT in tail
    assert "KV007 warning —" in tail


def test_one_verdict_line_per_rule_even_with_several_findings_of_it(tmp_path) -> None:
    lines = []
    for i, (exp, got) in enumerate(((8192, 7168), (4096, 2048))):
        lines += [lookup(f"r{i}", exp + 100, exp)] + shortfall_pair(f"r{i}", got, exp, proc=f"Worker_TP{i} pid={i}")
    rep = analyze([write(tmp_path / "a.log", lines)])
    kv001 = [f for f in rep.findings if f.rule == "KV001"]
    out = _render([str(tmp_path / "a.log")])
    head = out.split("Read 1 input")[0]
    assert head.count("KV001 error —") == 1
    if len(kv001) > 1:
        assert f"(+{len(kv001) - 1} more)" in head


@pytest.mark.parametrize("width", [60, 80])
def test_compact_layout_fits_narrow_terminals_without_boxes_or_tables(width) -> None:
    out = _render([EXAMPLE], width=width)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not any(ch in out for ch in "╭│╰")
    # causes are lines, not a table column squeezed to a word per line
    assert re.search(r"^1\. pin-accounting-bug\s+█", out, re.M)
    words_alone = [line for line in lines if re.fullmatch(r"\s*[A-Za-z]+\s*", line)
                   and line.strip() not in ("deployment", "timeline")]
    assert len(words_alone) <= 6, words_alone  # a squeezed table column gave dozens
    assert SHORTFALL_VERDICT in _flat("\n".join(lines[:8]))


def test_wide_layout_keeps_the_boxes() -> None:
    out = _render([EXAMPLE], width=140)
    assert "╭─ deployment" in out and "╭─ timeline" in out
    assert not [line for line in out.splitlines() if line.endswith(" ")]  # pasted reports carry no padding


def _first_line(out: str) -> str:
    return out.splitlines()[0]


def test_clean_log_says_no_problem_found_with_what_was_checked(run_cli) -> None:
    code, out, err = run_cli("analyze", HEALTHY)
    assert code == 0, err
    first = _first_line(out)
    assert "no problem found" in first and f"all {len(all_rules())} rules ran" in first


@pytest.mark.parametrize("content", [
    b"2026-05-06 12:00:00 nginx: GET /index.html 200\nanother program's log line\n",
    b"============ Serving Benchmark Result ============\nSuccessful requests: 100\n",
])
def test_non_vllm_input_says_nothing_was_recognised_on_stdout_first(run_cli, tmp_path, content) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(content)
    code, out, err = run_cli("analyze", str(p))
    assert code == 3 and "Traceback" not in err
    assert "nothing recognised" in _first_line(out)
    assert "no problem found" not in out.lower()


def test_an_indented_paste_nothing_recognised_is_not_called_healthy(run_cli, tmp_path) -> None:
    pair = shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1")
    p = tmp_path / "paste.log"
    p.write_text("".join("    " + line + "\n" for line in pair))
    code, out, err = run_cli("analyze", str(p))
    assert "no problem found" not in out.lower()
    if code == 3:
        assert "nothing recognised" in _first_line(out) and "indented" in out
    else:  # recognised after all: then the finding must be there
        assert "KV001" in "\n".join(out.splitlines()[:6])  # in the verdict block (suspect lines may lead)


@pytest.mark.parametrize("flags,expect", [
    (["--ignore", "KV"], "did not run (KV001–KV023"),
    (["--ignore", "KV,SD,SRV,LOG"], "no rule ran"),
])
def test_deselected_rules_are_never_reported_as_a_clean_bill(run_cli, flags, expect) -> None:
    code, out, err = run_cli("analyze", EXAMPLE, *flags)
    assert code == 0, err
    assert expect in _flat(out.split("Read 1 input")[0])
    assert "no problem found" not in out.lower()


def test_a_missing_input_is_named_in_the_status_and_the_rest_is_analysed(run_cli, tmp_path) -> None:
    code, out, err = run_cli("analyze", HEALTHY, str(tmp_path / "rank1.log"))
    assert code == 2
    status = _flat(out.split("Read 1 input")[0])
    assert "NOT READ" in status and "rank1.log" in status
    assert "no such file" in err and "Traceback" not in err
    assert "no problem found:" not in out


def test_escape_sequences_from_a_log_never_reach_the_terminal(tmp_path) -> None:
    evil = "r1\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b]0;owned\x07\x9b31m"
    p = write(tmp_path / "a.log", [lookup(evil, 9000, 8192)] + shortfall_pair(evil, 7168, 8192,
                                                                                 proc="Worker_TP0 pid=1"))
    rep = analyze([p])
    for color in (False, True):
        buf = io.StringIO()
        if color:  # a colour terminal: Rich's own styling escapes are allowed, the log's never
            render_terminal(rep, color=None, file=_Tty(buf), width=120)
        else:
            render_terminal(rep, color=False, file=buf, width=120)
        out = buf.getvalue()
        assert "\x1b]52" not in out and "\x1b[2J" not in out and "\x1b]0;" not in out and "\x9b" not in out
        if not color:
            assert "\x1b" not in out
        assert "KV001" in out


class _Tty(io.StringIO):
    def __init__(self, target: io.StringIO) -> None:
        super().__init__()
        self._t = target

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return self._t.write(s)


def test_timeline_has_a_time_axis_a_labelled_last_value_and_separate_marker_rows() -> None:
    out = _render([EXAMPLE])
    assert re.search(r"log time \(zone unknown\)\s+\d\d:\d\d:\d\d", out)
    assert re.search(r"draft acceptance rate\s+\S+.*last \d+%", out)
    # the finding and the shortfall fall in the same column: each has its own row, neither hides the other
    assert re.search(r"▲ finding ×\d+\s+.*▲", out) and re.search(r"! shortfall ×\d+\s+.*!", out)


def test_no_python_reprs_or_placeholders_leak_into_the_report() -> None:
    out = _render([DYNAMIC_K])
    ours = "\n".join(line for line in out.splitlines() if "pid=" not in line)  # evidence quotes the log verbatim
    assert "schedule [[" not in ours and "[(" not in ours and "TP0?" not in ours and "=[[" not in ours.replace(
        "per_batch_size=[[1, <max>, K]]", "")
    assert "batch 2–64: K=0" in out
    assert not re.search(r": [A-Za-z ]*\bN\b[A-Za-z ]*\bN\b", out)  # digit-normalised shapes


def test_headline_prefers_the_rule_headline_then_the_first_sentence() -> None:
    rep = analyze([EXAMPLE])
    kv007 = next(f for f in rep.findings if f.rule == "KV007")
    assert headline(kv007) == kv007.summary.split(". ")[0]
    kv001 = next(f for f in rep.findings if f.rule == "KV001")
    assert headline(kv001).startswith("6144 tokens (24 × 256) missing on TP2")
    assert shorten("a" * 50 + ": " + "b" * 80, 100) == "a" * 50
    assert code_ranges(["KV001", "KV002", "KV003", "KV005", "SD001"]) == "KV001–KV003, KV005, SD001"
