"""SD001 / SD002 / SD004 — speculative-decoding acceptance: sustained drop, zero acceptance, low from the start."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specdiag.analyzers.base import register
from specdiag.analyzers.kv_coverage import FRAGMENT_LINES
from specdiag.analyzers.sd_common import (
    CONNECTOR_COLLECT,
    DEFINITIONS,
    FRAGMENT_CEILING,
    FRAGMENT_NOTE,
    PASTE_PLATFORM_CAP,
    PLATFORM_STEP,
    PLATFORM_UNKNOWN,
    STATELESS_METHODS,
    SpecSeriesRule,
    changepoint,
    config_seen,
    connector_shown,
    dedupe_evidence,
    ev_of,
    is_eagle_family,
    k_zero_ranges,
    kmax_of,
    method_of,
    method_text,
    num,
    pct,
    pooled_length,
    pooled_rate,
    rnd,
    schedule_lookup,
    schedule_of,
    span,
)
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, CauseBoard, Evidence, Finding
from specdiag.metrics.series import Interval
from specdiag.observe import RunState
from specdiag.timeutil import TIME_BASIS

CONFIRM_DYNAMIC_K = "specdiag repro --preset dynamic-k"
CONFIRM_RESTORED = "specdiag repro --set spec=draft_model --toggle lmcache=on,off"
CONFIRM_MISMATCH = ("serve the same prompts with the connector and prefix caching off (specdiag repro --toggle "
                    "prefix_caching=off --toggle spec=draft_model): acceptance that stays low points at the draft itself")


RESTORE_PRECONDITION = "KV connector restoring context (kv_transfer_config, LMCache lines or a kv_consumer role)"


def require_restore(b: CauseBoard, ctx: Context, method: str | None, restores: int, ext_mean: float | None,
                    other: str | None = None) -> None:
    """``draft-state-not-restored`` needs context that reached the KV cache without the drafter's forward pass.

    On a server without a KV connector that only leaves preemption resumes and, for DFlash/DSpark (whose
    drafter writes its own context KV), prefix-cache hits (vLLM issue #47930). ``other`` names such a source
    when the caller saw one; otherwise the connector decides: disproved, the cause is ruled out; not shown, it
    stays below the causes that need no precondition.
    """
    if method in STATELESS_METHODS:
        return
    shown = connector_shown(ctx, restores, ext_mean)
    what = RESTORE_PRECONDITION
    if shown is not True and other:
        shown, what = True, other
    b.require("draft-state-not-restored", what, shown, CONNECTOR_COLLECT)


class _ConnectorSignals:
    """LMCache restore evidence the acceptance rules weigh: the first ``Retrieved … out of …`` line that
    loaded something (the run state counts them all, ``run.count("R4")``)."""

    EVENTS = frozenset({"R4"})

    def __init__(self) -> None:
        self.first_retrieve: Event | None = None

    def observe_first(self, ev: Event) -> None:
        if (ev.f.get("retrieved") or 0) > 0:
            self.first_retrieve = ev


def _k0_before(items, idx: int, lookup, lookback: int = 6) -> list:
    """Intervals within ``lookback`` before ``idx`` that look K=0 (no SpecDecoding line while generating,
    or ``Running`` mapping to K=0 through the schedule)."""
    out = []
    for iv in items[max(0, idx - lookback): idx]:
        k = lookup(iv.running) if (lookup and iv.running) else None
        if (not iv.has_spec and iv.generating) or k == 0:
            out.append(iv)
    return out


@register
class AcceptanceDrop(SpecSeriesRule):
    """Speculative-decoding acceptance dropped and stayed down against the run's own baseline.

    Detects: a change-point in the drafts-weighted acceptance rate (Accepted/Drafted per logging
    interval, from the ``SpecDecoding metrics`` lines of every era): the best single split of the series,
    tested against a robust noise scale (MAD of the per-interval rates around their segment's rate), with
    a minimum relative and absolute drop, and a sustained "after" segment (its last half is still low).
    Reports the intervals, drafts counts and before/after acceptance and mean acceptance length. Without
    the speculative config in the inputs, a missing dynamic-K schedule is no evidence and confidence is
    capped (0.6).

    Why it matters: spec-decode failures are silent — outputs stay correct while the speed-up disappears.
    A drop that a fixed threshold would miss (a healthy 60 % falling to 35 %) costs a third of the tokens
    per step.

    Causes weighed: ``stale-draft-kv`` (a dynamic-K schedule with K=0 ranges and K=0 intervals just
    before the drop: a proposer that skipped ingesting committed tokens drafts from a stale KV cache),
    ``draft-state-not-restored`` (external-cache/KV-connector restores, prefix hits or preemption resumes
    around the drop with an EAGLE/MTP/DFlash drafter that never saw those tokens), ``workload-shift`` (the
    prompt mix changed — ngram/suffix acceptance depends entirely on the text).

    Fix: follow the top cause's fix; confirm with the ``specdiag repro`` experiment it names.

    References: vLLM ``v1/spec_decode/metrics.py`` (0.32.0 :120), ``llm_base_proposer.py:512-626``;
    vllm-metal PR #716/#734; vLLM issue #47930 (fix PR #47926).
    """

    code = "SD001"
    name = "spec-acceptance-drop"
    title = "Speculative-decoding acceptance dropped against the run's own baseline"
    severity = "warning"
    cause_ids = ("stale-draft-kv", "draft-state-not-restored", "workload-shift")
    defaults = {"min_intervals_per_side": 3, "min_drafts_per_side": 300, "min_z": 4.0, "max_ratio": 0.75,
                "min_abs_drop": 0.05}
    events = SpecSeriesRule.events | frozenset({"V_DRAFT_LOADED"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.metal: Event | None = None  # vllm-metal's draft-model proposer announced itself

    def observe_other(self, ev: Event) -> None:
        if ev.id == "V_DRAFT_LOADED":
            self.metal = self.metal or ev

    def _weigh_schedule(self, b: CauseBoard, ctx: Context, sched, k0: list, pasted: bool) -> dict[str, float] | None:
        """K=0 intervals of a dynamic-K schedule right before the drop point to stale draft KV — on a proposer
        that skips ingestion at K=0 (vllm-metal before PR #716). Upstream vLLM ingests before the K check
        (v1/spec_decode/llm_base_proposer.py, 0.25.0-0.32.0), so a paste that does not show the platform caps
        the cause (returned as the ``cap`` for ``ranked``)."""
        if sched and k_zero_ranges(sched):
            if k0:
                b.support("stale-draft-kv", 6, f"{len(k0)} K=0 interval(s) right before the drop under schedule {sched}")
                if pasted and self.metal is None:
                    b.note_for("stale-draft-kv", PLATFORM_UNKNOWN)
                    return {"stale-draft-kv": PASTE_PLATFORM_CAP}
            else:
                b.oppose("stale-draft-kv", 2, f"schedule {sched} has K=0 ranges, but no K=0 interval precedes the drop")
        elif config_seen(ctx):
            b.oppose("stale-draft-kv", 6, "no K=0 range in a dynamic-K schedule")
        else:
            b.oppose("stale-draft-kv", 1.5, "no dynamic-K schedule in the excerpt (its config is not shown)")
        return None

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """One finding per engine whose acceptance fell at a change-point and stayed down."""
        pasted = run.lines_read is not None and run.lines_read <= FRAGMENT_LINES
        out = []
        method = method_of(ctx)
        sched = schedule_of(ctx)
        lookup = schedule_lookup(sched, kmax_of(ctx)) if sched else None
        for label, items in self.engines():
            cp = self._sustained_drop(items)
            if cp is None:
                continue
            idx = items.index(cp["at"])
            b = _drop_priors()
            k0 = _k0_before(items, idx, lookup) if lookup else []
            if method in STATELESS_METHODS:
                b.rule_out("stale-draft-kv", f"method {method} keeps no draft KV cache")
                b.rule_out("draft-state-not-restored", f"method {method} has no drafter state to restore")
                b.support("workload-shift", 2, f"{method} acceptance depends on how repetitive the text is")
            cap = self._weigh_schedule(b, ctx, sched, k0, pasted)
            _weigh_restores(b, ctx, method, items, idx)
            causes = b.ranked(ceiling=0.85 if config_seen(ctx) else FRAGMENT_CEILING, cap=cap)
            out.append(self._finding(ctx, label, method, sched, cp, k0, causes, cap))
        return out

    def _sustained_drop(self, items: list[Interval]) -> dict[str, Any] | None:
        """The change-point of the series when it is a clear drop (noise, relative and absolute thresholds) whose
        last half is still low; None otherwise — a recovered drop is episodic (SD003 covers the K=0 pattern)."""
        o = self.options
        cp = changepoint(items, o["min_intervals_per_side"], o["min_drafts_per_side"])
        if cp is None:
            return None
        r1, r2 = cp["rate_before"], cp["rate_after"]
        if r1 is None or r2 is None or r1 <= 0:
            return None
        if cp["z"] < o["min_z"] or r2 > r1 * o["max_ratio"] or r1 - r2 < o["min_abs_drop"]:
            return None
        after = cp["after"]
        tail = after[len(after) // 2:]
        rt, _, _ = pooled_rate(tail)
        if rt is None or rt > r1 * 0.85:
            return None  # recovered: episodic, not a sustained drop (SD003 covers the K=0 pattern)
        return cp

    def _finding(self, ctx: Context, label: str, method: str | None, sched: list[list[int]] | None,
                 cp: dict[str, Any], k0: list[Interval], causes: list[Cause],
                 cap: dict[str, float] | None) -> Finding:
        """The SD001 finding: "collapsed" when almost nothing is accepted any more, info when a stateless
        method's drop is best explained by the workload (its acceptance follows the text)."""
        r1, r2 = cp["rate_before"], cp["rate_after"]
        at, before, after = cp["at"], cp["before"], cp["after"]
        collapse = r2 <= 0.1 * r1 or (cp["length_after"] is not None and cp["length_after"] <= 1.05)
        word = "collapsed" if collapse else "dropped"
        summary = (f"{label}: acceptance {word} from {pct(r1)} (mean length {num(cp['length_before'])}, "
                   f"{cp['drafted_before']} drafted) to {pct(r2)} (mean length {num(cp['length_after'])}, "
                   f"{cp['drafted_after']} drafted) at {span([at])} ({TIME_BASIS}); {cp['z']:.1f}× the interval noise. "
                   f"[{DEFINITIONS}]")
        evidence = dedupe_evidence([ev_of(before[0]), ev_of(before[-1]), ev_of(at), ev_of(after[-1]),
                                    *[ev_of(iv, spec=False) for iv in k0[:2]]])
        if not config_seen(ctx):
            summary += f" Note: {FRAGMENT_NOTE}."
        # ngram/suffix acceptance follows the text: a drop explained only by the workload is information
        sev = "info" if (method in STATELESS_METHODS and causes[0].id == "workload-shift") else "warning"
        return Finding(
            rule=self.code, severity=sev, title=f"Speculative-decoding acceptance {word} and stayed down",
            summary=summary, count=len(after), evidence=evidence,
            measurements=_drop_measurements(ctx, label, method, sched, cp), causes=causes,
            identity=f"{label}|{round(at.t) if at.t else at.line}", first_seen=at.t,
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}",
                        "Watch Accepted/Drafted per interval (specdiag metrics LOG --format table)."]
            + ([PLATFORM_STEP] if cap else []),
        )


def _drop_priors() -> CauseBoard:
    """SD001's three causes with their priors, fixes and confirming experiments; the workload leads until
    the log says otherwise."""
    b = CauseBoard()
    b.add("stale-draft-kv", 0.3,
          fix="Remove the K=0 range from num_speculative_tokens_per_batch_size (or use a build whose proposer "
              "ingests committed tokens at K=0: upstream vLLM >= 0.25, vllm-metal with PR #716).",
          confirm_with=CONFIRM_DYNAMIC_K)
    b.add("draft-state-not-restored", 0.3,
          fix="Tokens restored from a KV connector / prefix cache / after preemption never ran through the "
              "drafter: use a build with the drafter-context fix (vLLM PR #47926), or disable the connector "
              "load path for the spec-decode pool.",
          confirm_with=CONFIRM_RESTORED)
    b.add("workload-shift", 0.4,
          fix="Compare the prompt mix before and after the change; nothing to fix if the traffic changed.",
          confirm_with="replay a sample of the earlier prompts now and compare Accepted/Drafted")
    return b


def _weigh_restores(b: CauseBoard, ctx: Context, method: str | None, items: list[Interval], idx: int) -> None:
    """Context the drafter never saw around the drop: external cache hits rising, preemptions growing, or a
    KV connector feeding a model-based drafter all point at ``draft-state-not-restored``."""
    ext_b = [iv.ext for iv in items[:idx] if iv.ext is not None]
    ext_a = [iv.ext for iv in items[idx:] if iv.ext is not None]
    if ext_a and (sum(ext_a) / len(ext_a)) > (sum(ext_b) / len(ext_b) if ext_b else 0) + 0.1:
        b.support("draft-state-not-restored", 4, f"external prefix cache hit rate rose to {pct(sum(ext_a) / len(ext_a))} "
                  f"after the drop (from {pct(sum(ext_b) / len(ext_b)) if ext_b else 'none'})")
    pre_b = max((iv.preempt or 0 for iv in items[:idx]), default=0)
    pre_a = max((iv.preempt or 0 for iv in items[idx:]), default=0)
    other = None
    if pre_a > pre_b:
        b.support("draft-state-not-restored", 2.5, f"preemptions grew from {pre_b} to {pre_a} around the drop "
                  "(resumed requests skip the drafter)")
        other = "preemption resumes around the drop" if method in ("dflash", "dspark") else None
    require_restore(b, ctx, method, 0, (sum(ext_a) / len(ext_a)) if ext_a else None, other)
    if ctx.kv_role in ("kv_consumer",) or ctx.kv_connector:
        if is_eagle_family(method) or method == "draft_model":
            b.support("draft-state-not-restored", 1.5, f"KV connector {ctx.kv_connector or ''} "
                      f"(role {ctx.kv_role}) with drafter {method}")


def _drop_measurements(ctx: Context, label: str, method: str | None, sched: list[list[int]] | None,
                       cp: dict[str, Any]) -> dict[str, Any]:
    """SD001's measurements: both sides of the change-point and its noise scale."""
    r1, r2 = cp["rate_before"], cp["rate_after"]
    before, after = cp["before"], cp["after"]
    return {
        "engine": label, "method": method,
        "acceptance_before": round(r1, 4), "acceptance_after": round(r2, 4),
        "mean_length_before": None if cp["length_before"] is None else round(cp["length_before"], 3),
        "mean_length_after": None if cp["length_after"] is None else round(cp["length_after"], 3),
        "drafted_before": cp["drafted_before"], "drafted_after": cp["drafted_after"],
        "intervals_before": len(before), "intervals_after": len(after),
        "before": span(before), "after": span(after), "z": round(cp["z"], 2),
        "noise_sigma": round(cp["sigma"], 4), "schedule": sched, "config_in_excerpt": config_seen(ctx),
    }


#: zero-acceptance intervals enough in an excerpt without the server start (with the drafted-token floor):
#: a paste of two SpecDecoding lines is what users post, and hundreds of drafts accepted at ~0 % are no transient
FRAGMENT_INTERVALS = 2
#: drafted tokens a paste's single interval needs before accepting none of them is worth a note (rule of three:
#: 0 successes in 300 draws bounds the rate under 1 % at 95 % confidence, SD002's ``max_rate``)
ONE_INTERVAL_DRAFTS = 300


@register
class ZeroAcceptance(SpecSeriesRule):
    """Drafts are proposed but none, or almost none (at most ``max_rate``, 1 %), is accepted (``Accepted: 0
    tokens``, mean acceptance length 1.00). The finding gives the accepted count as printed: ``zero_intervals``
    counts the intervals at or under that rate, not only those that accepted nothing.

    Detects: intervals whose SpecDecoding line reports drafted tokens and 0 (or almost 0) accepted ones,
    for most of the drafted tokens of the run: three such intervals in a log with the server start, two in
    an excerpt without it (a pasted pair of SpecDecoding lines; confidence capped, the note says so) or in a
    paste of at most 50 lines that carries the configuration line on top (capped less: the config is known).

    Why it matters: every step pays for K draft tokens and their verification and gains nothing — spec
    decode is a pure slowdown.

    Causes weighed: ``draft-state-not-restored`` (prompts restored from a KV connector such as LMCache in
    a P/D decode instance (``kv_consumer``), prefix-cache hits or preemption resumes never ran through the
    EAGLE/MTP/DFlash drafter, so it drafts without context — vLLM issue #47930), ``draft-target-mismatch``
    (the draft does not belong to the target: other tokenizer/vocab, other fine-tune), ``drafts-never-accepted``
    (reported for P/D-disaggregated EAGLE-3 setups without an established cause).

    Fix: for restored context use a build with the drafter-context fix or disable speculative decoding
    on the decode pool; for a mismatch use the draft trained for this target.

    References: vLLM ``v1/spec_decode/metrics.py``; vLLM issue #47930 / PR #47926; reference
    ``spec-decode.md`` §6–§7.
    """

    code = "SD002"
    name = "spec-zero-acceptance"
    title = "Speculative decoding drafts tokens but (almost) none is accepted"
    severity = "warning"
    severity_note = "info for a paste whose only interval with drafts accepted none of 300 or more"
    cause_ids = ("draft-state-not-restored", "draft-target-mismatch", "drafts-never-accepted")
    defaults = {"min_intervals": 3, "min_drafted": 500, "max_rate": 0.01}
    events = SpecSeriesRule.events | _ConnectorSignals.EVENTS

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.conn = _ConnectorSignals()

    def observe(self, ev: Event) -> None:
        if ev.id == "R4":  # only when ingest dispatches it (short, or read by the Python path)
            conn = self.conn
            if conn.first_retrieve is None:
                conn.observe_first(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """One finding per engine where most drafted tokens fell in intervals that accepted (almost) none."""
        out = []
        method = method_of(ctx)
        # a short paste counts as an excerpt even when the user put the config line on top of it: the config
        # line says how the server runs, not that the input holds its intervals since the start
        lines = run.lines_read
        pasted = lines is not None and lines <= FRAGMENT_LINES
        for label, items in self.engines():
            zr = self._zero_run(ctx, label, items, pasted)
            if zr is None:
                one = self._one_zero_interval(items, pasted)
                if one is not None:
                    out.append(self._one_interval_note(label, one))
                continue
            seen = config_seen(ctx)
            from_start = zr.spec[0] in zr.zero and ctx.startup_seen  # the first interval of the excerpt may be any interval
            retrieves = run.count("R4")
            b = _zero_priors()
            _weigh_zero_causes(b, ctx, method, zr.ext_mean, retrieves, seen, from_start)
            causes = b.ranked(ceiling=0.85 if seen and not pasted else (0.7 if seen else FRAGMENT_CEILING))
            first_retrieve = self.conn.first_retrieve or run.first("R4")
            out.append(self._finding(ctx, method, zr, causes, retrieves, first_retrieve, lines, pasted))
        return out

    @staticmethod
    def _one_zero_interval(items: list[Interval], pasted: bool) -> Interval | None:
        """A paste's only interval with drafts, which accepted none of at least ``ONE_INTERVAL_DRAFTS``: decisive for
        that interval (0 of 300 bounds its rate under 1 % at 95 % confidence), one interval all the same."""
        spec = [iv for iv in items if iv.dr]
        if not pasted or len(spec) != 1 or spec[0].acc != 0 or spec[0].dr < ONE_INTERVAL_DRAFTS:
            return None
        return spec[0]

    def _one_interval_note(self, label: str, iv: Interval) -> Finding:
        """An info note, not a diagnosis: one interval cannot tell a transient from a drafter that never works."""
        return Finding(
            rule=self.code, severity="info", title=self.title,
            summary=(f"{label}: the one interval with drafts in this paste drafted {iv.dr} tokens and accepted none "
                     f"(under 1 % at 95 % confidence for that interval, {iv.dr} draws with no success): one interval "
                     f"cannot tell a transient from a drafter that never works; {FRAGMENT_INTERVALS} or more decide it. "
                     "Collect the SpecDecoding (V0: Speculative metrics) lines around it."),
            count=1, evidence=[ev_of(iv)], causes=[], identity=f"{self.code}|one|{label}", first_seen=iv.t,
            measurements={"engine": label, "spec_intervals": 1, "drafted_tokens": iv.dr, "accepted_tokens": 0},
            next_steps=["Collect the SpecDecoding metrics lines of the minutes around this one: two or more intervals "
                        "that accept nothing make it a finding (SD002)."])

    def _zero_run(self, ctx: Context, label: str, items: list[Interval], pasted: bool) -> _ZeroRun | None:
        """The zero-acceptance intervals of one engine, or None when they are too few or carry too few (or not
        most) of the drafts; an excerpt without the server start needs fewer intervals (a pasted pair)."""
        o = self.options
        spec = [iv for iv in items if iv.dr]
        zero = [iv for iv in spec if (iv.acc or 0) <= o["max_rate"] * iv.dr]
        needed = o["min_intervals"] if config_seen(ctx) and not pasted else min(o["min_intervals"], FRAGMENT_INTERVALS)
        if len(zero) < needed:
            return None
        zdr = sum(iv.dr for iv in zero)
        tdr = sum(iv.dr for iv in spec)
        if zdr < o["min_drafted"] or zdr < 0.5 * tdr:
            return None
        rate, acc, _dr = pooled_rate(zero)
        ext = [iv.ext for iv in zero if iv.ext is not None]
        ext_mean = sum(ext) / len(ext) if ext else None
        return _ZeroRun(label, spec, zero, zdr, acc, rate, ext_mean)

    def _finding(self, ctx: Context, method: str | None, zr: _ZeroRun, causes: list[Cause], retrieves: int,
                 first_retrieve: Event | None, lines: int | None, pasted: bool) -> Finding:
        """The SD002 finding; the first LMCache retrieve joins the evidence, since restored KV is the lead cause."""
        zero = zr.zero
        evidence = [ev_of(zero[0]), ev_of(zero[0], spec=False), ev_of(zero[-1])]
        if first_retrieve is not None:
            r = first_retrieve.rec
            evidence.append(Evidence(r.path, r.line, r.display()))
        seen = config_seen(ctx)
        meas = {"engine": zr.label, "method": method, "num_speculative_tokens": kmax_of(ctx),
                "zero_intervals": len(zero), "spec_intervals": len(zr.spec), "drafted_tokens": zr.drafted,
                "accepted_tokens": zr.accepted, "acceptance_rate": round(zr.rate or 0.0, 4),
                "mean_acceptance_length": rnd(pooled_length(zero)), "kv_role": ctx.kv_role,
                "external_prefix_cache_hit_rate": None if zr.ext_mean is None else round(zr.ext_mean, 4),
                "lmcache_retrieves": retrieves, "config_in_excerpt": seen}
        return Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=_zero_summary(ctx, method, zr, lines, pasted, self.options["max_rate"]), count=len(zero),
            evidence=dedupe_evidence(evidence), measurements=meas, causes=causes,
            identity=f"{zr.label}|{method}|{round(zero[0].t) if zero[0].t else zero[0].line}", first_seen=zero[0].t,
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}",
                        "Meanwhile, speculative decoding costs throughput here: consider disabling it on this pool."],
        )


@dataclass
class _ZeroRun:
    """One engine's zero-acceptance intervals and their totals, read alike by the causes, summary and
    measurements."""

    label: str
    spec: list[Interval]
    zero: list[Interval]
    drafted: int
    accepted: int
    rate: float | None
    ext_mean: float | None


def _zero_priors() -> CauseBoard:
    """SD002's three causes with their priors: restored context leads, since it is the known cause (#47930)."""
    b = CauseBoard()
    b.add("draft-state-not-restored", 0.4,
          fix="The drafter never saw the restored tokens: use a vLLM build with the drafter-context fix "
              "(PR #47926) or turn speculative decoding off on the decode (kv_consumer) pool; on P/D, keep "
              "prefill and decode drafters consistent.",
          confirm_with=CONFIRM_RESTORED)
    b.add("draft-target-mismatch", 0.3,
          fix="Use the draft/EAGLE head trained for exactly this target model and tokenizer.",
          confirm_with=CONFIRM_MISMATCH)
    b.add("drafts-never-accepted", 0.2,
          fix="Collect per-request spec stats (Prometheus vllm:spec_decode_*) and report upstream.",
          confirm_with="specdiag repro --toggle spec=off,draft_model")
    return b


def _weigh_zero_causes(b: CauseBoard, ctx: Context, method: str | None, ext_mean: float | None, retrieves: int,
                       seen: bool, from_start: bool) -> None:
    """Any sign of restored context (kv_consumer role, external cache hits, LMCache retrieves) explains zero
    acceptance; only when the config is seen does its absence count against it and point at the draft."""
    restored = False
    if method in STATELESS_METHODS:
        b.rule_out("draft-state-not-restored", f"method {method} has no drafter state")
        b.rule_out("draft-target-mismatch", f"method {method} has no draft model")
    if ctx.kv_role == "kv_consumer":
        b.support("draft-state-not-restored", 5, "the instance is a P/D decode instance (kv_role kv_consumer): "
                  "prompts arrive as restored KV, never prefilled through the drafter")
        restored = True
    if ext_mean is not None and ext_mean >= 0.3:
        b.support("draft-state-not-restored", 3, f"external prefix cache hit rate {pct(ext_mean)} in the "
                  "zero-acceptance intervals")
        restored = True
    if retrieves:
        b.support("draft-state-not-restored", 2, f"{retrieves} LMCache retrieve line(s) "
                  "(KV restored from the connector)")
        restored = True
    if is_eagle_family(method):
        b.support("draft-state-not-restored", 1.5, f"{method} drafts from the target's hidden states of the context")
    require_restore(b, ctx, method, retrieves, ext_mean)
    if restored:
        b.oppose("draft-target-mismatch", 2, "restored context alone explains zero acceptance")
        b.oppose("drafts-never-accepted", 1.5, "restored context explains it")
    elif seen:
        b.oppose("draft-state-not-restored", 4, "no KV-connector restore, external hit or kv_consumer role seen")
        if from_start:
            b.support("draft-target-mismatch", 3, "acceptance is 0 from the first interval")
    spec_cfg = ctx.speculative or {}
    if spec_cfg.get("model"):
        b.note_for("draft-target-mismatch", f"draft {spec_cfg.get('model')} for target {ctx.model}")
    else:
        b.note_for("draft-state-not-restored", "no restore seen, but the excerpt does not show the connector "
                   "or kv_role configuration")


def _zero_summary(ctx: Context, method: str | None, zr: _ZeroRun, lines: int | None, pasted: bool,
                  max_rate: float) -> str:
    """SD002's summary, with the notes that say why confidence is capped (an excerpt, or a short paste)."""
    seen = config_seen(ctx)
    zero, ext_mean = zr.zero, zr.ext_mean
    some = (f" (not none: an interval counts here at or under {max_rate:.0%} accepted)" if zr.accepted else "")
    return (f"{zr.label}: {len(zero)} of {len(zr.spec)} intervals drafted {zr.drafted} tokens and accepted {zr.accepted} "
            f"({pct(zr.rate)}; mean acceptance length {num(pooled_length(zero))}){some} from {span(zero)} "
            f"({TIME_BASIS}). "
            f"{method_text(method).capitalize()}, K={kmax_of(ctx)}"
            + (f", kv_role {ctx.kv_role}" if ctx.kv_role else "")
            + (f", external prefix cache hit rate {pct(ext_mean)}" if ext_mean is not None else "")
            + f". [{DEFINITIONS}]" + ("" if seen else f" Note: {FRAGMENT_NOTE}.")
            + (f" Note: the input is a short paste ({lines} lines): the configuration is known, but whether "
               "later intervals accepted drafts is not shown, so confidence is capped." if seen and pasted else ""))


@register
class LowAcceptanceFromStart(SpecSeriesRule):
    """Acceptance is uniformly low from the first interval (no change-point): a poorly matched draft.

    Detects: a model-based drafter (draft_model, EAGLE/EAGLE-3, MTP, DFlash, Medusa…) whose drafts-weighted
    acceptance rate and mean acceptance length stay below ``max_rate``/``max_length`` over the whole run,
    the first intervals included. ngram/suffix acceptance depends on the text, so they are reported only
    when almost nothing is accepted (info). "From the start" needs the start: without a startup line in
    the inputs the finding says "throughout the excerpt" and caps confidence at 0.5; with fewer than
    ``min_intervals`` intervals or ``min_drafted`` drafts (a grepped paste) it is only an info note saying
    how many lines would decide it, unless the drafter collapsed: two intervals or more, five times
    ``min_drafted`` drafts, and a rate at most a third of the limit.

    Why it matters: with acceptance this low the draft forward passes and verification cost more than the
    tokens they save.

    Causes weighed: ``draft-target-mismatch`` (draft trained for another target, tokenizer or fine-tune; a
    quantised target; a mismatched chat template), ``workload-shift`` (the traffic is unlike the draft's
    training data), ``draft-state-not-restored`` (most prompts restored from an external cache).

    Fix: use the draft trained for this target (same tokenizer and chat template); measure acceptance on
    representative prompts before deploying; lower K.

    References: vLLM ``config/speculative.py``; reference ``spec-decode.md`` §4, §7.
    """

    code = "SD004"
    name = "spec-low-acceptance-from-start"
    title = "Speculative-decoding acceptance is low from the start"
    severity = "warning"
    cause_ids = ("draft-target-mismatch", "workload-shift", "draft-state-not-restored")
    defaults = {"max_rate": 0.15, "max_length": 1.4, "stateless_max_rate": 0.03, "min_intervals": 5,
                "min_drafted": 1000}

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        o = self.options
        method = method_of(ctx)
        out = []
        for label, items in self.engines():
            spec = [iv for iv in items if iv.dr]
            if not spec:
                continue
            rate, acc, dr = pooled_rate(spec)
            if rate is None or acc <= 0.01 * dr:
                continue  # nothing drafted, or zero acceptance (SD002)
            head = spec[: max(3, len(spec) // 4)]
            rh, _, _ = pooled_rate(head)
            length = pooled_length(spec)
            stateless = method in STATELESS_METHODS
            limit = o["stateless_max_rate"] if stateless else o["max_rate"]
            if rate > limit or (rh is not None and rh > limit * 1.5):
                continue
            if not stateless and length is not None and length > o["max_length"]:
                continue
            # a drafter that collapsed (a few percent over thousands of drafts) is judged from two intervals: no
            # traffic mix makes a working drafter's acceptance that low for that many drafts
            collapsed = len(spec) >= 2 and dr >= 5 * o["min_drafted"] and rate <= limit / 3
            if (len(spec) < o["min_intervals"] or dr < o["min_drafted"]) and not collapsed:
                out.append(self._too_few(label, spec, rate, acc, dr, length, method, ctx, run))
                continue
            out.append(self._low(label, spec, head, rh, rate, acc, dr, length, method, ctx, run))
        return out

    def _board(self, method: str | None, spec: list, ctx: Context, run: RunState) -> CauseBoard:
        b = CauseBoard()
        b.add("draft-target-mismatch", 0.5, fix="Use the draft/EAGLE head trained for this exact target and tokenizer.",
              confirm_with=CONFIRM_MISMATCH)
        b.add("workload-shift", 0.3, fix="Measure acceptance on representative prompts; lower K or pick another method.",
              confirm_with="specdiag repro --set spec=ngram --toggle num_speculative_tokens=1,3")
        b.add("draft-state-not-restored", 0.2, fix="See SD002: restored context never ran through the drafter.",
              confirm_with=CONFIRM_RESTORED)
        if method in STATELESS_METHODS:
            b.rule_out("draft-target-mismatch", f"{method} has no draft model")
            b.rule_out("draft-state-not-restored", f"{method} has no drafter state")
        ext = [iv.ext for iv in spec if iv.ext is not None]
        ext_mean = sum(ext) / len(ext) if ext else None
        if ext_mean is not None and ext_mean > 0.5 and is_eagle_family(method):
            b.support("draft-state-not-restored", 3, f"external prefix cache hit rate {pct(ext_mean)}")
        self._weigh_restores(b, method, ctx, run, ext_mean)
        return b

    @staticmethod
    def _weigh_restores(b: CauseBoard, method: str | None, ctx: Context, run: RunState, ext_mean: float | None) -> None:
        """KV restored by a connector (LMCache ``Retrieved … out of …`` lines, a P/D consumer, external hits).

        DFlash and DSpark draft from context KV that the drafter writes while the target runs its forward pass;
        tokens that never ran one — prefix-cache hits and KV-connector restores — leave it unwritten, so the mean
        acceptance length collapses towards 1.0 (vLLM issue #47930, fix PR #47926; reference spec-decode.md §6).
        Other EAGLE-family heads also draft from the context's hidden states, more weakly affected.
        """
        if method in STATELESS_METHODS:
            return
        retrieves = run.count("R4")
        require_restore(b, ctx, method, retrieves, ext_mean)
        how = []
        if retrieves:
            how.append(f"{retrieves} LMCache retrieve line(s)")
        if ctx.kv_role == "kv_consumer":
            how.append("a P/D decode instance (kv_role kv_consumer)")
        if ext_mean is not None and ext_mean >= 0.3:
            how.append(f"external prefix cache hit rate {pct(ext_mean)}")
        if not how:
            return
        if method in ("dflash", "dspark"):
            b.support("draft-state-not-restored", 6, f"{method} drafts from context KV its drafter writes during the "
                      f"target's forward pass; restored tokens ({', '.join(how)}) never ran one, which drives the mean "
                      "acceptance length towards 1.0 (vLLM issue #47930, fixed by PR #47926)")
            b.oppose("draft-target-mismatch", 1.5, "restored context explains it without a mismatched draft")
        elif is_eagle_family(method):
            b.support("draft-state-not-restored", 1.5, f"{method} drafts from the context's hidden states and the "
                      f"context was restored ({', '.join(how)})")

    def _low(self, label, spec, head, rh, rate, acc, dr, length, method, ctx: Context, run: RunState) -> Finding:
        """Low over enough intervals. "From the start" needs the start: without a startup line the excerpt may
        begin at any interval, so the finding says "throughout the excerpt" and caps its confidence."""
        start = ctx.startup_seen
        b = self._board(method, spec, ctx, run)
        if start:
            b.note_for("draft-target-mismatch", f"first {len(head)} intervals already at {pct(rh)}")
        causes = b.ranked(ceiling=0.7 if start else 0.5)
        where = (f"{pct(rh)} in the first {len(head)}" if start else
                 "the excerpt does not show the server start, so whether it was low from the start is not established")
        return Finding(
            rule=self.code, severity="info" if method in STATELESS_METHODS else "warning",
            title=self.title if start else "Speculative-decoding acceptance is low throughout the excerpt",
            summary=(f"{label}: {method_text(method)}, K={kmax_of(ctx)}, accepted {acc} of {dr} drafted tokens ({pct(rate)}, mean "
                     f"acceptance length {num(length)}) over {len(spec)} intervals; {where}. [{DEFINITIONS}]"),
            count=len(spec), evidence=[ev_of(spec[0]), ev_of(spec[-1])],
            measurements={"engine": label, "method": method, "acceptance_rate": round(rate, 4),
                          "mean_acceptance_length": rnd(length), "drafted_tokens": dr, "accepted_tokens": acc,
                          "intervals": len(spec), "acceptance_first_intervals": rnd(rh, 4) if start else None,
                          "start_in_excerpt": start,
                          "draft_model": (ctx.speculative or {}).get("model"), "target_model": ctx.model},
            causes=causes, identity=f"{label}|{method}", first_seen=spec[0].t,
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )

    def _too_few(self, label, spec, rate, acc, dr, length, method, ctx: Context, run: RunState) -> Finding:
        """Low acceptance in a handful of intervals (a grepped paste): say it, and what would decide it.

        A few intervals are a few seconds of traffic; one unusual prompt makes them low. They can neither
        show that acceptance was low from the start nor place a change, so this is information only.
        """
        o = self.options
        causes = self._board(method, spec, ctx, run).ranked(ceiling=0.3)
        return Finding(
            rule=self.code, severity="info", title="Speculative-decoding acceptance is low in too few intervals to judge",
            summary=(f"{label}: {len(spec)} SpecDecoding interval(s) accepted {acc} of {dr} drafted tokens ({pct(rate)}, "
                     f"mean acceptance length {num(length)}); at least {o['min_intervals']} intervals and "
                     f"{o['min_drafted']} drafted tokens are needed to call acceptance low. [{DEFINITIONS}]"),
            count=len(spec), evidence=[ev_of(spec[0]), ev_of(spec[-1])],
            measurements={"engine": label, "method": method, "acceptance_rate": round(rate, 4),
                          "mean_acceptance_length": rnd(length), "drafted_tokens": dr, "accepted_tokens": acc,
                          "intervals": len(spec), "min_intervals": o["min_intervals"], "start_in_excerpt": ctx.startup_seen},
            causes=causes, identity=f"{label}|{method}|few", first_seen=spec[0].t,
            next_steps=[f"Collect at least {o['min_intervals']} consecutive SpecDecoding lines (about "
                        f"{10 * o['min_intervals']} s at the default VLLM_LOG_STATS_INTERVAL) and the startup lines "
                        "('non-default args' with speculative_config), then rerun.", causes[0].fix],
        )
