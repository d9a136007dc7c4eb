"""The report object every renderer consumes (schema ``specdiag.report/1``, see docs/report-contract.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specdiag import __version__
from specdiag.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.deployments import DeploymentResult
    from specdiag.ruledocs import RuleDoc

SCHEMA = "specdiag.report/1"


@dataclass(frozen=True)
class Report:
    """Built complete by the engine; baselines, redaction and tool errors give new reports (``replace``)."""

    inputs: list[dict[str, Any]]
    #: the single deployment's context (JSON view), or None when the inputs held several
    context: dict[str, Any] | None
    findings: list[Finding]
    #: per-series time points for timelines: {"acceptance": [...], ...}; filled by the metrics stage
    timeline: dict[str, Any] = field(default_factory=dict)
    #: what was not recognised, with counts, so users see what the tool ignored
    unrecognized: dict[str, int] = field(default_factory=dict)
    #: rules that ran (codes), so CI formats can report passing checks too
    rules_run: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: the live Context object (not serialised) of the single deployment, for renderers that want more
    ctx: Any = None
    #: one entry per server found in the inputs; every finding belongs to exactly one
    deployments: list[DeploymentResult] = field(default_factory=list)
    #: rules that raised and were stopped (the others completed): [{"rule", "error", "deployment"}]
    rules_failed: list[dict[str, str]] = field(default_factory=list)
    #: findings a baseline suppressed (``with_baseline``), for renderers that mention them
    suppressed: list[Finding] = field(default_factory=list)
    #: inputs the tool could not read at all (``check`` goes on with the others): [{"path", "message"}]
    tool_errors: list[dict[str, Any]] = field(default_factory=list)
    #: prompt and completion text replaced in every string (``specdiag.redact``)
    redacted: bool = False
    #: records, rows and counted lines that reached the rules as usable events (``StreamTally.analysed``;
    #: None: not counted, a report the engine did not build). 0 with lines recognised: nothing could be judged.
    #: Not in the JSON: how many depends on which lines the scanner took (whether any did, does not)
    analysed: int | None = None
    #: every registered rule's documentation by code (``ruledocs.rule_table``): names, titles, severities,
    #: families and sections for the renderers, which never import the rules. Filled by whoever builds the
    #: report (the engine, ``check`` without a readable input); empty: renderers know no rule but by code.
    #: Not in the JSON: ``specdiag rules`` and docs/rules/ publish it
    rules: Mapping[str, RuleDoc] = field(default_factory=dict)
    #: settings the user asked about (``analyze --suspect``): each gets a verdict line, weighed or not
    suspects: tuple[str, ...] = ()

    @classmethod
    def from_deployments(cls, deployments: list[DeploymentResult], **kw: Any) -> Report:
        """A report over one or several deployments; the timeline is the busiest deployment's."""
        single = deployments[0] if len(deployments) == 1 else None
        busiest = max(deployments, key=lambda d: (len(d.findings), len(d.timeline.get("series", {}))), default=None)
        failed = [{**f, "deployment": d.id} for d in deployments for f in d.rules_failed]
        return cls(
            context=single.context.to_dict() if single else None,
            ctx=single.context if single else None,
            findings=[f for d in deployments for f in d.findings],
            timeline=busiest.timeline if busiest else {},
            deployments=list(deployments),
            rules_failed=failed,
            **kw,
        )

    def with_baseline(self, fingerprints: set[str]) -> Report:
        """A report without the findings whose fingerprint the baseline holds (those become ``suppressed``)."""
        def keep(f: Finding) -> bool:
            return f.fingerprint not in fingerprints

        deployments = [replace(d, findings=[f for f in d.findings if keep(f)]) for d in self.deployments]
        return replace(self, findings=[f for f in self.findings if keep(f)], deployments=deployments,
                       suppressed=[*self.suppressed, *(f for f in self.findings if not keep(f))])

    def with_tool_errors(self, errors: list[dict[str, Any]]) -> Report:
        return replace(self, tool_errors=[*self.tool_errors, *errors])

    def exit_code(self, fail_on: str) -> int:
        """The contract's exit code: 3 nothing recognised, 1 a finding at or above ``fail_on``, else 0."""
        if self.recognized_lines == 0:
            return 3
        if fail_on == "never":
            return 0
        threshold = SEVERITY_RANK[fail_on]
        return 1 if any(SEVERITY_RANK[f.severity] >= threshold for f in self.findings) else 0

    def deployment_of(self, finding: Finding) -> str | None:
        return finding.deployment

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
        findings = []
        for f in self.sorted_findings():
            d = f.to_dict()
            d["deployment"] = self.deployment_of(f)
            findings.append(d)
        out = {
            "schema": SCHEMA,
            "tool": {"name": "specdiag", "version": __version__},
            "inputs": self.inputs,
            "context": self.context,
            "findings": findings,
            "summary": self.summary,
            "unrecognized": self.unrecognized,
            "rules_run": self.rules_run,
            "deployments": [d.to_dict() for d in self.deployments],
        }
        if self.rules_failed:
            out["rules_failed"] = self.rules_failed
        return out
