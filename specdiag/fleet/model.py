"""The fleet report (schema ``specdiag.fleet/1``): one row per deployment, then the contrast."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specdiag import __version__
from specdiag.findings import SEVERITY_RANK, Finding
from specdiag.fleet.contrast import (
    METHOD,
    RuleContrast,
    Separator,
    attributes,
    contrast,
    majority_differences,
)

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.fleet.run import Outcome

SCHEMA = "specdiag.fleet/1"


@dataclass(frozen=True)
class FleetRow:
    """One deployment of the fleet: what it runs, how it differs, what was found (or why it could not be read)."""

    id: str
    sources: list[str]
    context: dict[str, Any] | None
    findings: list[Finding]
    error: str | None = None
    differences: dict[str, str] = field(default_factory=dict)
    recognized_lines: int = 0

    def by_rule(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for f in self.findings:
            r = out.setdefault(f.rule, {"count": 0, "severity": f.severity, "top_causes": [],
                                        "first_seen": None, "last_seen": None})
            r["count"] += f.count
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK[r["severity"]]:
                r["severity"] = f.severity
            if f.top_cause and f.top_cause.id not in r["top_causes"]:
                r["top_causes"].append(f.top_cause.id)
            if f.first_seen is not None:
                r["first_seen"] = min(x for x in (r["first_seen"], f.first_seen) if x is not None)
                r["last_seen"] = max(x for x in (r["last_seen"], f.first_seen) if x is not None)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "sources": list(self.sources), "context": self.context,
                "findings": [f.to_dict() for f in self.findings], "by_rule": self.by_rule(),
                "differences_from_majority": dict(self.differences), "error": self.error}


@dataclass(frozen=True)
class FleetReport:
    deployments: list[FleetRow]
    contrast_rules: list[RuleContrast]

    @property
    def contrast(self) -> list[Separator]:
        """The contrasts stated, every rule's in turn (the JSON ``contrast`` list)."""
        return [s for rc in self.contrast_rules for s in rc.shown]

    @property
    def summary(self) -> dict[str, Any]:
        affected: dict[str, int] = {}
        for row in self.deployments:
            for rule in row.by_rule():
                affected[rule] = affected.get(rule, 0) + 1
        return {"deployments": len(self.deployments),
                "failed": sum(1 for r in self.deployments if r.error),
                "with_findings": sum(1 for r in self.deployments if r.findings),
                "deployments_by_rule": dict(sorted(affected.items()))}

    def exit_code(self, fail_on: str) -> int:
        """``check``-style: 1 a finding at or above ``fail_on``; 2 a deployment could not be analysed;
        3 nothing recognised anywhere; else 0."""
        if fail_on != "never":
            t = SEVERITY_RANK[fail_on]
            if any(SEVERITY_RANK[f.severity] >= t for r in self.deployments for f in r.findings):
                return 1
        if any(r.error for r in self.deployments):
            return 2
        if not any(r.recognized_lines for r in self.deployments):
            return 3
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "tool": {"name": "specdiag", "version": __version__},
                "deployments": [r.to_dict() for r in self.deployments],
                "contrast": [s.to_dict() for s in self.contrast],
                "contrast_rules": [rc.to_dict() for rc in self.contrast_rules], "contrast_method": dict(METHOD),
                "summary": self.summary}


def row_id(group_id: str, dep_id: str) -> str:
    """A fleet row's id: the pod folder's name, or ``folder/pod`` for a deployment inside a merged stream."""
    return group_id if dep_id == group_id else f"{group_id}/{dep_id}"


def build_fleet_report(outcomes: list[Outcome], min_severity: str = "warning") -> FleetReport:
    """Rows from each group's outcome, differences from the majority, and the contrast per rule."""
    raw: list[tuple[str, list[str], dict | None, list[Finding], str | None, int]] = []
    for group, result, error in outcomes:
        if result is None:
            raw.append((group.id, list(group.paths), None, [], error or "failed", 0))
            continue
        recognized = sum(int(i.get("recognized", 0)) for i in result.inputs)
        for dep in result.deployments:
            dep_id = row_id(group.id, dep.id)
            raw.append((dep_id, dep.sources, dep.context.to_dict(), dep.findings, None, recognized))
    attrs = {r[0]: attributes(r[2]) for r in raw if r[4] is None}
    diffs = majority_differences(attrs) if attrs else {}
    threshold = SEVERITY_RANK[min_severity]
    affected: dict[str, set[str]] = {}
    for dep_id, _s, _c, findings, err, _n in raw:
        for f in findings:
            if err is None and SEVERITY_RANK[f.severity] >= threshold:
                affected.setdefault(f.rule, set()).add(dep_id)
    rows = [FleetRow(i, s, c, f, e, diffs.get(i, {}), n) for i, s, c, f, e, n in raw]
    return FleetReport(rows, contrast(attrs, affected))
