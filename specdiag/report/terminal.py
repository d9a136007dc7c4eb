"""The terminal report: the answer first and last, the reasoning in between.

Layout: the status line and one verdict line per finding group (so the answer is on the first screen and
still on the screen when the run ends) → what was read, and what was not read whole → each deployment → the
timeline → each finding with its arithmetic, ranked causes (evidence for ``+`` and against ``−``, each
cause's fix and the experiment that would confirm it) and the log lines as ``path:line`` in log order → the
verdict again. What each finding shows is ``report.layout``'s, the same as markdown and HTML.

Below ``COMPACT_BELOW`` columns the layout drops boxes and tables (nothing wraps one word per line); the
content stays the same. Every
string that came from a log goes through ``specdiag.sanitize.terminal_text``: a log line can carry escape
sequences (OSC 52 clipboard writes, ``ESC[2J``, title sets) that must never reach the tty; Rich markup is
never interpreted either.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specdiag.findings import Finding
from specdiag.report.layout import (
    BRIEF,
    DEFAULT,
    VERBOSE,
    WHY_NOT_SETTING,
    CauseView,
    FindingView,
    deployment_blocks,
    deployment_rows,
    finding_views,
    input_notes,
    line_ends_note,
    measurement_items,
    ordered_findings,
    run_lines,
)
from specdiag.report.model import Report
from specdiag.report.verdict import Status, present_suspects, status, suspects, verdicts
from specdiag.sanitize import one_line, terminal_text
from specdiag.timeutil import fmt_log_time

SEV_STYLE = {"error": "bold white on red", "warning": "bold black on yellow", "info": "bold white on blue"}
SEV_COLOR = {"error": "red", "warning": "yellow", "info": "blue"}
SUSPECT_COLOR = {"rejected": "green", "possible": "yellow", "supported": "red", "not weighed": "dim"}
COMPACT_BELOW = 100
DEFAULT_WIDTH = 120  # pasted or piped reports: a fixed, readable width


def _bar(conf: float, width: int = 10) -> str:
    n = max(0, min(width, round(conf * width)))
    return "█" * n + "░" * (width - n)


def _t(s: Any, style: str = "") -> Text:
    """Log-derived text, made safe for a terminal."""
    return Text(terminal_text(s), style=style)


def _deployment_of(report: Report) -> Any:
    """Names each finding's deployment when the report holds several (else None: nothing to tell apart)."""
    return report.deployment_of if len(report.deployments) > 1 else None


def _verdict_block(console: Console, st: Status, findings: list[Finding], compact: bool, where: Any = None,
                   asked: tuple[str, ...] = (), present: frozenset[str] = frozenset()) -> None:
    head = Text("specdiag: ", style="bold")
    head.append(st.text, style="bold" if st.kind in ("findings", "clean") else "bold yellow")
    console.print(head)
    _suspect_lines(console, suspects(findings, asked, present), compact)  # the user's suspicion, answered first
    vs = verdicts(findings, where)
    if vs and compact:  # no hanging-indent column: the full width for the words
        for v in vs:
            t = Text("  ")
            t.append(v.rule, style=f"bold {SEV_COLOR[v.severity]}")
            t.append(" ")
            t.append(v.severity, style=SEV_COLOR[v.severity])
            t.append(terminal_text(v.line()[len(v.rule) + len(v.severity) + 1:]))
            console.print(t)
    elif vs:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column()
        for v in vs:
            code = Text("  ")
            code.append(v.rule, style=f"bold {SEV_COLOR[v.severity]}")
            code.append(" ")
            code.append(v.severity, style=SEV_COLOR[v.severity])
            grid.add_row(code, _t(v.line()[len(v.rule) + len(v.severity) + 2:]))
        console.print(grid)
    for h in st.hints:
        console.print(_t("  " + h, "dim"))


def _suspect_lines(console: Console, sus: list, compact: bool) -> None:
    """``save_decode_cache: rejected (0.00) — why; settle: …``, the words under the verdict when wrapped."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for s in sus:
        head = Text("  ")
        head.append(terminal_text(s.name) + ":", style="bold")
        body = Text(s.verdict, style=SUSPECT_COLOR.get(s.verdict, ""))
        body.append(terminal_text(s.line()[len(s.name) + 2 + len(s.verdict):]))
        if compact:  # no hanging-indent column: the full width for the words
            console.print(head + Text(" ") + body)
        else:
            grid.add_row(head, body)
    if sus and not compact:
        console.print(grid)


def _inputs_line(report: Report) -> Text:
    lines = sum(i["lines"] for i in report.inputs)
    rec = sum(i["recognized"] for i in report.inputs)
    n = len(report.inputs)
    ends = line_ends_note(report)
    t = Text()
    t.append(f"Read {n} input{'s' if n != 1 else ''}, {lines:,} lines{f' ({ends})' if ends else ''}: {rec:,} recognised "
             "as vLLM/LMCache output")
    t.append(f" in {report.elapsed_s:.2f} s.")
    return t


def _context(report: Report, compact: bool) -> RenderableType | None:
    """One block per deployment (a server: its files, or one pod of a merged stream), from the shared layout."""
    blocks = [_context_block(deployment_rows(c), terminal_text(title), compact) for title, c in deployment_blocks(report)]
    shown = [b for b in blocks if b is not None]
    return Group(*shown) if shown else None


def _context_block(rows: list[tuple[str, str]], title: str, compact: bool) -> RenderableType | None:
    if not rows:
        return None
    if compact:  # "key: value" lines use the whole width; a key column would squeeze every value
        lines = [Text(title, style="bold underline")]
        for k, v in rows:
            t = Text(f"{k}: ", style="bold")
            t.append(terminal_text(v))
            lines.append(t)
        return Group(*lines)
    tab = Table.grid(padding=(0, 2))
    tab.add_column(style="bold", no_wrap=True)
    tab.add_column()
    for k, v in rows:
        tab.add_row(k, _t(v))
    return Panel(tab, title=title, title_align="left", border_style="dim")


def _measurements(m: Mapping[str, Any], verbose: bool) -> Text | None:
    """The numbers on one wrapped line (``layout.measurement_items``)."""
    items = measurement_items(m, verbose)
    if not items:
        return None
    mt = Text()
    for k, shown in items:
        mt.append(k, style="dim")
        mt.append("=" + terminal_text(shown) + "  ")
    mt.rstrip()
    return mt


def _reasons(c: CauseView) -> Text:
    """The evidence for (``+``) and against (``−``) a cause, and how many more the detail level left out."""
    why = Text()
    for s in c.for_:
        why.append("+ ", style="green")
        why.append(terminal_text(s) + "\n")
    for s in c.against:
        why.append("− ", style="red")
        why.append(terminal_text(s) + "\n")
    if c.more_for or c.more_against:
        why.append(f"({c.more_for} more for, {c.more_against} more against: -v)\n", style="dim")
    return why


def _cause_lines(c: CauseView) -> list[RenderableType]:
    """``N. id  ████░░ 0.40``, then indented its reasons both ways, its fix and its confirming experiment."""
    line = Text(f"{c.rank}. ")
    line.append(terminal_text(c.id), style="bold" if c.rank == 1 else "")
    line.append(f"  {_bar(c.confidence)} {c.confidence:.2f}")
    body = _reasons(c)
    for label, value, style in (("Fix: ", c.fix, "bold green"), ("Confirm: ", c.confirm_with, "bold")):
        if value:
            body.append(label, style=style)
            body.append(terminal_text(value) + "\n")
    if not body:
        return [line]
    body.rstrip()
    return [line, Padding(body, (0, 0, 0, 3))]


def _causes(v: FindingView) -> list[RenderableType]:
    """Ranked causes as lines (no table: narrow terminals must not wrap a word per line)."""
    parts: list[RenderableType] = []
    parts.append(Text("Causes (share of belief; the rest is kept for causes nobody listed, so they add up to less than 1):", style="bold"))
    for c in v.shown:
        parts += _cause_lines(c)
    if v.also:
        parts.append(Text("also weighed: " + ", ".join(f"{terminal_text(c.id)} {c.confidence:.2f}" for c in v.also)
                          + "  (-v for the reasons)", style="dim"))
    suspect = v.why_not
    if suspect is not None:
        t = Text(f"Why not {WHY_NOT_SETTING}: ", style="bold")
        t.append(terminal_text(f"confidence {suspect.confidence:.2f} — {v.why_not_reasons}"))
        parts.append(t)
    return parts


def _evidence(v: FindingView, verbose: bool, compact: bool) -> Text:
    """The evidence lines in log order; ``▸`` marks the primary one (the CI formats' location). Without
    ``-v`` a long line is cut to about two rows of the terminal (the other layouts show it whole)."""
    ev = Text("Evidence, in log order (▸ = the line CI annotations point at):\n", style="bold")
    limit = 120 if compact else 220
    for e in v.evidence_shown:
        text = one_line(e.text)
        text = text if verbose or len(text) <= limit else text[: limit - 1] + "…"
        ev.append(("▸ " if e.primary else "  ") + one_line(e.where), style="cyan")
        ev.append(("\n    " if compact else "  ") + text + "\n")
    if v.evidence_more:
        ev.append(f"  … {v.evidence_more} more evidence line(s) in the JSON report\n", style="dim")
    ev.rstrip()
    return ev


def _head(v: FindingView) -> Text:
    head = Text()
    head.append(f" {v.severity.upper()} ", style=SEV_STYLE[v.severity])
    head.append(f" {v.rule} ", style="bold")
    head.append(terminal_text(v.title))
    if v.count > 1:
        head.append(f"  ×{v.count} occurrences", style="bold")
    if v.deployment:
        head.append(f"  on {terminal_text(v.deployment)}", style="bold")
    if v.run is not None:
        head.append(f"  in run {v.run}", style="bold")
    return head


def _finding(v: FindingView, verbose: bool, compact: bool) -> RenderableType:
    """The shared layout (``report.layout``): head, arithmetic, numbers, causes, evidence, next steps."""
    parts: list[RenderableType] = [_head(v)]
    if v.first_seen is not None:
        parts.append(Text(f"first seen {fmt_log_time(v.first_seen)}", style="dim"))
    if v.summary:
        parts.append(_t(v.summary))
    mt = _measurements(v.measurements, verbose)
    if mt is not None:
        parts.append(mt)
    if v.causes:
        parts += _causes(v)
    if v.evidence:
        parts.append(_evidence(v, verbose, compact))
    if v.next_steps:
        ns = Text("Next steps:\n", style="bold")
        for s in v.next_steps:
            ns.append(f"  • {terminal_text(s)}\n")
        ns.rstrip()
        parts.append(ns)
    if compact:
        return Group(Text(""), *parts)
    return Panel(Group(*parts), border_style=SEV_COLOR[v.severity], expand=True)


def _timeline(console: Console, report: Report, compact: bool, width: int) -> None:
    """Acceptance and cache-hit sparklines on one time axis, one marker row per kind, a time axis."""
    from specdiag.metrics.sparkline import LABEL_W, timeline_rows

    spark_w = max(16, min(60, width - LABEL_W - (14 if compact else 18)))
    rows = timeline_rows(report.timeline or {}, width=spark_w)
    if not rows:
        return
    body = Text("\n".join(terminal_text(r) for r in rows))
    body.append("\n'last' = the value of the last interval; blank columns: no interval logged there", style="dim")
    if compact:
        console.print(Group(Text("timeline", style="bold underline"), body))
    else:
        console.print(Panel(body, title="timeline", title_align="left", border_style="dim"))


def _unrecognised(console: Console, report: Report) -> None:
    unrec = {k: v for k, v in report.unrecognized.items() if k != "top_warnings" and v}
    if unrec:
        console.print(Text("Records of unknown messages (vLLM/LMCache output whose text no template or catalogued "
                           "release prints): "
                           + ", ".join(f"{v:,} {terminal_text(k)} record(s)" for k, v in unrec.items()), style="dim"))
    top = report.unrecognized.get("top_warnings") or {}
    if top:
        console.print(Text("Unrecognised warnings/errors, most frequent first (example text):", style="dim"))
        for shape, n in list(top.items())[:5]:
            console.print(_t(f"  {n:>5} × {one_line(shape)}", "dim"))


def resolve_width(out: Any, width: int | None = None) -> int:
    """The report width: explicit, else ``$COLUMNS``, else the terminal's, else 120 (pasted/piped)."""
    if width:
        return max(40, width)
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return max(40, int(env))
    if getattr(out, "isatty", lambda: False)():
        try:
            return max(40, os.get_terminal_size(out.fileno()).columns)
        except (OSError, ValueError, AttributeError):
            pass
    return DEFAULT_WIDTH


class _RightStripped:
    """A file that drops trailing blanks from each line: Rich pads table cells to the column width, which a
    report pasted into a ticket or a chat does not need."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._pending = ""

    def write(self, s: str) -> int:
        text = self._pending + s
        *lines, self._pending = text.split("\n")
        if lines:
            self._out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(s)

    def flush(self) -> None:
        if self._pending:
            self._out.write(self._pending.rstrip(" "))
            self._pending = ""
        getattr(self._out, "flush", lambda: None)()

    def isatty(self) -> bool:
        return False


def render_terminal(report: Report, verbose: bool = False, color: bool | None = None, file: Any = None,
                    width: int | None = None, quiet: bool = False, brief: bool = False) -> None:
    """Print the report. ``width`` overrides the detected terminal width (tests, screenshots); ``quiet``
    prints only the status and verdict lines; ``brief`` the verdict, then each finding's head, leading
    cause, fix and two evidence lines (no deployment panel, timeline or closing verdict)."""
    from specdiag.sanitize import sanitized_report

    report = sanitized_report(report)  # log text reaches the tty without escape sequences or bidi controls
    out = file or sys.stdout
    w = resolve_width(out, width)
    if not getattr(out, "isatty", lambda: False)():
        out = _RightStripped(out)
    compact = w < COMPACT_BELOW
    console = Console(file=out, no_color=color is False, highlight=False, soft_wrap=False, emoji=False,
                      markup=False, width=w)
    findings = ordered_findings(report)
    st = status(report, list(report.rules))
    _verdict_block(console, st, findings, compact, _deployment_of(report), report.suspects,
                   present_suspects([d.context.to_dict() for d in report.deployments]))
    if quiet:
        out.flush()
        return
    for line in run_lines(report):  # several server runs: which, and what changed, first
        console.print(_t(line, "bold" if not line.startswith(" ") else ""))
    console.print(_inputs_line(report), style="dim")
    for level, msg in input_notes(report):
        console.print(_t(f"  ! {level}: {one_line(msg)}", "yellow"))
    if st.kind == "nothing-recognised":
        out.flush()
        return
    if brief:
        for v in finding_views(report, BRIEF):
            console.print(_finding(v, False, compact))
        out.flush()
        return
    ctx = _context(report, compact)
    if ctx is not None:
        console.print(ctx)
    _timeline(console, report, compact, w)
    for v in finding_views(report, VERBOSE if verbose else DEFAULT):
        console.print(_finding(v, verbose, compact))
    _unrecognised(console, report)
    console.print(Text(""))
    console.print(Text("── verdict " + "─" * max(0, min(w, 80) - 11), style="dim"))
    _verdict_block(console, st, findings, compact, _deployment_of(report), report.suspects,
                   present_suspects([d.context.to_dict() for d in report.deployments]))
    out.flush()


__all__ = ["COMPACT_BELOW", "render_terminal", "resolve_width", "escape"]
