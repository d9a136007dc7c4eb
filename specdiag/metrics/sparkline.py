"""Compact terminal sparklines for timelines (pure functions, no dependencies).

    sparkline([0.6, 0.62, None, 0.2, 0.58], width=20)          -> '▇▇ ▂▇' (None = gap, shown as a space)
    sparkline(values, width=40, lo=0.0, hi=1.0)                 -> fixed scale (rates)
    marker_row(times, t0, t1, width=40, marks=[(t, '!')])      -> a row of marks aligned under the sparkline
    timeline_rows(report.timeline, width=60)                   -> ready-made lines for the terminal report

When there are more values than ``width``, neighbouring values are averaged into ``width`` buckets
(None values are skipped; an all-None bucket is a gap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def _bucket(values: Sequence[float | None], width: int) -> list[float | None]:
    n = len(values)
    if n <= width:
        return list(values)
    out: list[float | None] = []
    for i in range(width):
        a, b = i * n // width, max((i + 1) * n // width, i * n // width + 1)
        chunk = [v for v in values[a:b] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


#: the least span a scale taken from the data has, as a share of its larger magnitude (``sparkline``)
MIN_REL_SPAN = 0.10


def sparkline(values: Sequence[float | None], width: int = 40, lo: float | None = None, hi: float | None = None,
              ascii_only: bool = False) -> str:
    """A one-line bar chart of ``values`` at most ``width`` characters wide. ``lo``/``hi`` fix the scale
    (default: the data's min and max, widened about their middle to at least ``MIN_REL_SPAN`` of the larger
    magnitude, so that a mean acceptance length going 2.91 → 2.93 is not drawn as a jump from the lowest bar to
    the highest); ``ascii_only`` uses ``_.-=#`` instead of block characters."""
    if width <= 0 or not values:
        return ""
    bars = "_.-=#" if ascii_only else BARS
    # inf/nan from a damaged line are gaps, not a scale that swallows every other value (or an OverflowError)
    vals = _bucket([v if v is not None and math.isfinite(v) else None for v in values], width)
    present = [v for v in vals if v is not None]
    if not present:
        return " " * len(vals)
    fixed = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    lo = min(present) if lo is None or not math.isfinite(lo) else lo
    hi = max(present) if hi is None or not math.isfinite(hi) else hi
    least = MIN_REL_SPAN * max(abs(lo), abs(hi))
    if not fixed and 0 < hi - lo < least:
        mid = (hi + lo) / 2
        lo, hi = mid - least / 2, mid + least / 2
    span = hi - lo
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
            continue
        if span <= 0:
            idx = len(bars) // 2 if hi != 0 else 0
        else:
            idx = int(round((min(max(v, lo), hi) - lo) / span * (len(bars) - 1)))
        out.append(bars[idx])
    return "".join(out)


def marker_row(t0: float, t1: float, width: int, marks: Sequence[tuple[float, str]]) -> str:
    """A row of ``width`` characters with each mark's symbol at its time's column (later marks win)."""
    row = [" "] * max(width, 0)
    if width <= 0 or t1 <= t0:
        return "".join(row)
    for t, sym in marks:
        col = int((t - t0) / (t1 - t0) * (width - 1))
        if 0 <= col < width:
            row[col] = sym[:1]
    return "".join(row)


def _columns(points, t0: float, t1: float, width: int) -> list[float | None]:
    """Average the points falling into each of ``width`` time columns. An empty column between two points no
    further apart than 1.5× the series' usual spacing is filled with the previous value (columns narrower
    than the logging interval); real gaps (e.g. K=0 intervals without a SpecDecoding line) stay blank."""
    pts = [(t, float(v)) for t, v in points if isinstance(v, (int, float)) and not isinstance(v, bool)
           and math.isfinite(v) and math.isfinite(t)]
    cols: list[list[float]] = [[] for _ in range(width)]
    colpos: list[int] = []
    for t, v in pts:
        col = 0 if t1 <= t0 else min(width - 1, max(0, int((t - t0) / (t1 - t0) * (width - 1))))
        cols[col].append(v)
        colpos.append(col)
    vals = [sum(c) / len(c) if c else None for c in cols]
    if len(pts) < 3:
        return vals
    gaps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:], strict=False))
    usual = gaps[len(gaps) // 2]
    for (ta, _va), (tb, _vb), ca, cb in zip(pts, pts[1:], colpos, colpos[1:], strict=False):
        if cb - ca > 1 and tb - ta <= 1.5 * usual:
            for c in range(ca + 1, cb):
                vals[c] = vals[ca]
    return vals


MARK_SYMBOLS = {"finding": "▲", "shortfall": "!", "load_failure": "x", "error": "E", "preemption": "p", "k0": "0"}
MARK_NAMES = {"finding": "finding", "shortfall": "shortfall", "load_failure": "load failure", "error": "error line",
              "preemption": "preemption", "k0": "K=0 interval"}
LABEL_W = 23
#: row labels that fit LABEL_W (the external prefix cache is the KV connector's, e.g. LMCache)
SERIES_LABELS = {"external_prefix_cache_hit_rate": "external cache hit rate"}


def _clock(t: float, with_date: bool) -> str:
    """Log time as printed in the log. Log timestamps carry no zone, so they are shown as read (the epoch
    value was built as if UTC) and the axis says so."""
    import time as _time

    return _time.strftime("%m-%d %H:%M:%S" if with_date else "%H:%M:%S", _time.gmtime(t))


def axis_row(t0: float, t1: float, width: int) -> str:
    """A time axis ``width`` wide: the first and last time at the edges, the middle one centred if it fits."""
    if width <= 0:
        return ""
    with_date = t1 - t0 >= 86400 or _clock(t0, True)[:5] != _clock(t1, True)[:5]
    a, b = _clock(t0, with_date), _clock(t1, with_date)
    row = [" "] * width
    if len(a) + len(b) + 1 > width:
        return a[:width].ljust(width)
    row[: len(a)] = a
    row[width - len(b):] = b
    mid = _clock((t0 + t1) / 2, with_date)
    start = (width - len(mid)) // 2
    if start > len(a) + 1 and start + len(mid) < width - len(b) - 1:
        row[start:start + len(mid)] = mid
    return "".join(row)


def _marker_rows(timeline: dict, t0: float, t1: float, width: int) -> list[str]:
    """One row per marker kind, so that a finding never hides a shortfall in the same column."""
    by_kind: dict[str, list[tuple[float, str]]] = {}
    for m in timeline.get("markers") or []:
        t = m.get("t")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t0 <= t <= t1:
            kind = m.get("kind") if m.get("kind") in MARK_SYMBOLS else "other"
            by_kind.setdefault(kind, []).append((t, MARK_SYMBOLS.get(kind, "*")))
    rows = []
    for kind in (*MARK_SYMBOLS, "other"):
        marks = by_kind.get(kind)
        if marks:
            label = f"{MARK_SYMBOLS.get(kind, '*')} {MARK_NAMES.get(kind, 'other')} ×{len(marks)}"
            rows.append(f"{label[:LABEL_W]:<{LABEL_W}} {marker_row(t0, t1, width, marks)}")
    return rows


def _engine_row(series: dict, chosen: list) -> list[str]:
    """With several engines, which one the rows show: their values are that engine's, not the deployment's
    (two data-parallel engines' 'last' values differ), and the others' series are charted only in HTML."""
    shown = next((s.get("by") for _n, s in chosen if s.get("by")), None)
    if not shown:
        return []
    engines = {s.get("by") for s in series.values() if isinstance(s, dict) and s.get("by")}
    text = (f"{shown} (1 of {len(engines)} engines: one with the most SpecDecoding intervals; "
            "the HTML report charts each)")
    return [f"{'engine shown'[:LABEL_W]:<{LABEL_W}} {text}"]


def timeline_rows(timeline: dict, width: int = 60, names: Sequence[str] = (
        "draft_acceptance_rate", "mean_acceptance_length", "prefix_cache_hit_rate", "external_prefix_cache_hit_rate"),
        ascii_only: bool = False) -> list[str]:
    """Lines for a terminal report: one sparkline per series present (time-aligned), one row per marker
    kind, then a time axis.

    A series line is ``<label:23> <sparkline> last <value>``: the labelled value is the last interval's
    (the state when the log ends). Blank columns are intervals with no data (a gap in the log, or K=0
    intervals without a SpecDecoding line). Empty list when the timeline has no series."""
    series = (timeline or {}).get("series") or {}
    chosen = [(n, series[n]) for n in names if n in series and series[n].get("points")]
    if not chosen:
        return []
    t0 = min(s["points"][0][0] for _n, s in chosen)
    t1 = max(s["points"][-1][0] for _n, s in chosen)
    lines = _engine_row(series, chosen)
    for name, s in chosen:
        vals = _columns(s["points"], t0, t1, width)
        frac = s.get("unit") == "fraction"
        line = sparkline(vals, width, lo=0.0 if frac else None, hi=1.0 if frac else None, ascii_only=ascii_only)
        last = next((v for v in reversed(vals) if v is not None), None)
        shown = "" if last is None else "last " + (f"{last:.0%}" if frac else f"{last:.2f}")
        label = SERIES_LABELS.get(name, name.replace("_", " "))
        lines.append(f"{label[:LABEL_W]:<{LABEL_W}} {line.ljust(width)} {shown}".rstrip())
    lines += _marker_rows(timeline, t0, t1, width)
    lines.append(f"{'log time (zone unknown)'[:LABEL_W]:<{LABEL_W}} {axis_row(t0, t1, width)}".rstrip())
    return lines
