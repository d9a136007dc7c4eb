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
from specdiag.events import CATALOG_KINDS, UNKNOWN_EVENT, Event
from specdiag.findings import Finding
from specdiag.ingest import Source, expand_inputs
from specdiag.ingest.hot import LookupRows, MetricRows
from specdiag.ingest.remote import expand_remote, is_url
from specdiag.metrics.collector import MetricsCollector
from specdiag.observe import COUNTED, METRIC_ROW_EVENTS, PROBLEM_LEVELS, SERIES_CAP, Observer, RunState
from specdiag.sanitize import error_text

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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "sources": list(self.sources), "context": self.context.to_dict()}
        if self.notes:
            out["notes"] = list(self.notes)
        return out


class DeploymentRun:
    """One deployment's observers (context builder, rules, metrics) and its run state, while reading."""

    def __init__(self, dep_id: str, rule_factory: Callable[[], list], user_cfg: dict | None,
                 user_cfg_path: str | None, severity_overrides: dict[str, str], *, metrics_cap: int = SERIES_CAP,
                 keep_metrics: bool = False, extra: list[Observer] | None = None) -> None:
        self.id = dep_id
        self.run = RunState(dep_id, series_cap=metrics_cap)
        self.ctx = Context()
        self.builder = ContextBuilder(self.ctx, user_cfg, user_cfg_path)
        self.rules = rule_factory()
        self.metrics = MetricsCollector()
        self.keep_metrics = keep_metrics
        self.extra = list(extra or [])
        self.severity_overrides = severity_overrides
        self.failed: dict[str, str] = {}
        self.dispatch: dict[str, list[Observer]] = {}
        self.last_origin: object = None
        for obs in self.observers:
            obs.start(self.run)
            for eid in obs.events:
                self.dispatch.setdefault(eid, []).append(obs)
        #: observers of the scanner's lookup columns (``tables = {"lookups"}``)
        self.row_observers = [obs for obs in self.observers if "lookups" in obs.tables]
        #: observers of the stats / SpecDecoding rows (``tables = {"metrics"}``)
        self.metric_observers = [obs for obs in self.observers if "metrics" in obs.tables]
        #: observers of every warning and error, whatever its template (``Observer.levels``)
        self.level_observers = [obs for obs in self.observers if obs.levels]

    @property
    def observers(self) -> list[Observer]:
        return [self.builder, *self.rules, self.metrics, *self.extra]

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
        if ev.id in RunState.SERIES_EVENTS:  # read by the Python path: a batch of one row
            rows = MetricRows.from_event(ev)
            self.run.series.observe_rows(rows)
            if ev.id in METRIC_ROW_EVENTS:
                error = _to_all(self.metric_observers, "observe_metrics", rows)
        elif ev.id in COUNTED:
            self.run.count_event(ev)
        error = _to_all(self.dispatch.get(ev.id, ()), "observe", ev) or error
        if ev.id == "L1" and self.row_observers:  # a lookup the Python path read: to the row observers as one row
            error = _to_all(self.row_observers, "observe_rows", LookupRows.from_event(ev)) or error
        level = ev.rec.level
        if level in PROBLEM_LEVELS and self.level_observers:
            error = _to_all([o for o in self.level_observers if level in o.levels and ev.id not in o.events],
                            "observe", ev) or error
        if error is not None:
            raise error

    def deliver_unmatched(self, rec: Any) -> None:
        """A record no template and no catalog entry knows: an upstream warning or error is still handed to
        the observers of every problem line (``Observer.levels``), as ``UNKNOWN_EVENT``, so it is named."""
        if rec.level in PROBLEM_LEVELS and rec.kind in CATALOG_KINDS and self.level_observers:
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
        if self.dispatch.get("V_STATS") or self.dispatch.get("V_SPEC"):
            for ev in rows.events():
                error = _to_all(self.dispatch.get(ev.id, ()), "observe", ev) or error
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
        for rule in sorted(self.rules, key=lambda r: r.late):  # late rules last, in registry order
            if rule.late:
                self.run.explained = frozenset(explained)
            severity = self.severity_overrides.get(rule.code)
            mine = self._finish_one(rule)
            if mine:
                explained.update(rule.events)
            findings.extend(replace(f, deployment=self.id, severity=severity or f.severity) for f in mine)
        self._finish_one(self.metrics)
        for obs in self.extra:
            self._finish_one(obs)
        notes = [f"{s}: store/retrieve line counts are those of the whole merged stream"
                 for s in self.run.shared_count_sources]
        return DeploymentResult(
            id=self.id, sources=list(self.run.sources), context=self.ctx, findings=findings,
            timeline=self.metrics.timeline(findings, self.ctx),
            rules_failed=[{"rule": k, "error": v} for k, v in self.failed.items()], notes=notes,
            metrics=self.metrics if self.keep_metrics else None,
        )

    def _deselected_events(self) -> frozenset[str]:
        """The templates only deselected rules read: a user who ignores a rule (``--ignore KV001``) chose not
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
