"""Key/value parsing of vLLM's periodic stats line and SpecDecoding line, every era (0.8 → 0.32, V0).

Both lines are parsed as ``Key: value`` pairs, never by position: fields come and go between versions
(``Preemptions`` only once > 0, ``Deferred``/``KV fetch`` from 0.20/0.32, ``Prefix cache hit rate``
omitted without queries in 0.31+, a dev build printed old and new SpecDecoding fields together).
Formats: ``/work/shared/reference/vllm/log-formats.md`` §5–§6 (``v1/metrics/loggers.py``,
``v1/spec_decode/metrics.py``).

Results are plain dicts with normalised names; rates are fractions in [0, 1] (vLLM prints percents).
"""

from __future__ import annotations

import re

from specdiag.catalog import wording as W
from specdiag.numbers import to_float, to_int
from specdiag.patterns import lazy

#: ``Key: value[unit]`` items. A key starts the body or follows ``, `` and cannot span a comma, and digit runs
#: are bounded, so a hostile body is scanned in linear time (an unanchored key made a run of letters quadratic)
_ITEM = lazy(
    r"(?:^|, )([A-Za-z][A-Za-z -]{0,80}?): (nan|-?inf|-?\d{1,30}(?:\.\d{1,30})?)(%| tokens/s| tokens| reqs)?")
_KV_FETCH = lazy(r"KV fetch: (\d+) waiting to start, (\d+) in progress, (\d+) completed waiting")
_PER_POS = lazy(
    re.escape(W.SPEC_PER_POSITION + W.KEY_END) + r"((?:nan|\d{1,30}(?:\.\d{1,30})?)(?:, (?:nan|\d{1,30}(?:\.\d{1,30})?)){0,1024})")

#: stats line key → normalised field
STATS_KEYS = {
    W.PROMPT_TPS: "prompt_throughput",
    W.GEN_TPS: "generation_throughput",
    W.RUNNING: "running_reqs",
    W.WAITING: "waiting_reqs",
    "Pending": "waiting_reqs",  # V0
    "Swapped": "swapped_reqs",  # V0
    "Deferred": "deferred_reqs",
    W.PREEMPTIONS: "preemptions",
    W.PREFIX_HIT: "prefix_cache_hit_rate",
    W.EXT_HIT: "external_prefix_cache_hit_rate",
    "MM cache hit rate": "mm_cache_hit_rate",
    "Corrupted": "corrupted_reqs",
}
PERCENT_FIELDS = {"prefix_cache_hit_rate", "external_prefix_cache_hit_rate", "mm_cache_hit_rate", "kv_cache_usage",
                  "cpu_swap_usage"}

#: SpecDecoding / Speculative metrics key → normalised field
SPEC_KEYS = {
    W.SPEC_MEAN_LENGTH: "mean_acceptance_length",
    W.SPEC_ACCEPTED_TPS: "accepted_throughput",
    W.SPEC_DRAFTED_TPS: "drafted_throughput",
    W.SPEC_ACCEPTED: "accepted_tokens",
    W.SPEC_DRAFTED: "drafted_tokens",
    W.SPEC_AVG_RATE: "draft_acceptance_rate",
    W.SPEC_RATE: "draft_acceptance_rate",
    "Number of accepted tokens": "accepted_tokens",  # 0.8.0-0.8.2 and V0
    "Number of draft tokens": "drafted_tokens",
    "Number of emitted tokens": "emitted_tokens",  # V0
    # V0 before 0.6 printed the unit twice: "Number of draft tokens tokens: 42272" (engine/metrics.py)
    "Number of draft tokens tokens": "drafted_tokens",
    "Number of emitted tokens tokens": "emitted_tokens",
    "Number of speculative tokens": "num_spec_tokens",  # V0
    "System efficiency": "system_efficiency",  # V0
}


def _num(s: str) -> float | None:
    """A printed value as a finite float; ``nan`` (vLLM's "no data"), ``inf`` and junk are unknown (None)."""
    return to_float(s)


def _count(v: float | None) -> int | None:
    """A count printed as a number: a non-negative integer of sane size, else unknown."""
    return int(v) if v is not None and 0 <= v < 1e18 else None


def parse_stats_body(body: str) -> dict:
    """``Avg prompt throughput: … , Running: 3 reqs, …`` → {field: value}. Counts are ints, rates fractions.

    ``kv_cache_usage`` is the engine's KV cache usage (``GPU KV cache usage``, or ``CPU KV cache usage`` on
    vLLM's CPU backend, 0.30+); ``kv_device`` names which. In the V0 line (``Swapped``/``Pending``)
    ``CPU KV cache usage`` is the swap space and goes to ``cpu_swap_usage``.
    """
    out: dict = {}
    v0 = "Pending:" in body or "Swapped:" in body
    m = _KV_FETCH.search(body)
    if m:
        out["kv_fetch_waiting"], out["kv_fetch_in_progress"], out["kv_fetch_completed_waiting"] = (
            to_int(m.group(1)), to_int(m.group(2)), to_int(m.group(3)))
        body = body[: m.start()] + body[m.end():]
    for key, val, unit in _ITEM.findall(body):
        key = key.strip()
        v = _num(val)
        if key.endswith(W.KV_USAGE.strip()):
            dev = key[: -len(W.KV_USAGE)].strip() or W.KV_DEVICE_GPU
            if v0 and dev == W.KV_DEVICE_CPU:
                name = "cpu_swap_usage"
            else:
                name = "kv_cache_usage"
                out["kv_device"] = dev
        else:
            name = STATS_KEYS.get(key)
            if name is None:
                continue
        if v is not None and (name in PERCENT_FIELDS or unit == "%"):
            v = round(v / 100.0, 6)
        elif v is not None and (unit == " reqs" or name == "preemptions"):
            v = _count(v)
        out[name] = v
    return out


def parse_spec_body(body: str) -> dict:
    """A SpecDecoding/Speculative metrics body → {field: value}.

    ``draft_acceptance_rate`` is a fraction (``48.1%`` → 0.481; the 0.8.0–0.8.2/V0 ``%.3f`` form is already
    one); ``per_position`` a list of fractions; ``num_drafts`` is derived as
    ``accepted / (mean_acceptance_length - 1)`` when both are known and the length > 1 (vLLM's definition:
    mean length = 1 + accepted / num_drafts, ``v1/spec_decode/metrics.py``).
    """
    out: dict = {}
    m = _PER_POS.search(body)
    if m:
        out["per_position"] = [_num(x) for x in m.group(1).split(", ")]
        body = body[: m.start()] + body[m.end():]
    for key, val, unit in _ITEM.findall(body):
        name = SPEC_KEYS.get(key.strip())
        if name is None:
            continue
        v = _num(val)
        if name == "draft_acceptance_rate":
            if v is not None and (unit == "%" or v > 1.0):
                v = round(v / 100.0, 6)
            if name in out and out[name] is not None:
                continue  # a dev build printed both: keep the first
        elif name in ("accepted_tokens", "drafted_tokens", "emitted_tokens", "num_spec_tokens") and v is not None:
            v = _count(v)
        out[name] = v
    acc, dr = out.get("accepted_tokens"), out.get("drafted_tokens")
    if out.get("draft_acceptance_rate") is None and acc is not None and dr:
        out["draft_acceptance_rate"] = acc / dr
    mal = out.get("mean_acceptance_length")
    if acc is not None and mal is not None and mal > 1.005:
        out["num_drafts"] = acc / (mal - 1.0)
    return out


#: the stats body's keys an interval keeps, in its field order (``series.Interval.fill_stats``; a scanned
#: row's ``MetricRows.stats_values`` gives them in this order)
STATS_ORDER = ("running_reqs", "waiting_reqs", "kv_cache_usage", "kv_device", "prefix_cache_hit_rate",
              "external_prefix_cache_hit_rate", "preemptions", "prompt_throughput", "generation_throughput")
#: the same for the SpecDecoding body (``fill_spec``, ``spec_values``)
SPEC_ORDER = ("accepted_tokens", "drafted_tokens", "mean_acceptance_length", "draft_acceptance_rate", "per_position",
             "num_drafts")


def stats_fields(ev) -> dict:
    """Parsed stats fields of a V_STATS/V_STATS_V0 event, cached on the event (many rules read them)."""
    f = ev.f
    d = f.get("_kv")
    if d is None:
        d = f["_kv"] = parse_stats_body(f.get("body") or "")
    return d


def spec_fields(ev) -> dict:
    """Parsed fields of a V_SPEC event, cached on the event."""
    f = ev.f
    d = f.get("_kv")
    if d is None:
        d = f["_kv"] = parse_spec_body(f.get("body") or "")
    return d


#: the counts V0's ``Speculative metrics`` line prints as totals since the engine started
_V0_TOTALS = ("accepted_tokens", "drafted_tokens", "emitted_tokens")


def v0_interval_counts(ev, totals: dict) -> None:
    """Make a V0 ``Speculative metrics`` line's counts those of its interval, as V1's are: V0's metrics
    collector prints totals since the engine started (``spec_decode/metrics.py``: ``_aggregate_num_accepted_tokens``
    and the like), so summing its lines counted every token once per line. ``totals``: the last totals per
    process, this run's. A total below the last one is a restarted counter: the interval is the total. The
    acceptance rate, printed as the running ratio too, becomes the interval's."""
    if not ev.rec.msg.startswith(W.SPEC_OLD):
        return
    d = spec_fields(ev)
    key = ev.rec.origin.key
    last = totals.get(key, {})
    now = {k: d.get(k) for k in _V0_TOTALS}
    both = [(k, v, last[k]) for k, v in now.items() if v is not None and last.get(k) is not None]
    if all(v >= before for _, v, before in both):  # else a restarted engine: its totals are its interval
        for k, v, before in both:
            d[k] = v - before
    totals[key] = now
    acc, dr = d.get("accepted_tokens"), d.get("drafted_tokens")
    if acc is not None and dr is not None:
        d["draft_acceptance_rate"] = acc / dr if dr else None
