"""Deployments: which inputs (and which lines of a merged stream) belong to one server.

A deployment gets its own context, rules and findings, so two pods' logs never mix their ranks, configs
or request ids. Grouping, from the outside in:

* each **folder** (or fsspec URL such as ``s3://bucket/pod-3/``) given on the command line is one deployment (a server's rank files, rotated files);
  the loose **files**, globs and stdin given together form one more (one file per rank of one server is
  the common case);
* inside any stream, a line whose wrapper names its origin — ``kubectl logs --prefix`` (``[pod/name/c]``),
  a journald host, a docker-compose service — belongs to the deployment of that name; lines without
  such a name follow the last named line of the same input (continuations, wrapped lines).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specdiag.context import Context, ContextBuilder
from specdiag.events import CATALOG_EVENT, UNKNOWN_EVENT, UNMATCHED_KINDS, Event, template
from specdiag.events.rows import metric_events
from specdiag.findings import Finding
from specdiag.ingest import Source, expand_inputs
from specdiag.ingest.hot import LookupRows, MetricRows
from specdiag.ingest.marks import START_MARKERS, CountMark
from specdiag.ingest.remote import expand_remote, is_url
from specdiag.metrics.collector import MetricsCollector
from specdiag.metrics.parse import v0_interval_counts
from specdiag.metrics.series import MAX_ENGINES
from specdiag.observe import (
    COUNTED,
    METRIC_ROW_EVENTS,
    PROBLEM_LEVELS,
    SERIES_CAP,
    LookBack,
    Observer,
    RunState,
    full_retrieve,
)
from specdiag.runs import RunInfo, RunStart, run_changes, starts_new_run
from specdiag.sanitize import error_text
from specdiag.timeutil import rec_time

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ingest.envelope import Record


@dataclass(frozen=True)
class InputGroup:
    """Inputs that belong to one deployment unless their lines name another."""

    id: str
    paths: tuple[str, ...]


def group_inputs(paths: Iterable[str]) -> list[InputGroup]:
    """Each folder argument is a group; the other arguments (files, globs, ``-``) form one group together."""
    folders: list[str] = []
    loose: list[str] = []
    for p in paths:
        (folders if p != "-" and (os.path.isdir(p) or is_url(p)) else loose).append(p)
    groups = [InputGroup(p.rstrip("/") or p, (p,)) for p in folders]
    if loose:
        groups.insert(0, InputGroup(_loose_id(loose), tuple(loose)))
    return groups


def _loose_id(paths: list[str]) -> str:
    if len(paths) == 1:
        return paths[0]
    parent = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths if p != "-"] or ["."])
    rel = os.path.relpath(parent)
    return rel if rel != "." else "inputs"


def sources_of(group: InputGroup, stdin_name: str) -> list[Source]:
    """The group's inputs: local ones as ``expand_inputs`` orders them, then remote (fsspec) ones."""
    local = [p for p in group.paths if not is_url(p)]
    remote = [s for p in group.paths if is_url(p) for s in expand_remote(p)]
    return (expand_inputs(local, stdin_name=stdin_name) if local else []) + remote


def deployment_key(rec: Any) -> str | None:
    """The deployment a record's wrapper names (kubectl pod, journald host, compose service), if any.

    Ingest's names are ``k8s:pod/<pod>/<container>``, ``host:<host>`` and ``compose:<service>``; a pod is
    shown as ``pod/<pod>/<container>``, as ``kubectl logs --prefix`` prints it. A Ray node (``ip=``) is not a
    deployment: one server's workers span several nodes.
    """
    return deployment_key_of(rec.origin.deployment)


def deployment_key_of(name: str | None) -> str | None:
    """``deployment_key`` of an ingest deployment name (``Origin.deployment``)."""
    if name is None:
        return None
    return name[4:] if name.startswith("k8s:") else name


#: deployments one input group is read as: each costs ≈ 20 KiB before its first line and its rules' state
#: after, so a stream that names more (a hostile one, or a whole fleet through one aggregator: ``specdiag
#: fleet`` reads one folder per pod) has the records of the rest counted as not analysed, not read
MAX_DEPLOYMENTS = 1024


def deployment_limit() -> int:
    """:data:`MAX_DEPLOYMENTS`, read when asked (a test lowers it)."""
    return MAX_DEPLOYMENTS


def deployment_for(runs: dict[str, Deployment], dep_id: str, make: Callable[[str], DeploymentRun]) -> Deployment | None:
    """The deployment ``dep_id`` of an input group, begun on its first record; None when the group holds
    :data:`MAX_DEPLOYMENTS` already (its records are then counted, ``SourceStats.beyond_limit``)."""
    dep = runs.get(dep_id)
    if dep is None and len(runs) < deployment_limit():
        dep = runs[dep_id] = Deployment(dep_id, make)
    return dep


@dataclass
class DeploymentResult:
    """What one deployment's analysis produced (picklable: it crosses process boundaries with ``-j``)."""

    id: str
    sources: list[str]
    context: Context
    findings: list[Finding]
    timeline: dict[str, Any]
    rules_failed: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the collector itself, only when asked for (``specdiag metrics`` builds its tables from it)
    metrics: MetricsCollector | None = None
    #: the server's runs in the inputs (``specdiag.runs``); the context above is the last run's
    runs: list[RunInfo] = field(default_factory=list)
    #: what differs between consecutive runs' contexts (``runs.run_changes``)
    run_changes: list[dict[str, Any]] = field(default_factory=list)
    #: volumes the rates of ``watch``'s rollout gate divide by (:func:`run_counts`)
    counts: dict[str, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "sources": list(self.sources), "context": self.context.to_dict()}
        if self.notes:
            out["notes"] = list(self.notes)
        if self.runs:
            out["runs"] = [r.to_dict() for r in self.runs]
        if len(self.runs) > 1:
            out["run_changes"] = list(self.run_changes)
        if self.counts:
            out["counts"] = dict(self.counts)
        return out


def run_counts(run: RunState) -> dict[str, int | None]:
    """A run's volumes, whichever path read the lines: LMCache's retrieve lines (one per rank and request),
    the scheduler's lookups (one per request scheduled), store lines, and the speculative tokens accepted
    and drafted over the SpecDecoding intervals (None when no such line was read: unknown, not zero)."""
    acc = dr = 0
    seen = False
    for intervals in run.series.engines.values():
        for iv in intervals:
            if iv.dr is not None:
                seen = True
                acc += iv.acc or 0
                dr += iv.dr
    return {"retrieve_lines": run.count("R4"), "lookup_lines": run.count("L1"), "store_lines": run.count("S1"),
            "spec_accepted_tokens": acc if seen else None, "spec_drafted_tokens": dr if seen else None}


def add_counts(a: dict[str, int | None], b: dict[str, int | None]) -> dict[str, int | None]:
    """Two runs' :func:`run_counts` as one (a count one run does not know stays the other's)."""
    keys = [*a, *(k for k in b if k not in a)]
    return {k: None if a.get(k) is None and b.get(k) is None else (a.get(k) or 0) + (b.get(k) or 0) for k in keys}


class DeploymentRun:
    """One deployment's observers (context builder, rules, metrics) and its run state, while reading."""

    def __init__(self, dep_id: str, rule_factory: Callable[[], list], user_cfg: dict | None,
                 user_cfg_path: str | None, severity_overrides: dict[str, str], *, metrics_cap: int = SERIES_CAP,
                 keep_metrics: bool = False, extra: list[Observer] | None = None, timeline: bool = True) -> None:
        self.id = dep_id
        self.run = RunState(dep_id, series_cap=metrics_cap)
        self.ctx = Context()
        self.builder = ContextBuilder(self.ctx, user_cfg, user_cfg_path)
        self.rules = rule_factory()
        self.metrics = MetricsCollector()
        self.keep_metrics = keep_metrics
        self.timeline = timeline
        self.extra = list(extra or [])
        self.severity_overrides = severity_overrides
        self.failed: dict[str, str] = {}
        self.last_origin: object = None
        self.observers: list[Observer] = [self.builder, *self.rules, self.metrics, *self.extra]
        for obs in self.observers:
            obs.start(self.run)
        #: template id -> indices of its observers, shared by every run with the same observer line-up
        self._plan = dispatch_plan(self.observers)
        #: template id -> its observers, filled as the run meets each id (``observers_of``)
        self.dispatch: dict[str, list[Observer]] = {}
        #: observers of the scanner's lookup columns (``tables = {"lookups"}``)
        self.row_observers = [obs for obs in self.observers if "lookups" in obs.tables]
        #: observers of the stats / SpecDecoding rows (``tables = {"metrics"}``)
        self.metric_observers = [obs for obs in self.observers if "metrics" in obs.tables]
        #: observers of every warning and error, whatever its template (``Observer.levels``)
        self.level_observers = [obs for obs in self.observers if obs.levels]
        self._by_level: dict[tuple[str, str], list[Observer]] = {}
        #: per process, the last totals of V0's ``Speculative metrics`` line (``v0_interval_counts``)
        self.v0_spec_totals: dict[str, dict] = {}

    def observers_of(self, event_id: str) -> list[Observer]:
        """The observers of ``event_id`` events. Filled per id on first use: a run kept a list per template
        id any observer reads (≈ 200, 12 KiB) from its start, which dominated what a deployment costs
        before its first line when a stream names thousands of them."""
        found = self.dispatch.get(event_id)
        if found is None:
            observers = self.observers
            found = self.dispatch[event_id] = [observers[i] for i in self._plan.get(event_id, ())]
        return found

    def read_events(self) -> frozenset[str]:
        """The template ids some observer of this run reads."""
        return frozenset(self._plan)

    def note_record(self, rec: Record) -> None:
        """Every record, before it is matched: a suffixed LMCache line places the build whether or not a
        template knows it (the fingerprint keeps the first of each location, so this stays a dict lookup)."""
        if rec.src_line is not None and rec.kind == "lmcache":
            self.builder.observe_record(rec)

    def deliver(self, ev: Event) -> None:
        """Hand the event to its observers, all of them even when one raises; then re-raise the first error.

        The run loop skips that record and names it in the input's errors: a line a rule cannot read (a
        5,000-digit count) costs that line, not the rule. A rule whose ``finish`` raises is dropped and listed.
        """
        error = None
        if ev.id == "V_SPEC":  # V0's line prints totals since start: its interval's counts, as V1 prints them
            v0_interval_counts(ev, self.v0_spec_totals)
        if ev.id in RunState.SERIES_EVENTS:  # read by the Python path: a batch of one row
            rows = MetricRows.from_event(ev)
            self.run.series.observe_rows(rows)
            if ev.id in METRIC_ROW_EVENTS:
                error = _to_all(self.metric_observers, "observe_metrics", rows)
        elif ev.id in COUNTED:
            self.run.count_event(ev)
        error = _to_all(self.observers_of(ev.id), "observe", ev) or error
        if ev.id == "L1" and self.row_observers:  # a lookup the Python path read: to the row observers as one row
            error = _to_all(self.row_observers, "observe_rows", LookupRows.from_event(ev)) or error
        level = ev.rec.level
        if level in PROBLEM_LEVELS and self.level_observers:
            error = _to_all(self._level_observers_of(level, ev.id), "observe", ev) or error
        if error is not None:
            raise error

    def _level_observers_of(self, level: str, event_id: str) -> list[Observer]:
        """The observers of every ``level`` line that do not read ``event_id`` already (asked per problem line)."""
        key = (level, event_id)
        found = self._by_level.get(key)
        if found is None:
            found = self._by_level[key] = [o for o in self.level_observers
                                           if level in o.levels and event_id not in o.events]
        return found

    def deliver_unmatched(self, rec: Any) -> None:
        """A record no template and no catalog entry knows: an upstream warning or error is still handed to
        the observers of every problem line (``Observer.levels``), as ``UNKNOWN_EVENT``, so it is named."""
        if rec.level in PROBLEM_LEVELS and rec.kind in UNMATCHED_KINDS and self.level_observers:
            self.deliver(Event(UNKNOWN_EVENT, rec, {}))

    def deliver_metrics(self, rows: MetricRows) -> None:
        """Hand a batch of stats / SpecDecoding rows on: to the run's interval series, the observers of the
        rows, and as Events to any observer of those events (all of them, then re-raise the first error)."""
        for origin in rows.origins:
            if origin is not self.last_origin:
                self.last_origin = origin
                self.run.saw_origin(origin)
        self.run.series.observe_rows(rows)
        error = _to_all(self.metric_observers, "observe_metrics", rows)
        if self.observers_of("V_STATS") or self.observers_of("V_SPEC"):
            for ev in metric_events(rows):
                error = _to_all(self.observers_of(ev.id), "observe", ev) or error
        if error is not None:
            raise error

    def deliver_rows(self, rows: LookupRows) -> None:
        """Hand a run of lookup rows to their observers (all of them, then re-raise the first error)."""
        error = _to_all(self.row_observers, "observe_rows", rows)
        if error is not None:
            raise error

    def finish(self) -> DeploymentResult:
        self._finish_one(self.builder)
        findings: list[Finding] = []
        explained: set[str] = set(self._deselected_events())
        claimed: list[str] = []
        for rule in sorted(self.rules, key=lambda r: r.late):  # late rules last, in registry order
            if rule.late:
                self.run.explained, self.run.claimed = frozenset(explained), tuple(claimed)
            severity = self.severity_overrides.get(rule.code)
            mine = self._finish_one(rule)
            if mine:
                explained.update(rule.events if rule.explains is None else rule.explains)
                claimed.extend(rule.claims)
            findings.extend(replace(f, deployment=self.id, severity=severity or f.severity) for f in mine)
        self._finish_one(self.metrics)
        for obs in self.extra:
            self._finish_one(obs)
        notes = [f"{s}: store/retrieve line counts are those of the whole merged stream"
                 for s in self.run.shared_count_sources]
        if self.run.series.untracked_rows:
            notes.append(f"{self.run.series.untracked_rows:,} stats/SpecDecoding line(s) of engines past the first "
                         f"{MAX_ENGINES:,} were counted but not kept in the interval series")
        return DeploymentResult(
            id=self.id, sources=list(self.run.sources), context=self.ctx, findings=findings,
            timeline=self.metrics.timeline(findings, self.ctx) if self.timeline else {},
            rules_failed=[{"rule": k, "error": v} for k, v in self.failed.items()], notes=notes,
            metrics=self.metrics if self.keep_metrics else None, counts=run_counts(self.run),
        )

    def _deselected_events(self) -> frozenset[str]:
        """The templates deselected rules read: a user who ignores a rule (``--ignore KV001``) chose not
        to hear about its lines, so the accounting of unexplained lines does not list them either."""
        from specdiag.analyzers.base import all_rules

        running = {r.code for r in self.rules}
        return frozenset(e for code, cls in all_rules().items() if code not in running for e in cls.events)

    def _finish_one(self, obs: Observer) -> list[Finding]:
        try:
            return list(obs.finish(self.ctx, self.run) or [])
        except Exception as e:  # noqa: BLE001 - a failing rule is reported, the others still finish
            self.failed.setdefault(getattr(obs, "code", None) or type(obs).__name__, error_text(e))
            return []


#: observer line-up (each observer's type and template ids) -> template id -> indices of its observers
_PLANS: dict[tuple, dict[str, tuple[int, ...]]] = {}


def dispatch_plan(observers: list[Observer]) -> dict[str, tuple[int, ...]]:
    """Which of ``observers`` read each template id. Every deployment of an analysis has the same line-up
    of observer types, so the plan is made once and shared (the lists of observers themselves are per run)."""
    key = tuple((type(obs), obs.events) for obs in observers)
    plan = _PLANS.get(key)
    if plan is None:
        built: dict[str, list[int]] = {}
        for i, obs in enumerate(observers):
            for eid in obs.events:
                built.setdefault(eid, []).append(i)
        plan = {eid: tuple(ix) for eid, ix in built.items()}
        if len(_PLANS) < 64:  # a handful of line-ups per process; never an unbounded cache
            _PLANS[key] = plan
    return plan


def _to_all(observers: Iterable[Observer], method: str, arg: object) -> Exception | None:
    """Call ``method(arg)`` on every observer, even after one raised; the first error, for the caller."""
    error: Exception | None = None
    for obs in observers:
        try:
            getattr(obs, method)(arg)
        except Exception as e:  # noqa: BLE001 - returned, after the other observers saw it
            error = error or e
    return error


@dataclass
class StreamTally:
    """Per-run bookkeeping that is not a deployment's: unrecognised records and their shapes."""

    unrecognized: Counter = field(default_factory=Counter)
    unknown_shapes: Counter = field(default_factory=Counter)
    #: shape → its first real line (what a reader is shown: a real line, not the digits-as-N key)
    examples: dict[str, str] = field(default_factory=dict)
    #: what reached the rules as usable events: records a template matched, lookup and metric rows, and the
    #: lines ingest only counted. 0 with lines recognised: every record was cut or no template knew it
    analysed: int = 0

    def merge(self, other: StreamTally) -> None:
        self.unrecognized.update(other.unrecognized)
        self.analysed += other.analysed
        for k, v in other.unknown_shapes.items():
            if k in self.unknown_shapes or len(self.unknown_shapes) < 500:
                self.unknown_shapes[k] += v
                self.examples.setdefault(k, other.examples.get(k, k))

    def top_warnings(self, n: int) -> dict[str, int]:
        return {self.examples.get(k, k): c for k, c in self.unknown_shapes.most_common(n)}


class InputCounts:
    """One input's counted lines (``HotTally``), handed to the runs they belong to.

    Ingest counts a block's hot lines before its records reach a deployment, so a run that ends inside
    an input takes the counts of the ``CountMark`` ingest put before its successor's marker line (the
    block was cut there); the rest goes, at the input's end, to the run then current. Kept per deployment
    of the input: what it was handed so far. First rows come per span between marks and go to the run
    whose span it was."""

    def __init__(self, hot: Any) -> None:
        self.hot = hot
        self.mark: CountMark | None = None
        self.handed: dict[str, dict[str, int]] = {}
        self.first: dict[str, Any] = {}
        self.named_first: dict[str | None, dict[str, Any]] = {}

    def note(self, mark: CountMark) -> None:
        """A mark ingest yielded: the counts before its line; the first rows of the span it closes."""
        self.mark = mark
        self._keep_firsts(mark.first, mark.named_first)

    def _keep_firsts(self, first: dict, named_first: dict) -> None:
        for tid, rec in first.items():
            self.first.setdefault(tid, rec)
        for key, recs in named_first.items():
            kept = self.named_first.setdefault(key, {})
            for tid, rec in recs.items():
                kept.setdefault(tid, rec)

    def _totals(self, dep_id: str, counts: dict[str, int], named: dict[str | None, dict[str, int]]) -> dict[str, int]:
        """The stream's unnamed counts plus the lines whose wrapper named this deployment."""
        out = dict(counts)
        for key, more in named.items():
            if key is None or deployment_key_of(key) == dep_id:
                for tid, n in more.items():
                    out[tid] = out.get(tid, 0) + n
        return out

    def _exact(self, line: int | None) -> bool:
        return line is not None and self.mark is not None and self.mark.line == line

    def grew(self, dep_id: str, line: int) -> bool:
        """Whether stores, retrieves or lookups (``COUNTED``) were counted for ``dep_id`` since its last
        hand-over, up to ``line``: the server served. Access lines the scanner counts are not among them, as
        the per-line stages count them nowhere (one between the rows of a start's banner is another
        process's, and must not split that start into two runs)."""
        src = self.mark if self._exact(line) else self.hot
        handed = self.handed.get(dep_id, {})
        return any(n != handed.get(tid, 0) for tid, n in self._totals(dep_id, src.counts, src.named).items()
                   if tid in COUNTED)

    def take(self, dep_id: str, line: int | None) -> tuple[dict[str, int], dict[str, Event], bool]:
        """The counts and first rows of ``dep_id``'s run that ends before ``line`` (None: at the input's
        end), less what was handed before; and whether they are exact (False: the boundary's mark was
        missing, the counts of the block holding ``line`` go to the run that ends)."""
        exact = self._exact(line)
        src = self.mark if exact else self.hot
        if not exact:  # the current span's first rows belong to this run too
            self._keep_firsts(self.hot.first, self.hot.named_first)
            self.hot.first, self.hot.named_first = {}, {}
        totals = self._totals(dep_id, src.counts, src.named)
        handed = self.handed.get(dep_id, {})
        self.handed[dep_id] = totals
        delta = {tid: n - handed.get(tid, 0) for tid, n in totals.items() if n != handed.get(tid, 0)}
        firsts: dict[str, Any] = {}
        for key, recs in self.named_first.items():
            if key is None or deployment_key_of(key) == dep_id:
                firsts.update(recs)
        firsts.update(self.first)
        self.first, self.named_first = {}, {}
        return delta, {tid: Event(tid, rec, None, template(tid)) for tid, rec in firsts.items()}, exact or line is None


class Deployment:
    """One server while reading: its runs (``specdiag.runs``), each with its own observers.

    Events, lookup rows and metric rows go to the current run's :class:`DeploymentRun`; a start marker
    that begins a new run (``runs.starts_new_run``) finishes the current run's observers, with the
    counted lines up to the marker, and starts fresh ones. ``finish`` returns the deployment's result:
    every run's findings (tagged with their run when there are several), the last run's context, the runs
    and what changed between them."""

    def __init__(self, dep_id: str, make: Callable[[str], DeploymentRun]) -> None:
        self.id = dep_id
        self._make = make
        self.current = make(dep_id)
        self.done: list[tuple[DeploymentResult, RunInfo]] = []
        self.info = RunInfo(1)
        self.st = RunStart()
        self.notes: list[str] = []
        self._src: str | None = None
        self._lookback: LookBack | None = None
        self._counts: InputCounts | None = None
        self._from_line = 1
        self._n = 0  # inputs begun: a line's place is (input number, line)
        self._span = _Span()
        self._end: float | None = None  # the run's latest time in the inputs it read before the current one

    @property
    def run(self) -> RunState:
        return self.current.run

    @property
    def last_origin(self) -> object:
        return self.current.last_origin

    @last_origin.setter
    def last_origin(self, origin: object) -> None:
        self.current.last_origin = origin

    def begin_source(self, name: str, lookback: LookBack | None, counts: InputCounts) -> None:
        if self._span.t1 is not None:
            self._end = max(t for t in (self._end, self._span.times()[1], float("-inf")) if t is not None)
        self._src, self._lookback, self._counts, self._from_line = name, lookback, counts, 1
        self._n += 1
        self.current.run.begin_source(name, lookback)

    def end_source(self, year: int | None, lines: int, input_counts: InputCounts) -> None:
        """The input ends: the rest of its counted lines go to the current run (also when no line of it
        reached this deployment: an empty input's default deployment)."""
        counts, firsts, _ = input_counts.take(self.id, None)
        self.current.run.add_counts(counts, firsts)
        self.current.run.end_source(year, max(0, lines - self._from_line + 1))
        self._src, self._counts = None, None

    def _seen(self, path: str, lo: int, hi: int, item: Any, served: bool) -> None:
        """Lines ``lo..hi`` of the current input reached the run (``item``: a Record or MetricRows that
        has times, else None)."""
        st = self.st
        st.held = True
        st.inputs.add(self._src)
        if served:
            st.served_in.add(self._src)
        self._span.see(path, (self._n, lo), (self._n, hi), item)

    def deliver(self, ev: Event) -> None:
        """To the current run, after a start marker's run rule. A line the scanner would only have counted
        (a complete store or retrieve) or handed on as a row (a lookup: no time) is seen as the scanner's
        path sees it, so the runs' lines and times are the same whichever path read the input."""
        tid, rec = ev.id, ev.rec
        if rec.level not in PROBLEM_LEVELS and (tid == CATALOG_EVENT or self.unread(tid)):
            # an INFO/DEBUG message only the catalog knows (or one nothing reads) says nothing of where a run
            # starts or ends: the logo vLLM prints as one call spans several lines before the version line
            self.current.deliver(ev)
            return
        if tid in START_MARKERS:
            self._at_marker(ev)
        if tid == "S1" or (tid == "R4" and full_retrieve(ev)):
            self.st.held = True
            self.st.inputs.add(self._src)
            self.st.served_in.add(self._src)
        else:
            self._seen(rec.path, rec.line, rec.line, None if tid == "L1" else rec, tid in COUNTED or tid in _SERVING)
        self.current.deliver(ev)

    def deliver_unmatched(self, rec: Any) -> None:
        self.current.deliver_unmatched(rec)

    def wants(self, event_id: str) -> bool:
        """Whether an observer reads ``event_id`` events (the runs share one set of observers)."""
        return bool(self.current.observers_of(event_id))

    def unread(self, event_id: str) -> bool:
        """Whether events of this template are read by nothing: no observer of this analysis, and neither
        the runs' counts, series, boundaries nor serving state. At INFO/DEBUG such a record only counts as
        recognised, as a message only the catalog knows does (``Storing KV cache for …`` when no rule
        reads stores per request), so the prefilter may count its place's records (``engine._learn_quiet``)."""
        return event_id not in RUN_EVENTS and not self.current.observers_of(event_id)

    def read_events(self) -> frozenset[str]:
        """The template ids something reads in this analysis (``unread`` is False for exactly these)."""
        return RUN_EVENTS | self.current.read_events()

    def note_record(self, rec: Any) -> None:
        self.current.note_record(rec)

    def deliver_rows(self, rows: LookupRows) -> None:
        self._seen(rows.path, rows.line[rows.lo], rows.line[rows.hi - 1], None, True)
        self.current.deliver_rows(rows)

    def deliver_metrics(self, rows: MetricRows) -> None:
        self._seen(rows.path, rows.lines[0], rows.lines[-1], rows, True)
        self.current.deliver_metrics(rows)

    def _at_marker(self, ev: Event) -> None:
        """A start marker: a new run when the run rule says so; noted in the run either way."""
        rec = ev.rec
        t = _time_of(rec)
        proc = rec.origin.key if rec.origin.pid is not None else None
        if self._counts is not None and self._counts.grew(self.id, rec.line):
            self.st.served_in.add(self._src)  # stores, retrieves or lookups were counted since the last hand-over
        if starts_new_run(self.st, ev.id, proc, t, self._src or "", self._times()):
            self._new_run(rec)
        self.st.note_marker(ev.id, proc or rec.origin.key, self._src or "")
        if self.info.marker is None:
            self.info.marker = ev.id

    def _times(self) -> tuple[float | None, float | None, float | None]:
        """The run's first time, its last time in the current input (None: it has not fed the run) and its
        last time in the inputs before (all of its inputs, when the current one has not fed it): what
        ``runs.starts_new_run`` compares a start line's time with."""
        first, last = self._span.times()
        if self._span.last is not None and self._span.last[0][0] == self._n:
            return first, last, self._end
        ends = [t for t in (self._end, last) if t is not None]
        return first, None, max(ends) if ends else None

    def _new_run(self, rec: Any) -> None:
        """End the current run before ``rec`` (with the counted lines up to it) and start a fresh one."""
        if self._counts is not None:
            counts, firsts, exact = self._counts.take(self.id, rec.line)
            self.current.run.add_counts(counts, firsts)
            if not exact and counts:  # lines counted since the last hand-over may be either run's
                self.notes.append(f"{rec.path}:{rec.line}: the counted store/retrieve/lookup lines of the block "
                                  f"holding this run start went to run {len(self.done) + 1}, the run before it")
        self.current.run.end_source(rec.year, max(0, rec.line - self._from_line))
        self._close_run()
        self.current = self._make(self.id)
        self.info, self.st = RunInfo(len(self.done) + 1), RunStart()
        self.current.run.begin_source(self._src or rec.path, self._lookback)
        self._from_line, self._span, self._end = rec.line, _Span(), None

    def _close_run(self) -> None:
        result = self.current.finish()
        info = self.info
        info.first_line, info.last_line = self._span.lines()
        info.start, info.end = self._span.times()
        info.versions = {"vllm": result.context.vllm_version, "lmcache": result.context.lmcache_version}
        self.done.append((result, info))

    def finish(self) -> DeploymentResult:
        """Every run's result as the deployment's: findings tagged by run when there are several."""
        self._close_run()
        if len(self.done) == 1:
            result, info = self.done[0]
            return replace(result, runs=[info], notes=[*result.notes, *self.notes])
        findings, failed, notes, sources = [], [], [], []
        counts: dict[str, int | None] = {}
        for result, info in self.done:
            counts = add_counts(counts, result.counts)
            findings += [replace(f, run=info.index) for f in result.findings]
            failed += [{**f, "run": str(info.index)} for f in result.rules_failed]
            notes += [f"run {info.index}: {n}" for n in result.notes]
            sources += [s for s in result.sources if s not in sources]
        last = self.done[-1][0]
        return replace(last, sources=sources, findings=findings, rules_failed=failed, notes=[*notes, *self.notes],
                       timeline=_merged_timeline([r.timeline for r, _ in self.done]),
                       runs=[info for _, info in self.done],
                       run_changes=run_changes([r.context.to_dict() for r, _ in self.done]), counts=counts)


#: templates whose events only a serving server prints (the access log's 5xx lines)
_SERVING = frozenset({"U5XX"})
#: what the runs read whatever the observers: counted lines, series rows, run boundaries, serving state
RUN_EVENTS = COUNTED | RunState.SERIES_EVENTS | frozenset(START_MARKERS) | _SERVING | {"L1", CATALOG_EVENT,
                                                                                       UNKNOWN_EVENT}


class _Span:
    """The first and last line that reached a run, and its first and last times, by place in the inputs
    (``(input number, line)``), not by arrival: a batch of metric rows may reach the run before lookup rows
    of earlier lines, so lines and times are the same whichever scan path read the input. Times are
    computed only when asked (``times``), of two items kept."""

    def __init__(self) -> None:
        self.first: tuple[tuple[int, int], str] | None = None
        self.last: tuple[tuple[int, int], str] | None = None
        self.t0: tuple[tuple[int, int], Any] | None = None
        self.t1: tuple[tuple[int, int], Any] | None = None

    def see(self, path: str, lo: tuple[int, int], hi: tuple[int, int], item: Any) -> None:
        if self.first is None or lo < self.first[0]:
            self.first = (lo, path)
        if self.last is None or hi > self.last[0]:
            self.last = (hi, path)
        if item is not None:
            if self.t0 is None or lo < self.t0[0]:
                self.t0 = (lo, item)
            if self.t1 is None or hi > self.t1[0]:
                self.t1 = (hi, item)

    def lines(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        first, last = self.first, self.last
        return (({"path": first[1], "line": first[0][1]} if first else None),
                ({"path": last[1], "line": last[0][1]} if last else None))

    def times(self) -> tuple[float | None, float | None]:
        """The times of the first and last lines, earlier first: lines pasted out of time order (two processes' lines
        one after the other) must not give a run that ends before it starts."""
        t0 = _time_of(self.t0[1], 0) if self.t0 else None
        t1 = _time_of(self.t1[1], -1) if self.t1 else None
        return (t1, t0) if t0 is not None and t1 is not None and t1 < t0 else (t0, t1)


def _time_of(item: Any, k: int = -1) -> float | None:
    """The log time of a Record, or of row ``k`` of a MetricRows batch."""
    if isinstance(item, MetricRows):
        times = item.times()
        return times[k] if times else None
    return rec_time(item)


def _merged_timeline(timelines: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' timelines as one: each series' points in run order, every marker."""
    out: dict[str, Any] = {"series": {}, "markers": []}
    for tl in timelines:
        for name, series in tl.get("series", {}).items():
            if name in out["series"]:
                out["series"][name] = {**series, "points": out["series"][name]["points"] + series["points"]}
            else:
                out["series"][name] = dict(series)
        out["markers"] += tl.get("markers", [])
        if tl.get("markers_dropped"):
            out["markers_dropped"] = out.get("markers_dropped", 0) + tl["markers_dropped"]
    out["markers"].sort(key=lambda m: m["t"])
    return out
