"""``--format markdown``: a GitHub-flavoured Markdown summary (job summary, PR comment, incident note).

Layout: one status line, the input notes, a table (rule, severity, count, first evidence ``path:line``, top
cause), one ``<details>`` block per finding with what every full layout shows (``report.layout``: the
numbers, the causes each with its reasons, fix and confirming experiment, the evidence lines in log order in a
fenced block), the deployment facts and a pointer to the machine-readable artifacts. ``max_bytes`` keeps the result under a size limit (GitHub rejects
a step summary over 1 MiB and then shows nothing): whole blocks are dropped from the end and a note says so.
"""

from __future__ import annotations

from specdiag.patterns import lazy
from specdiag.report.layout import (
    DEFAULT,
    VERBOSE,
    WHY_NOT_SETTING,
    CauseView,
    FindingView,
    deployment_blocks,
    deployment_rows,
    finding_views,
    input_notes,
    measurement_items,
)
from specdiag.report.model import Report
from specdiag.report.text import status_line, suppressed
from specdiag.report.verdict import Status, nothing_judged, nothing_to_judge
from specdiag.sanitize import markdown_text, neutralise_workflow_commands, plain_text
from specdiag.timeutil import TIME_BASIS, fmt_time

STEP_SUMMARY_LIMIT = 1024 * 1024
SEV_ICON = {"error": "🔴 error", "warning": "🟠 warning", "info": "🔵 info"}
_BACKTICKS = lazy(r"`+")


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


def _cause_md(c: CauseView) -> str:
    """One ranked cause as a list item: confidence, reasons for and against, its fix and confirmation."""
    out = [f"{c.rank}. {code(c.id)} — {c.confidence:.2f}\n"]
    out += [f"   - **for:** {cell(r)}\n" for r in c.for_]
    out += [f"   - **against:** {cell(r)}\n" for r in c.against]
    if c.more_for or c.more_against:
        out.append(f"   - ({c.more_for} more for, {c.more_against} more against in the JSON report)\n")
    if c.fix:
        out.append(f"   - **Fix:** {cell(c.fix)}\n")
    if c.confirm_with:
        out.append(f"   - **Confirm:** {code(c.confirm_with)}\n")
    return "".join(out)


def _causes_md(v: FindingView) -> str:
    parts = ["Causes (share of belief; they add up to less than 1):\n\n"]
    parts += [_cause_md(c) for c in v.shown]
    parts.append("\n")
    if v.also:
        parts.append("Also weighed: " + ", ".join(f"{code(c.id)} {c.confidence:.2f}" for c in v.also) + "\n\n")
    if (suspect := v.why_not) is not None:
        parts.append(f"**Why not {code(WHY_NOT_SETTING)}:** confidence {suspect.confidence:.2f} — "
                     f"{cell(v.why_not_reasons)}\n\n")
    return "".join(parts)


def _evidence_md(v: FindingView) -> str:
    """The evidence lines in log order, ``▸`` marking the primary one, in a fence the log text cannot close."""
    lines = [f"{'▸' if e.primary else ' '} {e.where}: {e.text}" for e in v.evidence_shown]
    if v.evidence_more:
        lines.append(f"… {v.evidence_more} more evidence line(s) in the JSON report")
    return "Evidence, in log order (▸ = the line CI annotations point at):\n\n" + fence("\n".join(lines)) + "\n"


def _details(v: FindingView, verbose: bool = False) -> str:
    """The shared layout (``report.layout``) folded into one ``<details>`` block: the arithmetic, the
    numbers, the causes, the suspect the evidence argues against, the evidence lines and the next steps."""
    ev0 = v.primary
    where = f" — {code(ev0.where)}" if ev0 else ""
    on = f" on {code(v.deployment)}" if v.deployment else ""
    count = f" ×{v.count}" if v.count > 1 else ""
    parts = [f"<details><summary><b>{cell(v.rule)}</b> {cell(v.title)}{count}{on}{where}</summary>\n\n"]
    if v.summary:
        parts.append(f"{cell(v.summary)}\n\n")
    if v.first_seen is not None:
        parts.append(f"First seen: {code(fmt_time(v.first_seen))} ({TIME_BASIS})\n\n")
    if items := measurement_items(v.measurements, verbose):
        parts.append("Numbers: " + " ".join(code(f"{k}={val}") for k, val in items) + "\n\n")
    if v.causes:
        parts.append(_causes_md(v))
    if v.evidence:
        parts.append(_evidence_md(v))
    if v.next_steps:
        parts.append("Next steps:\n\n" + "".join(f"- {cell(step)}\n" for step in v.next_steps) + "\n")
    parts.append(f"Fingerprint: {code(v.fingerprint)}\n\n</details>\n\n")
    return "".join(parts)


def _table_row(v: FindingView) -> str:
    """The finding in the summary table: rule and title, severity, count, primary location, top cause."""
    loc = code(v.primary.where) if v.primary else ""
    top = f"{code(v.top.id)} ({v.top.confidence:.2f})" if v.top else ""
    on = f" on {code(v.deployment)}" if v.deployment else ""
    return f"| **{cell(v.rule)}** {cell(v.title)}{on} | {SEV_ICON[v.severity]} | {v.count} | {loc} | {top} |\n"


def _deployments_md(report: Report) -> str:
    """The deployment facts, one list per deployment (``layout.deployment_rows``)."""
    out = []
    for title, c in deployment_blocks(report):
        rows = deployment_rows(c)
        if rows:
            out.append(f"**{cell(title)}:**\n\n" + "".join(f"- {cell(k)}: {cell(val)}\n" for k, val in rows)
                       + "\n")
    return "".join(out)


def _sentence(text: str) -> str:
    """A status or hint as a markdown sentence: capitalised, escaped, with its full stop."""
    return cell(text[:1].upper() + text[1:]) + "."


def _headline(report: Report, unjudged: Status | None) -> str:
    """The summary's title line: the worst severity shown, or a warning when nothing could be judged."""
    c = report.summary
    if c["errors"]:
        head = "❌"
    elif c["warnings"] or unjudged:
        head = "⚠️"
    else:
        head = "✅"
    return f"## {head} specdiag: {status_line(report)}\n\n"


def _header_md(report: Report, views: list[FindingView], fail_on: str | None) -> list[str]:
    """Title, fail-on threshold, input problems and, when there are no findings, why not; never truncated."""
    unjudged = nothing_judged(report) if not views else None
    header = [_headline(report, unjudged)]
    if fail_on is not None:
        header.append(f"Fails on: **{fail_on}**.\n\n")
    problems = input_notes(report)
    if problems:
        header.append("**Input problems:**\n\n")
        for level, msg in problems[:20]:
            header.append(f"- {level}: {cell(msg)}\n")
        header.append("\n")
    if unjudged:
        header.append(_sentence(unjudged.text) + "\n\n" + _sentence(unjudged.hints[0]) + "\n")
    elif not views and report.recognized_lines:
        unseen, hints = nothing_to_judge(report)
        header.append(" ".join([_sentence("no findings" + unseen), *map(_sentence, hints)]) + "\n")
    elif not views:
        header.append("No line of the input was recognised as vLLM or LMCache output.\n")
    return header


def _blocks_md(report: Report, views: list[FindingView], verbose: bool) -> list[str]:
    """The droppable body, in the order it is cut from the end: findings table, details, deployments."""
    blocks: list[str] = []
    if views:
        blocks.append("| rule | severity | count | first evidence | top cause |\n|---|---|---|---|---|\n")
        blocks += [_table_row(v) for v in views]
        blocks.append("\n")
        blocks += [_details(v, verbose) for v in views]
    if report.recognized_lines and (dep := _deployments_md(report)):
        blocks.append(dep)
    return blocks


def _footer_md(report: Report, artifact_hint: str) -> list[str]:
    """Baseline count and where the full details are; kept even when blocks are dropped."""
    sup = suppressed(report)
    footer = []
    if sup:
        footer.append(f"{len(sup)} finding(s) matched the baseline and are not shown.\n\n")
    footer.append(f"Machine-readable details: {artifact_hint}.\n")
    return footer


def _truncated_md(header: list[str], blocks: list[str], footer: list[str], max_bytes: int,
                  artifact_hint: str) -> str:
    """Keep as many whole blocks as fit in ``max_bytes`` with header and footer, then say what was cut; a
    header that alone is too big is cut hard."""
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


def render_markdown(report: Report, *, max_bytes: int | None = None, fail_on: str | None = None,
                    artifact_hint: str = "the JSON or SARIF report", verbose: bool = False) -> str:
    """The summary; with ``max_bytes`` whole blocks are dropped from the end to stay within it; ``verbose``:
    every cause and reason in full, as the terminal's ``-v`` (``layout.VERBOSE``)."""
    views = finding_views(report, VERBOSE if verbose else DEFAULT)
    header = _header_md(report, views, fail_on)
    blocks = _blocks_md(report, views, verbose)
    footer = _footer_md(report, artifact_hint)
    text = _safe("".join(header) + "".join(blocks) + "".join(footer))
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    return _truncated_md(header, blocks, footer, max_bytes, artifact_hint)


def _safe(text: str) -> str:
    """Printed to a CI log too: no line may read as a workflow command; valid UTF-8 only."""
    return neutralise_workflow_commands(text).encode("utf-8", "replace").decode("utf-8")


__all__ = ["STEP_SUMMARY_LIMIT", "cell", "code", "fence", "render_markdown"]
