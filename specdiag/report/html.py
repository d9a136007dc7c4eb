"""``--html FILE``: one self-contained HTML incident report (and ``write_repro_html`` for repro runs).

The findings, deployments and input notes are ``report.layout``'s, shown as the terminal and markdown show
them (same causes, same per-cause facts, same evidence order); the page adds charts and folded detail.

The page opens offline and makes no network request of any kind:

* the chart library (uPlot, MIT, vendored in ``assets/``) and the page's own script and CSS are inlined;
* a Content-Security-Policy ``<meta>`` allows only those inline blocks, by their SHA-256 hash
  (``default-src 'none'``: no fetch, no image, no font, no frame, no form target);
* the data is one ``<script type="application/json">`` block in which ``<``, ``>``, ``&``, U+2028 and
  U+2029 are ``\\u``-escaped, so no log text can close the block or start markup;
* every log-derived string in the static part is ``html.escape``\\ d here, and the script inserts text only
  with ``textContent`` — a log line can show ``<script>`` but never run it.

Long series are downsampled (min/max-preserving, at most :data:`MAX_POINTS` points per series) so that a
large log still gives a file of a few hundred kilobytes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specdiag import __version__
from specdiag.patterns import lazy
from specdiag.report.layout import (
    DEFAULT,
    VERBOSE,
    WHY_NOT_SETTING,
    CauseView,
    Detail,
    FindingView,
    deployment_blocks,
    deployment_rows,
    finding_views,
    input_notes,
    ordered_findings,
)
from specdiag.report.verdict import present_suspects, status, suspects, verdicts
from specdiag.timeutil import TIME_BASIS, YEAR_KNOWN_FROM, fmt_time
from specdiag.values import is_schedule, schedule_rows, schedule_text

ASSETS = Path(__file__).parent / "assets"
MAX_POINTS = 2000
MAX_MARKERS = 3000
MAX_MARKER_ROWS = 500

#: chart groups in page order: (id, title, series base names)
SERIES_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("acceptance", "Speculative decoding: acceptance",
     ("mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance")),
    ("drafts", "Speculative decoding: drafted and accepted tokens per interval",
     ("drafted_tokens", "accepted_tokens")),
    ("cache", "Prefix cache hit rate (local and external / LMCache)",
     ("prefix_cache_hit_rate", "external_prefix_cache_hit_rate")),
    ("throughput", "Throughput", ("prompt_throughput", "generation_throughput")),
    ("kv", "KV cache usage", ("kv_cache_usage",)),
    ("requests", "Requests: running, waiting, preemptions", ("running_reqs", "waiting_reqs", "preemptions")),
)
_BASES = sorted((b for _, _, bs in SERIES_GROUPS for b in bs), key=len, reverse=True)
#: Okabe & Ito's colour-blind-safe palette (blue, vermillion, bluish green, orange, reddish purple, sky blue,
#: black, yellow last: it is faint on white); no two neighbours differ only in red vs green
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
KIND_COLORS = {"shortfall": "#D55E00", "load_failure": "#E69F00", "preemption": "#CC79A7",
               "error": "#000000", "k0": "#009E73", "finding": "#0072B2"}
OTHER_KIND_COLOR = "#999999"
#: translucent fill for K=0 stretches (dynamic K turned speculation off: no SpecDecoding line)
K0_SHADE = "rgba(0, 158, 115, 0.13)"
#: the time axis: log timestamps carry no zone, so none is claimed
TIME_LABEL = TIME_BASIS
#: a gap between two points longer than this many times the series' usual spacing is a missing stretch
GAP_FACTOR = 1.5
KIND_WORDS = {"shortfall": "KV shortfall (retrieved < expected)", "load_failure": "KV load failure",
              "preemption": "preemption", "error": "error", "k0": "K=0 (no drafting)", "finding": "finding",
              "k0-shade": "K=0 stretch (shaded band)"}

# C0/C1 controls (but tab and newline) and lone surrogates from undecodable bytes
_CONTROL = lazy("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SAFE_CLASS = lazy(r"^[a-z0-9_-]{1,40}$")


# ---------------------------------------------------------------------------------------------- escaping
def clean_text(s: Any) -> str:
    """The text with control characters and undecodable bytes made visible (``\\x1b``, U+FFFD)."""
    s = s if isinstance(s, str) else str(s)

    def rep(m: re.Match) -> str:
        c = m.group(0)
        return "\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else f"\\x{ord(c):02x}"

    return _CONTROL.sub(rep, s)


def esc(s: Any) -> str:
    """Escape for HTML text and quoted attribute values."""
    return html.escape(clean_text(s), quote=True)


def _json_safe(obj: Any, depth: int = 0) -> Any:
    if depth > 60:
        return None
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, str):
        return clean_text(obj) if _CONTROL.search(obj) else obj
    if isinstance(obj, dict):
        return {str(_json_safe(k, depth + 1)) if not isinstance(k, str) else _json_safe(k, depth + 1):
                _json_safe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(x, depth + 1) for x in obj]
    if obj is None or isinstance(obj, (bool, int)):
        return obj
    return _json_safe(str(obj), depth + 1)


def json_for_script(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``, U+2028/9."""
    text = json.dumps(_json_safe(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _fmt_time(t: float | None) -> str:
    """A log time with milliseconds, without a year when the log printed none (``timeutil.fmt_time``)."""
    return "" if t is None else fmt_time(float(t), ms=True)


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ------------------------------------------------------------------------------------------ downsampling
def downsample(points: list[list[Any]], max_points: int = MAX_POINTS) -> list[list[Any]]:
    """At most ``max_points`` points: per bucket the minimum and the maximum (in time order), plus both ends.

    Numeric values keep every spike and dip; list values (per-position rates) are sampled evenly.
    """
    n = len(points)
    if n <= max_points:
        return list(points)
    if max_points < 4:
        return [points[0], points[-1]][:max_points]
    if any(not (p[1] is None or isinstance(p[1], (int, float))) for p in points):
        step = (n - 1) / (max_points - 1)
        return [points[round(i * step)] for i in range(max_points)]
    buckets = (max_points - 2) // 2
    inner = points[1:-1]
    m = len(inner)
    out = [points[0]]
    for b in range(buckets):
        chunk = inner[b * m // buckets:(b + 1) * m // buckets]
        if not chunk:
            continue
        vals = [(i, p) for i, p in enumerate(chunk) if p[1] is not None]
        if not vals:
            out.append(chunk[0])
            continue
        lo = min(vals, key=lambda ip: ip[1][1])
        hi = max(vals, key=lambda ip: ip[1][1])
        for _, p in sorted({lo[0]: lo, hi[0]: hi}.values(), key=lambda ip: ip[0]):
            out.append(p)
    out.append(points[-1])
    return out


# --------------------------------------------------------------------------------------------- timeline
def _base_name(name: str) -> str | None:
    for b in _BASES:
        if name == b or (name.startswith(b) and not (name[len(b)].isalnum() or name[len(b)] == "_")):
            return b
    return None


def _clean_points(raw: Any) -> list[list[Any]]:
    """Well-formed ``[t, value]`` points in time order; anything else is dropped, non-finite values become gaps."""
    out = []
    isfinite = math.isfinite
    for p in raw if isinstance(raw, list) else []:
        if type(p) not in (list, tuple) or len(p) < 2:
            continue
        t, v = p[0], p[1]
        tt = type(t)
        if tt is float:
            if not isfinite(t):
                continue
        elif tt is int:
            t = float(t)
        else:
            continue
        tv = type(v)
        if tv is float:
            if not isfinite(v):
                v = None
        elif tv is int or v is None:
            pass
        elif tv in (list, tuple):
            v = [_num(x) for x in v]
        else:
            v = None
        out.append([t, v])
    out.sort(key=lambda p: p[0])
    return out


def with_gaps(points: list[list[Any]], factor: float = GAP_FACTOR) -> tuple[list[list[Any]], list[float]]:
    """``points`` with a ``[t, None]`` point in the middle of every stretch longer than ``factor`` × the
    usual (median) spacing, and the times of those points. The chart breaks its line there instead of
    drawing it straight across intervals that were never logged (K=0 stretches, a stalled server)."""
    none_ts = [p[0] for p in points if p[1] is None]  # an interval logged without a value is a gap too
    if len(points) < 3:
        return points, none_ts
    gaps = sorted(b[0] - a[0] for a, b in zip(points, points[1:], strict=False))
    usual = gaps[len(gaps) // 2]
    if usual <= 0:
        return points, none_ts
    out: list[list[Any]] = [points[0]]
    holes: list[float] = []
    for a, b in zip(points, points[1:], strict=False):
        if b[0] - a[0] > factor * usual:
            mid = round((a[0] + b[0]) / 2, 3)
            out.append([mid, None])
            holes.append(mid)
        out.append(b)
    return out, sorted(holes + none_ts)


def k0_stretches(markers: list[dict[str, Any]], series: dict[str, Any]) -> list[list[float]]:
    """``[start, end]`` of each K=0 stretch: from its marker to the next SpecDecoding interval."""
    starts = sorted(m["t"] for m in markers if m.get("kind") == "k0")
    if not starts:
        return []
    spec_ts = sorted({float(p[0]) for name in ("draft_acceptance_rate", "mean_acceptance_length")
                      for p in _clean_points((series.get(name) or {}).get("points"))})
    out = []
    for t in starts:
        end = next((x for x in spec_ts if x > t), None)
        if end is not None and (not out or t >= out[-1][1]):
            out.append([t, end])
    return out


def _range_for(unit: str, values: Iterable[float]) -> list[float] | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    u = unit.lower()
    if u in ("ratio", "fraction", "rate", "0-1", "") and min(vals) >= 0 and max(vals) <= 1:
        return [0, 1] if u else None
    if u in ("%", "percent", "pct") and min(vals) >= 0 and max(vals) <= 100:
        return [0, 100]
    return None


def _marker_rank(f: Any) -> list[str | None]:
    m = getattr(f, "measurements", {}) or {}
    ranks = m.get("ranks")
    if isinstance(ranks, list) and 0 < len(ranks) <= 16 and all(isinstance(r, str) for r in ranks):
        return list(ranks)
    r = m.get("rank")
    return [r] if isinstance(r, str) and r else [None]


def _series_entries(name: str, s: dict[str, Any], pts: list[list[Any]], max_points: int) -> list[dict[str, Any]]:
    """One drawable series per value (a per-position series, e.g. acceptance by draft position, gives one per
    position, at most 16), downsampled, with its real gaps."""
    unit = str(s.get("unit") or "")
    label = str(s.get("label") or name)
    by = s.get("by")
    if by:
        label += f" [{by}]"
    if not any(isinstance(p[1], list) for p in pts):
        pts, holes = with_gaps(downsample(pts, max_points))
        return [{"name": str(name), "label": label, "unit": unit, "points": pts, "holes": holes}]
    width = max(len(p[1]) for p in pts if isinstance(p[1], list))
    pts = downsample(pts, max_points)
    out = []
    for i in range(min(width, 16)):
        sub, holes = with_gaps([[p[0], p[1][i] if isinstance(p[1], list) and i < len(p[1]) else None] for p in pts])
        out.append({"name": f"{name}[{i}]", "label": f"{label} pos {i + 1}", "unit": unit, "points": sub,
                    "holes": holes})
    return out


def _grouped_series(series: dict[str, Any], max_points: int) -> tuple[dict[str, list[dict[str, Any]]], list[str], int]:
    """The timeline's series by chart group (known groups first, in ``SERIES_GROUPS`` order), the group
    order, and how many points came in."""
    expanded: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    total_in = 0
    for name, s in series.items():
        if not isinstance(s, dict):
            continue
        pts = _clean_points(s.get("points"))
        total_in += len(pts)
        if not pts:
            continue
        base = _base_name(str(name))
        gid = next((g for g, _, bs in SERIES_GROUPS if base in bs), None) if base else None
        gkey = gid or f"other:{str(s.get('unit') or '')}"
        expanded.setdefault(gkey, []).extend(_series_entries(name, s, pts, max_points))
        if gkey not in order:
            order.append(gkey)
    group_rank = {g: i for i, (g, _, _) in enumerate(SERIES_GROUPS)}
    order.sort(key=lambda g: group_rank.get(g, len(group_rank)))
    base_rank = {b: i for _, _, bs in SERIES_GROUPS for i, b in enumerate(bs)}
    for g in order:
        expanded[g].sort(key=lambda s: base_rank.get(_base_name(s["name"]) or "", 99))
    return expanded, order, total_in


def _raw_markers(timeline: Any, report: Any) -> list[dict[str, Any]]:
    """The timeline's markers, plus one per finding with a first occurrence (on the lanes of its ranks)."""
    raw_markers: list[dict[str, Any]] = []
    tm = timeline.get("markers") if isinstance(timeline, dict) else None
    for m in tm if isinstance(tm, list) else []:
        if not isinstance(m, dict) or _num(m.get("t")) is None:
            continue
        raw_markers.append({"t": round(_num(m["t"]), 3), "kind": str(m.get("kind") or "event"),
                            "label": str(m.get("label") or ""), "rank": m.get("rank") or None,
                            "rule": m.get("rule") or None})
    for f in getattr(report, "findings", None) or []:
        t = _num(getattr(f, "first_seen", None))
        if t is None:
            continue
        ranks = _marker_rank(f)
        same = [m for m in raw_markers if m["kind"] == "finding" and m["rule"] == f.rule]
        if same and ranks == [None]:
            continue  # the timeline already marks it
        # put the finding on the lanes of the ranks it names (the timeline's marker has no rank)
        raw_markers = [m for m in raw_markers if not (m in same and m["rank"] is None)]
        for rank in ranks:
            raw_markers.append({"t": round(t, 3), "kind": "finding", "label": f"{f.rule}: {f.title}",
                                "rank": rank, "rule": f.rule})
    return raw_markers


def _chart_markers(timeline: Any, report: Any) -> tuple[list[dict[str, Any]], int]:
    """The markers in time order, each once, with its lane; sampled down to ``MAX_MARKERS`` (findings kept).
    Also returns how many there were before sampling (including those the timeline dropped)."""
    seen = set()
    markers = []
    for m in sorted(_raw_markers(timeline, report), key=lambda m: m["t"]):
        m["rank"] = str(m["rank"]) if m["rank"] is not None else None
        m["rule"] = str(m["rule"]) if m["rule"] is not None else None
        key = (m["t"], m["kind"], m["rank"], m["rule"], m["label"])
        if key in seen:
            continue
        seen.add(key)
        m["lane"] = m["rank"] or "all"
        markers.append(m)
    total_markers = len(markers) + int(_num(timeline.get("markers_dropped") if isinstance(timeline, dict) else 0) or 0)
    if total_markers > MAX_MARKERS:
        step = total_markers / MAX_MARKERS
        keep = {round(i * step) for i in range(MAX_MARKERS)}
        markers = [m for i, m in enumerate(markers) if i in keep or m["kind"] == "finding"]
    return markers, total_markers


def _group_chart(g: str, part: int, ss: list[dict[str, Any]], units: list[str], tmin: float,
                 tmax: float) -> dict[str, Any]:
    """One chart: the group's series of (at most) two units on one x axis, nulls where a series has no point."""
    us = units[part:part + 2]
    members = [s for s in ss if s["unit"] in us]
    xs = sorted({p[0] for s in members for p in s["points"]} | {tmin, tmax})
    idx = {t: i for i, t in enumerate(xs)}
    cols = []
    for s in members:
        col: list[float | None] = [None] * len(xs)
        for t, v in s["points"]:
            col[idx[t]] = v
        cols.append(col)
    # real gaps (x indices) per series; every other null only aligns series sampled at other times
    holes = [sorted(idx[t] for t in s.get("holes", ())) for s in members]
    title = {g: t for g, t, _ in SERIES_GROUPS}.get(g) or ("Other series" + (f" ({units[0]})" if units and units[0] else ""))
    if part:
        title += " (continued)"
    ranges = {}
    for u in us:
        r = _range_for(u, (p[1] for s in members if s["unit"] == u for p in s["points"]))
        if r:
            ranges[u] = r
    return {
        "id": f"{g}-{part // 2}" if part else g,
        "title": title,
        "units": us,
        "ranges": ranges,
        "series": [{"label": s["label"], "unit": s["unit"], "color": PALETTE[i % len(PALETTE)]}
                   for i, s in enumerate(members)],
        "data": [xs, *cols],
        "holes": holes,
        "points": sum(len(s["points"]) for s in members),
    }


def _chart_groups(expanded: dict[str, list[dict[str, Any]]], order: list[str], tmin: float,
                  tmax: float) -> list[dict[str, Any]]:
    """The charts, group by group; a group with more than two units continues in a second chart."""
    groups = []
    for g in order:
        ss = expanded[g]
        units: list[str] = []
        for s in ss:
            if s["unit"] not in units:
                units.append(s["unit"])
        # at most two units (left and right axis) per chart
        groups += [_group_chart(g, part, ss, units, tmin, tmax) for part in range(0, len(units), 2)]
    return groups


def build_chart_data(report: Any, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """The chart model the page's script draws: aligned, downsampled series per group, and event markers."""
    timeline = getattr(report, "timeline", None) or {}
    series = timeline.get("series") if isinstance(timeline, dict) else None
    series = series if isinstance(series, dict) else {}
    expanded, order, total_in = _grouped_series(series, max_points)
    markers, total_markers = _chart_markers(timeline, report)
    # ---- the shared time axis
    ts = [p[0] for ss in expanded.values() for s in ss for p in s["points"]] + [m["t"] for m in markers]
    if not ts:
        return {"groups": [], "markers": [], "lanes": [], "kind_colors": KIND_COLORS, "tmin": None, "tmax": None,
                "k0": [], "k0_shade": K0_SHADE, "time_label": TIME_LABEL, "year_known_from": YEAR_KNOWN_FROM,
                "points_in": total_in, "markers_total": total_markers}
    tmin, tmax = min(ts), max(ts)
    if tmax - tmin < 1:
        tmin, tmax = tmin - 30, tmax + 30
    lanes = ["all"] if any(m["lane"] == "all" for m in markers) else []
    lanes += sorted({m["lane"] for m in markers if m["lane"] != "all"}, key=_natural)
    note = ""
    if len(markers) < total_markers:
        note = f"{len(markers):,} of {total_markers:,} events drawn (sampled; every finding kept)."
    kind_colors = dict(KIND_COLORS)
    for m in markers:
        kind_colors.setdefault(m["kind"], OTHER_KIND_COLOR)
    return {
        "tmin": tmin, "tmax": tmax,
        "groups": _chart_groups(expanded, order, tmin, tmax),
        "k0": k0_stretches(markers, series),
        "k0_shade": K0_SHADE,
        "time_label": TIME_LABEL,
        "year_known_from": YEAR_KNOWN_FROM,  # earlier times are on the stand-in year: shown without one
        "markers": markers,
        "markers_total": total_markers,
        "markers_note": note,
        "lanes": lanes,
        "event_xs": sorted({m["t"] for m in markers} | {tmin, tmax}),
        "kind_colors": kind_colors,
        "points_in": total_in,
    }


def _natural(s: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


# ------------------------------------------------------------------------------------------- page shell
def _page(title: str, body: str, data: Any, scripts: list[str], extra_css: str = "") -> str:
    css = _asset("report.css") + extra_css
    styles = [css] + ([_asset("uPlot.min.css")] if scripts else [])
    script_src = " ".join(_sha256(s) for s in scripts) or "'none'"
    style_src = " ".join(_sha256(s) for s in styles)
    csp = (f"default-src 'none'; script-src {script_src}; style-src {style_src}; img-src data:; "
           "font-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
           "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'; "
           # no script may write markup from a string (innerHTML, document.write, ...): Trusted Types, no policy
           "require-trusted-types-for 'script'; trusted-types 'none'")
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n",
        "<meta name=\"referrer\" content=\"no-referrer\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<meta name=\"generator\" content=\"specdiag {esc(__version__)}\">\n",
        f"<title>{esc(title)}</title>\n",
    ]
    parts += [f"<style>{s}</style>\n" for s in styles]
    parts.append("</head>\n<body>\n<main>\n")
    parts.append(body)
    parts.append("</main>\n")
    parts.append(f"<script type=\"application/json\" id=\"specdiag-data\">{json_for_script(data)}</script>\n")
    parts += [f"<script>{s}</script>\n" for s in scripts]
    parts.append("</body>\n</html>\n")
    return "".join(parts)


def _kind_css(kinds: Iterable[str]) -> str:
    out = [f".kinds .sw.k-finding{{background:transparent;border:2px solid {KIND_COLORS['finding']}}}"]
    out.append(f".kinds .sw.k-k0-shade{{background:{K0_SHADE}}}")
    for k in kinds:
        if _SAFE_CLASS.match(k):
            out.append(f".k-{k}{{background:{KIND_COLORS.get(k, OTHER_KIND_COLOR)}}}")
    return "\n" + "\n".join(out) + "\n" if out else ""


def _scroll(table: str) -> str:
    """A table in its own sideways-scrolling box: a table wider than a phone scrolls there, never the page."""
    return f"<div class=\"scroll\">{table}</div>"


def _kv_rows(rows: list[tuple[str, Any]]) -> str:
    out = []
    for k, v in rows:
        if v in (None, "", [], {}):
            continue
        out.append(f"<tr><th>{esc(k)}</th><td>{esc(_fmt_value(v, 400))}</td></tr>")
    return "<table class=\"kv\">" + "".join(out) + "</table>" if out else ""


def _fmt_value(v: Any, limit: int = 300) -> str:
    if isinstance(v, bool):
        s = "yes" if v else "no"
    elif v is None:
        s = "—"
    elif is_schedule(v):
        s = schedule_text(v)
    elif isinstance(v, float):
        s = f"{v:.6g}"
    elif isinstance(v, (list, tuple)):
        items = [_fmt_value(x, 80) for x in v[:12]]
        s = ", ".join(items) + (f" (+{len(v) - 12} more)" if len(v) > 12 else "")
    elif isinstance(v, dict):
        s = json.dumps(_json_safe(v), ensure_ascii=False, default=str)
    else:
        s = str(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------- report
def _context_html(c: dict[str, Any]) -> str:
    """One deployment's facts (``layout.deployment_rows``), its dynamic-K schedule as a table, and every key
    of its context folded away."""
    out = _kv_rows(deployment_rows(c))
    spec = c.get("speculative")
    if isinstance(spec, dict) and is_schedule(spec.get("per_batch_size")):
        out += _schedule_table(spec["per_batch_size"])
    rest = {k: v for k, v in c.items() if v not in (None, "", [], {})}
    if rest:
        full = "".join(f"<tr><th>{esc(k)}</th><td class=\"mono\">{esc(_fmt_value(v, 4000))}</td></tr>"
                       for k, v in rest.items())
        out += f"<details><summary>all context ({len(rest)} keys)</summary><table class=\"kv\">{full}</table></details>"
    return out or "<p class=\"note\">No deployment context was recognised.</p>"


def _deployments_html(report: Any) -> str:
    """Every deployment's facts; with several, each under its own heading."""
    blocks = deployment_blocks(report)
    if len(blocks) == 1:
        return _context_html(blocks[0][1])
    return "\n".join(f"<h3>{esc(title)}</h3>{_context_html(c)}" for title, c in blocks)


def _schedule_table(v: Any) -> str:
    """A dynamic-K schedule (``num_speculative_tokens_per_batch_size``) as a table: batch sizes → K."""
    rows = "".join(f"<tr><td>{esc(b)}</td><td>{esc(k)}</td><td>{'no speculation' if k == 0 else ''}</td></tr>"
                   for b, k in schedule_rows(v))
    return _scroll("<table class=\"grid schedule\"><caption>dynamic-K schedule</caption><tr><th>batch size</th>"
                   f"<th>K (draft tokens)</th><th></th></tr>{rows}</table>")


def _why_not_html(v: FindingView) -> str:
    """The rejected popular suspect, always visible (not folded into "also weighed")."""
    c = v.why_not
    if c is None:
        return ""
    conf = _num(c.confidence) or 0.0
    return (f"<p class=\"whynot\"><b>Why not {WHY_NOT_SETTING}:</b> confidence {conf:.2f} — "
            f"{esc(v.why_not_reasons)}</p>")


def _head_html(v: FindingView) -> str:
    h = ["<div class=\"head\">"]
    h.append(f"<span class=\"sev sev-{v.severity}\">{esc(v.severity)}</span><span class=\"rule\">{esc(v.rule)}</span>")
    h.append(f"<span class=\"title\">{esc(v.title)}</span>")
    if v.count and v.count > 1:
        h.append(f"<span class=\"rule\">×{esc(v.count)}</span>")
    if v.deployment:
        h.append(f"<span class=\"rule\">on {esc(v.deployment)}</span>")
    if v.first_seen is not None:
        h.append(f"<span class=\"when\">first seen {esc(_fmt_time(v.first_seen))} ({TIME_LABEL})</span>")
    h.append("</div>")
    return "\n".join(h)


def _measurements_html(m: Mapping[str, Any]) -> list[str]:
    """Scalars inline; a dynamic-K schedule as its table; nested values (per-request rows) folded away."""
    items = []
    for k, v in m.items():
        if isinstance(v, dict) or k == "per_request" or is_schedule(v):
            continue
        items.append(f"<span><b>{esc(k)}</b>={esc(_fmt_value(v, 240))}</span>")
    nested = {k: v for k, v in m.items() if isinstance(v, dict) or k == "per_request"}
    h = [f"<div class=\"measure mono\">{''.join(items)}</div>"]
    h += [_schedule_table(v) for v in m.values() if is_schedule(v)][:1]
    if nested:
        rows = "".join(f"<tr><th>{esc(k)}</th><td class=\"mono\">{esc(_fmt_value(v, 4000))}</td></tr>"
                       for k, v in nested.items())
        h.append(f"<details><summary>more measurements</summary><table class=\"kv\">{rows}</table></details>")
    return h


def _cause_row_html(c: CauseView) -> str:
    """One ranked cause: confidence meter, reasons for and against, its fix and confirming experiment."""
    conf = _num(c.confidence) or 0.0
    why = "".join(f"<li class=\"for\">{esc(s)}</li>" for s in c.for_)
    why += "".join(f"<li class=\"against\">{esc(s)}</li>" for s in c.against)
    if c.more_for or c.more_against:
        why += f"<li class=\"note\">{c.more_for} more for, {c.more_against} more against in the JSON report</li>"
    fix = (f"<div class=\"fix\"><b>Fix:</b> {esc(c.fix)}</div>" if c.fix else "") + (
        f"<div><b>Confirm:</b> <code>{esc(c.confirm_with)}</code></div>" if c.confirm_with else "")
    # data-label: the column's name, shown by the stylesheet when a narrow screen turns each row into a card
    return (f"<tr class=\"{'top' if c.rank == 1 else ''}\"><td class=\"rank\">{c.rank}</td>"
            f"<td class=\"id\"><b>{esc(c.id)}</b></td><td class=\"conf\" data-label=\"confidence\">"
            f"<meter min=\"0\" max=\"1\" value=\"{conf:.3f}\"></meter> {conf:.2f}</td>"
            f"<td data-label=\"for / against\"><ul>{why}</ul></td><td data-label=\"fix · confirm with\">{fix}</td></tr>")


def _causes_html(v: FindingView) -> list[str]:
    """The causes the layout shows in full, in a table; the rest named with their confidence."""
    rows = "".join(_cause_row_html(c) for c in v.shown)
    h = ["<h3>Causes, ranked by the evidence</h3>" + _scroll(
        "<table class=\"grid causes\"><tr><th>#</th><th>cause</th><th>confidence</th><th>for / against</th>"
        f"<th>fix · confirm with</th></tr>{rows}</table>")]
    if v.also:
        h.append("<p class=\"note\">also weighed: "
                 + esc(", ".join(f"{c.id} {(_num(c.confidence) or 0.0):.2f}" for c in v.also)) + "</p>")
    h.append(_why_not_html(v))
    return h


def _evidence_html(v: FindingView) -> str:
    """The evidence lines in log order, ``▸`` marking the primary one (the CI formats' location)."""
    lines = "\n".join(f"{'▸' if e.primary else ' '} <span class=\"loc\">{esc(e.where)}</span>  {esc(e.text)}"
                      for e in v.evidence_shown)
    if v.evidence_more:
        lines += f"\n… {v.evidence_more} more evidence line(s) in the JSON report"
    return ("<h3>Evidence, in log order (▸ = the line CI annotations point at)</h3>"
            f"<pre class=\"ev\">{lines}</pre>")


def _finding_html(i: int, v: FindingView) -> str:
    """The shared layout (``report.layout``): head, arithmetic, numbers, causes, evidence, next steps."""
    h = [f"<section class=\"finding {v.severity}\" id=\"f-{i}\">", _head_html(v)]
    if v.summary:
        h.append(f"<p>{esc(v.summary)}</p>")
    if v.measurements:
        h += _measurements_html(v.measurements)
    if v.causes:
        h += _causes_html(v)
    if v.evidence:
        h.append(_evidence_html(v))
    if v.next_steps:
        h.append("<h3>Next steps</h3><ul>" + "".join(f"<li>{esc(s)}</li>" for s in v.next_steps) + "</ul>")
    h.append("</section>")
    return "\n".join(h)


def _notes_html(report: Any) -> str:
    """Input that was not read whole (``layout.input_notes``), right below the answer."""
    notes = input_notes(report)
    if not notes:
        return ""
    return ("<ul class=\"notes\">" + "".join(f"<li><b>{esc(level)}:</b> {esc(msg)}</li>" for level, msg in notes)
            + "</ul>")


def _inputs_html(report: Any) -> str:
    rows = []
    for inp in report.inputs or []:
        errs = "; ".join(map(str, inp.get("errors") or []))
        n_lines, n_rec = int(inp.get("lines", 0) or 0), int(inp.get("recognized", 0) or 0)
        rows.append(f"<tr><td class=\"mono\">{esc(inp.get('path', ''))}</td><td>{n_lines:,}</td>"
                    f"<td>{n_rec:,}</td><td>{esc(inp.get('skipped', 0))}</td>"
                    f"<td>{esc(', '.join(map(str, inp.get('formats') or [])))}</td><td>{esc(errs)}</td></tr>")
    out = _scroll("<table class=\"grid\"><tr><th>input</th><th>lines</th><th>recognised</th><th>skipped</th>"
                  "<th>formats</th><th>errors</th></tr>" + "".join(rows) + "</table>")
    unrec = {k: v for k, v in (report.unrecognized or {}).items() if k != "top_warnings" and v}
    if unrec:
        out += ("<p class=\"note\">Records of unknown messages (vLLM/LMCache output whose text no template or "
                "catalogued release prints): "
                + esc(", ".join(f"{v:,} {k} record(s)" if isinstance(v, int) else f"{k}: {v}"
                                for k, v in unrec.items())) + "</p>")
    top = (report.unrecognized or {}).get("top_warnings") or {}
    if isinstance(top, dict) and top:
        out += ("<details><summary>unrecognised warnings and errors (most frequent)</summary><pre class=\"ev\">"
                + "\n".join(f"{esc(n):>6} × {esc(shape)}" for shape, n in list(top.items())[:20]) + "</pre></details>")
    if report.rules_run:
        out += f"<p class=\"note\">Rules run: {esc(', '.join(report.rules_run))}.</p>"
    return out


def _timeline_html(charts: dict[str, Any]) -> str:
    if not charts["groups"] and not charts["markers"]:
        return ("<p class=\"note\">No timestamped metrics or events in these logs, so there is no timeline "
                "(vLLM writes its metrics lines every 10 s unless <code>--disable-log-stats</code> is set).</p>")
    out = [f"<p class=\"note\">One shared time axis: {TIME_LABEL}, as written in the log. Drag across a chart to "
           "zoom all of them, double-click to reset; dashed lines mark events, a break in a line is a stretch with "
           "no logged interval, and shaded bands are K=0 stretches (dynamic K turned speculation off).</p>"]
    if not charts["groups"]:
        out.append("<p class=\"note\">No metric series were found in these logs; only the events are drawn.</p>")
    kinds = sorted({m["kind"] for m in charts["markers"]})
    if charts.get("k0"):
        kinds.append("k0-shade")
    if kinds:
        out.append("<div class=\"kinds\">" + "".join(
            f"<span><span class=\"sw k-{esc(k) if _SAFE_CLASS.match(k) else 'other'}\"></span>"
            f"{esc(KIND_WORDS.get(k, k))}</span>" for k in kinds) + "</div>")
    out.append("<div id=\"charts\" class=\"charts\"></div>")
    out.append("<noscript><p class=\"note\">The charts need JavaScript; the data is in the "
               "<code>specdiag-data</code> block of this file.</p></noscript>")
    ms = charts["markers"]
    if ms:
        rows = "".join(
            f"<tr><td class=\"mono\">{esc(_fmt_time(m['t']))}</td><td>{esc(m['kind'])}</td><td>{esc(m['rank'] or '')}"
            f"</td><td>{esc(m['rule'] or '')}</td><td>{esc(m['label'])}</td></tr>" for m in ms[:MAX_MARKER_ROWS])
        more = f", first {MAX_MARKER_ROWS}" if len(ms) > MAX_MARKER_ROWS else ""
        out.append(f"<details><summary>events ({charts['markers_total']:,}{more})</summary>" + _scroll(
            f"<table class=\"grid\"><tr><th>{TIME_LABEL}</th><th>kind</th><th>rank</th><th>rule</th><th>what</th>"
            f"</tr>{rows}</table>") + "</details>")
    return "\n".join(out)


def _verdict_html(st: Any, findings: list[Any], where: Any = None, sus: list[Any] | None = None) -> str:
    """The answer, above everything else: the status, the suspected settings' verdicts, and one verdict
    line per finding group, each with its arithmetic (the headline), the most likely cause and the next
    step, linked to the finding."""
    first = {}
    for i, f in enumerate(findings, 1):
        first.setdefault(f.rule, i)
    out = ["<section id=\"verdict\" class=\"verdict\"><h2>Summary</h2>",
           f"<p class=\"status status-{esc(st.kind)}\"><b>{esc(st.text)}</b></p>"]
    if sus:
        out.append("<ul class=\"suspects\">")
        out += [f"<li><b>{esc(s.name)}</b>: <b>{esc(s.verdict)}</b>{esc(s.line()[len(s.name) + 2 + len(s.verdict):])}</li>"
                for s in sus]
        out.append("</ul>")
    vs = verdicts(findings, where)
    if vs:
        out.append("<ul class=\"verdicts\">")
        for v in vs:
            sev = v.severity if v.severity in ("error", "warning", "info") else "info"
            line = (f"<b>{esc(v.rule)}</b> <span class=\"sev sev-{sev}\">{esc(sev)}</span> — {esc(v.headline)}"
                    + v.tail(esc, lambda s: f"<b>{s}</b>"))
            out.append(f"<li>{line} <a href=\"#f-{first[v.rule]}\">details</a></li>")
        out.append("</ul>")
    out += [f"<p class=\"note\">{esc(h)}</p>" for h in st.hints]
    out.append("</section>")
    return "\n".join(out)


def render_html(report: Any, *, verbose: bool = False) -> str:
    """The whole report page as a string (log text: no controls, bidi overrides or lone surrogates);
    ``verbose``: every cause and reason in full, as the terminal's ``-v`` (``layout.VERBOSE``)."""
    from specdiag.sanitize import plain_text

    return plain_text(_render_html(report, VERBOSE if verbose else DEFAULT))


def _render_html(report: Any, detail: Detail = DEFAULT) -> str:
    charts = build_chart_data(report)
    findings = ordered_findings(report)
    views = finding_views(report, detail)
    s = report.summary
    redacted = bool(getattr(report, "redacted", False))
    c = report.context or {}
    title = "specdiag report" + (f" — {c.get('model')}" if c.get("model") else "")
    b = ["<header><h1>specdiag incident report</h1>"]
    paths = [str(i.get("path", "")) for i in report.inputs or []]
    lines = sum(int(i.get("lines", 0) or 0) for i in report.inputs or [])
    b.append(f"<p class=\"sub\">{esc(', '.join(paths[:6]) + (f' (+{len(paths) - 6} more)' if len(paths) > 6 else ''))}"
             f" — {lines:,} lines, {report.recognized_lines:,} recognised</p>")
    st = status(report, list(report.rules))
    b.append("<div class=\"badges\">")
    if st.kind == "clean":
        b.append(f"<span class=\"badge ok\">{'no problem found' if st.all_lines else 'no finding in the recognised lines'}"
                 "</span>")
    for key, cls in (("errors", "error"), ("warnings", "warning"), ("infos", "info")):
        if s.get(key):
            b.append(f"<span class=\"badge {cls}\">{s[key]} {esc(key if s[key] != 1 else key[:-1])}</span>")
    if redacted:
        b.append("<span class=\"badge redacted\">prompts and completions redacted</span>")
    b.append("</div></header>")
    sus = suspects(findings, report.suspects, present_suspects([d.context.to_dict() for d in report.deployments]))
    b.append(_verdict_html(st, findings, report.deployment_of if len(report.deployments) > 1 else None, sus))
    b.append(_notes_html(report))
    b.append(f"<h2>Findings ({len(findings)})</h2>")
    if views:
        b.extend(_finding_html(i, v) for i, v in enumerate(views, 1))
    else:
        b.append(f"<p>{esc(st.text)}.</p>")
    b.append("<h2>Deployment</h2>")
    b.append(_deployments_html(report))
    b.append("<h2>Timeline</h2>")
    b.append(_timeline_html(charts))
    b.append("<h2>What was read</h2>")
    b.append(_inputs_html(report))
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    b.append(f"<footer>specdiag {esc(__version__)} · generated {esc(now)} · analysis took "
             f"{float(report.elapsed_s or 0):.2f} s · self-contained page: no network access</footer>")

    rd = report.to_dict()
    rd.pop("timeline", None)
    data = {"report": rd, "charts": charts}
    scripts = [_asset("uPlot.iife.min.js"), _asset("report.js")] if (charts["groups"] or charts["markers"]) else []
    kinds = set(KIND_COLORS) | {m["kind"] for m in charts["markers"]}
    return _page(title, "\n".join(b), data, scripts, _kind_css(sorted(kinds)) + ".k-other{background:#999999}\n")


def write_html(report: Any, path: str | Path, *, verbose: bool = False) -> None:
    """Write the self-contained HTML report for ``report`` to ``path`` (UTF-8)."""
    Path(path).write_text(render_html(report, verbose=verbose), encoding="utf-8")


# ------------------------------------------------------------------------------------------------ repro
_SYMPTOM_ORDER = ("shortfalls", "failed_requests", "engine_crash", "acceptance_pct", "acceptance_after_k0_pct",
                  "lmcache_hit_pct", "missing_tokens", "load_failed_requests", "external_hit_pct")
_CELL_META = {"name", "cell", "toggles", "toggled", "status", "errors", "error", "dir", "runs", "symptoms", "exposure",
              "shortfall_rate_interval"}


def _cell_fields(cell: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any], list[str]]:
    name = str(cell.get("name") or cell.get("cell") or "")
    toggles = cell.get("toggles") if isinstance(cell.get("toggles"), dict) else cell.get("toggled")
    toggles = toggles if isinstance(toggles, dict) else {}
    sym = cell.get("symptoms")
    if not isinstance(sym, dict):
        sym = {k: v for k, v in cell.items() if k not in _CELL_META}
    st = cell.get("status")
    status = [str(x) for x in st] if isinstance(st, (list, tuple)) else ([str(st)] if st not in (None, "") else [])
    return name, toggles, sym, status


def _status_html(status: list[str]) -> str:
    if not status:
        return "<span class=\"note\">–</span>"
    parts = []
    for s in status:
        cls = s.lower() if _SAFE_CLASS.match(s.lower()) else "other"
        parts.append(f"<span class=\"st-{cls}\">{esc(s)}</span>")
    return " ".join(parts)


def _sym_value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        vals = [x for x in v if x is not None]
        if not vals:
            return "–"
        return " / ".join(_fmt_value(x, 60) for x in vals[:8]) + (" …" if len(vals) > 8 else "")
    if v is None:
        return "–"
    return _fmt_value(v, 120)


def _nonempty(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(x not in (None, "", 0, 0.0, [], {}) for x in v)
    return v not in (None, "", [], {})


def _repro_verdict_html(v: dict[str, Any]) -> list[str]:
    """The one-line verdict, the conclusions (or why there is none) and the run's notes."""
    concl = v.get("conclusion")
    concls = [concl] if isinstance(concl, str) and concl else []
    if isinstance(v.get("conclusions"), list):
        concls += [str(x) for x in v["conclusions"] if x]
    b = ["<h2>Verdict</h2>"]
    if isinstance(v.get("headline"), str) and v["headline"]:
        b.append(f"<p><strong>{esc(v['headline'])}</strong></p>")
    if concls:
        b.append("<div class=\"verdict\">" + "".join(f"<p>{esc(x)}</p>" for x in concls) + "</div>")
    else:
        b.append("<p class=\"note\">No conclusion was drawn (no usable cells, or no difference between them).</p>")
    notes = v.get("notes")
    if isinstance(notes, list) and notes:
        b.append("<ul>" + "".join(f"<li class=\"note\">{esc(n)}</li>" for n in notes) + "</ul>")
    return b


def _matrix_keys(rows: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]]) -> tuple[list[str], list[str]]:
    """The toggles the cells set, and the symptoms any cell measured (the verdict's symptoms first)."""
    keys: list[str] = []
    for _, tg, _, _ in rows:
        for k in tg:
            if k not in keys:
                keys.append(str(k))
    sym_keys: list[str] = []
    for _, _, sym, _ in rows:
        for k, val in sym.items():
            if k not in sym_keys and _nonempty(val):
                sym_keys.append(str(k))
    # the verdict's symptoms first, then whatever else varies
    sym_keys.sort(key=lambda k: (_SYMPTOM_ORDER.index(k) if k in _SYMPTOM_ORDER else len(_SYMPTOM_ORDER)))
    return keys, sym_keys


def _matrix_grid_html(rows: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]], keys: list[str],
                      sym_keys: list[str]) -> str:
    """Two crossed toggles as a grid: one toggle's values down, the other's across, a cell's status inside."""
    a_vals = list(dict.fromkeys(str(tg.get(keys[0])) for _, tg, _, _ in rows))
    b_vals = list(dict.fromkeys(str(tg.get(keys[1])) for _, tg, _, _ in rows))
    grid = [f"<table class=\"grid matrix\"><tr><th>{esc(keys[0])} ↓ / {esc(keys[1])} →</th>"
            + "".join(f"<th>{esc(x)}</th>" for x in b_vals) + "</tr>"]
    for av in a_vals:
        grid.append(f"<tr><th>{esc(av)}</th>")
        for bv in b_vals:
            hit = [r for r in rows if str(r[1].get(keys[0])) == av and str(r[1].get(keys[1])) == bv]
            if not hit:
                grid.append("<td class=\"cell note\">not run</td>")
                continue
            _, _, sym, st = hit[0]
            shown = sym_keys[:4]
            detail = "".join(f"<div class=\"mono\">{esc(k)}: {esc(_sym_value(sym.get(k)))}</div>" for k in shown)
            grid.append(f"<td class=\"cell\">{_status_html(st)}{detail}</td>")
        grid.append("</tr>")
    grid.append("</table>")
    return _scroll("".join(grid))


def _cells_html(cells: list[dict[str, Any]], rows: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]],
                keys: list[str], sym_keys: list[str]) -> list[str]:
    """Every cell and symptom as a table (folded under a grid), then the cells' errors."""
    if not rows:
        return ["<p class=\"note\">No cell has finished.</p>"]
    head = "<tr><th>cell</th>" + "".join(f"<th>{esc(k)}</th>" for k in keys) + "<th>status</th>" + "".join(
        f"<th>{esc(k)}</th>" for k in sym_keys) + "</tr>"
    body = []
    for nm, tg, sym, st in rows:
        body.append(f"<tr><td class=\"mono\">{esc(nm)}</td>" + "".join(
            f"<td>{esc(_fmt_value(tg.get(k, '–'), 80))}</td>" for k in keys) + f"<td>{_status_html(st)}</td>"
            + "".join(f"<td class=\"mono\">{esc(_sym_value(sym.get(k)))}</td>" for k in sym_keys) + "</tr>")
    b = [("<details><summary>every cell and symptom</summary>" if len(keys) == 2 else "")
         + _scroll(f"<table class=\"grid\">{head}{''.join(body)}</table>") + ("</details>" if len(keys) == 2 else "")]
    errs = [(c.get("name") or c.get("cell"), e) for c in cells
            for e in (c.get("errors") if isinstance(c.get("errors"), list) else [c.get("error")]) if e]
    if errs:
        b.append("<h3>Errors</h3><pre class=\"ev\">" + "\n".join(f"{esc(n)}: {esc(e)}" for n, e in errs) + "</pre>")
    return b


def _differential_html(diff: Any) -> list[str]:
    """Per toggle and symptom: the symptom's value under each setting, and what that shows."""
    if not (isinstance(diff, list) and diff):
        return []
    b = ["<h2>Differential</h2><div class=\"scroll\"><table class=\"grid\"><tr><th>toggle</th><th>symptom</th>"
         "<th>by value</th><th>conclusion</th></tr>"]
    for d in diff:
        if not isinstance(d, dict):
            continue
        bv = d.get("by_value")
        by = "; ".join(f"{k}: {_fmt_value(x, 120)}" for k, x in bv.items()) if isinstance(bv, dict) else ""
        b.append(f"<tr><td>{esc(d.get('toggle', ''))}</td><td>{esc(d.get('symptom', ''))}</td>"
                 f"<td class=\"mono\">{esc(by)}</td><td>{esc(d.get('conclusion', ''))}</td></tr>")
    b.append("</table></div>")
    return b


def _run_info_html(v: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """The plan, the device and anything else the verdict carries that no section above shows."""
    info = []
    if plan:
        info.append(("plan", {k: x for k, x in plan.items() if k not in ("description",)}))
    if v.get("device"):
        info.append(("device", v["device"]))
    extra = {k: x for k, x in v.items() if k not in ("plan", "device", "cells", "differential", "conclusions",
                                                     "conclusion", "headline", "notes", "results", "schema")}
    info += list(extra.items())
    return ["<h2>Run</h2>" + _kv_rows([(k, x) for k, x in info])] if info else []


def render_repro_html(verdict: dict[str, Any]) -> str:
    """The repro run's page: the verdict, the cell matrix, the per-toggle differential, the plan."""
    v = verdict if isinstance(verdict, dict) else {}
    plan = v.get("plan") if isinstance(v.get("plan"), dict) else {}
    cells = [c for c in (v.get("cells") or []) if isinstance(c, dict)] if isinstance(v.get("cells"), list) else []
    rows = [_cell_fields(c) for c in cells]
    name = plan.get("name") or v.get("name") or v.get("preset") or "repro run"
    b = [f"<header><h1>specdiag repro — {esc(name)}</h1>"]
    if plan.get("description"):
        b.append(f"<p class=\"sub\">{esc(plan['description'])}</p>")
    b.append("</header>")
    b += _repro_verdict_html(v)
    # ---- the matrix: a grid when two toggles were crossed, else one row per cell
    keys, sym_keys = _matrix_keys(rows)
    b.append(f"<h2>Cells ({len(rows)})</h2>")
    if len(keys) == 2 and rows:
        b.append(_matrix_grid_html(rows, keys, sym_keys))
    b += _cells_html(cells, rows, keys, sym_keys)
    b += _differential_html(v.get("differential"))
    b += _run_info_html(v, plan)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    b.append(f"<footer>specdiag {esc(__version__)} · generated {esc(now)} · self-contained page: no network access"
             "</footer>")
    return _page(f"specdiag repro — {name}", "\n".join(b), v, [])


def write_repro_html(verdict: dict[str, Any], path: str | Path) -> None:
    """Write the repro run's page (``verdict`` is the verdict dict; unknown or missing keys are tolerated)."""
    Path(path).write_text(render_repro_html(verdict), encoding="utf-8")


__all__ = ["build_chart_data", "downsample", "json_for_script", "render_html", "render_repro_html", "write_html",
           "write_repro_html"]
