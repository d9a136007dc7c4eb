"""``--format json``: the stable contract (schema specdiag.report/1)."""

from __future__ import annotations

import json

from specdiag.report.model import Report
from specdiag.sanitize import json_safe


def render_json(report: Report, indent: int | None = 2) -> str:
    """Valid UTF-8 (lone surrogates from undecodable names become U+FFFD), no NaN/Infinity (null instead)."""
    return json.dumps(json_safe(report.to_dict()), indent=indent, ensure_ascii=False, allow_nan=False) + "\n"


def render_jsonl(report: Report) -> str:
    """``--format jsonl``: one line per finding (most severe first, as ``findings[]``), each a ``findings[]``
    entry of the contract plus the report's ``schema`` and ``tool``, so that a line read alone (``grep``,
    ``tail``, a log shipper) still says which contract it follows. Nothing else of the report is written: no
    findings, no lines. Escaped as ``render_json`` (valid UTF-8, no NaN, every line break inside a string as
    ``\\n``), so one finding never spans two lines — not even for a reader that also splits at U+0085,
    U+2028 or U+2029 (Python's ``str.splitlines``, JavaScript before ES2019): those are written as escapes."""
    d = json_safe(report.to_dict())
    head = {"schema": d["schema"], "tool": d["tool"]}
    lines = (json.dumps({**head, **f}, ensure_ascii=False, allow_nan=False) for f in d["findings"])
    return "".join(line.translate(_LINE_BREAKS) + "\n" for line in lines)


#: line separators ``json.dumps(ensure_ascii=False)`` leaves raw (they can only occur inside strings)
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
