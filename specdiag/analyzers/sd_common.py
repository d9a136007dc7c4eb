"""Shared machinery of the speculative-decoding rules (SD…): interval series, robust statistics,
the dynamic-K schedule lookup and the change-point test.

Definitions (vLLM ``v1/spec_decode/metrics.py``; reference ``spec-decode.md`` §4):
acceptance rate = Accepted / Drafted; mean acceptance length = 1 + Accepted / num_drafts (includes the
bonus token). Every rate here is weighted by the interval's ``Drafted`` count, so an interval with a
handful of drafts cannot move a verdict.
"""

from __future__ import annotations

import math
from typing import Any

from specdiag.analyzers.base import Rule
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Evidence
from specdiag.metrics.series import Interval
from specdiag.numbers import finite_or_none
from specdiag.observe import RunState
from specdiag.timeutil import fmt_time

EAGLE_FAMILY = ("eagle", "eagle3", "mtp", "deepseek_mtp", "qwen3_next_mtp", "qwen3_5_mtp", "gemma4_mtp", "dflash",
                "dspark", "ernie_mtp", "glm4_moe_mtp", "mimo_mtp", "longcat_flash_mtp", "extract_hidden_states")
DRAFT_STATE_METHODS = EAGLE_FAMILY + ("draft_model", "medusa", "mlp_speculator")
STATELESS_METHODS = ("ngram", "ngram_gpu", "suffix")
HYBRID_HINTS = ("mamba", "jamba", "hybrid", "next", "nemotronh", "nemotron_h", "granitemoehybrid", "falconh",
                "falcon_h", "zamba", "qwen3_5", "qwen3.5", "plamo2", "bamba", "lfm2", "minimax", "kimi_linear",
                "olmo3_hybrid", "gdn")

DEFINITIONS = ("acceptance rate = Accepted/Drafted draft tokens; mean acceptance length = 1 + Accepted/num_drafts "
               "(bonus token included)")


def method_of(ctx: Context) -> str | None:
    spec = ctx.speculative or {}
    m = spec.get("method")
    return str(m).lower() if m else None


def method_text(method: str | None) -> str:
    """A summary's words for the drafting method: a grepped excerpt of SpecDecoding lines may not name it."""
    return f"method {method}" if method else "method not in the log"


def config_seen(ctx: Context) -> bool:
    """The speculative configuration (or the server start) is in the inputs.

    Only then is a missing setting (no dynamic-K schedule, no KV connector, no kv_role) evidence: a grepped
    excerpt of SpecDecoding lines could not have shown it.
    """
    spec = ctx.speculative or {}
    return ctx.startup_seen or spec.get("num_speculative_tokens_source") == "config"


#: what would show whether a KV connector restores context on this server
CONNECTOR_COLLECT = ("the startup line 'non-default args: {…}' (it lists kv_transfer_config when a connector is set) "
                     "or any LMCache line of the same server")


def connector_shown(ctx: Context, restores: int = 0, ext_mean: float | None = None) -> bool | None:
    """Whether the input shows a KV connector that restores context (True), shows there is none (False), or
    cannot tell (None: a fragment without the arguments line).

    vLLM prints ``non-default args`` at start-up with ``kv_transfer_config`` in it whenever a connector is
    configured (entrypoints/serve/utils/api_utils.py:286, 0.9.2+), so that line without it, and no LMCache
    line, is a server without a connector. External prefix-cache hits are only reported by a connector
    (v1/metrics/loggers.py, 0.11.2+).
    """
    if ctx.kv_connector or ctx.kv_role or restores or ctx.lmcache_version or ctx.lmcache_config:
        return True
    if ext_mean is not None and ext_mean > 0:
        return True
    if ctx.vllm_args_seen:
        return False
    return None


#: a paste that does not show the platform: upstream vLLM cannot have this bug, a plugin proposer can
PASTE_PLATFORM_CAP = 0.5
PLATFORM_UNKNOWN = ("the input does not show which proposer runs: upstream vLLM (dynamic K exists from 0.25.0) runs "
                    "the drafter's ingest pass before the K check (v1/spec_decode/llm_base_proposer.py, 0.25.0-0.32.0), "
                    "so stale draft KV needs a plugin proposer such as vllm-metal's before its PR #716")
PLATFORM_STEP = ("Collect the startup lines that name the platform: vllm-metal prints 'Draft model loaded for speculative "
                 "decoding: …'; upstream vLLM prints its version ('vLLM API server version …') and no such line.")


#: the most belief an SD finding gives its causes when the excerpt lacks the server start and configuration
FRAGMENT_CEILING = 0.6
FRAGMENT_NOTE = ("the excerpt shows neither the server start nor the speculative config, so confidence is capped; "
                 "include the startup lines ('non-default args', 'Initializing a V1 LLM engine') to decide")


def is_eagle_family(method: str | None) -> bool:
    return bool(method) and (method in EAGLE_FAMILY or "eagle" in method or "mtp" in method or method in ("dflash", "dspark"))


def kmax_of(ctx: Context) -> int | None:
    spec = ctx.speculative or {}
    k = finite_or_none(spec.get("num_speculative_tokens"))  # inf/nan from a damaged dump: unknown
    return int(k) if k is not None else None


def schedule_of(ctx: Context) -> list[list[int]] | None:
    s = (ctx.speculative or {}).get("per_batch_size")
    if isinstance(s, list) and s and all(isinstance(x, (list, tuple)) and len(x) == 3 for x in s):
        try:
            return [[int(a), int(b), int(k)] for a, b, k in s]
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def schedule_lookup(schedule: list[list[int]], kmax: int | None):
    """``batch size → K`` as vLLM builds it (``v1/spec_decode/dynamic/utils.py:77-148``): inclusive ranges,
    gaps and the tail carry the previous K forward, every K clipped to ``num_speculative_tokens``."""
    rows = sorted(schedule)

    def k_for(bs: int) -> int:
        k = rows[0][2]
        for start, _end, kk in rows:
            if bs >= start:
                k = kk
            else:
                break
        return min(k, kmax) if kmax is not None else k

    return k_for


def k_zero_ranges(schedule: list[list[int]]) -> list[tuple[int, int]]:
    return [(a, b) for a, b, k in schedule if k == 0]


# ------------------------------------------------------------------------------------------ statistics
def wmean(vals: list[float], w: list[float]) -> float | None:
    tw = sum(w)
    return sum(v * x for v, x in zip(vals, w, strict=False)) / tw if tw else None


def wmedian(vals: list[float], w: list[float]) -> float | None:
    pairs = sorted(zip(vals, w, strict=False))
    tw = sum(w)
    if not pairs or tw <= 0:
        return None
    acc = 0.0
    for v, x in pairs:
        acc += x
        if acc >= tw / 2:
            return v
    return pairs[-1][0]


def mad(vals: list[float], center: float) -> float:
    """Median absolute deviation, scaled to a normal sigma (× 1.4826)."""
    if not vals:
        return 0.0
    dev = sorted(abs(v - center) for v in vals)
    n = len(dev)
    med = dev[n // 2] if n % 2 else (dev[n // 2 - 1] + dev[n // 2]) / 2
    return 1.4826 * med


def pooled_rate(items: list[Interval]) -> tuple[float | None, int, int]:
    acc = sum(iv.acc or 0 for iv in items)
    dr = sum(iv.dr or 0 for iv in items)
    return (acc / dr if dr else None), acc, dr


def pooled_length(items: list[Interval]) -> float | None:
    acc = sum(iv.acc or 0 for iv in items if iv.ndrafts)
    nd = sum(iv.ndrafts or 0 for iv in items)
    if nd:
        return 1 + acc / nd
    mals = [iv.mal for iv in items if iv.mal is not None]
    return sum(mals) / len(mals) if mals else None


def changepoint(items: list[Interval], min_seg: int = 3, min_drafts: int = 200) -> dict[str, Any] | None:
    """The single split that best separates the drafts-weighted acceptance before/after it.

    Binary segmentation: for each split, the statistic is the difference of pooled rates scaled by
    ``sqrt(n1·n2/(n1+n2))``; its significance is judged against a robust noise scale — the MAD of the
    intervals' rates around their own segment's rate (per-interval noise, not a global threshold).
    Returns None without enough data. ``z`` is the drop in noise units (positive = acceptance fell).
    """
    pts = [iv for iv in items if iv.dr and iv.dr > 0]
    n = len(pts)
    if n < 2 * min_seg:
        return None
    acc = [iv.acc or 0 for iv in pts]
    dr = [iv.dr for iv in pts]
    cacc, cdr = [0], [0]
    for a, d in zip(acc, dr, strict=False):
        cacc.append(cacc[-1] + a)
        cdr.append(cdr[-1] + d)
    best, best_i = 0.0, None
    for i in range(min_seg, n - min_seg + 1):
        d1, d2 = cdr[i], cdr[n] - cdr[i]
        if d1 < min_drafts or d2 < min_drafts:
            continue
        r1, r2 = cacc[i] / d1, (cacc[n] - cacc[i]) / d2
        score = (r1 - r2) * math.sqrt(i * (n - i) / n)
        if abs(score) > abs(best):
            best, best_i = score, i
    if best_i is None:
        return None
    i = best_i
    before, after = pts[:i], pts[i:]
    r1, a1, d1 = pooled_rate(before)
    r2, a2, d2 = pooled_rate(after)
    resid = [iv.acc / iv.dr - r1 for iv in before if iv.acc is not None] + [iv.acc / iv.dr - r2 for iv in after if iv.acc is not None]
    sigma = max(mad(resid, 0.0), 0.01, 0.05 * max(r1 or 0, r2 or 0))
    z = (r1 - r2) / sigma * math.sqrt(1.0 / (1.0 / len(before) + 1.0 / len(after))) if r1 is not None and r2 is not None else 0
    return {"index": i, "before": before, "after": after, "rate_before": r1, "rate_after": r2,
            "accepted_before": a1, "drafted_before": d1, "accepted_after": a2, "drafted_after": d2,
            "length_before": pooled_length(before), "length_after": pooled_length(after),
            "sigma": sigma, "z": z, "at": after[0]}


# ------------------------------------------------------------------------------------------ evidence
def ev_of(iv: Interval, spec: bool = True) -> Evidence:
    rec = iv.evidence_rec() if spec else iv.rec
    return Evidence(rec.path, rec.line, rec.display())


def span(items: list[Interval]) -> str:
    if not items:
        return "-"
    a = items[0]
    return short_span(items) if len(items) > 1 else f"{fmt_time(a.t)} (line {a.evidence_rec().line})"


def short_span(items: list[Interval]) -> str:
    """``2026-03-14 09:01:00–09:01:20 (lines 17–19, 3 intervals)``; ``03-14 …`` when the log gave no year."""
    if not items:
        return "-"
    a, b = items[0], items[-1]
    ta, tb = fmt_time(a.t), fmt_time(b.t)
    day_a, _, _ = ta.rpartition(" ")
    day_b, _, clock_b = tb.rpartition(" ")
    if day_a and day_a == day_b:  # same day (with or without a known year): show it once
        tb = clock_b
    la, lb = a.evidence_rec().line, b.evidence_rec().line
    n = sum(iv.n for iv in items)
    return f"{ta}–{tb} (lines {la}–{lb}, {n} interval{'s' if n != 1 else ''})" if n > 1 else f"{ta} (line {la})"


def rnd(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def dedupe_evidence(evs: list[Evidence], limit: int = 8) -> list[Evidence]:
    out, seen = [], set()
    for e in evs:
        k = (e.path, e.line)
        if k not in seen:
            seen.add(k)
            out.append(e)
        if len(out) >= limit:
            break
    return out


class SpecSeriesRule(Rule):
    """Base of the SD rules: they read the run's per-engine interval series (``run.series``) in ``finish``."""

    family = "SD"
    events: frozenset[str] = frozenset()

    def observe(self, ev: Event) -> None:
        if ev.id not in RunState.SERIES_EVENTS:
            self.observe_other(ev)

    def observe_other(self, ev: Event) -> None:
        pass

    def engines(self) -> list[tuple[str, list[Interval]]]:
        series = self.run.series
        labels = series.labels()
        return [(labels[k], v) for k, v in series.engines.items()]

    def finish(self, ctx: Context, run: RunState):  # pragma: no cover - interface
        raise NotImplementedError
