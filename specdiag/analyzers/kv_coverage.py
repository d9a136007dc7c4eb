"""How much of the deployment's log an input covers, so that absence counts only where it could show.

"No pin-timeout warning" argues against a pin timeout only if the input holds the minutes before the
error on that rank. A pasted fragment (a few lines, no startup, no config dump) cannot: the rules then
keep such absences out of the weighing, cap their confidence and say which lines would decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specdiag.context import Context
from specdiag.events.rows import row_record
from specdiag.timeutil import rec_time

if TYPE_CHECKING:
    from specdiag.events import Record
    from specdiag.events.rows import LookupRows

#: at most this many lines and no startup: a paste, not a log
FRAGMENT_LINES = 50


@dataclass
class Coverage:
    """What the input shows: ``full`` (startup/config seen), ``partial`` (an excerpt) or ``fragment`` (a paste)."""

    kind: str
    max_line: int = 0
    span_s: float | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return self.kind != "full"

    def sentence(self) -> str:
        what = "a pasted fragment" if self.kind == "fragment" else "an excerpt"
        span = f" spanning {self.span_s:.0f} s" if self.span_s is not None and self.span_s >= 1 else ""
        lacks = ", ".join(self.missing) if self.missing else "the lines before the error"
        return (f"The input is {what} ({self.max_line} line(s) seen{span}; no {lacks}): lines that are absent here "
                "are not counted against any cause, and confidence is capped.")


def _config_in_log(ctx: Context) -> bool:
    return bool(ctx.lmcache_config_source and ctx.lmcache_config_source.startswith("log"))


def startup_in_log(ctx: Context) -> bool:
    """LMCache's startup lines are in the input: its config dump, its version banner or the engine's layout
    line (chunk_size, MLA; printed once at startup). A ``--lmcache-config`` file is not the log."""
    initialised = any("initialized" in e for e in ctx.lmcache_version_evidence)
    return _config_in_log(ctx) or initialised or ctx.use_mla is not None


def input_kind(ctx: Context, lines: int | None, max_line_seen: int) -> str:
    """``full`` / ``partial`` / ``fragment`` for a rule that does not see every line.

    ``lines`` is what the inputs held (``RunState.lines_read``); without it the highest line number the rule
    saw stands in, which is a lower bound (a long log whose warnings sit near its top reads as a fragment).
    """
    n = lines if lines is not None else max_line_seen
    if n <= FRAGMENT_LINES:  # a paste, even with the startup or config lines on top: it shows no time between them
        return "fragment"
    return "full" if startup_in_log(ctx) else "partial"


class CoverageTracker:
    """Cheap per-event bookkeeping (one comparison per event) for ``assess``."""

    def __init__(self) -> None:
        self.max_line = 0
        self.first: Record | None = None
        self._last: Record | None = None
        self._last_rows: tuple | None = None  # (rows, row) of the newest lookup rows, built only if asked

    def see(self, rec: Record) -> None:
        if rec.line > self.max_line:
            self.max_line = rec.line
        if self.first is None:
            self.first = rec
        self._last, self._last_rows = rec, None

    def see_rows(self, rows: LookupRows) -> None:
        """A run of lookup rows: only its last one can be the input's last line seen (kept lazily)."""
        if not len(rows):
            return
        last = rows.hi - 1
        if rows.line[last] > self.max_line:
            self.max_line = rows.line[last]
        if self.first is None:
            self.first = rows.record(rows.lo)
        self._last, self._last_rows = None, (rows.path, rows.line[last], rows.keep(last))

    @property
    def last(self) -> Record | None:
        if self._last_rows is not None:
            path, line, kept = self._last_rows
            self._last = row_record(kept, path, line)
            self._last_rows = None
        return self._last

    def assess(self, ctx: Context) -> Coverage:
        """Classify the input from what the context found (startup lines, config dump) and the lines seen."""
        missing = []
        config = _config_in_log(ctx)
        startup = startup_in_log(ctx)
        if not config:
            missing.append("LMCache config dump")
        if not startup:
            missing.append("startup lines")
        span = None
        if self.first is not None and self.last is not None:
            t0, t1 = rec_time(self.first), rec_time(self.last)
            if t0 is not None and t1 is not None:
                span = max(t1 - t0, 0.0)
        if self.max_line <= FRAGMENT_LINES:  # a paste, even with the startup or config lines on top
            kind = "fragment"
        elif startup:
            kind = "full"
        else:
            kind = "partial"
        return Coverage(kind=kind, max_line=self.max_line, span_s=span, missing=missing)
