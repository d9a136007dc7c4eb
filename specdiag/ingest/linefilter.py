"""Line filters (``--since``, ``--until``, ``--request``, ``--rank``) applied before anything is parsed.

A filtered input is read through :class:`FilteredStream`: a line the filter excludes becomes an empty
line, so it never reaches the scanner or the rules, and every line kept keeps its line number (evidence
still points into the real file). Decisions are made on each line's logger header; a line without one (a
traceback, a continuation, a banner row) shares the decision of the line before it.

**Times.** A line's time is its logger's: LMCache's ``[2026-05-06 15:56:03,745]`` (with its year), vLLM's
``05-06 15:56:03`` (no year: none is guessed). A filter time may be ``HH:MM[:SS]``, ``MM-DD HH:MM[:SS]`` or
``YYYY-MM-DD HH:MM[:SS]`` (``T`` or a space between date and time; fractions of a second are dropped):

* a dated filter is compared with a dated line on year, month, day and time, and with a vLLM line (no
  year) on month, day and time — the year the line does not print is not invented;
* a time of day alone is compared with each line's time of day, which is only meaningful within one date:
  once the lines read span two dates, the filter cannot be applied and reading stops with
  :class:`FilterError` (give the date);
* a time with a zone (``Z``, ``+02:00``) is refused: the logs print none (log time, zone unknown).

Lines before the first line with a time have none: ``--since`` excludes them (they cannot be shown to be
after it), ``--until`` keeps them. An input in which no line has a time cannot be filtered by time: an
error, not an empty analysis.

**Ranks.** ``--rank N`` keeps the lines of the process whose prefix names TP rank N (``(Worker_TP2 pid=…)``,
``(VllmWorker rank=2 pid=…)``) and the lines of processes that name no rank (the API server, the engine
core, whose scheduler serves every rank); it excludes the other ranks' lines.

**Requests.** ``--request ID`` keeps the lines that mention one of the given ids, excludes the lines that
name another request (``req_id=…``, ``Request …``, ``Reqid: …``, ``chatcmpl-…``, …), and keeps the lines
that name no request (configuration, stats, start-up): they are the context every request ran in — except
a line that follows, from the same process and at the same time, a line of another request (the second
line of LMCache's error pair).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specdiag.ingest.sources import InputError, Source
from specdiag.patterns import lazy

#: how far into a line its header (wrappers, process prefix, logger envelope) is looked for
HEAD = 256

_LMC_TIME = lazy(rb"\[(20\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_VLLM_TIME = lazy(rb"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
_REQUEST = lazy(rb"(?:req_id=|request_id=|[Rr]equest |Reqid: |req=|lookup id )'?([^\s,\]}']+)"
                rb"|\b((?:chatcmpl|cmpl)-[\w-]+)")


class FilterError(InputError):
    """A filter that cannot be applied to this input (one line, exit 2, as any input problem)."""


@dataclass(frozen=True)
class LineTime:
    """A line's logger time: ``year`` None where the line prints none (vLLM)."""

    year: int | None
    month: int
    day: int
    second: int  # of the day


#: a filter time: ``HH:MM[:SS]``, ``MM-DD HH:MM[:SS]``, ``YYYY-MM-DD HH:MM[:SS]`` (``T`` or a space)
_SPEC = lazy(r"^(?:(?:(\d{4})-)?(\d\d)-(\d\d)[T ])?(\d\d):(\d\d)(?::(\d\d)(?:[.,]\d+)?)?$")


@dataclass(frozen=True)
class TimeSpec:
    """A ``--since``/``--until``/``--before`` time as given: the parts it names, nothing added."""

    text: str
    year: int | None
    month: int | None
    day: int | None
    second: int

    @classmethod
    def parse(cls, text: str, option: str) -> TimeSpec:
        t = text.strip()
        if re.search(r"(?:Z|[+-]\d\d:?\d\d)$", t) and not _SPEC.match(t):
            raise FilterError(f"{option} {text}: the logs print no time zone (log time, zone unknown); give the "
                              "time without one, as the log prints it")
        m = _SPEC.match(t)
        if m is None:
            raise FilterError(f"{option} {text}: expected HH:MM[:SS], MM-DD HH:MM[:SS] or YYYY-MM-DD HH:MM[:SS]")
        year, month, day, hh, mm, ss = m.groups()
        if int(hh) > 23 or int(mm) > 59 or int(ss or 0) > 59 or (month and not (1 <= int(month) <= 12
                                                                                  and 1 <= int(day) <= 31)):
            raise FilterError(f"{option} {text}: not a valid time")
        return cls(text, int(year) if year else None, int(month) if month else None, int(day) if day else None,
                   int(hh) * 3600 + int(mm) * 60 + int(ss or 0))

    def compare(self, t: LineTime) -> int:
        """-1, 0 or 1 as the line's time is before, at or after this time, on the parts both name."""
        if self.month is None:
            a, b = t.second, self.second
        elif self.year is None or t.year is None:
            a, b = (t.month, t.day, t.second), (self.month, self.day, self.second)
        else:
            a, b = (t.year, t.month, t.day, t.second), (self.year, self.month, self.day, self.second)
        return (a > b) - (a < b)


def line_time(line: bytes) -> LineTime | None:
    """The logger time in a line's header, or None."""
    head = line[:HEAD]
    m = _LMC_TIME.search(head)
    if m is not None:
        y, mo, d, hh, mi, ss = map(int, m.groups())
        return LineTime(y, mo, d, hh * 3600 + mi * 60 + ss)
    m = _VLLM_TIME.search(head)
    if m is not None:
        mo, d, hh, mi, ss = map(int, m.groups())
        return LineTime(None, mo, d, hh * 3600 + mi * 60 + ss)
    return None


#: a vLLM process prefix (``(Worker_TP2 pid=767)``) and the TP rank in its name
_PREFIX = lazy(rb"\(([A-Za-z][\w ]{0,60}?)(?: pid=\d+| ip=[\d.]+)+\)")
_RANK = lazy(rb"TP(\d{1,6})\b|rank=(\d{1,6})")


def line_rank(line: bytes) -> int | None | bool:
    """The TP rank a line's process prefix names; None for a prefix without a rank; False without a prefix."""
    m = _PREFIX.search(line[:HEAD])
    if m is None:
        return False
    r = _RANK.search(m.group(1))
    return int(r.group(1) or r.group(2)) if r else None


@dataclass
class LineFilter:
    """The filters of one command line, and what they excluded (per input: ``fresh`` gives a new one)."""

    since: TimeSpec | None = None
    until: TimeSpec | None = None
    requests: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    excluded: int = 0
    kept: int = 0
    timed: int = 0
    _keep: bool = True
    _dates: set[tuple[int, int]] = field(default_factory=set)
    #: process prefix → (time, kept) of its last line that named a request
    _last_request: dict[bytes, tuple[LineTime | None, bool]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.since or self.until or self.requests or self.ranks)

    def fresh(self) -> LineFilter:
        return LineFilter(self.since, self.until, self.requests, self.ranks)

    def describe(self) -> str:
        """The filter as the command line gave it: ``--since 16:05 --rank 2``."""
        parts = [f"--since {self.since.text}"] if self.since else []
        parts += [f"--until {self.until.text}"] if self.until else []
        parts += [f"--request {r}" for r in self.requests] + [f"--rank {r}" for r in self.ranks]
        return " ".join(parts)

    def keep(self, line: bytes) -> bool:
        """Whether ``line`` is analysed (counted in ``kept`` or ``excluded``)."""
        t = line_time(line) if (self.since or self.until or self.requests) else None
        header = t is not None or (line_rank(line) is not False)
        if header:
            self._keep = self._decide(line, t)
        elif self.since and self.timed == 0:
            self._keep = False  # before the first timed line: not shown to be after --since
        if self._keep:
            self.kept += 1
        else:
            self.excluded += 1
        return self._keep

    def _decide(self, line: bytes, t: LineTime | None) -> bool:
        if t is not None:
            self.timed += 1
            self._check_dates(t)
            if self.since is not None and self.since.compare(t) < 0:
                return False
            if self.until is not None and self.until.compare(t) > 0:
                return False
        elif self.since is not None and self.timed == 0:
            return False
        if self.ranks:
            rank = line_rank(line)
            if rank is not None and rank is not False and rank not in self.ranks:
                return False
        return not self.requests or self._request_kept(line, t)

    def _request_kept(self, line: bytes, t: LineTime | None) -> bool:
        """A line naming a request is kept when it names one of ours; a line naming none is kept, unless
        its process printed a line of another request at the same time just before (the second line of
        LMCache's error pair, ``Num retrieved tokens: …``, belongs to the ``Request X …`` line above it)."""
        m = _PREFIX.search(line[:HEAD])
        proc = m.group(0) if m is not None else b""
        if _REQUEST.search(line) is not None:
            ok = any(r.encode() in line for r in self.requests)
            if len(self._last_request) >= 4096:
                self._last_request.clear()
            self._last_request[proc] = (t, ok)
            return ok
        prev = self._last_request.get(proc)
        return not (prev is not None and t is not None and prev[0] == t and not prev[1])

    def _check_dates(self, t: LineTime) -> None:
        """A time of day alone is one date's: refuse once the lines span two."""
        if not any(s is not None and s.month is None for s in (self.since, self.until)):
            return
        self._dates.add((t.month, t.day))
        if len(self._dates) > 1:
            spec = self.since if self.since is not None and self.since.month is None else self.until
            days = ", ".join(f"{m:02d}-{d:02d}" for m, d in sorted(self._dates))
            raise FilterError(f"{spec.text} has no date and the log spans several ({days}): give the date "
                              f"too, e.g. {days[-5:]} {spec.text}")

    def finish(self) -> None:
        """At the input's end: a time filter on an input without a single time cannot have been applied."""
        if (self.since or self.until) and self.timed == 0 and (self.kept or self.excluded):
            raise FilterError("no line of the input carries a time: --since/--until cannot be applied")


class FilteredStream:
    """A readable (``read(n)`` of whole lines, such as a follower or :class:`LineBlocks`) with the lines
    ``keep`` rejects made empty. ``boundary`` (``--before``): reads are cut before the first line at or
    after that time, and ``on_boundary`` is called before the read that starts with it."""

    def __init__(self, inner: Any, flt: LineFilter | None, boundary: TimeSpec | None = None,
                 on_boundary: Callable[[], None] | None = None, stats: Any = None) -> None:
        self.inner = inner
        self.flt = flt
        self.keep = flt.keep if flt is not None and flt.active else None
        #: the filtered input's ``SourceStats``: its ``filter`` entry says what was applied and excluded
        self.stats = stats
        if stats is not None and self.keep is not None:
            stats.filter = {"applied": flt.describe(), "excluded_lines": 0}
        self.boundary = boundary
        self.on_boundary = on_boundary
        self.passed = boundary is None
        self._rest = b""
        self._cut = False

    def read(self, n: int = -1) -> bytes:
        if self._cut:
            self._cut = False
            if self.on_boundary is not None:
                self.on_boundary()
        data, self._rest = (self._rest, b"") if self._rest else (self.inner.read(n), b"")
        if not data:
            if self.flt is not None:
                self.flt.finish()
            return b""
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" after the last line break
        out: list[bytes] = []
        for i, line in enumerate(lines):
            if not self.passed and (t := line_time(line)) is not None and self.boundary.compare(t) >= 0:
                self.passed = True
                if out or i:
                    self._rest, self._cut = b"\n".join(lines[i:]) + b"\n" + tail, True
                    break
                self._cut = False
                if self.on_boundary is not None:
                    self.on_boundary()
            out.append(line if self.keep is None or self.keep(line) else b"")
        if self.stats is not None and self.keep is not None:
            self.stats.filter["excluded_lines"] = self.flt.excluded
        return b"\n".join(out) + b"\n" + (b"" if self._rest else tail)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class LineBlocks:
    """A :class:`~specdiag.ingest.sources.Source`'s decoded line blocks as a readable: a compressed or CR-ended
    file is decoded once, then filtered as text lines."""

    def __init__(self, blocks) -> None:
        self._it = iter(blocks)

    def read(self, n: int = -1) -> bytes:
        return next(self._it, b"")


def filtered_source(src: Source, flt: LineFilter) -> Source:
    """``src`` read through ``flt`` (decoded first: a compressed file is filtered as text), same name."""
    out = Source(src.path, src.display, stream=None, found=src.found)
    out._stream = FilteredStream(LineBlocks(src.chunks()), flt, stats=out.stats)  # noqa: SLF001 - set after stats
    return out


__all__ = ["FilterError", "FilteredStream", "LineBlocks", "LineFilter", "LineTime", "TimeSpec",
           "filtered_source", "line_rank", "line_time"]
