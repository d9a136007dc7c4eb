"""``--format markdown``: a GitHub-flavoured Markdown summary (job summary, PR comment, incident note).

Layout: one status line, a table (rule, severity, count, first evidence ``path:line``, top cause), one
``<details>`` block per finding with the explanation, the fix and the evidence lines in a fenced block, and a
pointer to the machine-readable artifacts. ``max_bytes`` keeps the result under a size limit (GitHub rejects
a step summary over 1 MiB and then shows nothing): whole blocks are dropped from the end and a note says so.
"""

from __future__ import annotations

import re

from specdiag.findings import Finding
from specdiag.report.layout import WHY_NOT_REASONS, WHY_NOT_SETTING, finding_view
from specdiag.report.model import Report
from specdiag.report.text import (
    display_path,
    ordered_findings,
    status_line,
    suppressed,
    tool_problems,
)
from specdiag.sanitize import markdown_text, neutralise_workflow_commands, plain_text
from specdiag.timeutil import TIME_BASIS, fmt_time

STEP_SUMMARY_LIMIT = 1024 * 1024
SEV_ICON = {"error": "🔴 error", "warning": "🟠 warning", "info": "🔵 info"}
MAX_EVIDENCE = 10
_BACKTICKS = re.compile(r"`+")


def cell(s: object) -> str:
    """Text safe inside a table cell or a line: one line, no raw HTML, no links/images/emphasis from log text."""
    return " ".join(markdown_text(s).split())


def code(s: object) -> str:
    """An inline code span the text cannot close (longer backtick run), safe in a table (``|`` escaped)."""
    t = " ".join(plain_text(s, keep_newlines=False).split()).replace("|", "\\|")
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(t)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if t.startswith("`") or t.endswith("`") or not t.strip() else ""
    return f"{ticks}{pad}{t}{pad}{ticks}"


def fence(text: str, lang: str = "text") -> str:
    """A fenced code block that the content cannot close (fence longer than any backtick run)."""
    text = plain_text(text)
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    f = "`" * max(3, longest + 1)
    return f"{f}{lang}\n{text}\n{f}\n"


def _details(f: Finding) -> str:
    """The shared layout (``report.layout``) folded into one ``<details>`` block: the arithmetic, the top
    causes with their fixes, the experiment that would confirm the top one, the suspect the evidence
    argues against, the evidence lines and the next steps."""
    v = finding_view(f)
    ev0 = v.primary
    where = f" — {code(f'{display_path(ev0.path)}:{ev0.line}')}" if ev0 else ""
    parts = [f"<details><summary><b>{cell(v.rule)}</b> {cell(v.title)}{where}</summary>\n\n"]
    if v.summary:
        parts.append(f"{cell(v.summary)}\n\n")
    if v.first_seen is not None:
        parts.append(f"First seen: {code(fmt_time(v.first_seen))} ({TIME_BASIS})\n\n")
    if v.causes:
        parts.append("| cause | confidence | fix |\n|---|---|---|\n")
        for c in v.causes[:5]:
            parts.append(f"| {code(c.id)} | {c.confidence:.2f} | {cell(c.fix)} |\n")
        parts.append("\n")
        if v.confirm_with:
            parts.append(f"Confirm with: {code(v.confirm_with)}\n\n")
        if (suspect := v.why_not) is not None:
            reasons = "; ".join(suspect.against[:WHY_NOT_REASONS])
            parts.append(f"**Why not {code(WHY_NOT_SETTING)}:** confidence {suspect.confidence:.2f} — {cell(reasons)}\n\n")
    if v.evidence:
        lines = [f"{display_path(e.path)}:{e.line}: {e.text}" for e in v.evidence[:MAX_EVIDENCE]]
        if len(v.evidence) > MAX_EVIDENCE:
            lines.append(f"… {len(v.evidence) - MAX_EVIDENCE} more evidence line(s) in the JSON report")
        parts.append(fence("\n".join(lines)))
        parts.append("\n")
    if v.next_steps:
        parts.append("Next steps:\n\n" + "".join(f"- {cell(step)}\n" for step in v.next_steps) + "\n")
    parts.append(f"Fingerprint: {code(v.fingerprint)}\n\n</details>\n\n")
    return "".join(parts)


def _table_row(f: Finding) -> str:
    """The finding in the summary table: rule and title, severity, count, primary location, top cause."""
    v = finding_view(f)
    loc = code(f"{display_path(v.primary.path)}:{v.primary.line}") if v.primary else ""
    top = f"{code(v.top.id)} ({v.top.confidence:.2f})" if v.top else ""
    return f"| **{cell(v.rule)}** {cell(v.title)} | {SEV_ICON[v.severity]} | {v.count} | {loc} | {top} |\n"


def render_markdown(report: Report, *, max_bytes: int | None = None, fail_on: str | None = None,
                    artifact_hint: str = "the JSON or SARIF report") -> str:
    """The summary; with ``max_bytes`` whole blocks are dropped from the end to stay within it."""
    findings = ordered_findings(report)
    c = report.summary
    if c["errors"]:
        head = "❌"
    elif c["warnings"]:
        head = "⚠️"
    else:
        head = "✅"
    header = [f"## {head} specdiag: {status_line(report)}\n\n"]
    if fail_on is not None:
        header.append(f"Fails on: **{fail_on}**.\n\n")
    problems = tool_problems(report)
    if problems:
        header.append("**Input problems:**\n\n")
        for p in problems[:20]:
            header.append(f"- {p['level']}: {cell(p['message'])}\n")
        header.append("\n")
    if not findings:
        header.append("No findings." if report.recognized_lines else
                      "No line of the input was recognised as vLLM or LMCache output.")
        header.append("\n")
    blocks: list[str] = []
    if findings:
        blocks.append("| rule | severity | count | first evidence | top cause |\n|---|---|---|---|---|\n")
        blocks += [_table_row(f) for f in findings]
        blocks.append("\n")
        for f in findings:
            blocks.append(_details(f))
    sup = suppressed(report)
    footer = []
    if sup:
        footer.append(f"{len(sup)} finding(s) matched the baseline and are not shown.\n\n")
    footer.append(f"Machine-readable details: {artifact_hint}.\n")

    text = _safe("".join(header) + "".join(blocks) + "".join(footer))
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    # keep as many whole blocks as fit, then say what was cut
    note_tpl = "\n> **Truncated:** {n} of {t} blocks left out to stay within the {k} KiB summary limit; " \
               f"see {artifact_hint} for everything.\n\n"
    budget = max_bytes - len("".join(header).encode()) - len("".join(footer).encode()) \
        - len(note_tpl.format(n=len(blocks), t=len(blocks), k=max_bytes // 1024).encode())
    kept: list[str] = []
    used = 0
    for b in blocks:
        size = len(b.encode())
        if used + size > budget:
            break
        kept.append(b)
        used += size
    note = note_tpl.format(n=len(blocks) - len(kept), t=len(blocks), k=max_bytes // 1024)
    text = _safe("".join(header) + "".join(kept) + note + "".join(footer))
    if len(text.encode()) > max_bytes:  # pathological header (thousands of input problems): hard cut
        text = text.encode()[: max_bytes - 64].decode("utf-8", "ignore") + "\n\n> **Truncated.**\n"
    return text


def _safe(text: str) -> str:
    """Printed to a CI log too: no line may read as a workflow command; valid UTF-8 only."""
    return neutralise_workflow_commands(text).encode("utf-8", "replace").decode("utf-8")


__all__ = ["STEP_SUMMARY_LIMIT", "cell", "code", "fence", "render_markdown"]
