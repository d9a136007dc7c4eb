"""The report object every renderer consumes (schema ``specdiag.report/1``, see docs/report-contract.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdiag import __version__
from specdiag.findings import SEVERITY_RANK, Finding

SCHEMA = "specdiag.report/1"


@dataclass
class Report:
    inputs: list[dict[str, Any]]
    context: dict[str, Any]
    findings: list[Finding]
    #: per-series time points for timelines: {"acceptance": [...], ...}; filled by the metrics stage
    timeline: dict[str, Any] = field(default_factory=dict)
    #: what was not recognised, with counts, so users see what the tool ignored
    unrecognized: dict[str, int] = field(default_factory=dict)
    #: rules that ran (codes), so CI formats can report passing checks too
    rules_run: list[str] = field(default_factory=list)
    #: rules whose finish raised: [{"rule": code, "error": "TypeError: …"}]; the other rules' findings stand
    rules_failed: list[dict[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: the live Context object (not serialised), for renderers that want more than the JSON view
    ctx: Any = None

    def sorted_findings(self) -> list[Finding]:
        def key(f: Finding):
            conf = f.causes[0].confidence if f.causes else 0.0
            return (-SEVERITY_RANK[f.severity], -f.priority, -conf, f.rule, f.evidence[0].line if f.evidence else 0)

        return sorted(self.findings, key=key)

    @property
    def summary(self) -> dict[str, int]:
        out = {"errors": 0, "warnings": 0, "infos": 0}
        for f in self.findings:
            out[{"error": "errors", "warning": "warnings", "info": "infos"}[f.severity]] += 1
        return out

    @property
    def recognized_lines(self) -> int:
        return sum(int(i.get("recognized", 0)) for i in self.inputs)

    def worst_severity(self) -> str | None:
        worst = None
        for f in self.findings:
            if worst is None or SEVERITY_RANK[f.severity] > SEVERITY_RANK[worst]:
                worst = f.severity
        return worst

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "tool": {"name": "specdiag", "version": __version__},
            "inputs": self.inputs,
            "context": self.context,
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "summary": self.summary,
            "unrecognized": self.unrecognized,
            "rules_run": self.rules_run,
            "rules_failed": self.rules_failed,
        }
