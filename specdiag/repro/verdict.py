"""Per-cell symptom counts and the differential across toggles.

The cell counts come from two places: a small, literal line counter over the cell's own log (the symptoms a
repro is designed to provoke; it needs nothing but the log) and, when available, the ``specdiag analyze``
engine's findings for the same log, which are preferred for the retrieval shortfall (KV001). Numbers from
``/metrics`` (spec-decode counters, prefix-cache hits) and from the client (failed requests, latency) sit
beside them. The differential then asks, per toggle, whether a symptom follows the toggle's value.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specdiag.catalog import wording as W
from specdiag.catalog.wording import REGEX as E
from specdiag.patterns import lazy
from specdiag.repro.workload import metric_sum, parse_prometheus

_R2 = lazy(r"Num retrieved tokens: (\d+), num expected tokens: (-?\d+)")
_V1 = lazy(r"Recovered from KV load failure: (\d+) request\(s\) rescheduled \((\d+) tokens affected\)")
_V2 = lazy(r"Failing (\d+) request\(s\) due to KV load failure \(failure_policy=\w+, (\d+) tokens affected\)")
_L1 = lazy(rf"{re.escape(W.TOTAL_TOKENS.lstrip())}(\d+){E.SEP}{E.COMPUTED}(\d+){E.SEP}{E.HIT}(\d+){E.SEP}{E.NEED}(-?\d+)")
_R4 = lazy(rf"{E.RETRIEVED}(\d+){E.OUT_OF}(\d+){E.REQUIRED_FROM}")
_SD = lazy(rf"{E.SPEC}{E.KEY_END}.*?{E.SPEC_ACCEPTED}{E.KEY_END}(\d+){E.TOKENS}{E.SEP}{E.SPEC_DRAFTED}{E.KEY_END}(\d+)"
           rf"{E.TOKENS}")

#: literal markers → counter name (a literal ``in`` test per line; cheap and version-tolerant)
_LITERALS = {
    "The cache block is in the storage, but it can't be retrieved": "cant_be_retrieved",
    "Key exists but KV cache does not exist": "redis_key_evicted",
    "Failed to allocate memory": "alloc_failures",
    "Pin timeout detected": "pin_timeouts",
    "EngineCore encountered a fatal error": "engine_fatal",
    "WorkerProc hit an exception": "worker_exceptions",
    "Traceback (most recent call last)": "tracebacks",
    "No supported cpu connector found": "lmcache_degraded",
    "System will operate in degraded mode": "lmcache_degraded",
    "Trying to access an invalidated MemoryObj": "invalidated_memobj",
    "is being garbage collected with ref_count": "memobj_leaks",
    "specdiag LMCache CPU connector active": "cpu_connector_active",
    "No eviction candidates found": "no_eviction_candidates",
    "Local cpu memory under pressure": "cpu_pressure",
    "chunks from cpu memory": "evicting",
}


@dataclass
class LogCounts:
    lines: int = 0
    shortfalls: int = 0
    missing_tokens: int = 0
    shortfall_pairs: list[tuple[int, int]] = field(default_factory=list)
    load_failed_requests: int = 0
    recovered_requests: int = 0
    lookups: int = 0
    #: lookups that found anything, and those that promised a load (``need to load`` > 0): the exposure
    lookups_with_hits: int = 0
    loads: int = 0
    retrieve_lines: int = 0
    lookup_total_tokens: int = 0
    lookup_hit_tokens: int = 0
    lookup_need_load: int = 0
    retrieved_tokens: int = 0
    spec_accepted: int = 0
    spec_drafted: int = 0
    markers: dict[str, int] = field(default_factory=dict)

    @property
    def crashed(self) -> bool:
        return self.markers.get("engine_fatal", 0) > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shortfall_pairs"] = [list(p) for p in self.shortfall_pairs[:50]]
        d["crashed"] = self.crashed
        return d


def count_log(path: Path, stop_offset: int | None = None) -> LogCounts:
    """Count symptom lines in ``path`` up to ``stop_offset`` bytes (what follows is shutdown noise: vLLM
    0.32.0 always logs an EngineDeadError when it is stopped)."""
    c = LogCounts()
    if not path.exists():
        return c
    with open(path, "rb") as fh:
        data = fh.read(stop_offset) if stop_offset is not None else fh.read()
    for raw in data.decode("utf-8", "replace").splitlines():
        c.lines += 1
        if "Num retrieved tokens" in raw and (m := _R2.search(raw)):
            r, e = int(m.group(1)), int(m.group(2))
            c.shortfalls += 1
            c.missing_tokens += max(0, e - r)
            c.shortfall_pairs.append((r, e))
        elif "KV load failure" in raw:
            if m := _V2.search(raw):
                c.load_failed_requests += int(m.group(1))
            elif m := _V1.search(raw):
                c.recovered_requests += int(m.group(1))
        elif W.HIT in raw and (m := _L1.search(raw)):
            c.lookups += 1
            c.lookup_total_tokens += int(m.group(1))
            c.lookup_hit_tokens += int(m.group(3))
            c.lookups_with_hits += int(m.group(3)) > 0
            c.loads += int(m.group(4)) > 0
            c.lookup_need_load += max(0, int(m.group(4)))
        elif W.REQUIRED_FROM in raw and (m := _R4.search(raw)):
            c.retrieve_lines += 1
            c.retrieved_tokens += int(m.group(1))
        elif W.SPEC in raw and (m := _SD.search(raw)):
            c.spec_accepted += int(m.group(1))
            c.spec_drafted += int(m.group(2))
        for lit, name in _LITERALS.items():
            if lit in raw:
                c.markers[name] = c.markers.get(name, 0) + 1
    return c


def metrics_numbers(metrics_text: str) -> dict[str, float | None]:
    """Rates from the final /metrics scrape (None when the counter is absent or has no denominator)."""
    m = parse_prometheus(metrics_text)

    def ratio(num: str, den: str) -> float | None:
        d = metric_sum(m, den)
        return round(100.0 * metric_sum(m, num) / d, 2) if d else None

    drafts = metric_sum(m, "vllm:spec_decode_num_drafts_total")
    acc = metric_sum(m, "vllm:spec_decode_num_accepted_tokens_total")
    return {
        "acceptance_pct": ratio("vllm:spec_decode_num_accepted_tokens_total",
                                "vllm:spec_decode_num_draft_tokens_total"),
        "mean_acceptance_length": round(1 + acc / drafts, 3) if drafts else None,
        "draft_tokens": metric_sum(m, "vllm:spec_decode_num_draft_tokens_total") or None,
        "prefix_cache_hit_pct": ratio("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
        "external_prefix_cache_hit_pct": ratio("vllm:external_prefix_cache_hits_total",
                                               "vllm:external_prefix_cache_queries_total"),
        "preemptions": metric_sum(m, "vllm:num_preemptions_total") or 0.0,
    }


def phase_acceptance(phase_batch: list[int], phase_metrics: list[dict[str, float]],
                     in_flight: list[int | None] | None = None) -> list[dict[str, Any]]:
    """Acceptance per workload phase from counter deltas (K=0 steps add nothing: spec-decode.md §4), with the
    most requests the client had in flight at once in that phase (None when not recorded)."""
    out = []
    for i, batch in enumerate(phase_batch):
        if i + 1 >= len(phase_metrics):
            break
        a, b = phase_metrics[i], phase_metrics[i + 1]

        def d(name: str, a: dict[str, float] = a, b: dict[str, float] = b) -> float:
            return b.get(name, 0.0) - a.get(name, 0.0)

        drafted = d("vllm:spec_decode_num_draft_tokens_total")
        accepted = d("vllm:spec_decode_num_accepted_tokens_total")
        out.append({"phase": i, "batch": batch, "drafted": int(drafted), "accepted": int(accepted),
                    "acceptance_pct": round(100 * accepted / drafted, 2) if drafted else None,
                    "in_flight": in_flight[i] if in_flight and i < len(in_flight) else None})
    return out


def max_in_flight(requests: list[Any], phases: int) -> list[int | None]:
    """Per phase, the most requests whose [sent, answered] windows overlap (a sweep over the client's own
    timestamps); None for a phase whose requests carry no send time."""
    out: list[int | None] = []
    for i in range(phases):
        rs = [r for r in requests if r.phase == i]
        if not rs or any(r.started is None for r in rs):
            out.append(None)
            continue
        edges = sorted([(r.started, 1) for r in rs] + [(r.started + r.latency_s, -1) for r in rs],
                       key=lambda e: (e[0], e[1]))
        cur = best = 0
        for _, step in edges:
            cur += step
            best = max(best, cur)
        out.append(best)
    return out


def k0_summary(phases: list[dict[str, Any]], failed: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Acceptance of the first batch-1 phase vs batch-1 phases that follow a batch>=2 phase. A batch-2 phase
    whose condition failed (``failed``: fewer requests in flight, drafting at K=0) is not a K=0 phase: the
    batch-1 phases after it are left out rather than reported as "after K=0"."""
    first = next((p for p in phases if p["batch"] == 1 and p["acceptance_pct"] is not None), None)
    after = []
    last_multi_ok: bool | None = None
    for p in phases:
        if p["batch"] >= 2:
            last_multi_ok = p["phase"] not in failed
        elif last_multi_ok and p["acceptance_pct"] is not None:
            after.append(p)
    multi = [p for p in phases if p["batch"] >= 2 and p["phase"] not in failed]
    acc_after = None
    if after:
        dr = sum(p["drafted"] for p in after)
        acc_after = round(100 * sum(p["accepted"] for p in after) / dr, 2) if dr else None
    return {
        "acceptance_first_batch1_pct": first["acceptance_pct"] if first else None,
        "acceptance_batch1_after_batch2_pct": acc_after,
        "drafted_in_batch2_phases": sum(p["drafted"] for p in multi),
        "phases_left_out": sorted(failed),
    }


def engine_findings(log_path: Path, lmcache_config: Path | None) -> list[dict[str, Any]] | None:
    """Findings of the ``specdiag analyze`` engine for this log, or None if the engine is not available."""
    try:
        from specdiag.engine import analyze  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        report = analyze([str(log_path)],
                         lmcache_config=str(lmcache_config) if lmcache_config and lmcache_config.exists() else None)
    except Exception as e:  # the engine is optional here: a failure must not lose the run's own counts
        return [{"rule": "ENGINE-ERROR", "severity": "info", "title": repr(e)[:200], "count": 0}]
    out = []
    for f in report.findings:
        top = f.causes[0] if f.causes else None
        out.append({
            "rule": f.rule, "severity": f.severity, "title": f.title, "count": f.count,
            "top_cause": {"id": top.id, "confidence": round(top.confidence, 3)} if top else None,
            "measurements": {k: v for k, v in f.measurements.items()
                             if isinstance(v, (int, float, str, bool)) or v is None},
        })
    return out


# ------------------------------------------------------------------------------------------ cell result
@dataclass
class CellResult:
    cell: str
    toggled: dict[str, str]
    repeat: int
    status: str  # ok | server-failed | error | interrupted
    error: str = ""
    startup_s: float | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    log: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)
    k0: dict[str, Any] = field(default_factory=dict)
    engine: list[dict[str, Any]] | None = None
    dir: str = ""
    #: the preset's conditions (conditions.py), set when the verdict is built
    conditions: list[dict[str, Any]] = field(default_factory=list)

    # ---- the symptom values the differential compares
    def symptom(self, name: str) -> float | None:
        if name == "shortfalls":
            eng = [f for f in (self.engine or []) if f.get("rule") == "KV001"]
            if self.engine is not None and not any(f["rule"] == "ENGINE-ERROR" for f in self.engine):
                return float(sum(int(f.get("count", 1)) for f in eng))
            return float(self.log.get("shortfalls", 0))
        if name == "failed_requests":
            return float(self.workload.get("failed", 0))
        if name == "engine_crash":
            return 1.0 if self.log.get("crashed") else 0.0
        if name == "acceptance_pct":
            return self.metrics.get("acceptance_pct")
        if name == "acceptance_after_k0_pct":
            return self.k0.get("acceptance_batch1_after_batch2_pct")
        if name == "lmcache_hit_pct":
            t = self.log.get("lookup_total_tokens", 0)
            return round(100 * self.log.get("lookup_hit_tokens", 0) / t, 2) if t else None
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


COUNT_SYMPTOMS = ("shortfalls", "failed_requests", "engine_crash")
RATE_SYMPTOMS = ("acceptance_pct", "acceptance_after_k0_pct", "lmcache_hit_pct")
SYMPTOM_WORDS = {
    "shortfalls": "the retrieval shortfall (retrieved < expected)",
    "failed_requests": "failed requests",
    "engine_crash": "an engine crash",
    "acceptance_pct": "draft acceptance",
    "acceptance_after_k0_pct": "acceptance after K=0 phases",
    "lmcache_hit_pct": "the LMCache hit rate",
}


def build_cell_result(cell_name: str, toggled: dict[str, str], repeat: int, cell_dir: Path,
                      status: str, error: str = "", startup_s: float | None = None,
                      workload: Any = None, stop_offset: int | None = None,
                      use_engine: bool = True) -> CellResult:
    """Read a finished cell's folder (log, metrics, workload) into a CellResult."""
    log_path = cell_dir / "vllm.log"
    counts = count_log(log_path, stop_offset)
    mtext = (cell_dir / "metrics.prom").read_text() if (cell_dir / "metrics.prom").exists() else ""
    res = CellResult(cell=cell_name, toggled=dict(toggled), repeat=repeat, status=status, error=error,
                     startup_s=round(startup_s, 1) if startup_s is not None else None,
                     log=counts.to_dict(), metrics=metrics_numbers(mtext), dir=str(cell_dir))
    if workload is not None:
        res.workload = workload.summary()
        if workload.phase_batch:
            res.phases = phase_acceptance(workload.phase_batch, workload.phase_metrics,
                                          max_in_flight(workload.requests, len(workload.phase_batch)))
            res.k0 = k0_summary(res.phases)
    if use_engine and log_path.exists():
        res.engine = engine_findings(log_path, cell_dir / "lmcache.yaml")
    return res


# ------------------------------------------------------------------------------------------ differential
def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"runs": 0}
    return {"runs": len(values), "present": sum(1 for v in values if v > 0),
            "mean": round(statistics.fmean(values), 2), "min": min(values), "max": max(values)}


def _fmt_range(st: dict[str, Any]) -> str:
    if st["runs"] == 0:
        return "no data"
    if st["min"] == st["max"]:
        return f"{st['mean']:g}"
    return f"{st['mean']:g} (range {st['min']:g}–{st['max']:g})"


def differential(results: list[CellResult], toggles: dict[str, list[str]],
                 causes: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """For each toggle and symptom: per value statistics and a conclusion in words.

    Cells are compared within the same *context* (the other toggles' values), so a second toggle cannot
    masquerade as the first one's effect. Count symptoms go through exposure and Fisher's exact test
    (``evidence.py``); rates (acceptance, hit %) compare repeat ranges within each context.
    """
    usable = [r for r in results if r.status == "ok" and not any(
        c.get("ok") is False and c.get("scope") == "cell" for c in r.conditions)]
    out: list[dict[str, Any]] = []
    for key, values in toggles.items():
        if len(values) < 2:
            continue
        for sym in COUNT_SYMPTOMS:
            d = _count_differential(results, key, values, sym, (causes or {}).get(key))
            if d is not None:
                out.append(d)
        for sym in RATE_SYMPTOMS:
            d = _rate_differential(usable, key, values, sym)
            if d is not None:
                out.append(d)
    return out


def _rate_differential(usable: list[CellResult], key: str, values: list[str], sym: str) -> dict[str, Any] | None:
    by_ctx: dict[tuple, dict[str, list[float]]] = {}
    for r in usable:
        v = r.symptom(sym)
        if v is None or key not in r.toggled:
            continue
        ctx = tuple(sorted((k, x) for k, x in r.toggled.items() if k != key))
        by_ctx.setdefault(ctx, {}).setdefault(r.toggled[key], []).append(float(v))
    if not by_ctx:
        return None
    by_value: dict[str, list[float]] = {}
    for groups in by_ctx.values():
        for val, xs in groups.items():
            by_value.setdefault(val, []).extend(xs)
    stats = {val: _stats(by_value.get(val, [])) for val in values}
    conclusion = _rate_conclusion(key, sym, values, by_ctx, stats)
    if conclusion is None:
        return None
    return {"toggle": key, "symptom": sym, "by_value": stats, "conclusion": conclusion}


#: what each suspect toggle does on the way to the mechanism (the mechanism itself is the catalog's text)
TOGGLE_ROLES = {
    "save_decode_cache": "save_decode_cache=true adds decode-phase stores; in a cache that is full they evict "
                         "chunks a lookup already counted (the trigger, not the mechanism)",
    "redis_maxmemory": "a Redis that has to evict drops keys LMCache already counted (remote backends cannot pin)",
    "pin_timeout_sec": "after pin_timeout_sec the PinMonitor force-unpins looked-up chunks, which makes them "
                       "evictable before the retrieve",
    "max_local_cpu_size": "a smaller CPU tier has to evict sooner",
}


def _count_differential(results: list[CellResult], key: str, values: list[str], sym: str,
                        cause_id: str | None) -> dict[str, Any] | None:
    """Fisher's exact test per context between the first value and each other one, over exposed runs."""
    from specdiag.repro import evidence as ev

    comps = []
    for ctx, arms in ev.arms_by_context(results, key, sym).items():
        base = arms.get(values[0]) or ev.Arm(values[0])
        for v in values[1:]:
            c = ev.compare(key, base, arms.get(v) or ev.Arm(v))
            c["context"] = dict(ctx)
            comps.append(c)
    present = sum(a["present"] for c in comps for a in c["arms"].values())
    exposed = sum(a["exposed"] for c in comps for a in c["arms"].values())
    if not comps or (present == 0 and sym != "shortfalls"):
        return None  # "no failed requests anywhere" is not worth a line per toggle
    if present == 0 and not any(r.log.get("lookups") for r in results):
        return None  # LMCache never looked anything up (e.g. lmcache=off): nothing to say about shortfalls
    decision = next((d for d in ("follows", "undecided", "rejected", "not-necessary", "absent")
                     if any(c["decision"] == d for c in comps)), "absent")
    if exposed == 0:
        decision = "no-exposure"
    stats = {v: {"present": sum(c["arms"].get(v, {}).get("present", 0) for c in comps),
                 "exposed": sum(c["arms"].get(v, {}).get("exposed", 0) for c in comps)} for v in values}
    return {"toggle": key, "symptom": sym, "by_value": stats, "comparisons": comps, "decision": decision,
            "mechanism": ev.mechanism(cause_id) if decision == "follows" else None,
            "conclusion": _count_words(key, sym, comps, decision, cause_id)}


def _count_words(key: str, sym: str, comps: list[dict[str, Any]], decision: str, cause_id: str | None) -> str:
    """Numbers first, then words: each context's comparison, the mechanism for a decision, the runs left out."""
    from specdiag.repro import evidence as ev

    words = SYMPTOM_WORDS[sym]
    order = {"follows": 0, "undecided": 1, "rejected": 2, "not-necessary": 3, "absent": 4}
    parts = []
    for c in sorted(comps, key=lambda c: order.get(c["decision"], 9)):
        where = ev.ctx_words(tuple(c["context"].items()))
        parts.append((f"with {where}: " if where and len(comps) > 1 else "") + c["words"])
    left = [x for c in comps for a in c["arms"].values() for x in a["left_out"]]
    if decision == "no-exposure":
        text = (f"{words}: no run had the chance to show it: this experiment can neither implicate nor clear "
                f"{key}")
    else:
        head = {"follows": f"follows {key}", "undecided": f"undecided for {key}",
                "rejected": f"does not follow {key}: {key} rejected",
                "not-necessary": f"does not follow {key} alone",
                "absent": f"absent with every value of {key}"}[decision]
        text = f"{words} {head} — " + " | ".join(parts)
    mech = ev.mechanism(cause_id)
    if decision == "follows" and mech:
        text += (f". Mechanism [{mech['id']}]: {mech['mechanism']}" if mech.get("mechanism")
                 else f". Mechanism [{mech['id']}] (specdiag explain {mech['id']})")
        if key in TOGGLE_ROLES:
            text += f" Role of {key}: {TOGGLE_ROLES[key]}."
    if left:
        text += f". Left out ({len(left)}): " + "; ".join(left[:6]) + (" …" if len(left) > 6 else "")
    return text


def headline(diff: list[dict[str, Any]]) -> str | None:
    """The verdict in one line, numbers beside each word: per toggle, its first count symptom's decision with
    the exposed-run split and Fisher's p of the comparison that carries it (the weakest one when several
    contexts agree). None when no count symptom was compared."""
    from specdiag.repro.evidence import ctx_words
    from specdiag.stats import describe_p

    parts, seen, first = [], set(), None
    for d in diff:
        if d["symptom"] not in COUNT_SYMPTOMS or d["toggle"] in seen or d["decision"] == "no-exposure":
            continue
        seen.add(d["toggle"])
        key, same = d["toggle"], [c for c in d["comparisons"] if c["decision"] == d["decision"]]
        c = max(same, key=lambda c: c["p"])
        hi, lo = c["higher"], next(v for v in c["values"] if v != c["higher"])
        arms = c["arms"]
        split = (f"{arms[hi]['present']}/{arms[hi]['exposed']} exposed runs with {key}={hi} vs "
                 f"{arms[lo]['present']}/{arms[lo]['exposed']} with {key}={lo}, {describe_p(c['p'])}")
        where = _contexts_words(len(same), len(d["comparisons"]), ctx_words(tuple(c["context"].items())))
        words = {"follows": f"follows {key}={hi}", "rejected": f"{key} rejected",
                 "not-necessary": f"{key} not necessary", "undecided": f"{key} undecided",
                 "absent": f"absent with every value of {key}"}[d["decision"]]
        first = first or d["symptom"]
        other = f" for {SYMPTOM_WORDS[d['symptom']]}" if d["symptom"] != first else ""
        parts.append(f"{words}{other} ({split}{where})")
    return f"{SYMPTOM_WORDS[first]}: " + "; ".join(parts) if first else None


def _contexts_words(agree: int, contexts: int, where: str) -> str:
    """Which of a toggle's contexts (the other toggles' values) carry its decision: all, or the one quoted."""
    if contexts <= 1:
        return ""
    return f", in each of {contexts} contexts" if agree == contexts else f", with {where} ({agree} of {contexts} contexts)"


def _rate_conclusion(key: str, sym: str, values: list[str], by_ctx: dict[tuple, dict[str, list[float]]],
                     stats: dict[str, dict[str, Any]], threshold: float = 5.0) -> str | None:
    """Compare rates *within* each context (other toggles fixed); a pooled mean across contexts would mix
    e.g. a 2 % hit rate with a 72 % one and say nothing."""
    words = SYMPTOM_WORDS[sym]
    verdicts = []
    parts = []
    for ctx, g in by_ctx.items():
        have = [v for v in values if g.get(v)]
        if len(have) < 2:
            continue
        st = {v: _stats(g[v]) for v in have}
        lo = min(have, key=lambda v: st[v]["mean"])
        hi = max(have, key=lambda v: st[v]["mean"])
        gap = st[hi]["mean"] - st[lo]["mean"]
        separated = st[lo]["max"] < st[hi]["min"]
        where = ", ".join(f"{k}={x}" for k, x in ctx)
        parts.append((f"[{where}] " if where else "") + "; ".join(f"{key}={v}: {_fmt_range(st[v])}%" for v in have))
        if gap < threshold:
            verdicts.append(("same", None, gap))
        elif separated:
            verdicts.append(("lower", lo, gap))
        else:
            verdicts.append(("overlap", lo, gap))
    if not verdicts:
        return None
    detail = " | ".join(parts)
    kinds = {v[0] for v in verdicts}
    if kinds == {"same"}:
        return f"{words} does not depend on {key} (within {threshold:g} points: {detail})"
    lows = {v[1] for v in verdicts if v[0] != "same"}
    if kinds == {"lower"} and len(lows) == 1:
        lo = next(iter(lows))
        gaps = [v[2] for v in verdicts]
        lo_txt, hi_txt = f"{min(gaps):.1f}", f"{max(gaps):.1f}"
        gap_txt = lo_txt if lo_txt == hi_txt else f"{lo_txt}–{hi_txt}"
        single = all(len(xs) == 1 for g in by_ctx.values() for xs in g.values())
        spread = ("one run per cell: no repeat spread, use --repeat to check it" if single
                  else "the repeat ranges do not overlap")
        return f"{words} is lower with {key}={lo} by {gap_txt} points ({detail}); {spread}"
    return f"{words} moves with {key} inconsistently or within the repeat spread ({detail})"


# ------------------------------------------------------------------------------------------ whole run
def _vals(rs: list[CellResult], sym: str) -> list[float]:
    """The symptom of every run that served its workload (a cell that failed to start measured nothing: no 0)."""
    return [v for v in (r.symptom(sym) for r in rs if r.status == "ok") if v is not None]


def _row_values(rs: list[CellResult]) -> dict[str, Any]:
    """The per-repeat values of one cell's row (each list holds one value per repeat)."""
    from specdiag.repro import evidence as ev

    ok = [r for r in rs if r.status == "ok"]
    return {
        "shortfalls": _vals(rs, "shortfalls"),
        "missing_tokens": [r.log.get("missing_tokens", 0) for r in rs],
        "cant_be_retrieved": [r.log.get("markers", {}).get("cant_be_retrieved", 0) for r in rs],
        "load_failed_requests": [r.log.get("load_failed_requests", 0) for r in rs],
        "recovered_requests": [r.log.get("recovered_requests", 0) for r in rs],
        "failed_requests": _vals(rs, "failed_requests"),
        "requests": [r.workload.get("requests", 0) for r in rs],
        "engine_crash": _vals(rs, "engine_crash"),
        "lmcache_degraded": [r.log.get("markers", {}).get("lmcache_degraded", 0) for r in rs],
        "alloc_failures": [r.log.get("markers", {}).get("alloc_failures", 0) for r in rs],
        "lmcache_hit_pct": _vals(rs, "lmcache_hit_pct"),
        "external_hit_pct": [r.metrics.get("external_prefix_cache_hit_pct") for r in rs],
        "acceptance_pct": _vals(rs, "acceptance_pct"),
        "acceptance_first_batch1_pct": [r.k0.get("acceptance_first_batch1_pct") for r in rs if r.k0],
        "acceptance_after_k0_pct": _vals(rs, "acceptance_after_k0_pct"),
        "drafted_in_batch2_phases": [r.k0.get("drafted_in_batch2_phases") for r in rs if r.k0],
        "startup_s": [r.startup_s for r in rs],
        "latency_p50_s": [r.workload.get("latency_p50_s") for r in ok],
        "errors": [r.error for r in rs if r.error],
        "exposure": [ev.exposure(r) for r in rs],
        "loads_attempted": [ev.exposure(r)["loads_attempted"] for r in rs],
        "shortfall_rate": ev.cell_rate(rs, "shortfalls")["text"],
        "shortfall_rate_interval": ev.cell_rate(rs, "shortfalls"),
        "conditions_failed": [c["detail"] for r in rs for c in r.conditions if c.get("ok") is False],
    }


def cell_rows(cells: list[tuple[str, dict[str, str]]], results: list[CellResult]) -> list[dict[str, Any]]:
    """One row per planned cell with every repeat's value (the spread is the list itself); a cell that never
    started has ``runs`` 0 and no values, so it prints "–", never 0."""
    rows = []
    for name, toggled in cells:
        rs = sorted((r for r in results if r.cell == name), key=lambda r: r.repeat)
        row: dict[str, Any] = {"cell": name, "toggled": toggled, "runs": len(rs),
                               "status": [r.status for r in rs] or ["not run"]}
        row.update(_row_values(rs) if rs else {"exposure": []})
        rows.append(row)
    return rows


def _settings(plan_dict: dict[str, Any], toggled: dict[str, str]) -> dict[str, str]:
    from specdiag.repro.plan import SETTINGS

    out = {k: v for k, (v, _) in SETTINGS.items()}
    out.update({str(k): str(v) for k, v in (plan_dict.get("base") or {}).items()})
    out.update(toggled)
    return out


def apply_conditions(plan_dict: dict[str, Any], results: list[CellResult]) -> None:
    """Check each run's preset conditions and drop failed phases from its K=0 summary (in place)."""
    from specdiag.repro.conditions import cell_conditions
    from specdiag.repro.plan import PRESETS

    preset = PRESETS.get(str(plan_dict.get("name")))
    must_evict = plan_dict.get("must_evict") or (preset.must_evict if preset else {})
    max_tokens = int(((plan_dict.get("workload") or {}).get("params") or {}).get("max_tokens", 64))
    for r in results:
        if r.status != "ok":
            continue
        r.conditions = cell_conditions(r.toggled, _settings(plan_dict, r.toggled), r.phases, r.log, must_evict,
                                       max_tokens)
        if r.phases:
            r.k0 = k0_summary(r.phases, frozenset(c["phase"] for c in r.conditions
                                                  if c.get("ok") is False and c.get("scope") == "phase"))


def _analyze_agreement(diff: list[dict[str, Any]], results: list[CellResult]) -> list[str]:
    """What ``specdiag analyze`` ranked first for KV001 in the cells that showed the shortfall, beside the
    mechanism the repro names: one cause id on both sides, or the disagreement said out loud."""
    tops: dict[str, int] = {}
    for r in results:
        for f in r.engine or []:
            if f.get("rule") == "KV001" and f.get("top_cause"):
                tops[f["top_cause"]["id"]] = tops.get(f["top_cause"]["id"], 0) + 1
    if not tops:
        return []
    named = {d["mechanism"]["id"] for d in diff if d.get("mechanism")}
    seen = ", ".join(f"{k} in {n} cell(s)" for k, n in sorted(tops.items(), key=lambda kv: -kv[1]))
    if not named:
        return [f"specdiag analyze on these cells ranks first for KV001: {seen}"]
    same = named & set(tops)
    return [f"specdiag analyze on these cells ranks first for KV001: {seen} — "
            + ("the same cause id as the repro's mechanism" if same else
               f"not the repro's mechanism ({', '.join(sorted(named))}): read both before acting")]


def build_verdict(plan_dict: dict[str, Any], device: dict[str, Any], cells: list[tuple[str, dict[str, str]]],
                  results: list[CellResult], interrupted: bool = False) -> dict[str, Any]:
    """The run's verdict: conditions checked, then the differential, then the cell rows and notes."""
    from specdiag.repro.plan import PRESETS

    preset = PRESETS.get(str(plan_dict.get("name")))
    apply_conditions(plan_dict, results)
    causes = plan_dict.get("causes") or (preset.causes if preset else {})
    diff = differential(results, plan_dict.get("toggles", {}), causes)
    notes = []
    if any(r.log.get("markers", {}).get("lmcache_degraded") for r in results):
        notes.append("LMCache ran in degraded mode (no connector) in some cells: their hit/shortfall numbers "
                     "say nothing about LMCache")
    ran = {r.cell for r in results}
    never = [name for name, _ in cells if name not in ran]
    if never:
        notes.append(("the run was interrupted: " if interrupted else "") + f"{len(never)} cell(s) never ran "
                     f"(excluded): {', '.join(never)}")
    for r in results:
        if r.status != "ok":
            notes.append(f"{r.cell} r{r.repeat}: {r.status} — excluded from every comparison")
        for c in r.conditions:
            if c.get("ok") is False:
                notes.append(f"{r.cell} r{r.repeat}: condition failed — {c['detail']}")
        if r.k0:
            notes.append(f"{r.cell} r{r.repeat}: {r.k0.get('drafted_in_batch2_phases')} draft tokens in the batch-2 "
                         f"phases that met their condition; acceptance first batch-1 phase "
                         f"{r.k0.get('acceptance_first_batch1_pct')}%, batch-1 phases after batch-2 "
                         f"{r.k0.get('acceptance_batch1_after_batch2_pct')}%")
    notes += _analyze_agreement(diff, results)
    from specdiag.repro.calibrate import record_words

    if cal_note := record_words(plan_dict.get("calibration")):
        notes.insert(0, cal_note)  # first: how the workload was sized frames every count below it
    return {
        "schema": "specdiag.repro/2",
        "plan": plan_dict,
        "device": device,
        "cells": cell_rows(cells, results),
        "differential": diff,
        "headline": headline(diff),
        "conclusions": [d["conclusion"] for d in diff],
        "notes": notes,
        "results": [r.to_dict() for r in results],
    }


def plan_cells(plan_dict: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """The planned cells (name, toggled) of a plan read back, first toggle varying slowest (as ``Plan.cells``)."""
    import itertools

    toggles = {str(k): [str(v) for v in vs] for k, vs in (plan_dict.get("toggles") or {}).items()}
    keys = list(toggles)
    out = []
    for combo in itertools.product(*(toggles[k] for k in keys)):
        toggled = dict(zip(keys, combo, strict=True))
        out.append((",".join(f"{k}={v}" for k, v in toggled.items()) or "base", toggled))
    return out


def _recount(res: CellResult) -> None:
    """A cell recorded before the exposure counters existed: count its kept log again (same stop point is
    unknown, so only the exposure counters are taken over; the symptom counts stay as recorded)."""
    log_path = Path(res.dir) / "vllm.log" if res.dir else None
    if "loads" in res.log or log_path is None or not log_path.exists():
        return
    fresh = count_log(log_path).to_dict()
    for k in ("loads", "lookups_with_hits", "retrieve_lines", "lookups", "lookup_need_load", "retrieved_tokens"):
        res.log[k] = fresh[k]


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[CellResult]]:
    """Read a run folder back (plan.json + every cells/*/cell.json) so its verdict can be recomputed. A cell
    interrupted before it finished keeps only its status and is returned as such (it is then excluded)."""
    import json

    from specdiag.repro.plan import check_plan_dict

    plan = check_plan_dict(json.loads((run_dir / "plan.json").read_text()), "plan.json")
    toggled_of = dict(plan_cells(plan))
    results = []
    fields = set(CellResult.__dataclass_fields__)
    for p in sorted((run_dir / "cells").glob("*/cell.json")):
        d = json.loads(p.read_text())
        if not isinstance(d, dict) or not isinstance(d.get("cell"), str):
            continue
        d.setdefault("toggled", toggled_of.get(d["cell"], {}))
        d.setdefault("repeat", 0)
        d.setdefault("status", "interrupted")
        res = CellResult(**{k: v for k, v in d.items() if k in fields})
        _recount(res)
        _rephase(res, p.parent / "workload.json")
        results.append(res)
    return plan, results


def _rephase(res: CellResult, workload_json: Path) -> None:
    """Re-reading recomputes each phase's requests in flight from the client's recorded send and answer times
    (``workload.json`` beside the cell), so the in-flight condition rests on the times themselves; a missing
    or unreadable file keeps the figures recorded in ``cell.json``."""
    import json
    from types import SimpleNamespace

    if not res.phases or not workload_json.is_file():
        return
    try:
        reqs = [SimpleNamespace(phase=int(r["phase"]), latency_s=float(r["latency_s"]),
                                started=None if r.get("started") is None else float(r["started"]))
                for r in json.loads(workload_json.read_text())["requests"]]
    except (OSError, ValueError, KeyError, TypeError):
        return
    for phase, flight in zip(res.phases, max_in_flight(reqs, len(res.phases)), strict=False):
        phase["in_flight"] = flight
