"""'No problem found' only when something was analysed: lines were recognised, at least one record reached
the rules, every selected rule ran, and (else it says "in what could be read") every line was read whole.

A recognised envelope is not an analysed record: a record cut at 1 MiB / 64 KiB, or one no template knows,
reaches no rule, and the silence of rules that saw nothing is no evidence of health.
"""

from __future__ import annotations

import io
from pathlib import Path

from specdiag.analyzers.base import all_rules
from specdiag.engine import analyze
from specdiag.report.markdown import render_markdown
from specdiag.report.terminal import render_terminal
from specdiag.report.verdict import status

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = ROOT / "examples" / "healthy-ngram" / "serve.log"
HDR = b"(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache INFO: "
DUMP = b"Creating LMCacheEngine with config: {'chunk_size': 256, 'x': '%s'} (cache_engine.py:109:lmcache.v1.cache_engine)\n"


def _status(*paths: Path):
    report = analyze([str(p) for p in paths], jobs=1)
    return report, status(report, list(all_rules()))


def _terminal(report) -> str:
    out = io.StringIO()
    render_terminal(report, color=False, file=out, width=200)
    return out.getvalue()


def test_a_log_that_is_one_over_long_record_is_not_called_healthy(tmp_path) -> None:
    path = tmp_path / "dump.log"
    path.write_bytes(HDR + DUMP % (b"a" * (2 << 20)))
    report, st = _status(path)
    assert report.recognized_lines == 1 and report.analysed == 0
    assert st.kind == "nothing-analysed"
    assert "no problem found" not in st.text and "not a clean bill of health" in st.text
    assert "cut" in st.text and "dump.log" in st.text  # what was skipped, by input
    assert any("whole lines" in h for h in st.hints)  # what to collect
    text = _terminal(report)
    assert "no problem found" not in text and text.count("nothing analysed") == 2  # verdict first and last


def test_records_no_template_knows_are_not_called_healthy(tmp_path) -> None:
    path = tmp_path / "unknown.log"
    path.write_bytes(b"".join(HDR + b"a message no template knows, number %d (foo.py:12:lmcache.foo)\n" % i
                              for i in range(20)))
    report, st = _status(path)
    assert st.kind == "nothing-analysed" and "20 lmcache records no template knows" in st.text
    assert any("INFO level" in h for h in st.hints)
    md = render_markdown(report)
    assert "No findings" not in md and "Nothing analysed" in md and "✅" not in md


def test_a_healthy_log_with_a_cut_line_is_clean_only_in_what_could_be_read(tmp_path) -> None:
    path = tmp_path / "serve.log"
    path.write_bytes(HEALTHY.read_bytes() + HDR + DUMP % (b"a" * (70 << 10)))
    _report, st = _status(path)
    assert st.kind == "partial"
    assert st.text.startswith("no problem found in what could be read:")
    assert "cut to 65,536 for parsing" in st.text and "serve.log" in st.text


def test_a_healthy_log_read_whole_is_still_no_problem_found() -> None:
    report, st = _status(HEALTHY)
    assert report.analysed > 0
    assert st.kind == "clean" and st.text.startswith("no problem found: ")
    assert "No findings." in render_markdown(report)
