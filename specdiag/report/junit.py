"""``--format junit``: JUnit XML for GitLab, Jenkins, Buildkite and Azure DevOps test reports.

* One ``<testsuite>`` per input log, one ``<testcase>`` per **enabled** rule (``report.rules_run``), so
  dashboards show passing checks too ("7 passed, 1 failed").
* A finding belongs to the suite of the log its first evidence line comes from (a finding without evidence
  goes to the first suite). Several findings of one rule in one log make one ``<failure>`` that lists them.
* ``<failure>`` only for findings at or above ``fail_on`` (default ``error``), ``type`` = their severity.
  **Warnings (and infos) below ``fail_on`` pass**, with the finding in ``<system-out>``: the test report then
  agrees with the exit code (``--fail-on warning`` turns them into failures). ``fail_on="never"`` passes
  every case.
* ``<error>`` only for tool errors: an input that could not be read gets a suite with one ``read input``
  case that errors. A partly read input (damaged compression) is noted in the suite's ``<system-err>``.
* Characters XML 1.0 cannot carry (control bytes from damaged logs) are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import TYPE_CHECKING

from specdiag.findings import Finding, severity_at_least
from specdiag.patterns import lazy
from specdiag.report.layout import finding_view
from specdiag.report.model import Report
from specdiag.report.text import display_path, finding_message, ordered_findings
from specdiag.sanitize import xml_text as _xml_channel

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ruledocs import RuleDoc

_INVALID_XML = lazy("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MAX_EVIDENCE = 20


def xml_text(s: object) -> str:
    """Text for XML 1.0: the XML channel's sanitiser (no escape sequences, forbidden characters shown, lone
    surrogates from undecodable file names replaced), then anything XML still cannot carry dropped."""
    return _INVALID_XML.sub("", _xml_channel(s))


def _rule_label(code: str, rules: Mapping[str, RuleDoc]) -> tuple[str, str]:
    """(classname, test name) of a rule's test case, from its documentation in ``Report.rules``; a code
    the report knows no rule for keeps its letters as the family."""
    doc = rules.get(code)
    name = doc.name if doc else ""
    family = (doc.family if doc else "") or re.sub(r"\d+$", "", code) or code
    return f"specdiag.{family}", f"{code} {name}".strip()


def _finding_text(f: Finding) -> str:
    """The CI message, then the evidence lines with their source and the fingerprint (``report.layout``)."""
    v = finding_view(f)
    lines = [finding_message(f)]
    for e in v.evidence_in_log_order(MAX_EVIDENCE):  # the layout's order; ``>`` marks the primary line
        lines.append(f"{'>' if e.primary else ' '} {display_path(e.path)}:{e.line}: {e.text}")
    if len(v.evidence) > MAX_EVIDENCE:
        lines.append(f"... {len(v.evidence) - MAX_EVIDENCE} more evidence line(s)")
    lines.append(f"fingerprint: {v.fingerprint}")
    return "\n".join(lines)


def _findings_by_suite(report: Report, findings: list[Finding]) -> tuple[list[str], dict[str, dict[str, list[Finding]]]]:
    """One suite per input (``specdiag`` without inputs); each finding in the suite of its first evidence
    line's log (else the first suite), grouped by rule."""
    inputs = [i.get("path", "") for i in report.inputs]
    suites_order = list(inputs) or ["specdiag"]
    by_suite: dict[str, dict[str, list[Finding]]] = {s: {} for s in suites_order}
    for f in findings:
        path = f.evidence[0].path if f.evidence else None
        suite = path if path in by_suite else suites_order[0]
        by_suite[suite].setdefault(f.rule, []).append(f)
    return suites_order, by_suite


def _rule_case(suite: ET.Element, code: str, fs: list[Finding], fail_on: str, rules: Mapping[str, RuleDoc]) -> int:
    """The test case of one rule in one suite: a failure listing the findings at or above ``fail_on``, the
    others in ``<system-out>``. Returns the number of failures (0 or 1)."""
    classname, name = _rule_label(code, rules)
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    failing = [f for f in fs if fail_on != "never" and severity_at_least(f.severity, fail_on)]
    if failing:
        worst = failing[0]
        msg = (worst.summary or worst.title).strip().splitlines()[0]
        if len(failing) > 1:
            msg += f" (+{len(failing) - 1} more finding(s))"
        fail = ET.SubElement(case, "failure", message=xml_text(msg[:500]), type=worst.severity)
        fail.text = xml_text("\n\n".join(_finding_text(f) for f in failing))
    passing = [f for f in fs if f not in failing]
    if passing:
        out = ET.SubElement(case, "system-out")
        out.text = xml_text("\n\n".join(f"[{f.severity}, below fail-on {fail_on}] {_finding_text(f)}"
                                        for f in passing))
    return 1 if failing else 0


def _tool_error_suite(root: ET.Element, err: dict) -> None:
    """An input that could not be read: a suite with one ``read input`` case that errors."""
    path = err.get("path") or "specdiag"
    suite = ET.SubElement(root, "testsuite", name=xml_text(display_path(path)), tests="1", failures="0",
                          errors="1", skipped="0", time="0")
    case = ET.SubElement(suite, "testcase", classname="specdiag.input", name="read input", time="0")
    e = ET.SubElement(case, "error", message=xml_text(err["message"][:500]), type="input-error")
    e.text = xml_text(err["message"])


def render_junit(report: Report, *, fail_on: str = "error") -> str:
    findings = ordered_findings(report)
    suites_order, by_suite = _findings_by_suite(report, findings)
    partial = {i.get("path", ""): list(i.get("errors") or []) for i in report.inputs}

    root = ET.Element("testsuites", name="specdiag")
    tot = {"tests": 0, "failures": 0, "errors": 0}
    codes = list(report.rules_run) or sorted({f.rule for f in findings})
    time_s = f"{report.elapsed_s:.3f}"

    for suite_name in suites_order:
        suite = ET.SubElement(root, "testsuite", name=xml_text(display_path(suite_name)))
        n = {"tests": len(codes), "failures": 0, "errors": 0}
        for code in codes:
            n["failures"] += _rule_case(suite, code, by_suite[suite_name].get(code, []), fail_on, report.rules)
        errs = partial.get(suite_name) or []
        if errs:
            se = ET.SubElement(suite, "system-err")
            se.text = xml_text("\n".join(errs))
        suite.set("tests", str(n["tests"]))
        suite.set("failures", str(n["failures"]))
        suite.set("errors", str(n["errors"]))
        suite.set("skipped", "0")
        suite.set("time", time_s)
        for k in tot:
            tot[k] += n[k]

    for err in getattr(report, "tool_errors", None) or []:
        _tool_error_suite(root, err)
        tot["tests"] += 1
        tot["errors"] += 1

    for k, v in tot.items():
        root.set(k, str(v))
    root.set("time", time_s)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["render_junit", "xml_text"]
