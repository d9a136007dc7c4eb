"""The fleet report as one self-contained HTML page: the contrast, then a deployments × time heat-map.

No script at all; one style block allowed by its hash in a strict CSP. Every string from a log or a path
is escaped; times are log time (zone unknown).
"""

from __future__ import annotations

import base64
import hashlib
import html

from specdiag.findings import SEVERITY_RANK
from specdiag.fleet.model import FleetReport, FleetRow
from specdiag.report.fleet import CONTRAST_TITLE
from specdiag.sanitize import plain_text
from specdiag.timeutil import fmt_time

BUCKETS = 24
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1b1b1b}
h1{font-size:20px}table{border-collapse:collapse}td,th{padding:2px 6px;font-size:12px}
th{text-align:left;font-weight:600}td.c{width:18px;height:18px;padding:0;border:1px solid #fff}
.s0{background:#f0f0f0}.s1{background:#56b4e9}.s2{background:#e69f00}.s3{background:#000000}
.scroll{max-width:100%;overflow-x:auto}li,td,th{overflow-wrap:anywhere}@media(max-width:600px){body{margin:12px}}
.err{color:#a00}.legend span{display:inline-block;width:14px;height:14px;margin:0 4px 0 12px;vertical-align:middle}
""".strip()


def _esc(s: object) -> str:
    return html.escape(plain_text(s), quote=True)


def _span(report: FleetReport) -> tuple[float, float] | None:
    times = [f.first_seen for r in report.deployments for f in r.findings if f.first_seen is not None]
    if not times:
        return None
    lo, hi = min(times), max(times)
    return lo, hi if hi > lo else lo + 1.0


def _cells(row: FleetRow, span: tuple[float, float] | None) -> list[tuple[int, str]]:
    """(severity level 0–3, tooltip) per time bucket."""
    level = [0] * BUCKETS
    tips: list[list[str]] = [[] for _ in range(BUCKETS)]
    if span is not None:
        lo, hi = span
        for f in row.findings:
            if f.first_seen is None:
                continue
            i = min(BUCKETS - 1, int((f.first_seen - lo) / (hi - lo) * BUCKETS))
            level[i] = max(level[i], SEVERITY_RANK[f.severity] + 1)
            tips[i].append(f"{f.rule} {f.severity} ×{f.count}")
    return [(lv, "; ".join(t)) for lv, t in zip(level, tips, strict=True)]


def render_fleet_html(report: FleetReport) -> str:
    span = _span(report)
    digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    csp = f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; base-uri 'none'; form-action 'none'"
    s = report.summary
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           "<title>specdiag fleet</title>", f"<style>{STYLE}</style></head><body>",
           f"<h1>specdiag fleet: {s['deployments']} deployments, {s['with_findings']} with findings, "
           f"{s['failed']} not analysed</h1>"]
    if report.contrast_rules:
        out.append(f"<h2>{_esc(CONTRAST_TITLE)}</h2><ul>")
        out += [f"<li>{_esc(rc.heading())}<ul>{''.join(f'<li>{_esc(x)}</li>' for x in rc.lines())}</ul></li>"
                for rc in report.contrast_rules]
        out.append("</ul>")
    if span:
        out.append(f"<p>Findings by first occurrence, {BUCKETS} buckets from {_esc(fmt_time(span[0]))} to "
                   f"{_esc(fmt_time(span[1]))} (log time, zone unknown).</p>")
    out.append("<p class=\"legend\">none<span class=\"s0\"></span> info<span class=\"s1\"></span> "
               "warning<span class=\"s2\"></span> error<span class=\"s3\"></span></p>")
    # the heat map scrolls sideways in its own box on a phone; the page itself never does
    out.append(f"<div class=\"scroll\"><table><tr><th>deployment</th><th colspan=\"{BUCKETS}\">time →</th><th>findings</th></tr>")
    for row in report.deployments:
        cells = "".join(f"<td class=\"c s{lv}\" title=\"{_esc(tip)}\"></td>" for lv, tip in _cells(row, span))
        by = row.by_rule()
        summary = (f"<span class=\"err\">not analysed: {_esc(row.error)}</span>" if row.error else
                   _esc(", ".join(f"{k} ×{v['count']}" for k, v in by.items()) or "no finding"))
        out.append(f"<tr><th>{_esc(row.id)}</th>{cells}<td>{summary}</td></tr>")
    out.append("</table></div></body></html>\n")
    return "".join(out)
