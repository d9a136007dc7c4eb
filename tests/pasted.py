"""A paste as the tests of real excerpts use it: lines written to a file, analysed, findings by rule."""

from __future__ import annotations

import json
from pathlib import Path

from specdiag.engine import analyze
from specdiag.findings import Finding
from specdiag.report.json_report import render_json


def write_paste(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def findings_by_rule(path: Path) -> dict[str, Finding]:
    """The findings of one input, by rule code (the last of a code that fires more than once)."""
    return {f.rule: f for f in analyze([str(path)]).findings}


def json_findings_by_rule(path: Path) -> dict[str, dict]:
    """The same through the JSON report: what a consumer of ``--format json`` reads."""
    return {f["rule"]: f for f in json.loads(render_json(analyze([str(path)])))["findings"]}
