"""One story in every report format: the terminal (``text``), markdown and HTML layouts name the same causes,
in the same order, each with the same confidence, fix and confirming experiment, the same evidence lines in
the same (log) order, and the CI formats name the same causes with their fixes.

Each output is reduced to its words (markup, escapes and box drawing removed, whitespace collapsed) and the
layout's parts (``report.layout.finding_views``) are looked for in sequence, so a layout that shows a part
for one cause only, skips a cause, or orders them otherwise fails.
"""

from __future__ import annotations

import html
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from corpus_paths import CORPUS

from specdiag.engine import analyze
from specdiag.report.github import render_github
from specdiag.report.gitlab import render_gitlab
from specdiag.report.html import render_html
from specdiag.report.junit import render_junit
from specdiag.report.layout import (
    DEFAULT,
    VERBOSE,
    WHY_NOT_SETTING,
    FindingView,
    deployment_blocks,
    deployment_rows,
    finding_views,
)
from specdiag.report.markdown import render_markdown
from specdiag.report.sarif import render_sarif
from specdiag.report.terminal import render_terminal
from specdiag.report.text import render_text
from specdiag.sanitize import terminal_text

HERE = Path(__file__).resolve().parent
CASES = ["tp4-cpu-eviction-vllm011", "tp2-lookup-disagreement-vllm025", "repro-cpu-pin-timeout",
         "real-cpu-redis-flushall-shortfall"]
FRAGMENTS = ["frag-pin-timeout", "frag-user-two-lines", "frag-redis-evicted"]
_BOX = re.compile("[│╭╮╰╯─┃━]")
_TAG = re.compile(r"<script.*?</script>|<style.*?</style>|<[^>]+>", re.S)


def _words(s: str) -> str:
    return " ".join(s.split())


def _terminal(report, width: int, verbose: bool = False) -> str:
    buf = io.StringIO()
    render_terminal(report, color=False, file=buf, width=width, verbose=verbose)
    return _words(_BOX.sub(" ", buf.getvalue()))


def _markdown(report, verbose: bool = False) -> str:
    md = render_markdown(report, verbose=verbose)
    return _words(html.unescape(re.sub(r"\\(.)", r"\1", md).replace("`", "").replace("**", "")))


def _html(report, verbose: bool = False) -> str:
    return _words(html.unescape(_TAG.sub(" ", render_html(report, verbose=verbose))))


def _full_layouts(report, verbose: bool = False) -> dict[str, str]:
    return {"terminal": _terminal(report, 120, verbose), "terminal-narrow": _terminal(report, 80, verbose),
            "markdown": _markdown(report, verbose), "html": _html(report, verbose)}


def _logs(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.iterdir() if p.is_file() and p.suffix not in (".json", ".md", ".yaml"))


def _pod_stream(tmp_path: Path) -> str:
    """Two pods' lines interleaved by ``kubectl logs --prefix``: one file, two deployments."""
    adp = "lmcache.integration.vllm.vllm_v1_adapter"

    def pod(name: str, version: str, rank: int, expected: int) -> list[str]:
        cfg = (f"(EngineCore_DP0 pid=7) INFO 05-06 15:00:00 [core.py:93] Initializing a V1 LLM engine (v{version}) "
               f"with config: model='m-{name}', tensor_parallel_size=2, ")
        err = [f"(Worker_TP{rank} pid=100) [2026-05-06 15:5{i}:03,745] LMCache ERROR: Num retrieved tokens: 0, "
               f"num expected tokens: {expected} (vllm_v1_adapter.py:884:{adp})" for i in range(2)]
        return [f"[pod/{name}/vllm] {line}" for line in [cfg, *err]]

    a, b = pod("vllm-a", "0.11.0", 1, 512), pod("vllm-b", "0.20.1", 0, 768)
    log = tmp_path / "all.log"
    log.write_text("\n".join(x for pair in zip(a, b, strict=True) for x in pair) + "\n")
    return str(log)


def _find(out: str, part: str, start: int, what: str) -> int:
    i = out.find(_words(terminal_text(part)), start)
    assert i >= 0, f"{what}: {part[:80]!r} not found after offset {start}"
    return i


def _cause_at(out: str, rank: int, cid: str, conf: float, start: int, what: str) -> int:
    m = re.compile(rf"\b{rank}\.? {re.escape(cid)} [^A-Za-z]{{0,24}}{conf:.2f}").search(out, start)
    assert m, f"{what}: cause {rank}. {cid} ({conf:.2f}) not found after offset {start}"
    return m.end()


def _assert_story(out: str, views: list[FindingView], name: str) -> None:
    """Every view's parts, in order: title, each shown cause with its fix and confirmation, the causes only
    named, why not save_decode_cache, the evidence sources in log order, the next steps."""
    pos = 0
    for v in views:
        what = f"{name} {v.rule}"
        pos = _find(out, v.title, pos, what)
        for c in v.shown:
            pos = _cause_at(out, c.rank, c.id, c.confidence, pos, what)
            for part in (*c.for_, *c.against):
                _find(out, part, pos, what)
            if c.fix:
                pos = _find(out, "Fix: " + c.fix, pos, what)
            if c.confirm_with:
                pos = _find(out, "Confirm: " + c.confirm_with, pos, what)
        for c in v.also:
            pos = _find(out, f"{c.id} {c.confidence:.2f}", pos, what)
        if v.why_not is not None:  # the popular suspect, argued with the same reasons
            pos = _find(out, f"Why not {WHY_NOT_SETTING}: confidence {v.why_not.confidence:.2f}", pos, what)
            pos = _find(out, v.why_not_reasons, pos, what)
        for e in v.evidence_shown:
            pos = _find(out, e.where, pos, what)
        for step in v.next_steps:
            pos = _find(out, step, pos, what)


def _assert_same_story(report, verbose: bool = False) -> list[FindingView]:
    views = finding_views(report, VERBOSE if verbose else DEFAULT)
    assert views, "the case must have findings to compare"
    fixes = sum(1 for v in views for c in v.shown if c.fix)
    confirms = sum(1 for v in views for c in v.shown if c.confirm_with)
    for name, out in _full_layouts(report, verbose).items():
        _assert_story(out, views, name)
        # no more causes in full than the layout picked: one "Fix:" and one "Confirm:" per shown cause
        assert out.count("Fix: ") == fixes, name
        assert out.count("Confirm: ") == confirms, name
    return views


@pytest.mark.parametrize("case", CASES)
def test_every_full_layout_tells_the_same_story_for_a_corpus_case(case: str) -> None:
    _assert_same_story(analyze(_logs(CORPUS / case)))


def test_with_verbose_every_full_layout_shows_every_cause_alike() -> None:
    report = analyze(_logs(CORPUS / "tp4-cpu-eviction-vllm011"))
    views = _assert_same_story(report, verbose=True)
    assert all(not v.also for v in views) and sum(len(v.shown) for v in views) > 8


@pytest.mark.parametrize("case", FRAGMENTS)
def test_every_full_layout_tells_the_same_story_for_a_fragment(case: str) -> None:
    views = _assert_same_story(analyze(_logs(HERE / "fragments" / case)))
    steps = [s for v in views for s in v.next_steps]
    for name, out in _full_layouts(analyze(_logs(HERE / "fragments" / case))).items():
        assert all(_words(terminal_text(s)) in out for s in steps), f"{name} lacks what to collect"


def test_every_full_layout_names_each_findings_deployment_in_a_merged_stream(tmp_path: Path) -> None:
    report = analyze([_pod_stream(tmp_path)])
    views = _assert_same_story(report)
    assert {v.deployment for v in views} == {"pod/vllm-a/vllm", "pod/vllm-b/vllm"}
    for name, out in _full_layouts(report).items():
        for v in views:
            assert f"{v.title} " in out and f"on {v.deployment}" in out, name
        for title, ctx in deployment_blocks(report):
            at = out.find(title)
            assert at >= 0, f"{name} lacks {title}"
            for key, value in deployment_rows(ctx):
                assert _words(f"{key}") in out[at:] and _words(terminal_text(value)) in out[at:], (name, key)


def test_every_full_layout_says_which_input_was_damaged_or_skipped(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes((CORPUS / "tp4-cpu-eviction-vllm011" / "vllm.log").read_bytes() + b"\x00\x01bin\x00\n")
    report = analyze([str(log)])
    assert report.inputs[0]["skipped"] > 0
    for name, out in _full_layouts(report).items():
        assert "1 line(s) skipped" in out and "(binary/NUL)" not in out, name  # in ingest's words only


def _ci_messages(report) -> dict[str, str]:
    gh = render_github(report)
    gh = gh.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
    gl = "\n".join(i["content"]["body"] for i in json.loads(render_gitlab(report)))
    sarif = "\n".join(r["message"]["text"] for r in json.loads(render_sarif(report))["runs"][0]["results"])
    root = ET.fromstring(render_junit(report))
    junit = "\n".join(el.text or "" for tag in ("failure", "system-out") for el in root.iter(tag))
    return {"github": gh, "gitlab": gl, "sarif": sarif, "junit": junit, "text": render_text(report)}


@pytest.mark.parametrize("case", ["tp4-cpu-eviction-vllm011", "tp2-lookup-disagreement-vllm025"])
def test_every_ci_format_names_the_shown_causes_and_their_fixes(case: str) -> None:
    report = analyze(_logs(CORPUS / case))
    views = finding_views(report)
    for name, out in _ci_messages(report).items():
        for v in views:  # junit groups findings by rule: each finding's message is checked on its own
            head = (v.summary or v.title).strip().splitlines()[0][:200]
            assert head in out, (name, v.rule)
            pos = out.index(head)
            for c in v.shown:
                assert c.id in out[pos:], (name, v.rule, c.id)
                pos = out.index(c.id, pos)
                if c.fix:
                    assert c.fix in out[pos:], (name, v.rule, c.id, "fix")
                    pos = out.index(c.fix, pos)


def test_sarif_carries_each_shown_cause_with_its_fix_and_confirmation() -> None:
    report = analyze(_logs(CORPUS / "tp4-cpu-eviction-vllm011"))
    views = {v.fingerprint: v for v in finding_views(report)}
    for r in json.loads(render_sarif(report))["runs"][0]["results"]:
        v = views[r["partialFingerprints"][next(iter(r["partialFingerprints"]))]]
        props = r["properties"]
        assert [(c["id"], c["fix"], c["confirmWith"]) for c in props.get("causes", [])] == \
            [(c.id, c.fix, c.confirm_with) for c in v.shown]
        assert [c["id"] for c in props.get("alsoWeighed", [])] == [c.id for c in v.also]
