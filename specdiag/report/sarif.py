"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning, reviewdog, Azure DevOps and SARIF viewers.

* ``tool.driver.rules`` lists only the rules that fired (keeps the file small); each carries its short and
  full description and the docstring sections as ``help`` (text and Markdown).
* ``results[].partialFingerprints["specdiag/v1"]`` is the finding's fingerprint (rule + incident identity,
  never line numbers alone), so re-runs do not open duplicate alerts.
* The first evidence line is the result's location; further evidence lines are ``relatedLocations``.
* Tool problems are ``invocations[0].toolExecutionNotifications``: an unreadable input is an ``error``
  notification and makes ``executionSuccessful`` false; a partly read input (damaged compression, cut
  lines) is a ``warning`` notification.
* Levels: error → ``error``, warning → ``warning``, info → ``note``.

Validated against the OASIS SARIF 2.1.0 JSON schema in ``tests/test_ci_formats.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from specdiag import __version__
from specdiag.findings import Finding
from specdiag.report.layout import finding_view
from specdiag.report.model import Report
from specdiag.report.text import display_path, execution_failed, ordered_findings, suppressed, tool_problems
from specdiag.sanitize import json_safe

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ruledocs import RuleDoc

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT_KEY = "specdiag/v1"
MAX_RELATED = 20


def artifact_uri(path: str | None) -> str:
    """A URI reference for a log path: relative paths stay relative (forward slashes, percent-encoded),
    absolute paths outside the working directory become ``file://`` URIs."""
    p = display_path(path or "-")
    # a file name that is not valid UTF-8 arrives with lone surrogates (surrogateescape): percent-encode its
    # original bytes, so the URI names the real file and the JSON stays valid UTF-8
    raw = p.encode("utf-8", "surrogateescape")
    if os.path.isabs(p):
        return "file://" + quote(raw, safe="/")
    return quote(raw, safe="/")


def _location(path: str, line: int | None, text: str | None = None) -> dict[str, Any]:
    phys: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(path)}}
    if line:
        region: dict[str, Any] = {"startLine": max(1, int(line))}
        if text:
            region["snippet"] = {"text": text}
        phys["region"] = region
    return {"physicalLocation": phys}


def _rule_descriptor(code: str, rules: Mapping[str, RuleDoc]) -> dict[str, Any]:
    """SARIF's ``reportingDescriptor`` of a rule, from its documentation in ``Report.rules``."""
    from specdiag.ruledocs import SECTIONS, help_markdown

    d = rules.get(code)
    if d is None:
        return {"id": code}
    full = d.sections.get("Detects") or d.summary or d.title
    help_text = "\n\n".join(f"{s}: {d.sections[s]}".replace("``", "`") for s in SECTIONS if d.sections.get(s))
    desc: dict[str, Any] = {
        "id": code,
        "name": d.name or code,
        "shortDescription": {"text": d.title},
        "fullDescription": {"text": full.replace("``", "`")},
        "help": {"text": help_text or d.title, "markdown": help_markdown(d)},
        "defaultConfiguration": {"level": LEVEL.get(d.severity, "warning")},
        "properties": {"tags": ["specdiag", d.family] if d.family else ["specdiag"]},
    }
    return desc


def _result(f: Finding, rule_index: int) -> dict[str, Any]:
    from specdiag.report.text import finding_message

    res: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": LEVEL[f.severity],
        "message": {"text": finding_message(f)},
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
    }
    if f.evidence:
        e0 = f.evidence[0]
        res["locations"] = [_location(e0.path, e0.line, e0.text)]
        related = []  # the layout's evidence order: log order (``report.layout``)
        others = [e for e in finding_view(f).evidence_in_log_order(MAX_RELATED + 1) if not e.primary]
        for i, e in enumerate(others[:MAX_RELATED], start=1):
            loc = _location(e.path, e.line, e.text)
            loc["id"] = i
            loc["message"] = {"text": e.text[:200] or f"evidence line {i + 1}"}
            related.append(loc)
        if related:
            res["relatedLocations"] = related
    props: dict[str, Any] = {"severity": f.severity, "count": f.count, "title": f.title}
    if f.causes:
        v = finding_view(f)  # the causes every full layout shows, each with its fix and confirming experiment
        props["causes"] = [{"id": c.id, "confidence": round(float(c.confidence), 3), "fix": c.fix,
                            "confirmWith": c.confirm_with} for c in v.shown]
        if v.also:
            props["alsoWeighed"] = [{"id": c.id, "confidence": round(float(c.confidence), 3)} for c in v.also]
        if f.causes[0].confirm_with:
            props["confirmWith"] = f.causes[0].confirm_with
    if f.measurements:
        props["measurements"] = json.loads(json.dumps(f.measurements, default=str))
    res["properties"] = props
    return res


def sarif_log(report: Report) -> dict[str, Any]:
    findings = ordered_findings(report)
    fired = sorted({f.rule for f in findings})
    index = {code: i for i, code in enumerate(fired)}
    notifications = []
    for p in tool_problems(report):
        n: dict[str, Any] = {
            "level": p["level"],
            "message": {"text": p["message"]},
            "descriptor": {"id": "input-unreadable" if p["level"] == "error" else "input-partially-read"},
        }
        if p.get("path"):
            n["locations"] = [_location(p["path"], None)]
        notifications.append(n)
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "specdiag",
            "version": __version__,
            "semanticVersion": __version__,
            "rules": [_rule_descriptor(code, report.rules) for code in fired],
        }},
        "invocations": [{
            "executionSuccessful": not execution_failed(report),
            "toolExecutionNotifications": notifications,
        }],
        "results": [_result(f, index[f.rule]) for f in findings],
        "properties": {
            "rulesRun": list(report.rules_run),
            "suppressedByBaseline": len(suppressed(report)),
            "inputs": [{"path": display_path(i.get("path", "")), "lines": i.get("lines", 0),
                        "recognized": i.get("recognized", 0)} for i in report.inputs],
        },
    }
    return {"version": "2.1.0", "$schema": SARIF_SCHEMA_URI, "runs": [run]}


def render_sarif(report: Report) -> str:
    return json.dumps(json_safe(sarif_log(report)), indent=2, ensure_ascii=False) + "\n"


__all__ = ["FINGERPRINT_KEY", "artifact_uri", "render_sarif", "sarif_log"]
