"""``--format json``: the stable contract (schema specdiag.report/1)."""

from __future__ import annotations

import json

from specdiag.report.model import Report


def render_json(report: Report, indent: int | None = 2) -> str:
    return json.dumps(report.to_dict(), indent=indent, ensure_ascii=False, default=str) + "\n"
