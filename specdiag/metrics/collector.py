"""The metrics observer that every ``analyze`` runs: per-engine intervals plus timeline markers.

Plain Python lists only (no pandas). ``timeline(findings, ctx)`` returns the ``report.timeline`` dict:

    {"series": {name: {"unit", "label", "points": [[t, value], ...], "by": engine label or None}},
     "markers": [{"t", "kind", "label", "rank", "rule"}]}

Series of the main engine (the one with the most SpecDecoding intervals) use the plain names; other
engines' series are named ``name@label``. A series longer than ``max_points`` is downsampled by merging
neighbouring intervals (drafts-weighted for acceptance), so the output stays small on GB logs.
"""

from __future__ import annotations

from typing import Any

from specdiag.metrics.series import Interval, SeriesTracker, compact
from specdiag.observe import Observer
from specdiag.timeutil import rec_time

MARKER_EVENTS = frozenset({"R2", "V1", "V2", "V_CORE_FATAL", "V_CORE_FAILED", "V_PROC_DIED", "V_WORKER_EXC",
                           "V_CORE_EXITED", "E_OOM", "E_NO_CACHE_MEM", "E_WORKER_FAILED"})

#: name → (unit, label, getter)
SERIES: dict[str, tuple[str, str, Any]] = {
    "mean_acceptance_length": ("tokens", "Mean acceptance length (1 + accepted/drafts)", lambda iv: iv.mal),
    "draft_acceptance_rate": ("fraction", "Draft acceptance rate (accepted/drafted)", lambda iv: iv.acceptance),
    "accepted_tokens": ("tokens", "Accepted draft tokens per interval", lambda iv: iv.acc),
    "drafted_tokens": ("tokens", "Drafted tokens per interval", lambda iv: iv.dr),
    "per_position_acceptance": ("fraction", "Per-position acceptance rate", lambda iv: iv.pos),
    "prefix_cache_hit_rate": ("fraction", "Prefix cache hit rate", lambda iv: iv.prefix),
    "external_prefix_cache_hit_rate": ("fraction", "External (KV connector) prefix cache hit rate", lambda iv: iv.ext),
    "prompt_throughput": ("tokens/s", "Avg prompt throughput", lambda iv: iv.prompt_tps),
    "generation_throughput": ("tokens/s", "Avg generation throughput", lambda iv: iv.gen_tps),
    "running_reqs": ("reqs", "Running requests", lambda iv: iv.running),
    "waiting_reqs": ("reqs", "Waiting requests", lambda iv: iv.waiting),
    "kv_cache_usage": ("fraction", "KV cache usage", lambda iv: iv.kv),
    "preemptions": ("count", "Preemptions (cumulative)", lambda iv: iv.preempt),
}


class MetricsCollector(Observer):
    """The series observer every analysis runs (the ``specdiag.observe`` protocol; it returns no findings)."""

    events = MARKER_EVENTS

    def __init__(self, max_points: int = 20000, max_markers: int = 500) -> None:
        #: the run's interval series (``start`` hands it over); a fresh one when used on its own
        self.series = SeriesTracker()
        self.max_points = max_points
        self.max_markers = max_markers
        self.markers: list[dict] = []
        self.markers_dropped = 0
        self.ctx = None

    def start(self, run) -> None:
        super().start(run)
        self.series = run.series

    def observe(self, ev) -> None:
        tid = ev.id
        f = ev.f
        rank = ev.rec.origin.rank_label
        if tid == "R2":
            if f.get("retrieved") is None or f.get("expected") is None or f["retrieved"] >= f["expected"]:
                return
            m = {"kind": "shortfall", "label": f"retrieved {f['retrieved']} of {f['expected']} tokens"}
        elif tid in ("V1", "V2"):
            m = {"kind": "load_failure", "label": ("recomputed" if tid == "V1" else "failed")
                 + f" {f.get('reqs')} request(s), {f.get('tokens')} tokens"}
        else:
            m = {"kind": "error", "label": (f.get("detail") or ev.rec.msg)[:120]}
        self._marker(rec_time(ev.rec), m, rank, None)

    def _marker(self, t, m: dict, rank, rule, into: list | None = None) -> None:
        target = self.markers if into is None else into
        if t is None:
            return
        if len(target) >= self.max_markers:
            self.markers_dropped += 1
            return
        m.update({"t": t, "rank": rank, "rule": rule})
        target.append(m)

    def finish(self, ctx, run) -> list:
        self.ctx = ctx
        return []

    # ------------------------------------------------------------------ output
    def engines(self) -> list[tuple[str, list[Interval]]]:
        labels = self.series.labels()
        return [(labels[k], v) for k, v in self.series.engines.items()]

    def timeline(self, findings=(), ctx=None) -> dict[str, Any]:
        ctx = ctx or self.ctx
        out: dict[str, Any] = {"series": {}, "markers": []}
        markers = list(self.markers)
        labels = self.series.labels()
        main = self.series.main_series()
        single = len(labels) == 1
        for key, items in self.series.engines.items():
            label = labels[key]
            suffix = "" if items is main else f"@{label}"
            while len(items) > self.max_points:
                items = compact(items)
            for name, (unit, text, get) in SERIES.items():
                pts = []
                for iv in items:
                    v = get(iv)
                    if v is not None and iv.t is not None:
                        pts.append([iv.t, v])
                if pts:
                    out["series"][name + suffix] = {"unit": unit, "label": text, "points": pts,
                                                    "by": None if single else label}
            # preemption increments
            prev = None
            for iv in items:
                if iv.preempt is not None:
                    if prev is not None and iv.preempt > prev and iv.t is not None:
                        self._marker(iv.t, {"kind": "preemption", "label": f"+{iv.preempt - prev} preemption(s)"},
                                     None, None, markers)
                    prev = iv.preempt
            self._k0_markers(items, ctx, markers)
        for f in findings:
            if getattr(f, "first_seen", None) is not None:
                self._marker(f.first_seen, {"kind": "finding", "label": f.title}, None, f.rule, markers)
        out["markers"] = sorted(markers, key=lambda m: m["t"])
        if self.markers_dropped:
            out["markers_dropped"] = self.markers_dropped
        return out

    def _k0_markers(self, items: list[Interval], ctx, markers: list) -> None:
        spec = (ctx.speculative if ctx is not None else None) or {}
        sched = spec.get("per_batch_size")
        if not isinstance(sched, list) or not any(isinstance(r, (list, tuple)) and len(r) == 3 and r[2] == 0 for r in sched):
            return
        in_run = False
        for iv in items:
            k0 = not iv.has_spec and iv.generating
            if k0 and not in_run and iv.t is not None:
                self._marker(iv.t, {"kind": "k0", "label": f"no SpecDecoding line while running {iv.running} req(s): K=0"},
                             None, None, markers)
            in_run = k0
