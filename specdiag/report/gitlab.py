"""``--format gitlab``: GitLab Code Quality report (``artifacts:reports:codequality``).

A JSON array of issues with the documented fields ``description``, ``check_name``, ``fingerprint``,
``severity`` and ``location.path`` + ``location.lines.begin``, plus the optional ``type``, ``categories``,
``engine_name`` and ``content.body``.

* ``fingerprint``: sha1 of the finding's fingerprint (rule + incident identity, no line numbers) and the
  log path — stable across runs, and unique within the report (GitLab shows only the first of duplicates;
  a collision gets a counter mixed in).
* ``severity``: error → ``major`` (``critical`` when the finding says the engine died: measurement
  ``crashed``/``engine_dead`` true, or rule ``engine-death``), warning → ``minor``, info → ``info``.
* A finding without evidence points at its first input (line 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specdiag.digests import sha1_hex
from specdiag.findings import Finding
from specdiag.report.model import Report
from specdiag.report.text import cause_line, display_path, finding_message, ordered_findings
from specdiag.sanitize import json_safe

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ruledocs import RuleDoc

SEVERITY = {"error": "major", "warning": "minor", "info": "info"}
ENGINE_DEATH_KEYS = ("crashed", "engine_dead", "engine_died")
ENGINE_DEATH_RULES = ("engine-death",)  # rule names (stable) whose errors mean the engine died


def severity_of(f: Finding, rules: Mapping[str, RuleDoc]) -> str:
    """GitLab's severity of a finding; ``rules`` (``Report.rules``) says which rule codes mean the engine
    died (by the rule's stable name), so an error of theirs is ``critical``."""
    if f.severity == "error":
        doc = rules.get(f.rule)
        if (doc is not None and doc.name in ENGINE_DEATH_RULES) or any(
                f.measurements.get(k) is True for k in ENGINE_DEATH_KEYS):
            return "critical"
    return SEVERITY[f.severity]


def issues(report: Report) -> list[dict[str, Any]]:
    default_path = report.inputs[0].get("path", "-") if report.inputs else "-"
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    for f in ordered_findings(report):
        ev = f.evidence[0] if f.evidence else None
        path = display_path(ev.path if ev else default_path)
        base = f"{f.fingerprint}|{path}"
        fp = sha1_hex(base, "surrogateescape")
        n = 1
        while fp in used:
            n += 1
            fp = sha1_hex(f"{base}|{n}", "surrogateescape")
        used.add(fp)
        desc = f"{f.rule}: {(f.summary or f.title).strip().splitlines()[0]}"
        top = cause_line(f)
        if top:
            desc += f" (likely cause: {top})"
        out.append({
            "type": "issue",
            "check_name": f.rule,
            "description": desc,
            "content": {"body": finding_message(f)},
            "categories": ["Bug Risk"],
            "severity": severity_of(f, report.rules),
            "fingerprint": fp,
            "location": {"path": path, "lines": {"begin": max(1, ev.line) if ev else 1}},
            "engine_name": "specdiag",
        })
    return out


def render_gitlab(report: Report) -> str:
    return json.dumps(json_safe(issues(report)), indent=2, ensure_ascii=False) + "\n"


__all__ = ["render_gitlab", "severity_of"]
