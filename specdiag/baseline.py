"""Baselines: findings a team has accepted, keyed by the finding's stable fingerprint.

A baseline file is JSON (schema ``specdiag.baseline/1``)::

    {"schema": "specdiag.baseline/1",
     "findings": [{"fingerprint": "…", "rule": "KV002", "severity": "warning", "title": "…",
                   "first_seen_at": "logs/serve.log:125"}]}

Only ``fingerprint`` is used for matching; the other fields make the file reviewable in a pull request.
The fingerprint hashes the rule code and the incident's identity (request ids, token counts, ranks — see
``Finding.fingerprint``), never line numbers alone, so the same incident in a re-run, or in the same log with
other lines before it, keeps its fingerprint.
"""

from __future__ import annotations

import json
from typing import Any

from specdiag.engine import ConfigError
from specdiag.findings import Finding
from specdiag.report.model import Report

SCHEMA = "specdiag.baseline/1"


class BaselineError(ConfigError):
    """An unreadable or malformed baseline file (exit code 2)."""


def load_baseline(path: str) -> set[str]:
    """The fingerprints in a baseline file. Raises BaselineError when missing or malformed."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as e:
        raise BaselineError(f"{path}: baseline file not found (create it with --update-baseline)") from e
    except OSError as e:
        raise BaselineError(f"{path}: cannot read baseline ({e.strerror or e})") from e
    except json.JSONDecodeError as e:
        raise BaselineError(f"{path}: baseline is not valid JSON ({e.msg} at line {e.lineno})") from e
    entries: Any
    if isinstance(data, dict):
        if data.get("schema") not in (None, SCHEMA):
            raise BaselineError(f"{path}: unsupported baseline schema {data.get('schema')!r} (expected {SCHEMA})")
        entries = data.get("findings", [])
    else:
        entries = data
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: 'findings' must be a list")
    out: set[str] = set()
    for e in entries:
        fp = e.get("fingerprint") if isinstance(e, dict) else e
        if not isinstance(fp, str) or not fp:
            raise BaselineError(f"{path}: every baseline entry needs a 'fingerprint' string")
        out.add(fp)
    return out


def render_baseline(findings: list[Finding]) -> str:
    """Deterministic baseline JSON: entries sorted by rule then fingerprint, duplicates dropped."""
    seen: dict[str, dict[str, Any]] = {}
    for f in findings:
        fp = f.fingerprint
        if fp in seen:
            continue
        ev = f.evidence[0] if f.evidence else None
        seen[fp] = {
            "fingerprint": fp,
            "rule": f.rule,
            "severity": f.severity,
            "title": f.title,
            "first_seen_at": f"{ev.path}:{ev.line}" if ev else None,
        }
    entries = sorted(seen.values(), key=lambda e: (e["rule"], e["fingerprint"]))
    return json.dumps({"schema": SCHEMA, "findings": entries}, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: str, findings: list[Finding]) -> None:
    """Write the baseline file atomically (``outfile.write_output``: a stream such as /dev/stdout is written
    through, a symlink to a file is replaced, never followed)."""
    from specdiag.outfile import OutputError, write_output

    try:
        write_output(path, render_baseline(findings))
    except OutputError as e:
        raise BaselineError(f"{path}: cannot write baseline ({e.reason})") from e


def apply_baseline(report: Report, fingerprints: set[str]) -> Report:
    """The report without baselined findings (they are listed in its ``suppressed``)."""
    return report.with_baseline(fingerprints)


__all__ = ["BaselineError", "SCHEMA", "apply_baseline", "load_baseline", "render_baseline", "write_baseline"]
