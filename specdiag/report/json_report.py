"""``--format json``: the stable contract (schema specdiag.report/1)."""

from __future__ import annotations

import json

from specdiag.report.model import Report
from specdiag.sanitize import json_safe


def render_json(report: Report, indent: int | None = 2) -> str:
    """Valid UTF-8 (lone surrogates from undecodable names become U+FFFD), no NaN/Infinity (null instead)."""
    return json.dumps(json_safe(report.to_dict()), indent=indent, ensure_ascii=False, allow_nan=False) + "\n"
