"""The HTML report without a browser: structure, escaping, CSP, embedded data, downsampling, repro page."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specdiag.findings import Cause, Evidence, Finding
from specdiag.report.html import (
    MAX_POINTS,
    build_chart_data,
    downsample,
    json_for_script,
    render_html,
    render_repro_html,
    write_html,
    write_repro_html,
)
from specdiag.report.model import Report
from specdiag.ruledocs import rule_table

CORPUS = Path(__file__).resolve().parent / "corpus"
EVIL = '<script>alert(1)</script> "><img src=x onerror=alert(1)> </script><!-- \u2028 & \x1b[31m \udcff'
T0 = 1761038000.0
UPLOT_SHA256 = "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f"


def rich_report(n: int = 400, evil: str = EVIL) -> Report:
    """A report with every timeline series, markers on several ranks and a finding quoting hostile text."""
    def pts(f):
        return [[T0 + i * 10, f(i)] for i in range(n)]

    series = {
        "mean_acceptance_length": ("tokens", lambda i: 2.6 if i < n * 0.6 else 1.1),
        "draft_acceptance_rate": ("ratio", lambda i: 0.55 if i < n * 0.6 else 0.03),
        "per_position_acceptance": ("ratio", lambda i: [0.8, 0.55, 0.3] if i < n * 0.6 else [0.05, 0.0, 0.0]),
        "prefix_cache_hit_rate": ("%", lambda i: 40 + 10 * math.sin(i / 20)),
        "external_prefix_cache_hit_rate": ("%", lambda i: 60 - 50 * i / n),
        "prompt_throughput": ("tokens/s", lambda i: 3000 + (i % 13) * 50),
        "generation_throughput": ("tokens/s", lambda i: 800 + (i % 7) * 10),
        "kv_cache_usage": ("%", lambda i: min(100.0, i / 3)),
        "running_reqs": ("reqs", lambda i: 20 + i % 7),
        "waiting_reqs": ("reqs", lambda i: max(0, i - n * 0.7)),
    }
    tl = {
        "series": {k: {"unit": u, "label": k.replace("_", " "), "points": pts(f), "by": None}
                   for k, (u, f) in series.items()},
        "markers": [
            {"t": T0 + n * 6, "kind": "shortfall", "label": f"retrieved 17152 of 20480 {evil}", "rank": "TP3",
             "rule": "KV001"},
            {"t": T0 + n * 7, "kind": "load_failure", "label": "failed to load 208 blocks", "rank": "TP1", "rule": None},
            {"t": T0 + n * 8, "kind": "preemption", "label": "preempted", "rank": None, "rule": None},
            {"t": T0 + n * 9, "kind": "error", "label": "EngineCore died", "rank": None, "rule": None},
        ],
    }
    f = Finding(
        rule="KV001", severity="error", title=f"LMCache retrieved fewer KV tokens {evil}",
        summary=f"expected 20480 − retrieved 17152 = 3328 missing {evil}", count=2,
        evidence=[Evidence("/logs/vllm.log", 514, f"(Worker_TP3 pid=303) LMCache ERROR: {evil}")],
        measurements={"expected_tokens": 20480, "ranks": ["TP2", "TP3"], "note": evil, "nan": float("nan"),
                      "by_rank": {"TP3": 6}},
        causes=[Cause("lookup-retrieve-eviction", 0.7, [f"for {evil}"], ["pins"], f"fix {evil}", "specdiag repro"),
                Cause("backend-read-failure", 0.04, [], ["no backend error"], "fix backend", "")],
        next_steps=[f"next {evil}"], first_seen=T0 + n * 6)
    g = Finding(rule="SD001", severity="warning", title="acceptance collapsed", first_seen=T0 + n * 5.9)
    return Report(
        inputs=[{"path": f"/logs/vllm.log{evil}", "lines": 1000, "recognized": 990, "skipped": 0,
                 "formats": ["vllm"], "errors": []}],
        context={"vllm_version": "0.11.0", "model": f"m{evil}", "tensor_parallel_size": 4,
                 "ranks_seen": ["TP0", "TP1", "TP2", "TP3"],
                 "speculative": {"method": "eagle3", "num_speculative_tokens": 4},
                 "lmcache_config": {"chunk_size": 256, "remote_url": evil}},
        findings=[f, g], timeline=tl, rules_run=["KV001"], unrecognized={"vllm": 3, "top_warnings": {evil: 2}},
        rules=rule_table())


def sample_verdict() -> dict:
    return {
        "schema": "specdiag.repro/1",
        "plan": {"name": "eviction", "description": "Evict between lookup and retrieve",
                 "toggles": {"max_local_cpu_size": ["0.004", "1.0"], "spec": ["off", "ngram"]}},
        "device": {"kind": "cpu"},
        "cells": [
            {"cell": "c01", "toggled": {"max_local_cpu_size": "0.004", "spec": "off"}, "runs": 2,
             "status": ["ok", "ok"], "shortfalls": [3.0, 5.0], "failed_requests": [0.0, 0.0], "errors": []},
            {"cell": "c02", "toggled": {"max_local_cpu_size": "0.004", "spec": "ngram"}, "runs": 1,
             "status": ["ok"], "shortfalls": [4.0], "errors": []},
            {"cell": "c03", "toggled": {"max_local_cpu_size": "1.0", "spec": "off"}, "runs": 1,
             "status": ["server-failed"], "shortfalls": [0.0], "errors": ["boom <b>"]},
            {"name": "c04", "toggles": {"max_local_cpu_size": "1.0", "spec": "ngram"}, "status": "ok",
             "symptoms": {"shortfalls": 0}},
        ],
        "differential": [{"toggle": "max_local_cpu_size", "symptom": "shortfalls",
                          "by_value": {"0.004": {"runs": 3, "mean": 4.0}, "1.0": {"runs": 2, "mean": 0.0}},
                          "conclusion": "max_local_cpu_size=0.004 reproduces the shortfall"}],
        "conclusions": ["max_local_cpu_size=0.004 reproduces the shortfall; 1.0 does not"],
        "notes": [],
        "results": [{"cell": "c01", "dir": "/runs/x"}],
    }


class _Collect(HTMLParser):
    """Elements, attributes and script/style blocks as the browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.blocks: list[tuple[str, dict, str]] = []
        self._open: tuple[str, dict] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("script", "style"):
            self._open = (tag, a)
            self._buf = []

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            self.blocks.append((tag, self._open[1], "".join(self._buf)))
            self._open = None

    def handle_data(self, data):
        if self._open:
            self._buf.append(data)
        else:
            self.text.append(data)


def _parse(page: str) -> _Collect:
    p = _Collect()
    p.feed(page)
    p.close()
    return p


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# ----------------------------------------------------------------------------------------------- tests
def test_page_is_self_contained_with_strict_csp():
    page = render_html(rich_report())
    p = _parse(page)
    csp = [a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(csp) == 1
    pol = dict(d.strip().split(" ", 1) for d in csp[0].split(";"))
    assert pol["default-src"] == "'none'" and pol["connect-src"] == "'none'" and pol["img-src"] == "data:"
    assert "unsafe-inline" not in csp[0] and "unsafe-eval" not in csp[0]
    assert pol["require-trusted-types-for"] == "'script'" and pol["trusted-types"] == "'none'"
    # the CSP appears before any script or style
    assert page.index("Content-Security-Policy") < page.index("<style") < page.index("<script")
    scripts = [b for b in p.blocks if b[0] == "script" and b[1].get("type") != "application/json"]
    assert len(scripts) == 2 and all(not b[1] for b in scripts)  # no src=, no nonce needed
    for _, _, body in scripts:
        assert _sha(body) in pol["script-src"]
    for _, _, body in (b for b in p.blocks if b[0] == "style"):
        assert _sha(body) in pol["style-src"]
    # nothing is fetched: no src/href to anything but an in-page anchor
    for tag, a in p.tags:
        assert "src" not in a, (tag, a)
        if "href" in a:
            assert a["href"].startswith("#"), (tag, a)
        assert "style" not in a, (tag, a)  # inline style attributes would need 'unsafe-inline'
    assert not re.search(r"https?://(?!github\.com/leeoniya)", page.replace("http-equiv", ""))


def test_log_text_is_escaped_everywhere():
    page = render_html(rich_report())
    p = _parse(page)
    tags = {t for t, _ in p.tags}
    assert "img" not in tags
    assert sum(1 for t, _ in p.tags if t == "script") == 3  # data + uPlot + report.js
    text = "".join(p.text)
    assert "<script>alert(1)</script>" in text and '"><img src=x onerror=alert(1)>' in text
    assert "\\x1b[31m" in text and "\x1b" not in page and "\udcff" not in page and "\ufffd" in text
    assert page.count("<script") == 3 and page.count("</script>") == 3
    # every onerror/onload in the page is inside escaped text, never an attribute
    assert all(not k.startswith("on") for _, a in p.tags for k in a)


def test_embedded_json_is_escaped_and_round_trips():
    report = rich_report()
    page = render_html(report)
    p = _parse(page)
    (_, _, raw), = [b for b in p.blocks if b[1].get("type") == "application/json"]
    for ch in ("<", ">", "&", "\u2028", "\u2029"):
        assert ch not in raw
    data = json.loads(raw)
    assert data["report"]["findings"][0]["rule"] == "KV001"
    assert "<script>alert(1)</script>" in data["report"]["findings"][0]["title"]
    assert data["report"]["findings"][0]["measurements"]["nan"] is None  # NaN is not JSON
    assert "timeline" not in data["report"]
    assert json_for_script({"a": "</script>\u2029&"}) == '{"a":"\\u003c/script\\u003e\\u2029\\u0026"}'


def test_sections_and_context():
    page = render_html(rich_report())
    text = "".join(_parse(page).text)
    for s in ("Summary", "Deployment", "Timeline", "Findings (2)", "What was read", "lookup-retrieve-eviction",
              "eagle3 K=4", "TP=4", "0.11.0", "Evidence", "Next steps", "first seen 2025-10-21"):
        assert s in text, s
    assert '<meter min="0" max="1" value="0.700">' in page


def test_chart_model_groups_units_and_markers():
    charts = build_chart_data(rich_report())
    ids = [g["id"] for g in charts["groups"]]
    assert ids == ["acceptance", "cache", "throughput", "kv", "requests"]
    acc = charts["groups"][0]
    assert acc["units"] == ["tokens", "ratio"] and acc["ranges"] == {"ratio": [0, 1]}
    labels = [s["label"] for s in acc["series"]]
    assert labels[:2] == ["mean acceptance length", "draft acceptance rate"]
    assert [lb for lb in labels if "pos" in lb] == [f"per position acceptance pos {i}" for i in (1, 2, 3)]
    xs = acc["data"][0]
    assert xs == sorted(xs) and all(len(col) == len(xs) for col in acc["data"])
    assert xs[0] == charts["tmin"] and xs[-1] == charts["tmax"]  # every chart spans the same time axis
    assert all(g["data"][0][0] == charts["tmin"] and g["data"][0][-1] == charts["tmax"] for g in charts["groups"])
    # finding markers come from first_seen, one per rank; timeline markers keep their rank
    kinds = [(m["kind"], m["lane"]) for m in charts["markers"]]
    assert ("finding", "TP2") in kinds and ("finding", "TP3") in kinds and ("shortfall", "TP3") in kinds
    assert ("finding", "all") in kinds  # SD001 has no rank
    assert charts["lanes"] == ["all", "TP1", "TP2", "TP3"]


def test_empty_timeline_still_marks_findings_and_says_so():
    r = rich_report()
    r = replace(r, timeline={})
    charts = build_chart_data(r)
    assert charts["groups"] == [] and len(charts["markers"]) == 3
    page = render_html(r)
    assert "only the events are drawn" in page
    r = replace(r, findings=[])
    page = render_html(r)
    assert "no timeline" in page and "<script>" not in page.replace('<script type="application/json"', "")
    # only KV001 ran: silence from rules that did not run is not health
    assert "no problem found" not in page and "did not run" in page
    from specdiag.analyzers.base import all_rules

    r = replace(r, rules_run=list(all_rules()), unrecognized={})
    page = render_html(r)  # 10 of its 1,000 lines are no vLLM/LMCache output: no clean bill for them
    assert "no problem found" not in page and "no finding in the recognised lines" in page
    whole = [{**i, "recognized": i["lines"]} for i in r.inputs]
    assert "no problem found" in render_html(replace(r, inputs=whole))


def test_tolerates_malformed_timeline():
    r = rich_report()
    r = replace(r, timeline={"series": {"x": None, "kv_cache_usage": {"points": [[None, 1], ["a", 2], [1.0], [T0, float("inf")],
                                                                       [T0 + 1, 5]]},
                             "odd_series": {"unit": "widgets", "points": [[T0, 1], [T0 + 5, 2]]}},
                  "markers": [None, {"t": "x"}, {"t": T0, "kind": "k0", "label": None}]})
    charts = build_chart_data(r)
    ids = [g["id"] for g in charts["groups"]]
    assert ids == ["kv", "other:widgets"]
    assert charts["groups"][0]["data"][1].count(None) >= 1
    render_html(r)


def test_downsample_keeps_extremes_and_bounds_size():
    pts = [[float(i), math.sin(i / 50.0)] for i in range(100_000)]
    pts[31_337][1] = 9.0
    pts[77_777][1] = -9.0
    out = downsample(pts, 2000)
    assert len(out) <= 2000
    assert out[0] == pts[0] and out[-1] == pts[-1]
    vals = [p[1] for p in out]
    assert max(vals) == 9.0 and min(vals) == -9.0
    assert [p[0] for p in out] == sorted(p[0] for p in out)
    lists = [[float(i), [0.5, 0.25]] for i in range(10_000)]
    assert len(downsample(lists, 2000)) == 2000
    assert downsample(pts[:10], 2000) == pts[:10]


def test_large_timeline_gives_a_reasonable_file(tmp_path):
    sizes = {}
    for n in (3_000, 9_000):
        out = tmp_path / f"big{n}.html"
        write_html(rich_report(n=n), out)
        sizes[n] = out.stat().st_size
    assert sizes[9_000] < 1_500_000, sizes
    assert sizes[9_000] < 1.15 * sizes[3_000], sizes  # downsampled: three times the log, about the same file
    charts = build_chart_data(rich_report(n=9_000))
    for g in charts["groups"]:
        assert all(sum(v is not None for v in col) <= MAX_POINTS for col in g["data"][1:]), g["id"]


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.glob("*/") if p.is_dir()) if CORPUS.exists() else [])
def test_corpus_logs_render(case, tmp_path):
    from specdiag.engine import analyze

    logs = [str(p) for p in (CORPUS / case).iterdir() if p.suffix in (".log", ".txt", ".gz") or p.name.endswith(".log")]
    if not logs:
        pytest.skip("no log")
    report = analyze(logs)
    out = tmp_path / "r.html"
    write_html(report, out)
    page = out.read_text(encoding="utf-8")
    p = _parse(page)
    assert "img" not in {t for t, _ in p.tags}
    data = json.loads(next(b[2] for b in p.blocks if b[1].get("type") == "application/json"))
    assert len(data["report"]["findings"]) == len(report.findings)
    for f in report.findings:
        assert f.rule in page


def test_cli_html_and_redact(tmp_path):
    from typer.testing import CliRunner

    from specdiag.cli import app

    log = CORPUS / "tp4-cpu-eviction-vllm011" / "vllm.log"
    if not log.exists():
        pytest.skip("corpus missing")
    text = log.read_text(encoding="utf-8", errors="replace")
    text += ("(APIServer pid=1) INFO 10-21 09:19:00 [logger.py:49] Received request chatcmpl-9: prompt: "
             "'<|user|>my secret prompt', params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3], lora_request: None.\n")
    p = tmp_path / "v.log"
    p.write_text(text, encoding="utf-8")
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["analyze", str(p), "--html", str(out), "--redact", "-f", "json"])
    assert out.exists(), res.output
    page = out.read_text(encoding="utf-8")
    assert "prompts and completions redacted" in page
    assert "my secret prompt" not in page and "my secret prompt" not in res.output


# ------------------------------------------------------------------------------------------------ repro
def test_repro_page_matrix_and_verdict(tmp_path):
    v = sample_verdict()
    out = tmp_path / "repro.html"
    write_repro_html(v, out)
    page = out.read_text(encoding="utf-8")
    p = _parse(page)
    text = "".join(p.text)
    assert "max_local_cpu_size=0.004 reproduces the shortfall; 1.0 does not" in text
    assert "max_local_cpu_size ↓ / spec →" in text  # two toggles: a 2-D grid
    assert "server-failed" in text and "boom <b>" in text and "not run" not in text
    assert "3 / 5" in text  # both repeats of c01
    assert not [b for b in p.blocks if b[0] == "script" and b[1].get("type") != "application/json"]
    assert "script-src 'none'" in page


@pytest.mark.parametrize("verdict", [
    {},
    {"cells": None, "conclusion": None},
    {"cells": [{}], "conclusion": "nothing"},
    {"cells": [{"name": "a", "toggles": {"k": "1"}, "symptoms": {"s": 1}, "status": "ok"},
               {"name": "b", "toggles": {"k": "2"}, "status": None, "extra": {"x": [1, 2]}}],
     "conclusion": f"c {EVIL}", "weird": object()},
    {"cells": "nope", "differential": [None, {"toggle": "t"}], "plan": "str"},
])
def test_repro_page_tolerates_any_shape(verdict):
    page = render_repro_html(verdict)
    assert page.startswith("<!DOCTYPE html>")
    assert "<img" not in page and page.count("<script") == 1


def test_vendored_uplot_is_unmodified_and_licensed():
    from specdiag.report.html import ASSETS

    text = (ASSETS / "uPlot.iife.min.js").read_text(encoding="utf-8")
    header, body = text.split("*/\n", 1)
    assert "MIT License" in header and "Leon Sorokin" in header
    # uPlot 1.6.32 dist/uPlot.iife.min.js from the npm registry tarball (npm pack uplot@1.6.32)
    assert hashlib.sha256(body.encode()).hexdigest() == UPLOT_SHA256
    assert (ASSETS / "uPlot.LICENSE").exists()
    assert "Permission is hereby granted" in render_html(rich_report())  # the notice travels with every page


def test_times_on_the_stand_in_year_are_shown_without_one() -> None:
    """A log that printed no year has its times on ``timeutil.NOMINAL_YEAR``: the page never shows it."""
    from specdiag.report.html import _fmt_time
    from specdiag.timeutil import parse_ts

    assert _fmt_time(parse_ts("10-21 04:12:33")) == "10-21 04:12:33.000"
    assert _fmt_time(parse_ts("2026-05-06 15:56:03,745")) == "2026-05-06 15:56:03.745"
    assert _fmt_time(None) == ""
