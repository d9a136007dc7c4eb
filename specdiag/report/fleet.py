"""Renderers of the fleet report: JSON (the ``specdiag.fleet/1`` contract), plain text, markdown."""

from __future__ import annotations

import json

from specdiag.fleet.contrast import ALPHA
from specdiag.fleet.model import FleetReport, FleetRow
from specdiag.sanitize import json_safe, markdown_text, one_line
from specdiag.timeutil import fmt_time

#: the contrast section's title in every format: what was compared and by which test
CONTRAST_TITLE = (f"What separates the deployments with each finding from the others "
                  f"(Fisher's exact test, two-sided; p < {ALPHA:g} is decisive)")
NO_CONTRAST = "No finding at warning or above to contrast."


def render_fleet_json(report: FleetReport) -> str:
    return json.dumps(json_safe(report.to_dict()), indent=2, ensure_ascii=False) + "\n"


def _versions(row: FleetRow) -> str:
    c = row.context or {}
    parts = [f"vLLM {c['vllm_version']}" if c.get("vllm_version") else "",
             f"LMCache {c['lmcache_version']}" if c.get("lmcache_version") else "",
             f"TP={c['tensor_parallel_size']}" if c.get("tensor_parallel_size") else ""]
    return ", ".join(p for p in parts if p) or "versions unknown"


def _findings_cell(row: FleetRow) -> str:
    if row.error:
        return f"not analysed: {row.error}"
    by = row.by_rule()
    if not by:
        return "no finding"
    return "; ".join(f"{rule} {r['severity']} ×{r['count']}" + (f" ({', '.join(r['top_causes'][:2])})" if r["top_causes"] else "")
                     + (f" from {fmt_time(r['first_seen'])}" if r["first_seen"] else "") for rule, r in by.items())


def render_fleet_text(report: FleetReport) -> str:
    s = report.summary
    lines = [f"specdiag fleet — {s['deployments']} deployment(s), {s['with_findings']} with findings, "
             f"{s['failed']} not analysed", ""]
    lines.append(f"{CONTRAST_TITLE}:" if report.contrast_rules else NO_CONTRAST)
    for rc in report.contrast_rules:
        lines.append(f"  {one_line(rc.heading())}")
        lines += [f"    {one_line(line)}" for line in rc.lines()]
    lines.append("")
    for row in report.deployments:
        lines.append(f"{one_line(row.id)}  [{one_line(_versions(row))}]")
        lines.append(f"    {one_line(_findings_cell(row))}")
        if row.differences:
            diff = ", ".join(f"{k}={v}" for k, v in list(row.differences.items())[:6])
            lines.append(f"    differs from the majority: {one_line(diff)}")
    return "\n".join(lines) + "\n"


def render_fleet_markdown(report: FleetReport) -> str:
    s = report.summary
    out = [f"## specdiag fleet: {s['deployments']} deployments, {s['with_findings']} with findings, "
           f"{s['failed']} not analysed\n"]
    out.append(f"**{markdown_text(CONTRAST_TITLE)}**\n" if report.contrast_rules else f"{NO_CONTRAST}\n")
    for rc in report.contrast_rules:
        out.append(f"- {markdown_text(rc.heading())}")
        out += [f"  - {markdown_text(line)}" for line in rc.lines()]
    if report.contrast_rules:
        out.append("")
    out.append("| deployment | versions | findings | differs from the majority |")
    out.append("|---|---|---|---|")
    for row in report.deployments:
        diff = ", ".join(f"{k}={v}" for k, v in list(row.differences.items())[:6])
        out.append(f"| {markdown_text(row.id)} | {markdown_text(_versions(row))} | "
                   f"{markdown_text(_findings_cell(row))} | {markdown_text(diff)} |")
    return "\n".join(out) + "\n"
