"""CI output formats on real corpus logs: SARIF against the official 2.1.0 schema, JUnit XML, GitLab Code
Quality, GitHub annotations (escaping, caps, order), Markdown summary, plain text."""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from functools import cache, lru_cache
from pathlib import Path

import jsonschema
import pytest
from corpus_paths import CASES, CORPUS, corpus_root  # noqa: E402,F401

from specdiag.engine import analyze
from specdiag.findings import Cause, Evidence, Finding, severity_at_least
from specdiag.report.github import CAP_PER_LEVEL, command, escape_data, escape_property, render_github
from specdiag.report.gitlab import issues, render_gitlab, severity_of
from specdiag.report.junit import render_junit
from specdiag.report.markdown import fence, render_markdown
from specdiag.report.model import Report
from specdiag.report.sarif import FINGERPRINT_KEY, artifact_uri, render_sarif
from specdiag.report.text import render_text
from specdiag.ruledocs import rule_table

HERE = Path(__file__).resolve().parent
SCHEMA_FILE = HERE / "schemas" / "sarif-schema-2.1.0.json"


pytestmark = pytest.mark.skipif(not CASES, reason="corpus not found")


@cache
def corpus_report(case: str) -> Report:
    return analyze([str(CORPUS / case)])


def all_corpus_report(fresh: bool = False) -> Report:
    return analyze([str(CORPUS / c) for c in CASES]) if fresh else _all_corpus_report()


@cache
def _all_corpus_report() -> Report:
    return analyze([str(CORPUS / c) for c in CASES])


@lru_cache(maxsize=1)
def sarif_validator():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def assert_valid_sarif(text: str) -> dict:
    doc = json.loads(text)
    errors = sorted(sarif_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    return doc


def synthetic(n_err=0, n_warn=0, n_info=0, path="logs/serve.log") -> Report:
    findings = []
    for sev, n in (("error", n_err), ("warning", n_warn), ("info", n_info)):
        for i in range(n):
            findings.append(Finding(
                rule="KV001", severity=sev, title=f"{sev} {i}", summary=f"{sev} number {i}",
                evidence=[Evidence(path, 100 + i, f"line {i}")],
                causes=[Cause("lookup-retrieve-eviction", confidence=(i % 7) / 10, fix="fix it")],
                identity=f"{sev}|{i}"))
    return Report(inputs=[{"path": path, "lines": 1000, "recognized": 900, "skipped": 0, "formats": ["vllm"],
                           "errors": []}], context={}, findings=findings, rules_run=["KV001", "KV002"],
                  rules=rule_table())


# --- SARIF ---------------------------------------------------------------------------------------------------

def test_shipped_schema_is_the_oasis_sarif_2_1_0_schema():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    assert "result" in schema["definitions"] and "notification" in schema["definitions"]
    digest = hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest()
    assert digest == "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"  # see schemas/README.md


@pytest.mark.parametrize("case", CASES)
def test_sarif_validates_on_every_corpus_case(case):
    rep = corpus_report(case)
    doc = assert_valid_sarif(render_sarif(rep))
    run = doc["runs"][0]
    fired = sorted({f.rule for f in rep.findings})
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == fired  # only the rules that fired
    assert len(run["results"]) == len(rep.findings)
    fps = {f.fingerprint for f in rep.findings}
    for res in run["results"]:
        assert res["partialFingerprints"][FINGERPRINT_KEY] in fps
        assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] in ("error", "warning", "note")
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is True


def test_sarif_on_all_logs_together_and_levels():
    rep = all_corpus_report()
    doc = assert_valid_sarif(render_sarif(rep))
    levels = {(f.fingerprint, f.severity) for f in rep.findings}
    got = {(r["partialFingerprints"][FINGERPRINT_KEY], r["level"]) for r in doc["runs"][0]["results"]}
    mapping = {"error": "error", "warning": "warning", "info": "note"}
    assert got == {(fp, mapping[s]) for fp, s in levels}
    # the damaged log yields partial-read warnings, not a failed execution
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is True
    assert any(n["level"] == "warning" for n in inv["toolExecutionNotifications"])


def test_sarif_tool_errors_are_notifications():
    rep = corpus_report("seed-minimal-variant")
    rep2 = Report(inputs=rep.inputs, context=rep.context, findings=rep.findings, rules_run=rep.rules_run,
                  rules=rep.rules)
    rep2 = rep2.with_tool_errors([{"path": "logs/gone.log", "message": "logs/gone.log: no such file or directory"}])
    doc = assert_valid_sarif(render_sarif(rep2))
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    n = inv["toolExecutionNotifications"][0]
    assert n["level"] == "error" and "gone.log" in n["message"]["text"]
    assert n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "logs/gone.log"


def test_sarif_fingerprints_stable_across_runs():
    a = json.loads(render_sarif(analyze([str(CORPUS / "tp4-cpu-eviction-vllm011")])))
    b = json.loads(render_sarif(analyze([str(CORPUS / "tp4-cpu-eviction-vllm011")])))
    fa = [r["partialFingerprints"] for r in a["runs"][0]["results"]]
    assert fa and fa == [r["partialFingerprints"] for r in b["runs"][0]["results"]]


def test_sarif_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert artifact_uri("logs/my serve.log") == "logs/my%20serve.log"
    assert artifact_uri(str(tmp_path / "logs" / "a.log")) == "logs/a.log"
    assert artifact_uri("/elsewhere/x.log").startswith("file:///")


# --- JUnit ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fail_on", ["error", "warning", "info", "never"])
@pytest.mark.parametrize("case", CASES)
def test_junit_parses_one_case_per_enabled_rule(case, fail_on):
    rep = corpus_report(case)
    root = ET.fromstring(render_junit(rep, fail_on=fail_on).encode())
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [i["path"].replace("\\", "/") for i in rep.inputs] or \
        len(suites) == len(rep.inputs)
    total_fail = 0
    for s in suites:
        cases = s.findall("testcase")
        assert len(cases) == len(rep.rules_run) == int(s.get("tests"))
        assert [c.get("name").split()[0] for c in cases] == rep.rules_run
        fails = s.findall("testcase/failure")
        assert int(s.get("failures")) == len(fails)
        assert s.findall("testcase/error") == []  # findings are never <error>
        total_fail += len(fails)
    want = 0 if fail_on == "never" else len({f.rule for f in rep.findings if severity_at_least(f.severity, fail_on)})
    assert total_fail == want
    assert int(root.get("failures")) == total_fail
    assert int(root.get("tests")) == len(rep.rules_run) * len(suites)


def test_junit_warnings_below_fail_on_pass_with_system_out():
    rep = corpus_report("hash-seed-unset-zero-hits")
    assert {f.severity for f in rep.findings if not f.rule.startswith("LOG")} == {"warning"}
    root = ET.fromstring(render_junit(rep, fail_on="error"))
    case = [c for c in root.iter("testcase") if c.get("name").startswith("KV002")][0]
    assert case.find("failure") is None
    assert "below fail-on error" in case.find("system-out").text
    root = ET.fromstring(render_junit(rep, fail_on="warning"))
    case = [c for c in root.iter("testcase") if c.get("name").startswith("KV002")][0]
    assert case.find("failure").get("type") == "warning"


def test_junit_unreadable_input_is_an_error_and_garbage_is_dropped():
    rep = synthetic(n_err=1)
    rep.findings[0].evidence = [Evidence("logs/serve.log", 3, "bad \x00\x1b[31m bytes \x07 here")]
    rep = rep.with_tool_errors([{"path": "logs/gone.log", "message": "logs/gone.log: no such file or directory"}])
    root = ET.fromstring(render_junit(rep))
    errs = root.findall(".//error")
    assert len(errs) == 1 and root.get("errors") == "1"
    assert "\x1b" not in ET.tostring(root, encoding="unicode")


def test_junit_on_damaged_log_parses():
    rep = corpus_report("truncated-garbled-tail")
    root = ET.fromstring(render_junit(rep))
    assert root.find("testsuite/system-err") is not None


# --- GitLab Code Quality ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_gitlab_documented_fields(case):
    rep = corpus_report(case)
    data = json.loads(render_gitlab(rep))
    assert isinstance(data, list) and len(data) == len(rep.findings)
    for it in data:
        assert isinstance(it["description"], str) and it["description"]
        assert isinstance(it["check_name"], str) and re.fullmatch(r"[A-Z]+\d+", it["check_name"])
        assert re.fullmatch(r"[0-9a-f]{40}", it["fingerprint"])
        assert it["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert isinstance(it["location"]["path"], str) and it["location"]["path"]
        assert isinstance(it["location"]["lines"]["begin"], int) and it["location"]["lines"]["begin"] >= 1


def test_gitlab_fingerprints_unique_and_stable():
    data = json.loads(render_gitlab(all_corpus_report()))
    fps = [i["fingerprint"] for i in data]
    assert len(fps) == len(set(fps))
    again = json.loads(render_gitlab(all_corpus_report(fresh=True)))
    assert fps == [i["fingerprint"] for i in again]
    # identical findings (same identity) in one report still get distinct fingerprints
    rep = synthetic(n_err=2)
    for f in rep.findings:
        f.identity = "same"
    fps = [i["fingerprint"] for i in issues(rep)]
    assert len(set(fps)) == 2


def test_gitlab_severity_mapping():
    rules = rule_table()
    f = Finding(rule="KV001", severity="error", title="t")
    assert severity_of(f, rules) == "major"
    f.measurements["crashed"] = True
    assert severity_of(f, rules) == "critical"
    assert severity_of(Finding(rule="KV001", severity="warning", title="t"), rules) == "minor"
    assert severity_of(Finding(rule="KV001", severity="info", title="t"), rules) == "info"
    deaths = [code for code, doc in rules.items() if doc.name == "engine-death"]
    assert deaths  # engine death is GitLab's "critical", known from the report's rule table
    for code in deaths:
        assert severity_of(Finding(rule=code, severity="error", title="t"), rules) == "critical"
        assert severity_of(Finding(rule=code, severity="warning", title="t"), rules) == "minor"
        assert severity_of(Finding(rule=code, severity="error", title="t"), {}) == "major"


# --- GitHub annotations --------------------------------------------------------------------------------------------

def test_escaping():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%d\n") == "a%3Ab%2Cc%25d%0A"
    assert escape_data("%0A") == "%250A"  # '%' first, so existing escapes are not decoded by GitHub
    line = command("error", "msg: a, b\nsecond", file="logs/a,b:c.log", line=3, title="KV001 x: y")
    assert line == "::error file=logs/a%2Cb%3Ac.log,line=3,title=KV001 x%3A y::msg: a, b%0Asecond"


def _unescape(s: str) -> str:
    return s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


CMD = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def test_github_on_all_corpus_logs(monkeypatch):
    monkeypatch.chdir(CORPUS)
    rep = analyze(CASES)
    out = render_github(rep)
    lines = out.splitlines()
    assert lines
    for ln in lines:
        m = CMD.match(ln)
        assert m, ln
        assert "\r" not in ln
        props = dict(p.split("=", 1) for p in m.group(2).split(",")) if m.group(2) else {}
        if "file" in props:
            assert not props["file"].startswith("/")  # relative to the checkout
            assert (CORPUS / _unescape(props["file"])).is_file()
            assert int(props["line"]) >= 1
    levels = [CMD.match(ln).group(1) for ln in lines]
    for lvl in ("error", "warning", "notice"):
        assert levels.count(lvl) <= CAP_PER_LEVEL


def test_github_caps_and_order():
    rep = synthetic(n_err=15, n_warn=12, n_info=3)
    lines = render_github(rep).splitlines()
    levels = [CMD.match(ln).group(1) for ln in lines]
    assert levels.count("error") == 10 and levels.count("warning") == 10
    assert levels.count("notice") == 4  # 3 infos + the overflow notice
    assert levels[:10] == ["error"] * 10  # most severe first
    last = lines[-1]
    assert last.startswith("::notice title=specdiag::") and "7 more" in last and "job summary" in last
    # highest confidence first within a level
    confs = [f.causes[0].confidence for f in rep.findings if f.severity == "error"]
    shown = [int(re.search(r"error number (\d+)", ln).group(1)) for ln in lines if ln.startswith("::error")]
    assert [(i % 7) / 10 for i in shown] == sorted(confs, reverse=True)[:10]


def test_github_overflow_notice_keeps_within_notice_cap():
    lines = render_github(synthetic(n_info=14)).splitlines()
    assert len(lines) == 10 and lines[-1].startswith("::notice title=specdiag::5 more")
    assert len(render_github(synthetic(n_info=10)).splitlines()) == 10  # exactly at the cap: no overflow


def test_github_multiline_message_is_one_line():
    rep = synthetic(n_err=1)
    rep.findings[0].summary = "first line\nsecond line 50% of 3,4: x"
    (line,) = render_github(rep).splitlines()
    assert "first line%0Asecond line 50%25 of 3,4: x" in line


# --- Markdown / text -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_markdown_on_corpus(case):
    rep = corpus_report(case)
    md = render_markdown(rep)
    assert md.startswith("## ")
    for f in rep.findings:
        assert f"**{f.rule}**" in md
    assert md.count("<details>") == md.count("</details>") == len(rep.findings)


def test_markdown_escapes_and_truncates():
    rep = synthetic(n_err=200)
    rep.findings[0].evidence = [Evidence("a.log", 1, "``` not the end | <script>")]
    md = render_markdown(rep)
    assert "<script>" not in md.split("```text", 1)[0]
    assert "````text" in md  # a fence longer than the backticks in the evidence
    small = render_markdown(rep, max_bytes=8000)
    assert len(small.encode()) <= 8000 and "Truncated" in small
    assert small.count("<details>") == small.count("</details>")


def test_fence():
    assert fence("a ```` b").startswith("`````text\n")


def test_text_plain_and_deterministic():
    rep = corpus_report("tp2-lookup-disagreement-vllm025")
    a = render_text(rep, fail_on="error")
    assert a == render_text(rep, fail_on="error")
    assert "\x1b" not in a
    first = [ln for ln in a.splitlines() if not ln.startswith(" ")][0]
    assert re.match(r"^\S+:\d+: (error|warning|info) [A-Z]+\d+ ", first)
