"""The one observer protocol, and the run state every observer may ask.

Rules, the context builder and the metrics collector are all observers of one deployment's event stream:

* ``start(run)`` — once, before the first event; ``run`` is that deployment's :class:`RunState`;
* ``observe(event)`` — for each event whose template id is in ``events``;
* ``finish(ctx, run)`` — once, after the last input; the context builder fills ``ctx``, rules return
  findings, the metrics collector returns none.

Ingest handles the high-volume lines (stores, retrieves, lookups, the periodic stats and SpecDecoding
lines) without turning each into an event. Observers do not know how: they ask the run state for
``count(tid)``, ``first(tid)``, ``event_before(...)`` and ``series`` (the per-engine intervals), which answer
from ingest's counters, its look-back window and the metric rows. An observer that needs every lookup line
declares ``tables = {"lookups"}`` and reads them as columns in ``observe_rows``
(``specdiag.ingest.hot.LookupRows``); one that needs every stats / SpecDecoding line declares
``tables = {"metrics"}`` and reads them in batches in ``observe_metrics`` (``MetricRows``). Both come in
line order between its events, whichever path read the lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from specdiag.metrics.series import SPEC_EVENTS, STATS_EVENTS, SeriesTracker

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.context import Context
    from specdiag.events import Event
    from specdiag.findings import Finding
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.hot import LookupRows, MetricRows
    from specdiag.ingest.origin import Origin

#: ``(before_line, needle, process_key) -> Record | None`` for the input being read
LookBack = Callable[[int, bytes, str], "Record | None"]
MAX_ORIGINS = 4096
#: intervals kept per engine before neighbours merge (11 hours of 10 s intervals): at 10,000 a log of 64
#: engines took 164 MiB, at 4,000 84 MiB (each row keeps its line for evidence)
SERIES_CAP = 4_000


def _no_lookback(before: int, needle: bytes, key: str) -> None:
    return None


class RunState:
    """What one deployment's run has seen so far, beyond the events themselves.

    Bounded: counters per template id, the first counted line of each, the distinct process origins
    (capped), the interval series (compacted past its cap) and a look-back into the raw lines of the
    input currently being read.
    """

    #: the periodic stats / SpecDecoding events: the run builds their interval series itself
    SERIES_EVENTS = STATS_EVENTS | SPEC_EVENTS

    def __init__(self, deployment: str, series_cap: int = SERIES_CAP) -> None:
        self.deployment = deployment
        #: per-engine interval series of the stats and SpecDecoding lines, one copy for every observer
        self.series = SeriesTracker(cap=series_cap)
        self._counts: dict[str, int] = {}
        self._first: dict[str, Event] = {}
        self.origins: list[Origin] = []
        self._origin_keys: set[str] = set()
        self.sources: list[str] = []
        #: sources whose counted lines could not be split between several deployments (a merged stream)
        self.shared_count_sources: list[str] = []
        #: the year ingest settled on for each input (None: no line of it carries one)
        self.input_years: dict[str, int | None] = {}
        #: how many lines each input that fed this deployment had (None: a re-analysis that does not know)
        self.input_lines: dict[str, int] = {}
        self._lookback: LookBack = _no_lookback
        self._current: str | None = None
        #: template ids read by a rule that reported a finding: set before the late rules finish (the
        #: accounting of upstream lines leaves what a specific diagnosis already took to that diagnosis)
        self.explained: frozenset[str] = frozenset()
        #: the literal message parts those rules claim (``Rule.claims``): catalog lines they account for
        self.claimed: tuple[str, ...] = ()

    # --- asked by observers ------------------------------------------------------------------------------
    def count(self, tid: str) -> int:
        """How many lines of a counted template (``COUNTED``: stores, retrieves, lookups) the inputs had,
        whether the scanner counted them or they reached the observers as events."""
        return self._counts.get(tid, 0)

    def first(self, tid: str) -> Event | None:
        """The first such counted line, as an Event (for evidence), or None."""
        return self._first.get(tid)

    def event_before(self, before_line: int, needle: bytes, process_key: str) -> Record | None:
        """The nearest counted LMCache line before ``before_line`` of that process containing ``needle``.

        Only meaningful while the input holding ``before_line`` is being read (from ``observe``).
        """
        return self._lookback(before_line, needle, process_key)

    @property
    def lines_read(self) -> int | None:
        """Lines of the inputs that fed this deployment, every line counted (for a stream that fed several
        deployments, the whole stream's): what tells a pasted fragment from a log. None when not known."""
        return sum(self.input_lines.values()) if self.input_lines else None

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    @property
    def firsts(self) -> dict[str, Event]:
        """``first(tid)`` of every counted template that has one."""
        return dict(self._first)

    # --- fed by the run loop ---------------------------------------------------------------------------
    def begin_source(self, name: str, lookback: LookBack | None) -> None:
        if name not in self.sources:
            self.sources.append(name)
        self._current = name
        self._lookback = lookback or _no_lookback

    def end_source(self, year: int | None = None, lines: int | None = None) -> None:
        if self._current is not None:
            self.input_years[self._current] = year
            if lines is not None:
                self.input_lines[self._current] = lines
        self._current = None
        self._lookback = _no_lookback

    def count_event(self, ev: Event) -> None:
        """A line of a counted template that reached the observers as an event (the Python path read it)."""
        tid = ev.id
        self._counts[tid] = self._counts.get(tid, 0) + 1
        if tid not in self._first and (tid != "R4" or full_retrieve(ev)):
            self._first[tid] = ev

    def add_counts(self, counts: dict[str, int], first: dict[str, Event]) -> None:
        for tid, n in counts.items():
            self._counts[tid] = self._counts.get(tid, 0) + n
        for tid, ev in first.items():
            self._first.setdefault(tid, ev)

    def saw_origin(self, origin: Origin) -> None:
        if origin.key not in self._origin_keys and len(self.origins) < MAX_ORIGINS:
            self._origin_keys.add(origin.key)
            self.origins.append(origin)


def full_retrieve(ev: Event) -> bool:
    """A retrieve that loaded all it was asked for: the kind ``first("R4")`` shows (as the scanner's first row)."""
    f = ev.f
    required = f.get("required") if f.get("required") is not None else f.get("required2")
    return required is None or (f.get("retrieved") or 0) >= required


#: templates whose lines the run state counts, whichever path read them (scanner rows or events)
COUNTED = frozenset({"S1", "R4", "L1"})
#: the levels at which an upstream line is a problem report someone must be told about
PROBLEM_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})

#: templates that reach ``tables = {"metrics"}`` observers as ``MetricRows``, not as events
METRIC_ROW_EVENTS = frozenset({"V_STATS", "V_SPEC"})


class Observer:
    """Base of every observer; subclasses list the template ids they want in ``events``."""

    events: ClassVar[frozenset[str]] = frozenset()
    #: scanner tables this observer reads as rows (``"lookups"``: ``observe_rows`` gets ``LookupRows``;
    #: ``"metrics"``: ``observe_metrics`` gets ``MetricRows``)
    tables: ClassVar[frozenset[str]] = frozenset()
    #: record levels whose events this observer gets whatever their template id: the accounting of the
    #: upstream warnings and errors that no specific rule explains reads every one of them, including
    #: records no template knows (id ``UNKNOWN_EVENT``); empty for every other observer
    levels: ClassVar[frozenset[str]] = frozenset()
    run: RunState

    def start(self, run: RunState) -> None:
        self.run = run

    def observe(self, ev: Event) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def observe_rows(self, rows: LookupRows) -> None:  # pragma: no cover - interface
        """A run of lookup lines, in line order between the events; keep bounded state, never the rows."""
        raise NotImplementedError

    def observe_metrics(self, rows: MetricRows) -> None:  # pragma: no cover - interface
        """A batch of stats / SpecDecoding lines (``METRIC_ROW_EVENTS``), in line order between the events."""
        raise NotImplementedError

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        return []


__all__ = ["COUNTED", "METRIC_ROW_EVENTS", "PROBLEM_LEVELS", "LookBack", "Observer", "RunState",
           "full_retrieve"]
