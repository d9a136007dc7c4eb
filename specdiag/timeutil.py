"""Record timestamps → epoch seconds (local time, no zone, as the logs print them).

LMCache prints ``YYYY-MM-DD HH:MM:SS,mmm``; vLLM ``MM-DD HH:MM:SS`` without a year (every version,
``vllm/logger.py`` ``%m-%d %H:%M:%S``). The year of vLLM lines comes from lines of the same input that
carry one (LMCache's own lines, collector wrappers), found by ingest (``initial_year`` for the lines
before the first such line, then each one as it passes). When no line carries a year, none is invented:
those times are placed on ``NOMINAL_YEAR`` so that differences and ordering still work, and
``fmt_time`` prints them as month-day and time only. No inferred date lies in the future.

Every time here is *log time*: the wall clock of the machine that wrote the line, zone unknown.
Parsing is cached per minute, so timelines over GB of logs stay cheap.
"""

from __future__ import annotations

import calendar
import time
from datetime import datetime, timezone
from functools import lru_cache
from itertools import repeat
from operator import add, floordiv, mod

from specdiag.patterns import lazy

#: how every time in a report must be read (the logs print no zone)
TIME_BASIS = "log time (zone unknown)"
#: stand-in year for inputs where no line carries one (a leap year, so 02-29 parses; obviously not real)
NOMINAL_YEAR = 1972
#: epoch seconds below this are on the nominal year(s) (a Dec→Jan wrap makes 1973)
YEAR_KNOWN_FROM = float(calendar.timegm((1980, 1, 1, 0, 0, 0, 0, 0, 0)))
#: an inferred date after this is impossible (the log was written before it was read; 2 days of zone slack)
_NOT_AFTER = time.time() + 2 * 86400
_FIRST_REAL_YEAR = 2000
#: timestamps that carry a year: LMCache's ``[2026-05-06 15:56:03,745]``, ISO ones of docker/kubectl/journald
_YEAR_TS = lazy(rb"(?<![\d.])(20\d\d)-(0[1-9]|1[0-2])-([0-3]\d)[ T]\d\d:\d\d:\d\d")
_VLLM_TS = lazy(rb"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN) (0[1-9]|1[0-2])-[0-3]\d \d\d:\d\d:\d\d")


@lru_cache(maxsize=4096)
def _minute_base(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return float(calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0)))


@lru_cache(maxsize=4096)
def _inferred_base(year: int, month: int, day: int, hour: int, minute: int) -> float:
    """Like ``_minute_base`` for a year that was inferred: one that would put the date in the future
    belongs to the year before (a log read in early January that ended in December)."""
    base = _minute_base(year, month, day, hour, minute)
    if year >= _FIRST_REAL_YEAR and base > _NOT_AFTER:
        return _minute_base(year - 1, month, day, hour, minute)
    return base


def parse_ts(ts: str | None, year: int | None = None) -> float | None:
    if not ts:
        return None
    try:
        if len(ts) >= 19 and ts[4] == "-":  # LMCache: 2026-05-06 15:56:03,745
            base = _minute_base(int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]))
            sec = float(ts[17:19])
            if len(ts) > 20:
                sec += int(ts[20:23]) / 1000.0
            return base + sec
        if len(ts) >= 14 and ts[2] == "-":  # vLLM: 05-06 15:56:03
            base = _inferred_base(year or NOMINAL_YEAR, int(ts[0:2]), int(ts[3:5]), int(ts[6:8]), int(ts[9:11]))
            return base + float(ts[12:14])
    except (ValueError, OverflowError):
        return None
    return None


#: (``MMDDhhmm``, year) → ``parse_ts`` of that minute; bounded (emptied when full)
_STAMP_MINUTES: dict[tuple[int, int | None], float | None] = {}


def stamp_time(stamp: int, year: int | None) -> float | None:
    """``parse_ts`` of a vLLM ``MM-DD hh:mm:ss`` stamp given as the number ``MMDDhhmmss`` (a scanned metric
    row's ``stamp`` column): the same float, one dict lookup a line instead of a decode and five ``int``s."""
    minute, second = divmod(stamp, 100)
    key = (minute, year)
    base = _STAMP_MINUTES.get(key, _STAMP_MINUTES)
    if base is _STAMP_MINUTES:
        if len(_STAMP_MINUTES) >= 65536:
            _STAMP_MINUTES.clear()
        mo, rest = divmod(minute, 1000000)
        day, rest = divmod(rest, 10000)
        base = _STAMP_MINUTES[key] = parse_ts(f"{mo:02d}-{day:02d} {rest // 100:02d}:{rest % 100:02d}:00", year)
    return None if base is None else base + float(second)


def stamp_times(stamps: list[int], year: int | None) -> list[float | None]:
    """``stamp_time`` of every stamp, a column at a time (each distinct minute parsed once)."""
    minutes = list(map(floordiv, stamps, repeat(100)))
    bases = {m: stamp_time(m * 100, year) for m in set(minutes)}
    if None in bases.values():
        return [stamp_time(s, year) for s in stamps]
    return list(map(add, map(bases.__getitem__, minutes), map(float, map(mod, stamps, repeat(100)))))


def rec_time(rec) -> float | None:
    return parse_ts(rec.ts, rec.year)


def year_known(t: float | None) -> bool:
    """True when ``t`` carries a real year (False for times on the nominal year, and for None)."""
    return t is not None and t >= YEAR_KNOWN_FROM


def fmt_time(t: float | None, ms: bool = False) -> str:
    """``2026-05-06 15:56:03``, or ``05-06 15:56:03`` when the log gave no year (never the stand-in year);
    with ``ms`` the milliseconds too (``…:03.745``). Log time, zone unknown."""
    if t is None:
        return "?"
    try:
        d = datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "?"
    text = d.strftime("%Y-%m-%d %H:%M:%S" if t >= YEAR_KNOWN_FROM else "%m-%d %H:%M:%S")
    return f"{text}.{d.microsecond // 1000:03d}" if ms else text


def fmt_log_time(t: float | None) -> str:
    """``fmt_time`` with the reading spelled out, for sentences: ``05-06 15:56:03 log time (zone unknown)``."""
    if t is None:
        return "an unknown time (no timestamp on those lines)"
    return f"{fmt_time(t)} {TIME_BASIS}"


def initial_year(block: bytes, start: int = 0, end: int | None = None) -> int:
    """The year of the vLLM lines at the top of an input, from the first timestamp in ``block`` that carries one.

    vLLM lines print no year; LMCache lines and collector wrappers do. A vLLM month later than that
    first dated line's month can only be the December before it (the log crossed New Year), so it takes
    the year before. A year later than today is no evidence (a log is not from the future). Without any
    dated line the answer is ``NOMINAL_YEAR``: the year is unknown, not the current one. ``start``/``end``:
    the part of ``block`` to read (no copy of it is made).
    """
    this_year = datetime.now(timezone.utc).year
    end = len(block) if end is None else end
    for m in _YEAR_TS.finditer(block, start, end):
        year, month = int(m.group(1)), int(m.group(2))
        if year > this_year:
            continue
        first = _VLLM_TS.search(block, start, m.start())
        if first is not None and int(first.group(1)) > month:
            year -= 1
        return year
    return NOMINAL_YEAR


def is_nominal_year(year: int | None) -> bool:
    return year is None or year < _FIRST_REAL_YEAR
