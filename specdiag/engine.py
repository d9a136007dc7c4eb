"""The pipeline: inputs → records → events → observers (context, rules, metrics) → findings → Report.

Everything streams: memory grows with the distinct requests still tracked and the findings, not with the
size of the logs. Inputs are grouped into deployments (``specdiag.deployments``); each deployment has its
own observers. Input groups are independent, so with ``jobs > 1`` they are analysed in parallel processes
and their results merged here.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specdiag.analyzers.base import Rule, all_rules
from specdiag.context import load_lmcache_yaml
from specdiag.deployments import (
    Deployment,
    DeploymentResult,
    DeploymentRun,
    InputCounts,
    InputGroup,
    StreamTally,
    deployment_for,
    deployment_key,
    deployment_key_of,
    deployment_limit,
    group_inputs,
    sources_of,
)
from specdiag.events import (
    CATALOG_EVENT,
    default_matcher,
    message_shape,
    nothing_printed_at,
    recognised_anywhere_at,
    recognised_fits_at,
)
from specdiag.findings import SEVERITIES
from specdiag.ingest import InputError, Source, iter_records, scan
from specdiag.ingest.blocks import NamedBlock
from specdiag.ingest.hot import HotWindow, LookupRows, MetricRows
from specdiag.ingest.marks import CountMark
from specdiag.ingest.prefilter import QUIET_LEVELS, QuietOrigin, QuietPlaces
from specdiag.ingest.sources import BARE_PASTE_MAX
from specdiag.observe import COUNTED, SERIES_CAP
from specdiag.report.model import Report
from specdiag.ruledocs import rule_table
from specdiag.sanitize import error_text
from specdiag.workers import keep_freed_memory

if TYPE_CHECKING:  # pragma: no cover - the filter module is imported only where a filter is given
    from specdiag.ingest.linefilter import LineFilter

#: scan threads beside the reading one: each holds a block in flight (1 MiB), so a bound keeps memory flat
MAX_SCAN_THREADS = 64


class ConfigError(Exception):
    """Bad options or configuration: exit code 2."""


@dataclass(frozen=True)
class AnalyzeOptions:
    """Everything one analysis needs, in one picklable object (it travels to worker processes)."""

    paths: tuple[str, ...]
    lmcache_config: str | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    severity_overrides: dict[str, str] = field(default_factory=dict)
    stdin_name: str = "-"
    #: parallel worker processes across input groups (1: in this process; 0: one per core)
    jobs: int = 1
    #: threads scanning the blocks of one input beside the reading thread (0: none; None: one when ``jobs``
    #: leaves a core to spare, :func:`scan_threads`; ``ingest/ahead.py``)
    scan_threads: int | None = None
    #: run the rules (``specdiag metrics`` needs only the context and the series)
    rules: bool = True
    #: intervals kept per engine by the metrics collector; ``keep_metrics`` returns the collector itself
    metrics_cap: int = SERIES_CAP
    keep_metrics: bool = False
    #: build each deployment's timeline (the terminal and HTML reports draw it; JSON and the CI formats do not,
    #: and on a log of many engines its points took more memory than the series they come from)
    timeline: bool = True
    #: more observers per deployment: factories called with the deployment id (picklable for ``-j``)
    observers: tuple[Callable[[str], Any], ...] = ()
    #: ``--since``/``--until``/``--request``/``--rank``: lines it excludes are never parsed (``linefilter.py``)
    line_filter: LineFilter | None = None
    #: read as a paste of message texts without their headers (set by :func:`analyze_group` itself, when a
    #: small input had nothing it recognised: ``BARE_PASTE_MAX``), with what standard input gave the first time
    bare_text: bool = False
    stdin_replay: bytes | None = None


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[type[Rule]]:
    """Rules whose code matches a ``select`` entry (code or prefix; default all) and no ``ignore`` entry."""
    rules = all_rules()
    sel = [s.upper() for s in select] if select else None
    ign = [s.upper() for s in ignore] if ignore else []
    known_prefixes = {code[:n] for code in rules for n in range(1, len(code) + 1)}
    for entry in (sel or []) + ign:
        if entry not in known_prefixes and entry != "ALL":
            raise ConfigError(f"unknown rule code or prefix {entry!r} (see 'specdiag rules')")
    out = []
    for code, cls in rules.items():
        if sel is not None and "ALL" not in sel and not any(code.startswith(s) for s in sel):
            continue
        if any(code.startswith(s) for s in ign):
            continue
        out.append(cls)
    return out


def analyze(paths: list[str], *, progress: Callable[[str, int], None] | None = None, **options: Any) -> Report:
    """Analyse the inputs (keyword options as in :class:`AnalyzeOptions`).

    Raises InputError (I/O) or ConfigError (options) — both exit code 2.
    """
    for key in ("select", "ignore"):
        if options.get(key) is not None:
            options[key] = tuple(options[key])
    return run_analysis(AnalyzeOptions(paths=tuple(paths), **options), progress=progress)


def run_analysis(opts: AnalyzeOptions, progress: Callable[[str, int], None] | None = None) -> Report:
    started = time.perf_counter()
    _validate(opts)
    groups = group_inputs(opts.paths)
    jobs = opts.jobs or os.cpu_count() or 1
    if jobs > 1 and len(groups) > 1 and "-" not in opts.paths:
        parts = _analyze_in_pool(groups, opts, min(jobs, len(groups)))
    else:
        parts = [analyze_group(g, opts, progress) for g in groups]
    return _assemble(parts, opts, time.perf_counter() - started)


def _validate(opts: AnalyzeOptions) -> None:
    if opts.lmcache_config:
        try:
            load_lmcache_yaml(opts.lmcache_config)
        except ValueError as e:
            raise ConfigError(str(e)) from e
    for code, sev in opts.severity_overrides.items():
        if sev not in SEVERITIES:
            raise ConfigError(f"severity for {code} must be one of {', '.join(SEVERITIES)}, not {sev!r}")
    select_rules(opts.select, opts.ignore)
    if opts.scan_threads is not None and not 0 <= opts.scan_threads <= MAX_SCAN_THREADS:
        raise ConfigError(f"scan_threads must be 0 to {MAX_SCAN_THREADS}, not {opts.scan_threads}")


@dataclass
class GroupResult:
    """One input group's share of the report (mergeable; picklable)."""

    deployments: list[DeploymentResult]
    inputs: list[dict[str, Any]]
    tally: StreamTally


def deployment_runs(opts: AnalyzeOptions) -> Callable[[str], DeploymentRun]:
    """A factory of fresh per-deployment observer sets for these options (one per deployment id)."""
    user_cfg = load_lmcache_yaml(opts.lmcache_config) if opts.lmcache_config else None
    rule_classes = select_rules(opts.select, opts.ignore) if opts.rules else []

    def rules() -> list[Rule]:
        return [cls(opts.rule_options.get(cls.code)) for cls in rule_classes]

    def make(dep_id: str) -> DeploymentRun:
        return DeploymentRun(dep_id, rules, user_cfg, opts.lmcache_config, dict(opts.severity_overrides),
                             metrics_cap=opts.metrics_cap, keep_metrics=opts.keep_metrics, timeline=opts.timeline,
                             extra=[factory(dep_id) for factory in opts.observers])

    return make


def analyze_group(group: InputGroup, opts: AnalyzeOptions,
                  progress: Callable[[str, int], None] | None = None) -> GroupResult:
    """Read one input group and run every deployment found in it to its findings."""
    make = deployment_runs(opts)
    runs: dict[str, Deployment] = {}

    def run_for(dep_id: str) -> Deployment | None:
        return deployment_for(runs, dep_id, make)

    tally = StreamTally()
    sources = sources_of(group, opts.stdin_name)
    for src in sources if opts.stdin_replay is not None else ():
        if src.kept() is not None:  # standard input, exhausted by the first reading
            src.replay(opts.stdin_replay)
    if opts.line_filter is not None and opts.line_filter.active:
        from specdiag.ingest.linefilter import filtered_source

        sources = [filtered_source(s, opts.line_filter.fresh()) for s in sources]
    processes = scan_processes(opts)
    if not scan.compiled_in_use():  # the Python scanner's block-sized buffers, reused (specdiag/workers.py)
        keep_freed_memory()
    for src in sources:
        _read_source(src, group.id, run_for, tally, progress, scan_threads(opts), processes, opts.bare_text)
    if not opts.bare_text and _bare_paste(sources):
        replay = next((k for s in sources if (k := s.kept()) is not None), None)
        return analyze_group(group, replace(opts, bare_text=True, stdin_replay=replay), progress)
    deployments = [r.finish() for r in runs.values()] or [Deployment(group.id, make).finish()]
    return GroupResult(deployments, [s.stats.to_dict() for s in sources], tally)


def _bare_paste(sources: list[Source]) -> bool:
    """Whether the group is a small paste of which no line was recognised (``BARE_PASTE_MAX``), every input one
    that can be read again (a file, or standard input kept as read)."""
    return bool(sources) and all(s.stats.recognized == 0 and s.stats.lines and s.stats.bytes_read <= BARE_PASTE_MAX
                                 and s.rereadable() and not s.stats.errors for s in sources)


def scan_threads(opts: AnalyzeOptions) -> int:
    """Threads that scan the blocks of one input beside the reading thread: as asked, else one when ``jobs``
    leaves a core to spare (ingest uses them only where the compiled scanner runs, ``ingest/ahead.py``).
    One is enough: with the scan on its own core the reading thread's Python is the longer of the two
    (``docs/benchmark.md``). A group analysed in a pool worker has ``jobs == 1``: its cores are the pool's."""
    if opts.scan_threads is not None:
        return opts.scan_threads
    jobs = opts.jobs or os.cpu_count() or 1
    return 1 if jobs > 1 else 0


def scan_processes(opts: AnalyzeOptions) -> int:
    """Worker processes the block scans of one input may use: one per job (ingest uses them only where
    the Python scanner runs, ``ingest/ahead.py``). A group analysed in a pool worker has ``jobs == 1``: no
    pool inside a pool."""
    jobs = opts.jobs or os.cpu_count() or 1
    return jobs if jobs > 1 else 0


def _read_source(src: Source, default_id: str, run_for: Callable[[str], Deployment | None], tally: StreamTally,
                 progress: Callable[[str, int], None] | None, scan_threads: int = 0, processes: int = 0,
                 bare: bool = False) -> None:
    """Stream one input's records (and lookup rows) to the deployment each belongs to; with
    ``scan_threads`` the blocks are scanned on that many threads while this one reads them, with
    ``processes`` on that many worker processes (:func:`scan_processes`). Ingest's count marks go to the
    input's :class:`InputCounts`, which splits the counted lines between the runs."""
    SourceLoop(src, default_id, run_for, tally).run(progress, scan_threads, processes, bare)


class SourceLoop:
    """One input being read: its look-back window, its counted lines and the deployments it fed so far.

    Kept as an object (not locals of one function) so that a reader of a growing input
    (:class:`StreamAnalysis`) can ask for the findings so far while the input is still being read."""

    def __init__(self, src: Source, default_id: str, run_for: Callable[[str], Deployment | None],
                 tally: StreamTally) -> None:
        self.src, self.default_id, self.run_for, self.tally = src, default_id, run_for, tally
        self.window = HotWindow(src.display)
        self.counts = InputCounts(src.stats.hot)
        self.fed: dict[str, Deployment] = {}
        self.text_events = 0
        self.quiet: QuietPlaces | None = None  # the places the prefilter may count, learnt while reading
        self.read: frozenset[str] | None = None  # the templates something of this analysis reads
        self.beyond: str | None = None  # the deployment beyond the group's limit the items now belong to

    def run(self, progress: Callable[[str, int], None] | None, scan_threads: int = 0, processes: int = 0,
            bare: bool = False) -> None:
        src = self.src
        matcher = default_matcher()
        current: Deployment | None = None
        reported = 0
        self.quiet = quiet_places(matcher)
        items = iter_records(src, hot=True, window=self.window, scan_threads=scan_threads,
                             scan_processes=processes, marks=True, quiet=self.quiet, bare=bare)
        while True:
            try:
                item = next(items, None)
            except InputError:  # the input itself cannot be read: the contract's exit 2
                raise
            except Exception as e:  # noqa: BLE001 - last line of defence: this input stops, the others go on
                _note_skipped(src, None, e, "reading stopped")
                break
            if item is None:
                break
            if type(item) is CountMark:
                self.counts.note(item)
                self.quiet.forget()  # a run may start here: its fingerprint has seen no place yet
                continue
            before = current
            current = self._deployment_of(item, current)
            if current is not before:
                self.quiet.forget()
            if current is None:  # a deployment beyond the group's limit (``deployments.MAX_DEPLOYMENTS``)
                self._beyond_limit(item)
            else:
                self._hand(item, current, matcher)
            if progress is not None and src.stats.bytes_read != reported:  # once per block read
                reported = src.stats.bytes_read
                progress(src.display, reported)
        self.end()

    def _deployment_of(self, item: Any, current: Deployment | None) -> Deployment | None:
        """The deployment ``item`` belongs to (scanned rows carry no wrapper: the current one's); begun.
        None: one beyond the group's limit, as are the unnamed items that follow it."""
        kind = type(item)
        if kind is NamedBlock:  # the rows that follow carry no wrapper: they are of the deployment it names
            key = deployment_key_of(item.deployment)
        else:
            key = None if kind is LookupRows or kind is MetricRows or kind is QuietOrigin else deployment_key(item)
        if key is not None and (current is None or current.id != key):
            current = self.run_for(key)
            self.beyond = key if current is None else None
        elif current is None and self.beyond is None:
            current = self.run_for(self.default_id)
        if current is None:
            return None
        if current.id not in self.fed:
            self.fed[current.id] = current
            current.begin_source(self.src.display, self.window.find_back, self.counts)
            self._templates_read(current)
        return current

    def _templates_read(self, dep: Deployment) -> None:
        """The prefilter may count a record only a template that nothing of this analysis reads would match
        (``Deployment.unread``): once the first deployment says which those are, only the others' words and
        needles keep a record from being quiet. Every deployment of a read shares one set of observers; one
        that read more would make every place unlearnt again."""
        read = dep.read_events()
        if self.read is not None and read <= self.read:
            return
        self.read = read if self.read is None else self.read | read
        self.quiet.use_templates(quiet_places(default_matcher(), self.read))

    def _hand(self, item: Any, current: Deployment, matcher: Any) -> None:
        kind, tally = type(item), self.tally
        rows = kind is LookupRows or kind is MetricRows
        try:
            if kind is MetricRows:
                tally.analysed += len(item)
                current.deliver_metrics(item)
            elif rows:
                tally.analysed += len(item)
                current.deliver_rows(item)
            elif kind is QuietOrigin:
                _saw(current, item.origin)
            elif kind is NamedBlock:
                return  # what it names was taken in ``_deployment_of``
            else:
                self.text_events += _deliver(item, matcher, current, tally, self.window, self.quiet,
                                             self.src.stats.formats)
        except Exception as e:  # noqa: BLE001 - last line of defence: this record is skipped and named
            if not rows:
                tally.unrecognized[item.kind] += 1
            _note_skipped(self.src, None if rows else item, e, "skipped")

    def _beyond_limit(self, item: Any) -> None:
        """An item of a deployment beyond the group's limit: counted and its deployment named, not read."""
        kind = type(item)
        if kind is NamedBlock or kind is QuietOrigin:  # markers, not records (quiet records ingest counted)
            return
        over = self.src.stats.beyond_limit
        over["records"] = over.get("records", 0) + (len(item) if kind is LookupRows or kind is MetricRows else 1)
        first = over.setdefault("first", [])
        if self.beyond is not None and len(first) < 3 and self.beyond not in first:
            first.append(self.beyond)

    def end(self) -> None:
        """The input ended: its counted lines to the deployments it fed."""
        src = self.src
        # raw text that a template recognised (a bare exception line of vLLM's) is vLLM output too
        src.stats.recognized += self.text_events
        self.tally.analysed += _counted_lines(src.stats.hot) + src.stats.access_lines + src.stats.quiet
        for project, n in src.stats.unknown.items():  # records nothing recognises, counted unread (``_learn_unknown``)
            self.tally.unrecognized[project] += n
        fed = list(self.fed.values()) or [d for d in (self.run_for(self.default_id),) if d is not None]
        _hand_counts(src, fed, self.counts)
        if src.stats.beyond_limit:
            src.stats.beyond_limit["limit"] = deployment_limit()
            over = src.stats.beyond_limit
            src.stats.errors.append(
                f"{over['records']:,} record(s) of deployments beyond the first {over['limit']:,} of this input group "
                f"not analysed (first: {', '.join(over['first'])}); give each pod its own folder and run "
                "'specdiag fleet', or split the input")
        self.window.clear()


def _deliver(rec: Any, matcher: Any, dep: Deployment, tally: StreamTally, window: HotWindow | None = None,
             quiet: QuietPlaces | None = None, formats: set[str] | None = None) -> int:
    """Match one record and hand its event to the deployment; 1 when it was raw text a template read. A bare
    pasted line read as a message adds ``bare-text`` and its project to the input's ``formats``: the report
    then says how it was read, and that the project's lines are there."""
    _saw(dep, rec.origin)
    dep.note_record(rec)
    ev = matcher.match(rec)
    if ev is None and rec.kind == "bare":
        return 0  # a pasted line no message's text fits: another program's, as in the first reading
    if ev is None:
        _tally_unrecognized(tally, rec)
        dep.deliver_unmatched(rec)
        if quiet is not None:
            _learn_unknown(rec, matcher, quiet)
        return 0
    if quiet is not None and rec.level in QUIET_LEVELS and (ev.id == CATALOG_EVENT or dep.unread(ev.id)):
        _learn_quiet(rec, dep, quiet, ev.f.get("entry") if ev.id == CATALOG_EVENT and ev.f else None)
    if window is not None and ev.id in COUNTED:  # a counted line the Python path read: look-back keeps it
        window.note(rec, ev.id)
    tally.analysed += 1
    if rec.kind == "bare" and formats is not None:
        formats.update(("bare-text", ev.rec.kind))
    dep.deliver(ev)
    return int(rec.kind in ("text", "bare") and rec.origin.pid is None)  # prefixed raw lines ingest counted already


def _saw(dep: Deployment, origin: Any) -> None:
    if origin is not dep.last_origin:
        dep.last_origin = origin
        dep.run.saw_origin(origin)




def quiet_places(matcher: Any, read: frozenset[str] | None = None) -> QuietPlaces:
    """The prefilter's quiet places for a read, with what the vLLM and LMCache templates read: all of them,
    or those in ``read`` (the templates something of this analysis reads, ``Deployment.read_events``); only
    templates that can match a DEBUG or INFO record, the only records ever quiet."""
    return QuietPlaces({p: matcher.dispatch(p, read, QUIET_LEVELS) for p in QuietPlaces.PROJECTS},
                       {p: matcher.needles(p, read, QUIET_LEVELS) for p in QuietPlaces.PROJECTS})


def _learn_quiet(rec: Any, dep: Deployment, quiet: QuietPlaces, entry: Any = None) -> None:
    """A vLLM or LMCache DEBUG/INFO record only the catalog knows, at a place where the catalog knows every
    text and no observer reads catalog events: its place's later records need only be counted
    (``prefilter.QUIET``) — in this run of this deployment, whose version fingerprint has seen the place."""
    if rec.kind not in ("vllm", "lmcache") or rec.level not in QUIET_LEVELS or rec.cont:
        return
    key = rec.place_key()
    if key is None or key in quiet.keys or dep.wants(CATALOG_EVENT):
        return
    if recognised_anywhere_at(rec):
        quiet.add(key)
    elif entry is not None:  # several messages were printed at this place: the texts this one fits
        simple = recognised_fits_at(rec, entry)
        if simple is not None:
            quiet.add_pattern(key, *simple)


def _learn_unknown(rec: Any, matcher: Any, quiet: QuietPlaces) -> None:
    """A vLLM or LMCache DEBUG/INFO record nothing recognised, printed where no catalogued release prints at its level:
    a later record of its place whose text nothing ``matcher`` looks a message up by fits
    (``Matcher.recognising``) would be recognised by nothing too, and only counted as such
    (``prefilter.UNKNOWN``): a plugin's or a newer build's DEBUG flood is not read line by line. What reading
    one does at DEBUG/INFO is count it (``_tally_unrecognized``); no observer sees it (``deliver_unmatched``)."""
    if rec.kind not in QuietPlaces.PROJECTS or rec.level not in QUIET_LEVELS or rec.cont:
        return
    key = rec.place_key()
    if key is None or key in quiet.unknown or not nothing_printed_at(rec):
        return
    quiet.add_unknown(key, rec.kind, matcher.recognising(rec.kind))


MAX_SKIP_NOTES = 20


def _note_skipped(src: Any, rec: Any, e: BaseException, what: str) -> None:
    """Name the record an unexpected exception skipped in ``inputs[].errors`` (the first few, then a count)."""
    errs = src.stats.errors
    src.stats.skipped += 1 if rec is not None else 0
    where = f"line {rec.line}" if rec is not None else f"after {src.stats.bytes_read} bytes"
    if len(errs) < MAX_SKIP_NOTES:
        errs.append(f"{where}: {what} ({error_text(e)})")
    elif len(errs) == MAX_SKIP_NOTES:
        errs.append("more records skipped; only the first are listed")


def _tally_unrecognized(tally: StreamTally, rec: Any) -> None:
    tally.unrecognized[rec.kind] += 1
    if rec.level in ("WARNING", "ERROR", "CRITICAL") and len(tally.unknown_shapes) < 500:
        shape = f"{rec.kind} {rec.level}: " + message_shape(rec.msg, 90)
        if shape not in tally.unknown_shapes:  # shown as its first real line, not the N-for-digits key
            tally.examples[shape] = f"{rec.kind} {rec.level}: {rec.msg[:90]}"
        tally.unknown_shapes[shape] += 1


def _counted_lines(hot: Any) -> int:
    """Lines ingest only counted (stores, complete retrieves, access lines): the rules read their counts.
    Lookups are counted too but reach the rules as rows, which were counted already."""
    return (sum(n for tid, n in hot.counts.items() if tid != "L1")
            + sum(n for c in hot.named.values() for tid, n in c.items() if tid != "L1"))


def _hand_counts(src: Source, fed: list[Deployment], counts: InputCounts) -> None:
    """Give the lines ingest only counted, those after the last run boundary, to the deployment(s) this
    input fed (their current runs)."""
    hot = src.stats.hot
    shared = any(hot.counts.values()) or any(hot.named.get(None, {}).values())
    for dep in fed:
        dep.end_source(src.stats.year, src.stats.lines, counts)
        if len(fed) > 1 and shared:
            dep.run.shared_count_sources.append(src.display)


# ------------------------------------------------------------------------------------------ incremental
class StreamAnalysis:
    """One input group read as it grows (``specdiag watch``), with the report so far on request.

    The same loop as :func:`analyze_group` reads each input (:class:`SourceLoop`); ``snapshot`` may be
    called while an input is being read, between two of its blocks (a follower's callbacks run there,
    ``ingest/follow.py``): it copies the deployments' observers and finishes the copies, so the analysis
    goes on untouched. A snapshot costs time and memory in proportion to that state (requests in flight,
    findings, the capped series), not to what was read; ``finish`` ends the analysis itself."""

    def __init__(self, opts: AnalyzeOptions, group_id: str) -> None:
        _validate(opts)
        self.opts, self.group_id = opts, group_id
        self._make = deployment_runs(opts)
        self.runs: dict[str, Deployment] = {}
        self.tally = StreamTally()
        self.loop: SourceLoop | None = None
        self.sources: list[Source] = []
        self._started = time.perf_counter()

    def _run_for(self, dep_id: str) -> Deployment | None:
        return deployment_for(self.runs, dep_id, self._make)

    def read(self, src: Source) -> None:
        """Read ``src`` to its end (a follower's end: its writer closed it, or it was stopped)."""
        self.sources.append(src)
        self.loop = SourceLoop(src, self.group_id, self._run_for, self.tally)
        try:
            self.loop.run(None)
        finally:
            self.loop = None

    def snapshot(self, lines: int | None = None) -> Report:
        """The report of everything read so far, the analysis left as it is. ``lines``: how many lines
        of the input being read have arrived (ingest counts them only at its end)."""
        loop = self.loop
        if loop is None:
            runs, tally = copy.deepcopy((self.runs, self.tally))
            return self._report(runs, tally)
        memo: dict[int, Any] = {id(loop.window): loop.window}  # the look-back: read by finish, never changed
        runs, tally, counts, fed = copy.deepcopy((self.runs, self.tally, loop.counts, loop.fed), memo)
        stats = loop.src.stats
        for dep in fed.values():
            dep.end_source(stats.year, stats.lines or lines or 0, counts)
        tally.analysed += _counted_lines(stats.hot) + stats.access_lines
        return self._report(runs, tally, lines)

    def finish(self) -> Report:
        """The final report (the analysis ends: call once, after the last ``read``)."""
        return self._report(self.runs, self.tally)

    def _report(self, runs: dict[str, Deployment], tally: StreamTally, lines: int | None = None) -> Report:
        deployments = [r.finish() for r in runs.values()]
        if not deployments:
            deployments = [Deployment(self.group_id, self._make).finish()]
        inputs = [s.stats.to_dict() for s in self.sources]
        if lines is not None and inputs and not inputs[-1]["lines"]:
            inputs[-1]["lines"] = lines
        return _assemble([GroupResult(deployments, inputs, tally)], self.opts, time.perf_counter() - self._started)


# ------------------------------------------------------------------------------------------ parallel
_POOL: Any = None


def _pool(jobs: int) -> Any:
    """A persistent process pool (reused across analyses in one process, e.g. by ``fleet``)."""
    global _POOL
    from concurrent.futures import ProcessPoolExecutor

    from specdiag.workers import start_worker

    if _POOL is None or _POOL._max_workers < jobs:  # noqa: SLF001 - the stdlib exposes no getter
        if _POOL is not None:
            _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = ProcessPoolExecutor(max_workers=jobs, initializer=start_worker, initargs=(os.getpid(),))
        import atexit

        atexit.register(_POOL.shutdown, wait=False, cancel_futures=True)  # before the interpreter tears down
    return _POOL


def _analyze_in_pool(groups: list[InputGroup], opts: AnalyzeOptions, jobs: int) -> list[GroupResult]:
    pool = _pool(jobs)
    futures = [pool.submit(analyze_group, g, replace(opts, jobs=1)) for g in groups]
    return [f.result() for f in futures]  # in input order, whatever finished first


# ------------------------------------------------------------------------------------------ assembly
def _assemble(parts: list[GroupResult], opts: AnalyzeOptions, elapsed: float) -> Report:
    tally = StreamTally()
    deployments: list[DeploymentResult] = []
    inputs: list[dict[str, Any]] = []
    for part in parts:
        deployments.extend(part.deployments)
        inputs.extend(part.inputs)
        tally.merge(part.tally)
    rules_run = [cls.code for cls in select_rules(opts.select, opts.ignore)] if opts.rules else []
    return Report.from_deployments(
        deployments, inputs=inputs, rules_run=rules_run, elapsed_s=elapsed,
        unrecognized={**dict(tally.unrecognized), "top_warnings": tally.top_warnings(10)}, analysed=tally.analysed,
        rules=rule_table(),
    )


__all__ = ["AnalyzeOptions", "ConfigError", "InputError", "StreamAnalysis", "analyze", "run_analysis", "select_rules"]
