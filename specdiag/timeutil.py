"""Record timestamps → epoch seconds (local time, no zone, as the logs print them).

LMCache prints ``YYYY-MM-DD HH:MM:SS,mmm``; vLLM ``MM-DD HH:MM:SS`` without a year (the year comes from
the ingest stage's inference). Parsing is cached per minute, so timelines over GB of logs stay cheap.
"""

from __future__ import annotations

import calendar
from datetime import datetime
from functools import lru_cache

DEFAULT_YEAR = datetime.now().year


@lru_cache(maxsize=4096)
def _minute_base(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return float(calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0)))


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
            base = _minute_base(year or DEFAULT_YEAR, int(ts[0:2]), int(ts[3:5]), int(ts[6:8]), int(ts[9:11]))
            return base + float(ts[12:14])
    except (ValueError, OverflowError):
        return None
    return None


def rec_time(rec) -> float | None:
    return parse_ts(rec.ts, rec.year)


def fmt_time(t: float | None) -> str:
    if t is None:
        return "?"
    return datetime.utcfromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
