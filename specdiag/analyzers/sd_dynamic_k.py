"""SD003 / SD005 / SD006 — dynamic K (``num_speculative_tokens_per_batch_size``, vLLM ≥ 0.25).

No log line reports the K of a step (reference ``spec-decode.md`` §3): K=0 intervals are inferred from
the SpecDecoding line missing while the engine generates (K=0 steps record no spec stats,
``scheduler.py:2961-2978``) and from ``Running: N reqs`` mapped through the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specdiag.analyzers.base import register
from specdiag.analyzers.kv_coverage import FRAGMENT_LINES
from specdiag.analyzers.sd_common import (
    DEFINITIONS,
    DRAFT_STATE_METHODS,
    PASTE_PLATFORM_CAP,
    PLATFORM_STEP,
    PLATFORM_UNKNOWN,
    STATELESS_METHODS,
    SpecSeriesRule,
    dedupe_evidence,
    ev_of,
    k_zero_ranges,
    kmax_of,
    mad,
    method_of,
    num,
    pct,
    pooled_length,
    pooled_rate,
    rnd,
    schedule_lookup,
    schedule_of,
    span,
    wmedian,
)
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, CauseBoard, Evidence, Finding
from specdiag.fingerprints import version_tuple
from specdiag.metrics.series import Interval
from specdiag.observe import RunState
from specdiag.timeutil import TIME_BASIS
from specdiag.values import schedule_text

CONFIRM = "specdiag repro --preset dynamic-k"


def classify(items, lookup):
    """Per interval: 'k0' (all steps K=0: no SpecDecoding line while generating), 'mixed' (a SpecDecoding
    line, but the batch at the log instant maps to K=0), 'spec' (K>0) or 'idle'."""
    out = []
    for iv in items:
        k_end = lookup(iv.running) if (iv.running is not None and iv.running > 0) else None
        if not iv.has_spec:
            out.append("k0" if iv.generating else "idle")
        elif k_end == 0:
            out.append("mixed")
        else:
            out.append("spec")
    return out


def stretches(items, kinds, what=("k0",)):
    """Consecutive runs of intervals whose kind is in ``what`` → list of (start, end) indices (inclusive)."""
    runs, start = [], None
    for i, k in enumerate(kinds):
        if k in what:
            if start is None:
                start = i
        elif start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(kinds) - 1))
    return runs


def _post_window(kinds: list[str], runs: list[tuple[int, int]], window: int) -> set[int]:
    """Indices of the first ``window`` K>0 intervals after each K=0 stretch; the window stops early at the
    next K=0 stretch, so an interval is never counted as both."""
    post_idx: set[int] = set()
    for _s, e in runs:
        taken = 0
        j = e + 1
        while j < len(kinds) and taken < window:
            if kinds[j] in ("k0", "mixed"):
                break
            if kinds[j] == "spec":
                post_idx.add(j)
                taken += 1
            j += 1
    return post_idx


@dataclass
class _PostKZero:
    """One engine's post-K=0 window against its other K>0 intervals, kept together so that the causes, the
    summary and the measurements all read the same numbers."""

    items: list[Interval]
    kinds: list[str]
    runs: list[tuple[int, int]]
    post_idx: set[int]
    post: list[Interval]
    base: list[Interval]
    rate_post: float
    acc_post: int
    drafted_post: int
    rate_base: float
    acc_base: int
    drafted_base: int
    margin: float

    def rate_after_window(self) -> float | None:
        """Pooled acceptance of the K>0 intervals after the last post-K=0 interval: recovery there is the
        signature of per-request staleness."""
        last_post = max(self.post_idx)
        later = [self.items[i] for i in range(last_post + 1, len(self.items))
                 if self.kinds[i] == "spec" and i not in self.post_idx]
        rl, _, _ = pooled_rate(later)
        return rl


def _measurements(label: str, method: str | None, sched: list[list[int]], kmax: int | None,
                  cmp: _PostKZero) -> dict[str, Any]:
    """The SD003 measurements: the stretches with their batch sizes and both sides of the comparison."""
    items, runs, post, base = cmp.items, cmp.runs, cmp.post, cmp.base
    return {
        "engine": label, "method": method, "schedule": sched, "num_speculative_tokens": kmax,
        "k0_stretches": [f"{span(items[s:e + 1])}, running "
                         f"{sorted({iv.running for iv in items[s:e + 1] if iv.running is not None})}"
                         for s, e in runs[:20]],
        "k0_intervals": sum(e - s + 1 for s, e in runs),
        "after_intervals": len(post), "baseline_intervals": len(base),
        "acceptance_after_k0": round(cmp.rate_post, 4), "acceptance_baseline": round(cmp.rate_base, 4),
        "mean_length_after_k0": rnd(pooled_length(post)), "mean_length_baseline": rnd(pooled_length(base)),
        "drafted_after_k0": cmp.drafted_post, "drafted_baseline": cmp.drafted_base, "margin_mad": round(cmp.margin, 2),
        "after_k0_intervals": [f"{span([iv])}: {pct(iv.acceptance)}" for iv in post[:20]],
    }


class _ScheduleRule(SpecSeriesRule):
    events = SpecSeriesRule.events | frozenset({"V_ARGS", "V_DYNAMIC_K_DP", "V_DRAFT_LOADED"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.args_ev: Event | None = None
        self.dp_disabled: Event | None = None
        self.metal: Event | None = None

    def observe_other(self, ev: Event) -> None:
        if ev.id == "V_ARGS":
            if "num_speculative_tokens_per_batch_size" in ev.f.get("args", "") and self.args_ev is None:
                self.args_ev = ev
        elif ev.id == "V_DYNAMIC_K_DP":
            self.dp_disabled = self.dp_disabled or ev
        elif ev.id == "V_DRAFT_LOADED":
            self.metal = self.metal or ev

    def schedule(self, ctx: Context):
        if self.dp_disabled is not None:
            return None
        return schedule_of(ctx)

    def args_evidence(self) -> list[Evidence]:
        if self.args_ev is None:
            return []
        r = self.args_ev.rec
        return [Evidence(r.path, r.line, r.display()[:600])]


@register
class AcceptanceAfterKZero(_ScheduleRule):
    """Acceptance falls in the intervals that follow K=0 stretches of a dynamic-K schedule.

    Detects: with ``num_speculative_tokens_per_batch_size`` containing K=0 ranges, intervals are classified
    as K=0 (no SpecDecoding line while the engine generates, or ``Running`` mapping to K=0), and the
    drafts-weighted acceptance of the first ``after_window`` K>0 intervals after each K=0 stretch is
    compared with the other K>0 intervals (baseline). A finding needs a relative and absolute drop and a
    robust margin (baseline MAD), with the schedule, the K=0 stretches and before/after numbers as evidence.

    Why it matters: a proposer that returns early at K=0 skips ingesting the committed tokens into the
    draft model; when K comes back the draft works from a stale KV cache and acceptance drops (outputs
    stay correct). This was the vllm-metal K=0 bug (fixed by vllm-metal PR #716); TensorRT-LLM had the same
    class of bug (PR #16888). Upstream vLLM ≥ 0.25 runs the ingest pass before the K check.

    Causes weighed: ``stale-draft-kv`` (draft KV not updated during K=0 steps), ``workload-shift``
    (requests served during high-concurrency periods differ from the rest).

    A paste of at most 50 lines that does not show the vllm-metal proposer's startup line cannot tell which
    proposer ran; since upstream is not affected, ``stale-draft-kv`` is then capped at 0.5 and the finding
    names the startup lines that decide.

    Fix: upgrade the platform plugin (vllm-metal with PR #716/#734) or remove the K=0 range from the
    schedule (e.g. ``[[1, max, K]]`` or K≥1 everywhere).

    References: reference ``spec-decode.md`` §3, §5; vLLM ``v1/spec_decode/llm_base_proposer.py:512-626``
    (comment :617-619), ``v1/core/sched/scheduler.py:1486-1490``; vllm-metal PR #716, #734.
    """

    code = "SD003"
    name = "spec-acceptance-after-k0"
    title = "Acceptance drops after K=0 stretches of the dynamic-K schedule (stale draft KV)"
    severity = "warning"
    cause_ids = ("stale-draft-kv", "workload-shift")
    defaults = {"after_window": 3, "min_after_intervals": 2, "min_base_intervals": 3, "min_after_drafts": 100,
                "max_ratio": 0.8, "min_abs_drop": 0.05, "min_margin": 3.0}

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """One finding per engine whose post-K=0 intervals accept clearly less than its other K>0 intervals."""
        pasted = run.lines_read is not None and run.lines_read <= FRAGMENT_LINES  # a paste: the platform may be cut off
        sched = self.schedule(ctx)
        if not sched or not k_zero_ranges(sched):
            return []
        kmax = kmax_of(ctx)
        lookup = schedule_lookup(sched, kmax)
        method = method_of(ctx)
        out = []
        for label, items in self.engines():
            kinds = classify(items, lookup)
            runs = stretches(items, kinds, ("k0", "mixed"))
            if not runs:
                continue
            cmp = self._compare(items, kinds, runs)
            if cmp is None:
                continue
            board, cap = self._weigh_causes(ctx, method, cmp, pasted)
            causes = board.ranked(ceiling=0.85, cap=cap)
            out.append(self._finding(label, sched, kmax, method, cmp, causes, cap))
        return out

    def _compare(self, items: list[Interval], kinds: list[str],
                 runs: list[tuple[int, int]]) -> _PostKZero | None:
        """The post-K=0 window against the baseline, or None when either side is too thin or the drop is not
        clear (relative, absolute and robust margin all required, so one noisy interval cannot fire)."""
        o = self.options
        post_idx = _post_window(kinds, runs, o["after_window"])
        post = [items[i] for i in sorted(post_idx)]
        base = [iv for i, iv in enumerate(items) if kinds[i] == "spec" and i not in post_idx]
        if len(post) < o["min_after_intervals"] or len(base) < o["min_base_intervals"]:
            return None
        rp, ap, dp = pooled_rate(post)
        rb, ab, db = pooled_rate(base)
        if rp is None or rb is None or dp < o["min_after_drafts"] or rb <= 0:
            return None
        base_rates = [iv.acc / iv.dr for iv in base if iv.dr]
        med = wmedian(base_rates, [iv.dr for iv in base if iv.dr]) or rb
        sigma = max(mad(base_rates, med), 0.02)
        post_rates = [iv.acc / iv.dr for iv in post if iv.dr]
        post_med = sorted(post_rates)[len(post_rates) // 2]
        margin = (med - post_med) / sigma
        if rp > rb * o["max_ratio"] or rb - rp < o["min_abs_drop"] or margin < o["min_margin"]:
            return None
        return _PostKZero(items, kinds, runs, post_idx, post, base, rp, ap, dp, rb, ab, db, margin)

    def _weigh_causes(self, ctx: Context, method: str | None, cmp: _PostKZero,
                      pasted: bool) -> tuple[CauseBoard, dict[str, float] | None]:
        """Stale draft KV against a workload shift; the method, the platform and the recovery after the window
        decide. A paste that cannot show the platform caps ``stale-draft-kv`` (returned as the cap)."""
        cap: dict[str, float] | None = None
        b = CauseBoard()
        b.add("stale-draft-kv", 0.5,
              fix="Use a build whose proposer ingests committed tokens at K=0 (vllm-metal with PR #716/#734; "
                  "upstream vLLM ≥ 0.25 does) or remove the K=0 range from num_speculative_tokens_per_batch_size.",
              confirm_with=CONFIRM)
        b.add("workload-shift", 0.3,
              fix="Compare the prompts served during high-concurrency periods with the rest.",
              confirm_with="replay the post-K=0 prompts alone at batch size 1 and compare Accepted/Drafted")
        b.support("stale-draft-kv", 3, f"{len(cmp.post)} interval(s) right after {len(cmp.runs)} K=0 stretch(es) "
                  f"accept {pct(cmp.rate_post)} vs {pct(cmp.rate_base)} elsewhere")
        if method in STATELESS_METHODS:
            b.rule_out("stale-draft-kv", f"method {method} keeps no draft KV cache")
        elif method in DRAFT_STATE_METHODS or method is None:
            b.support("stale-draft-kv", 2, f"method {method} keeps draft KV that must be advanced every step")
        if self.metal is not None:
            b.support("stale-draft-kv", 3, f"vllm-metal draft-model proposer (line {self.metal.rec.line}); its "
                      "K=0 early return skipped ingestion before PR #716")
        else:
            v = version_tuple(ctx.vllm_version)
            if v is not None and v >= (0, 25, 0):
                b.oppose("stale-draft-kv", 1.5, f"upstream vLLM {ctx.vllm_version} runs the ingest pass before the K "
                         "check (llm_base_proposer.py:617-619) unless a platform plugin replaces the proposer")
            if pasted:
                b.note_for("stale-draft-kv", PLATFORM_UNKNOWN)
                cap = {"stale-draft-kv": PASTE_PLATFORM_CAP}
        # recovery after the post window: the signature of per-request staleness
        rl = cmp.rate_after_window()
        if rl is not None and rl >= cmp.rate_base * 0.9:
            b.support("stale-draft-kv", 1.5, f"acceptance recovers to {pct(rl)} once the prompts turn over")
        return b, cap

    def _finding(self, label: str, sched: list[list[int]], kmax: int | None, method: str | None,
                 cmp: _PostKZero, causes: list[Cause], cap: dict[str, float] | None) -> Finding:
        """The SD003 finding of one engine: summary, evidence and measurements all read the same comparison."""
        post = cmp.post
        return Finding(
            rule=self.code, severity="warning", title=self.title, summary=self._summary(label, sched, kmax, cmp),
            count=len(post), evidence=dedupe_evidence(self._evidence(cmp), 10),
            measurements=_measurements(label, method, sched, kmax, cmp), causes=causes,
            identity=f"{label}|{sched}", first_seen=post[0].t if cmp.runs else None,
            headline=(f"{label}: acceptance {pct(cmp.rate_post)} in the {len(post)} interval(s) right after K=0 "
                      f"stretches vs {pct(cmp.rate_base)} otherwise"),
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}",
                        "Until then, prefer a schedule without K=0 (e.g. K=1 at high batch sizes)."]
            + ([PLATFORM_STEP] if cap else []),
        )

    @staticmethod
    def _summary(label: str, sched: list[list[int]], kmax: int | None, cmp: _PostKZero) -> str:
        """The before/after numbers in one paragraph, with at most four K=0 stretches named."""
        items, runs, post, base = cmp.items, cmp.runs, cmp.post, cmp.base
        runs_txt = "; ".join(span(items[s:e + 1]) for s, e in runs[:4])
        return (f"{label}: under schedule {schedule_text(sched)} (K={kmax}), {len(runs)} K=0 stretch(es) ({runs_txt}"
                f"{'; …' if len(runs) > 4 else ''}; {TIME_BASIS}). The {len(post)} K>0 interval(s) right after them "
                f"accepted {cmp.acc_post}/{cmp.drafted_post} drafted tokens ({pct(cmp.rate_post)}, mean length "
                f"{num(pooled_length(post))}) against {cmp.acc_base}/{cmp.drafted_base} ({pct(cmp.rate_base)}, mean "
                f"length {num(pooled_length(base))}) in the other {len(base)} "
                f"K>0 intervals; margin {cmp.margin:.1f}× the baseline MAD. [{DEFINITIONS}]")

    def _evidence(self, cmp: _PostKZero) -> list[Evidence]:
        """The schedule line, the first two K=0 stretches, three post-K=0 intervals and one baseline interval."""
        evidence = self.args_evidence()
        for s, _e in cmp.runs[:2]:
            evidence.append(ev_of(cmp.items[s], spec=False))
        evidence += [ev_of(iv) for iv in cmp.post[:3]]
        evidence += [ev_of(cmp.base[0])]
        return evidence


@register
class SpecDisabledBySchedule(_ScheduleRule):
    """SpecDecoding lines are missing while the engine generates: K=0 by the dynamic-K schedule (info).

    Detects: a ``num_speculative_tokens_per_batch_size`` schedule with K=0 ranges, and logging intervals
    with generation throughput but no SpecDecoding line (every step of the interval had K=0, so no spec
    stats were recorded), or whose ``Running`` maps to K=0.

    Why it matters: not a fault — speculation is off by design at those batch sizes. It explains gaps in
    acceptance timelines and a frozen ``Drafted`` count; absence of the line is not evidence that spec
    decode is off.

    Causes weighed: ``spec-disabled-by-schedule``.

    Fix: nothing, unless speculation is wanted at those batch sizes (adjust the ranges).

    References: reference ``spec-decode.md`` §3–§4; vLLM ``scheduler.py:1486-1490``, ``:2961-2978``.
    """

    code = "SD005"
    name = "spec-disabled-by-schedule"
    title = "Speculation was off (K=0) in some intervals by the dynamic-K schedule"
    severity = "info"
    cause_ids = ("spec-disabled-by-schedule",)
    defaults = {"min_intervals": 1}

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        sched = self.schedule(ctx)
        out = []
        if self.dp_disabled is not None and schedule_of(ctx):
            r = self.dp_disabled.rec
            out.append(Finding(
                rule=self.code, severity="info", title="Dynamic K was disabled (data parallelism): static K in use",
                summary=r.msg, evidence=[Evidence(r.path, r.line, r.display())],
                measurements={"schedule": schedule_of(ctx)},
                causes=[Cause("spec-disabled-by-schedule", 0.5, for_=["vLLM falls back to static K with DP > 1"])],
                identity="dp-disabled"))
            return out
        if not sched or not k_zero_ranges(sched):
            return out
        lookup = schedule_lookup(sched, kmax_of(ctx))
        for label, items in self.engines():
            kinds = classify(items, lookup)
            k0 = [iv for iv, k in zip(items, kinds, strict=False) if k == "k0"]
            mixed = [iv for iv, k in zip(items, kinds, strict=False) if k == "mixed"]
            if len(k0) + len(mixed) < self.options["min_intervals"]:
                continue
            running = sorted({iv.running for iv in k0 + mixed if iv.running is not None})
            zr = k_zero_ranges(sched)
            out.append(Finding(
                rule=self.code, severity="info", title=self.title,
                summary=(f"{label}: {len(k0)} interval(s) generated without any SpecDecoding line and {len(mixed)} "
                         f"ended at a batch size mapped to K=0 (Running: {', '.join(map(str, running))} reqs); schedule {schedule_text(sched)} sets K=0 for "
                         f"batch sizes {', '.join(f'{a}-{b}' for a, b in zr)}. Not a fault: those steps record no "
                         "spec stats, so Drafted freezes and the line disappears."),
                count=len(k0) + len(mixed),
                evidence=dedupe_evidence(self.args_evidence() + [ev_of(iv, spec=False) for iv in (k0 + mixed)[:3]]),
                measurements={"engine": label, "schedule": sched, "k0_intervals": len(k0), "mixed_intervals": len(mixed),
                              "running_at_k0": running},
                causes=[Cause("spec-disabled-by-schedule", 0.9,
                              for_=[f"schedule {schedule_text(sched)} has K=0 for batch sizes {', '.join(f'{a}–{b}' for a, b in zr)}",
                                    f"{len(k0)} interval(s) with generation but no SpecDecoding line"],
                              fix="Nothing to fix. To speculate at those batch sizes, give them K ≥ 1.",
                              confirm_with="specdiag metrics LOG --format table (drafted_tokens stays empty in K=0 intervals)")],
                identity=f"{label}|k0", first_seen=(k0 + mixed)[0].t,
                next_steps=["No action needed; read acceptance only from the K>0 intervals."],
            ))
        return out


@register
class PerPositionCaveat(_ScheduleRule):
    """Per-position acceptance rates are biased low under a dynamic-K schedule (info).

    Detects: a dynamic-K schedule (several K values, or K below ``num_speculative_tokens``) together with
    SpecDecoding lines that carry per-position rates.

    Why it matters: a step that drafted k < K tokens counts as "not accepted" at positions ≥ k yet adds to
    ``num_drafts``, so positions beyond the smallest non-zero K cannot be compared across schedules or
    with fixed-K runs (the Prometheus per-position counter has the same denominator).

    Causes weighed: ``per-position-denominator``.

    Fix: compare Accepted/Drafted, or only positions below the smallest non-zero K of the schedule.

    References: reference ``spec-decode.md`` §4; vLLM ``v1/spec_decode/metrics.py``.
    """

    code = "SD006"
    name = "spec-per-position-bias"
    title = "Per-position acceptance rates are biased low under dynamic K"
    severity = "info"
    cause_ids = ("per-position-denominator",)
    defaults = {}

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        sched = self.schedule(ctx)
        kmax = kmax_of(ctx)
        if not sched:
            return []
        ks = sorted({min(k, kmax) if kmax else k for _a, _b, k in sched})
        nonzero = [k for k in ks if k > 0]
        if not nonzero or (len(nonzero) == 1 and (kmax is None or nonzero[0] >= kmax)):
            return []
        kmin = nonzero[0]
        out = []
        for label, items in self.engines():
            withpos = [iv for iv in items if iv.pos]
            if not withpos:
                continue
            n = max(len(iv.pos) for iv in withpos)
            tot = [0.0] * n
            wts = [0.0] * n
            for iv in withpos:
                w = iv.ndrafts or iv.dr or 1
                for i, x in enumerate(iv.pos):
                    if x is not None:
                        tot[i] += x * w
                        wts[i] += w
            pos = [round(t / w, 3) if w else None for t, w in zip(tot, wts, strict=False)]
            rate, _, _ = pooled_rate(withpos)
            out.append(Finding(
                rule=self.code, severity="info", title=self.title,
                summary=(f"{label}: schedule {schedule_text(sched)} drafts between {kmin} and {max(nonzero)} tokens; per-position "
                         f"rates {pos} are comparable only for positions < {kmin}. Use Accepted/Drafted "
                         f"({pct(rate)}) to compare runs."),
                count=len(withpos), evidence=dedupe_evidence(self.args_evidence() + [ev_of(withpos[0])]),
                measurements={"engine": label, "schedule": sched, "per_position": pos, "comparable_positions": kmin,
                              "acceptance_rate": rate},
                causes=[Cause("per-position-denominator", 0.9,
                              for_=["steps that drafted k < K still count in num_drafts for positions ≥ k"],
                              fix=f"Compare only positions < {kmin}, or Accepted/Drafted.",
                              confirm_with="specdiag repro --preset dynamic-k")],
                identity=f"{label}|pos", first_seen=withpos[0].t,
                next_steps=[f"Read per-position rates only for positions < {kmin}."],
            ))
        return out
