"""Checks a specdiag JSON report against a corpus case's ``expected.json`` (same rules as the shared scorer)."""

from __future__ import annotations

SEVERITY = {"info": 0, "warning": 1, "error": 2}


def _same(expected, actual) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, list):
        return isinstance(actual, list) and sorted(map(str, expected)) == sorted(map(str, actual))
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(expected) == float(actual)
    return expected == actual


def mismatch(exp: dict, finding: dict) -> str | None:
    if exp.get("rule") is not None and finding.get("rule") != exp["rule"]:
        return f"rule {finding.get('rule')} != {exp['rule']}"
    if exp.get("severity_at_least") and SEVERITY[finding["severity"]] < SEVERITY[exp["severity_at_least"]]:
        return f"severity {finding['severity']} < {exp['severity_at_least']}"
    meas = finding.get("measurements") or {}
    for k, v in (exp.get("measurements") or {}).items():
        if k not in meas or not _same(v, meas[k]):
            return f"measurement {k}={meas.get(k)!r}, expected {v!r}"
    causes = finding.get("causes") or []
    top = causes[0] if causes else {}
    if exp.get("top_cause_in") is not None and top.get("id") not in exp["top_cause_in"]:
        return f"top cause {top.get('id')} not in {exp['top_cause_in']}"
    if exp.get("top_confidence_max") is not None and top.get("confidence", 1) > exp["top_confidence_max"]:
        return f"top confidence {top.get('confidence')} > {exp['top_confidence_max']}"
    if exp.get("not_top") and top.get("id") in exp["not_top"]:
        return f"top cause {top.get('id')} is excluded"
    return None


def check_report(expected: dict, report: dict) -> list[str]:
    """All the ways ``report`` fails ``expected`` (empty list = pass)."""
    problems = []
    exp = expected.get("expect") or {}
    findings = report["findings"]
    for i, ef in enumerate(exp.get("findings") or []):
        reasons = [mismatch(ef, f) for f in findings]
        if not any(r is None for r in reasons):
            problems.append(f"expected finding #{i + 1} not matched: {sorted(set(reasons))[:3] or 'no findings'}")
    for rule in exp.get("absent_rules") or []:
        if any(f["rule"] == rule for f in findings):
            problems.append(f"{rule} must be absent")
    for sev, limit in (exp.get("max_findings_at_or_above") or {}).items():
        n = sum(1 for f in findings if SEVERITY[f["severity"]] >= SEVERITY[sev])
        if n > limit:
            problems.append(f"{n} findings at or above {sev} (max {limit})")
    return problems
