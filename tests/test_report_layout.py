"""One layout of a finding (``specdiag.report.layout``): the parts are picked once from the Finding, and
every full renderer (terminal, HTML, markdown) shows the same ones, each with its own channel's escaping."""

from __future__ import annotations

import html
import io

from specdiag.findings import Cause, Evidence, Finding
from specdiag.report.html import render_html
from specdiag.report.layout import WHY_NOT_CAUSE, WHY_NOT_SETTING, finding_view
from specdiag.report.markdown import render_markdown
from specdiag.report.model import Report
from specdiag.report.terminal import render_terminal
from specdiag.report.text import finding_message
from specdiag.ruledocs import rule_table


def _finding(**kw) -> Finding:
    causes = [
        Cause("pin-timeout", 0.6, for_=["forced unpin at line 7"], against=["gap only 2 s"],
              fix="raise pin_timeout_sec", confirm_with="scrape lmcache:forced_unpin_count"),
        Cause("lookup-retrieve-eviction", 0.2, for_=["memory pressure"], fix="more CPU memory"),
        Cause(WHY_NOT_CAUSE, 0.01, against=["it only changes what is stored", "the prefix lay within the prompt"]),
    ]
    base = dict(rule="KV001", severity="error", title="LMCache retrieved fewer KV tokens",
                summary="Retrieved 0 of 256 tokens, on rank TP1.", count=2,
                evidence=[Evidence("b.log", 40, "ERROR Num retrieved tokens: 0"), Evidence("a.log", 9, "INFO lookup")],
                measurements={"missing_tokens": 256}, causes=causes, next_steps=["Include the scheduler log."])
    return Finding(**{**base, **kw})


def _report(f: Finding) -> Report:
    inputs = [{"path": "a.log", "lines": 50, "recognized": 50, "skipped": 0}]
    return Report(inputs=inputs, context={}, findings=[f], rules_run=["KV001"], rules=rule_table())


def _terminal(report: Report, width: int = 120) -> str:
    buf = io.StringIO()
    render_terminal(report, color=False, file=buf, width=width)
    return " ".join(buf.getvalue().split())


def test_the_top_cause_carries_the_findings_fix_and_confirming_experiment() -> None:
    v = finding_view(_finding())
    assert v.top is not None and v.top.id == "pin-timeout" and v.top.rank == 1
    assert (v.fix, v.confirm_with) == ("raise pin_timeout_sec", "scrape lmcache:forced_unpin_count")
    assert finding_view(_finding(causes=[])).fix == "" and finding_view(_finding(causes=[])).top is None


def test_the_popular_suspect_is_argued_only_when_it_is_not_the_top_cause() -> None:
    assert finding_view(_finding()).why_not.id == WHY_NOT_CAUSE
    first = _finding(causes=[Cause(WHY_NOT_CAUSE, 0.5), Cause("pin-timeout", 0.1)])
    assert finding_view(first).why_not is None


def test_the_primary_evidence_line_stays_marked_when_sorted_into_log_order() -> None:
    v = finding_view(_finding())
    assert v.primary.source == "b.log:40"
    ordered = v.evidence_in_log_order(8)
    assert [(e.source, e.primary) for e in ordered] == [("a.log:9", False), ("b.log:40", True)]
    assert [e.source for e in v.evidence_in_log_order(1)] == ["b.log:40"], "the limit applies before sorting"


def test_split_causes_names_the_rest_and_none_shows_all() -> None:
    v = finding_view(_finding())
    shown, rest = v.split_causes(1)
    assert [c.id for c in shown] == ["pin-timeout"] and [c.id for c in rest] == ["lookup-retrieve-eviction", WHY_NOT_CAUSE]
    assert v.split_causes(None) == (v.causes, ())


def test_an_unknown_severity_is_laid_out_as_info() -> None:
    assert finding_view(_finding(severity="fatal")).severity == "info"


def test_every_full_renderer_shows_the_same_parts_of_a_finding() -> None:
    report = _report(_finding())
    outputs = {"terminal": _terminal(report), "html": html.unescape(render_html(report)),
               "markdown": render_markdown(report).replace("\\", "")}  # markdown escapes _ as \_
    for name, out in outputs.items():
        for part in ("KV001", "LMCache retrieved fewer KV tokens", "Retrieved 0 of 256 tokens", "pin-timeout",
                     "0.60", "raise pin_timeout_sec", "scrape lmcache:forced_unpin_count", "b.log", "40",
                     "ERROR Num retrieved tokens: 0"):
            assert part in out, f"{name} lacks {part!r}"
    for name in ("terminal", "html"):  # the detailed layouts also argue both ways
        out = outputs[name]
        assert "forced unpin at line 7" in out and "gap only 2 s" in out, name
    for name, out in outputs.items():  # every full layout rejects the popular suspect with the same reasons
        assert f"Why not {WHY_NOT_SETTING}" in out.replace("`", ""), name
        assert "it only changes what is stored; the prefix lay within the prompt" in out, name
        assert "Include the scheduler log." in out, f"{name} lacks the next steps"


def test_every_full_renderer_says_when_the_finding_was_first_seen() -> None:
    from specdiag.timeutil import parse_ts

    for ts, shown in (("2026-05-06 15:56:03,745", "2026-05-06 15:56:03"), ("05-06 15:56:03", "05-06 15:56:03")):
        report = _report(_finding(first_seen=parse_ts(ts)))
        outputs = {"terminal": _terminal(report), "html": html.unescape(render_html(report)),
                   "markdown": render_markdown(report)}
        for name, out in outputs.items():
            assert f"{shown}" in out, (name, shown)
            assert "1972-" not in out, name  # a log without a year: no stand-in year


def test_log_text_in_a_finding_part_is_escaped_for_each_channel() -> None:
    hostile = "<b>x</b> \x1b[2J [a](javascript:1)"
    report = _report(_finding(causes=[Cause("pin-timeout", 0.6, fix=hostile)]))
    assert "\x1b" not in _terminal(report)
    page = render_html(report)
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    md = render_markdown(report)
    assert "<b>x</b>" not in md and "](javascript" not in md.replace("\\](", "")


def test_the_ci_message_names_the_causes_the_full_layouts_show_with_their_fixes() -> None:
    msg = finding_message(_finding())
    assert msg.splitlines() == ["Retrieved 0 of 256 tokens, on rank TP1. [2 occurrences]",
                                "Likely cause: pin-timeout (0.60)", "Fix: raise pin_timeout_sec",
                                "Confirm: scrape lmcache:forced_unpin_count",
                                "Also possible: lookup-retrieve-eviction (0.20) - fix: more CPU memory",
                                f"Also possible: {WHY_NOT_CAUSE} (0.01)"]
    assert finding_message(_finding(causes=[])).splitlines()[-1] == "Next: Include the scheduler log."


def test_each_shown_cause_keeps_its_own_fix_and_the_rest_are_only_named() -> None:
    from specdiag.report.layout import DEFAULT

    causes = [Cause(f"c{i}", 0.5 - i / 20, fix=f"fix {i}", confirm_with=f"confirm {i}") for i in range(6)]
    v = finding_view(_finding(causes=causes), DEFAULT)
    assert [(c.id, c.fix, c.confirm_with) for c in v.shown] == [(f"c{i}", f"fix {i}", f"confirm {i}") for i in range(4)]
    assert [c.id for c in v.also] == ["c4", "c5"]


def test_reasons_beyond_the_cap_are_counted_and_verbose_shows_them_all() -> None:
    from specdiag.report.layout import REASONS_SHOWN, VERBOSE

    many = Cause("pin-timeout", 0.6, for_=[f"for {i}" for i in range(5)], against=["a"])
    short = finding_view(_finding(causes=[many])).shown[0]
    assert len(short.for_) == REASONS_SHOWN and (short.more_for, short.more_against) == (5 - REASONS_SHOWN, 0)
    full = finding_view(_finding(causes=[many]), VERBOSE).shown[0]
    assert len(full.for_) == 5 and full.more_for == 0


def test_the_deployment_facts_say_when_no_speculation_was_seen() -> None:
    from specdiag.report.layout import deployment_rows

    rows = dict(deployment_rows({"vllm_version": "0.11.0", "speculative": None}))
    assert rows == {"vLLM": "0.11.0", "speculative": "off / not seen"}
    assert deployment_rows({}) == [], "nothing recognised: no block at all"


def test_verbose_terminal_shows_every_cause_in_full() -> None:
    causes = [Cause(f"c{i}", 0.5 - i / 20, fix=f"fix number {i}") for i in range(6)]
    buf = io.StringIO()
    render_terminal(_report(_finding(causes=causes)), verbose=True, color=False, file=buf, width=120)
    out = buf.getvalue()
    assert all(f"fix number {i}" in out for i in range(6)) and "also weighed" not in out


def test_a_failure_policy_taken_from_the_version_default_says_so() -> None:
    from specdiag.report.layout import _policy

    assert _policy({"kv_load_failure_policy": "none", "kv_load_failure_policy_source": "default for vLLM 0.11.0"}) \
        == "none (default for vLLM 0.11.0)"
    assert _policy({"kv_load_failure_policy": "fail", "kv_load_failure_policy_source": "observed"}) == "fail"
    assert _policy({}) is None
