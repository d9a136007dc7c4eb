"""``--format text``: plain, deterministic, colour-free output for CI logs — plus helpers the CI formats share.

One line per finding in the ``path:line: severity CODE title`` shape (which a GitHub problem matcher or an
editor can pick up), then indented detail lines, then a one-line summary. No timings, no colour, no
terminal width: the same input gives byte-identical output.
"""

from __future__ import annotations

from specdiag.findings import Finding
from specdiag.report.layout import display_path, finding_view, ordered_findings, tool_problems
from specdiag.report.model import Report
from specdiag.report.verdict import nothing_judged, nothing_to_judge
from specdiag.sanitize import neutralise_workflow_commands

# ---------------------------------------------------------------------------------------------------------
# helpers shared by the CI renderers (github, markdown, sarif, junit, gitlab)


def execution_failed(report: Report) -> bool:
    return any(p["level"] == "error" for p in tool_problems(report))


def suppressed(report: Report) -> list[Finding]:
    return list(getattr(report, "suppressed", None) or [])


def cause_line(f: Finding) -> str:
    c = f.top_cause
    if c is None:
        return ""
    return f"{c.id} ({c.confidence:.2f})"


def finding_message(f: Finding, *, with_fix: bool = True) -> str:
    """A short multi-line message from the shared layout (``report.layout``): what happened, the likely
    cause with its fix and confirming experiment, then the other causes the full layouts show, each with its
    fix (so a CI annotation names the same causes as the report); without a cause, the first next step."""
    v = finding_view(f)
    lines = [(v.summary or v.title).strip()]
    if v.count > 1:
        lines[0] += f" [{v.count} occurrences]"
    if v.top is not None:
        lines.append(f"Likely cause: {cause_line(f)}")
        if with_fix and v.fix:
            lines.append(f"Fix: {v.fix}")
        if with_fix and v.confirm_with:
            lines.append(f"Confirm: {v.confirm_with}")
        for c in v.shown[1:]:
            lines.append(f"Also possible: {c.id} ({c.confidence:.2f})" + (f" - fix: {c.fix}" if with_fix and c.fix else ""))
    elif with_fix and v.next_steps:
        lines.append(f"Next: {v.next_steps[0]}")
    return "\n".join(lines)


def summary_counts(findings: list[Finding]) -> dict[str, int]:
    out = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        out[f.severity] += 1
    return out


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def status_line(report: Report) -> str:
    c = summary_counts(report.findings)
    parts = [plural(c["error"], "error"), plural(c["warning"], "warning"), f"{c['info']} info"]
    s = ", ".join(parts)
    n_sup = len(suppressed(report))
    if n_sup:
        s += f" ({n_sup} more suppressed by the baseline)"
    n_in = len(report.inputs)
    return f"{s} in {plural(n_in, 'input')} ({report.recognized_lines:,} lines recognised)"


# ---------------------------------------------------------------------------------------------------------


def render_text(report: Report, *, fail_on: str | None = None) -> str:
    out: list[str] = []
    for p in tool_problems(report):
        out.append(f"specdiag: {p['level']}: {p['message']}")
    for f in ordered_findings(report):
        ev = f.evidence[0] if f.evidence else None
        loc = f"{display_path(ev.path)}:{ev.line}: " if ev else ""
        out.append(f"{loc}{f.severity} {f.rule} {f.title}")
        for i, line in enumerate(finding_message(f).split("\n")):  # \x0b in log text stays on its line
            if i == 0 and line.strip() == f.title.strip():
                continue
            out.append(f"    {line}")
        for e in finding_view(f).evidence_in_log_order(4):  # the layout's order: log order
            if not e.primary:
                out.append(f"    see {display_path(e.path)}:{e.line}")
    if report.findings or out:
        out.append("")
    line = status_line(report)
    if fail_on is not None:
        line += f"; fail-on {fail_on}"
    out.append(f"specdiag: {line}")
    if report.recognized_lines == 0 and report.inputs:
        out.append("specdiag: no line of the input was recognised as vLLM or LMCache output")
    elif not report.findings and (unjudged := nothing_judged(report)) is not None:
        out.append(f"specdiag: {unjudged.text}")
    elif not report.findings and (unseen := nothing_to_judge(report)[0]):
        out.append(f"specdiag: no findings{unseen}")
    # CI logs: no escape sequence reaches the job log, and no line of log text (a file named
    # ``::warning title=x::ok.log``) is read by the runner as a workflow command
    return neutralise_workflow_commands("\n".join(out)) + "\n"


__all__ = [
    "cause_line", "display_path", "execution_failed", "finding_message", "ordered_findings", "render_text",
    "status_line", "summary_counts", "suppressed", "tool_problems",
]
