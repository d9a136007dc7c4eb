"""SRV002 — the KV cache ran full while requests waited or were preempted."""

from __future__ import annotations

from specdiag.analyzers.base import register
from specdiag.analyzers.sd_common import SpecSeriesRule, dedupe_evidence, ev_of, method_of, pct
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: processes whose preemption warnings are kept apart (a hostile log must not grow the table)
MAX_PROCESSES = 64


class _Preempted:
    """One process's V0 preemption warnings: how many, the highest running total they printed, the first."""

    __slots__ = ("first", "lines", "total")

    def __init__(self, first: Event) -> None:
        self.first, self.lines, self.total = first, 0, None


def _near_said(sat: list, o: dict) -> str:
    """The intervals counted full below ``min_usage`` (a queue standing), said as such."""
    near = [iv for iv in sat if iv.kv < o["min_usage"]]
    return (f" or ≥ {pct(o['near_usage'])} with {o['min_waiting']}+ requests waiting ({len(near)} of them, lowest "
            f"{pct(min(iv.kv for iv in near))})" if near else "")


def _full(iv, o: dict) -> bool:
    """An interval whose KV cache was full: at ``min_usage`` or more, or at ``near_usage`` or more while
    ``min_waiting`` requests waited (the free rest too small to admit one of them: a long prompt needs more blocks
    than a few per cent hold, so a queue stands at 94.7 % as at 95.9 %)."""
    if iv.kv is None:
        return False
    return iv.kv >= o["min_usage"] or (iv.kv >= o["near_usage"] and (iv.waiting or 0) >= o["min_waiting"])


@register
class KvCacheSaturation(SpecSeriesRule):
    """The KV cache ran full while requests waited (a growing or standing queue) or were preempted.

    Detects: stats intervals with ``KV cache usage`` ≥ ``min_usage`` (GPU, or CPU on vLLM's CPU backend), or
    ≥ ``near_usage`` while ``min_waiting`` requests wait (the free rest too small to admit a long prompt; at least
    one interval at ``min_usage``), in which the waiting queue grows, stands at ``min_waiting`` or more in every one of them (a burst draining
    through a full cache), or the cumulative ``Preemptions`` counter rises (0.11.2+); and V0's own warning
    ``Sequence group N is preempted by PreemptionMode.X mode because there is not enough KV cache space``
    (0.6.0–0.10.2 ``core/scheduler.py``), per process, with its running total.

    Why it matters: preempted requests are recomputed (or resumed without drafter state, which also
    hurts spec-decode acceptance); queues grow and latency explodes while throughput stays flat.

    Causes weighed: ``kv-cache-undersized`` (too little memory for the KV cache for this load),
    ``long-context-burst`` (a burst of long prompts), ``draft-kv-overhead`` (a draft model's KV shares the
    block pool).

    Fix: more KV memory (``--gpu-memory-utilization``, more GPUs, a KV offload tier), fewer concurrent
    sequences (``--max-num-seqs``), shorter ``--max-model-len``.

    References: vLLM ``v1/metrics/loggers.py`` (0.32.0 :335); reference ``log-formats.md`` §5, §8.
    """

    code = "SRV002"
    name = "kv-cache-saturation"
    title = "KV cache saturated while requests waited or were preempted"
    severity = "warning"
    family = "SRV"
    cause_ids = ("kv-cache-undersized", "long-context-burst", "draft-kv-overhead")
    defaults = {"min_usage": 0.95, "min_intervals": 3, "min_waiting": 4, "near_usage": 0.9}
    events = frozenset({"V_PREEMPTED"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.preempted: dict[tuple, _Preempted] = {}  # by process

    def observe_other(self, ev: Event) -> None:
        key = ev.rec.origin.key
        seen = self.preempted.get(key)
        if seen is None:
            if len(self.preempted) >= MAX_PROCESSES:
                return
            seen = self.preempted[key] = _Preempted(ev)
        seen.lines += 1
        total = ev.f.get("total")
        if total is not None and (seen.total is None or total > seen.total):
            seen.total = total

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        out = self._from_series(ctx)
        if not out:
            out = [self._from_warnings(key, seen) for key, seen in self.preempted.items()]
        return out

    def _from_warnings(self, key: tuple, seen: _Preempted) -> Finding:
        """V0's scheduler said it preempted sequences because the KV cache had no room: the finding from its
        warnings alone (no stats interval showed the cache full long enough)."""
        n, total, first = seen.lines, seen.total, seen.first
        said = f"; its running total reached {total}" if total is not None else ""
        b = self._board(None)
        b.support("kv-cache-undersized", 2, f"vLLM's own words: 'preempted … because there is not enough KV cache space' ×{n}")
        causes = b.ranked(ceiling=0.8)
        return Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"vLLM's scheduler preempted sequences because the KV cache had no room: {n} warning(s) "
                     f"({first.f.get('mode')} mode){said}. Preempted "
                     "sequences are recomputed or swapped back, so latency grows while throughput stays flat."),
            count=n, evidence=[evidence_of(first, 400)], causes=causes,
            measurements={"preemption_warnings": n, "preemptions": total, "mode": first.f.get("mode")},
            identity=f"{self.code}|preempted|{key}", first_seen=rec_time(first.rec),
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )

    def _board(self, ctx: Context | None) -> CauseBoard:
        b = CauseBoard()
        b.add("kv-cache-undersized", 0.5, fix="Give the KV cache more memory (--gpu-memory-utilization, more GPUs, "
              "a KV offload tier) or admit fewer sequences (--max-num-seqs).",
              confirm_with="specdiag repro --toggle num_gpu_blocks=off,36")
        b.add("long-context-burst", 0.3, fix="Cap --max-model-len or route long prompts to a separate pool.",
              confirm_with="compare prompt throughput peaks with the saturated intervals (specdiag metrics LOG)")
        b.add("draft-kv-overhead", 0.1, fix="A draft model's KV shares the pool: budget for it or use a smaller draft.",
              confirm_with="specdiag repro --toggle spec=off,draft_model --set num_gpu_blocks=36")
        if ctx is not None and method_of(ctx) == "draft_model":
            b.support("draft-kv-overhead", 3, "method draft_model registers its layers in the same KV-cache groups")
        return b

    def _from_series(self, ctx: Context) -> list[Finding]:
        o = self.options
        out = []
        for label, items in self.engines():
            sat = [iv for iv in items if _full(iv, o)]
            if len(sat) < o["min_intervals"] or not any(iv.kv >= o["min_usage"] for iv in sat):
                continue
            pre = [iv.preempt for iv in items if iv.preempt is not None]
            pre_total = max(pre) if pre else 0
            pre_first = next((iv for iv in items if iv.preempt), None)
            waits = [iv.waiting or 0 for iv in sat]
            grew = max(waits) >= o["min_waiting"] and waits[-1] >= waits[0]
            standing = min(waits) >= o["min_waiting"]  # a queue in every saturated interval, even while it drains
            if not (grew or standing or pre_total > 0):
                continue
            b = self._board(ctx)
            peak_prompt = max((iv.prompt_tps or 0) for iv in sat)
            avg_prompt = sum((iv.prompt_tps or 0) for iv in items) / max(1, len(items))
            if avg_prompt and peak_prompt > 3 * avg_prompt:
                b.support("long-context-burst", 2, f"prompt throughput peaked at {peak_prompt:.0f} tok/s (avg {avg_prompt:.0f})")
            causes = b.ranked(ceiling=0.8)
            evs = [ev_of(sat[0], spec=False), ev_of(max(sat, key=lambda iv: iv.waiting or 0), spec=False)]
            if pre_first is not None:
                evs.append(ev_of(pre_first, spec=False))
            out.append(Finding(
                rule=self.code, severity="warning", title=self.title,
                summary=(f"{label}: {len(sat)} interval(s) at ≥ {pct(o['min_usage'])} {sat[0].kv_device or 'GPU'} KV cache "
                         f"usage{_near_said(sat, o)} (peak {pct(max(iv.kv for iv in sat))}); "
                         + (f"waiting queue up to {max(waits)} requests" if grew else
                            f"{min(waits)}–{max(waits)} requests waited in each of them" if standing else
                            f"waiting queue up to {max(waits)} requests")
                         + f"; {pre_total} preemption(s) in total."),
                count=len(sat), evidence=dedupe_evidence(evs), causes=causes,
                measurements={"engine": label, "saturated_intervals": len(sat), "peak_kv_cache_usage": max(iv.kv for iv in sat),
                              "peak_waiting": max(waits), "preemptions": pre_total},
                identity=f"{label}|sat", first_seen=sat[0].t,
                next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
            ))
        return out
