"""What ingest hands on for the high-volume lines it never turns into records one by one.

The scanner (``scan.py``) reads every block and leaves three things for the rest of the pipeline:

* :class:`LookupRows` — the scheduler's per-request lookup lines (``Reqid: …, LMCache hit tokens: …``) as
  columns, handed to the observers that declare ``tables = {"lookups"}`` in line order between the
  records (so "the lookup before this shortfall" still means what it says);
* :class:`HotTally` — per input, how many store / retrieve / lookup / access lines there were and the
  first of each (for evidence), summed over processes;
* :class:`HotWindow` — the look-back: the stores, retrieves and lookups of the last two blocks as
  columns, to answer "the retrieve line of this process just before this error" without keeping raw lines.

Lines the scanner leaves to the Python path (a kubectl wrapper, an unusual level) reach the rules as
ordinary events; ``HotWindow.note`` keeps the last few of those too, so the look-back answers either way.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from itertools import accumulate, repeat
from operator import sub
from typing import TYPE_CHECKING

from specdiag.catalog.wording import BYTES as _W
from specdiag.ingest import scan
from specdiag.ingest.origin import Origin, OriginCache
from specdiag.numbers import to_int
from specdiag.timeutil import stamp_times

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.events import Event
    from specdiag.ingest.envelope import Record

NA = scan.NA
#: look-back reach in lines (as the raw-line window it replaces)
LOOKBACK_LINES = 2000


class BlockView:
    """One scanned block of one input, shared by the rows cut from it: its bytes, result and origins."""

    __slots__ = ("path", "block", "off", "res", "year", "_origins", "_by_proc", "_values")

    def __init__(self, path: str, block: bytes, off: int, res: scan.ScanResult, origins: OriginCache,
                 year: int | None) -> None:
        self.path = path
        self.block = block  # the bytes read; the scanned lines start at ``off`` (row offsets are relative to it)
        self.off = off
        self.res = res
        self.year = year
        self._origins = origins
        self._by_proc: list[Origin | None] = [None] * len(res.prefixes)
        self._values: dict[str, list | array] = {}  # per-table values and offsets, made once per block

    def values(self, table: str) -> list[tuple]:
        """The ``stats`` / ``spec`` rows' parsed values, a tuple per row (``columns`` transposed), once per block."""
        v = self._values.get(table)
        if v is None:
            v = self._values[table] = list(zip(*self.columns(table), strict=True))
        return v

    def columns(self, table: str) -> list[list]:
        """The same values a column at a time (``scan.stats_columns``/``spec_columns``), once per block."""
        key = table + "/columns"
        v = self._values.get(key)
        if v is None:
            v = self._values[key] = scan.stats_columns(self.res) if table == "stats" else scan.spec_columns(self.res)
        return v

    def origin(self, proc: int) -> Origin:
        o = self._by_proc[proc]
        if o is None:
            o = self._by_proc[proc] = scan.origin_of(self.res.prefixes[proc], self._origins)
        return o

    def record(self, table: str, i: int) -> Record:
        if table in ("stats", "spec"):
            return self._vllm_record(table, i)
        cols, off = self.res.columns[table], self.off
        return scan.hot_record(self.block, off + cols["start"][i], off + cols["end"][i], cols["line"][i], self.path,
                               self._origins, self.year)

    def _vllm_record(self, table: str, i: int) -> Record:
        """A metric row's Record: its process is the row's (no prefix to peel again), then vLLM's header."""
        cols = self.res.columns[table]
        proc = cols["proc"][i]
        return metric_record(self.path, cols["line"][i], self.origin(proc), self.raw(table, i),
                             len(self.res.prefixes[proc]), self.year)

    def packed_lookups(self, lo: int, hi: int) -> PackedRows:
        """Lookup rows ``lo .. hi-1``'s lines in one bytes object: a slice of the scan's ``lookup_text`` where
        it made one, else cut from the block (``scan.pack_rows``)."""
        cols, text = self.res.columns["lookups"], self.res.lookup_text
        if text is None:
            return PackedRows.of(self.block, self.off, cols["start"], cols["end"], lo, hi)
        offsets = self._values.get("lookups/offsets")
        if offsets is None:  # each row's place in the text, once per block
            offsets = self._values["lookups/offsets"] = scan.packed_array(
                "q", accumulate(map(sub, cols["end"], cols["start"]), initial=0))
        if lo == 0 and hi == len(offsets) - 1:  # the block's lookups in one run: the text and offsets as they are
            return PackedRows(text, offsets)
        first = offsets[lo]
        return PackedRows(text[first : offsets[hi]], scan.packed_array("q", map(sub, offsets[lo : hi + 1], repeat(first))))

    def raw(self, table: str, i: int) -> bytes:
        cols, off = self.res.columns[table], self.off
        return self.block[off + cols["start"][i] : off + cols["end"][i]]


def _pick(columns: list[list], idx: list[int]) -> list:
    """Rows ``idx`` (ascending) of every column: a slice when they are consecutive (a block's metric rows
    usually are), else one ``itemgetter`` pass per column."""
    if not idx:
        return [[] for _ in columns]
    if idx[-1] - idx[0] + 1 == len(idx):
        return [col[idx[0] : idx[-1] + 1] for col in columns]
    return [scan.gather(col, idx) for col in columns]


class PackedRows:
    """Consecutive rows' lines in one bytes object; ``rows[i]`` is row ``i``'s line (a new slice)."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: bytes, offsets: array) -> None:
        self.data, self.offsets = data, offsets

    @classmethod
    def of(cls, block: bytes, base: int, starts: array, ends: array, lo: int, hi: int) -> PackedRows:
        data = scan.pack_rows(block, base, starts, ends, lo, hi)
        return cls(data, array("q", accumulate(map(sub, ends[lo:hi], starts[lo:hi]), initial=0)))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes:
        if i < 0:
            i += len(self)
        return self.data[self.offsets[i] : self.offsets[i + 1]]


class LookupRows:
    """Consecutive lookup lines of one input: rows ``lo .. hi-1`` of the columns below.

    Columns are those of ``scan.SCHEMA["lookups"]`` (``scan.NA`` for a missing value). Valid only while
    ``observe_rows`` runs: an observer keeps bounded state (counts, a capped map), never the rows.
    """

    __slots__ = ("path", "lo", "hi", "line", "total", "computed", "hit", "need", "rid_hash", "proc", "_view", "_event")

    def __init__(self, path: str, lo: int, hi: int, cols: dict[str, array], view: BlockView | None = None,
                 event: Event | None = None) -> None:
        self.path = path
        self.lo, self.hi = lo, hi
        self.line, self.total, self.computed = cols["line"], cols["total"], cols["computed"]
        self.hit, self.need, self.rid_hash, self.proc = cols["hit"], cols["need"], cols["rid_hash"], cols["proc"]
        self._view = view
        self._event = event

    @classmethod
    def from_view(cls, view: BlockView, lo: int, hi: int) -> LookupRows:
        return cls(view.path, lo, hi, view.res.columns["lookups"], view)

    @classmethod
    def from_event(cls, ev: Event) -> LookupRows:
        """One lookup line the Python path read (no scanner, or a wrapped line): a batch of one row.

        Its numbers come from the scanner's grammar on the message (what a scanned row would hold); only
        a message that grammar rejects is parsed by the template."""
        vals = scan.message_values("L1", ev.rec.raw)
        if vals is not None:
            rid, total, computed, hit, need, _below = vals
            cols = {"line": array("q", [ev.rec.line]), "total": array("q", [total]),
                    "computed": array("q", [computed]), "hit": array("q", [hit]), "need": array("q", [need]),
                    "rid_hash": array("Q", [scan.rid_hash(rid)]), "proc": array("I", [0])}
            return cls(ev.rec.path, 0, 1, cols, None, ev)
        f = ev.f
        rid = (f.get("req_id") or "").encode()

        def num(key: str) -> int:
            v = f.get(key)
            try:
                return int(v) if v not in (None, "None") and abs(int(v)) < 2**62 else NA
            except (TypeError, ValueError):
                return NA

        cols = {"line": array("q", [ev.rec.line]), "total": array("q", [num("total")]),
                "computed": array("q", [num("vllm_computed")]), "hit": array("q", [num("hit")]),
                "need": array("q", [num("need")]), "rid_hash": array("Q", [scan.rid_hash(rid)]),
                "proc": array("I", [0])}
        return cls(ev.rec.path, 0, 1, cols, None, ev)

    def __len__(self) -> int:
        return self.hi - self.lo

    def record(self, i: int) -> Record:
        """Row ``i``'s Record (built on demand: for evidence)."""
        if self._event is not None:
            return self._event.rec
        return self._view.record("lookups", i)

    @property
    def read_event(self) -> Event | None:
        """The Event of a batch of one that the Python path read (``from_event``); None for scanned rows.
        Turning a scanned row into an Event is the events layer's job (``events.rows.lookup_event``)."""
        return self._event

    def keep(self, i: int) -> Record | bytes:
        """What to keep of row ``i`` to rebuild it later (``events.rows.revive``): its raw bytes, or its Record."""
        return self._event.rec if self._event is not None else self._view.raw("lookups", i)

    def kept_rows(self) -> PackedRows | list[Record]:
        """``keep(i)`` for every row, in order: their lines packed into one bytes object by one copy
        (``scan.pack_rows``), sliced again only for a row that is asked for. One object, not one per row:
        a slice per row was the largest Python cost of a lookup-dense log, and a copy of the span that
        holds them kept three times the bytes (13 MiB more at the peak for a history of 20,000 rows)."""
        if self._event is not None:
            return [self._event.rec]
        return self._view.packed_lookups(self.lo, self.hi)

    def origin(self, i: int) -> Origin:
        if self._event is not None:
            return self._event.rec.origin
        return self._view.origin(self.proc[i])


def metric_record(path: str, line: int, origin: Origin, raw: bytes, plen: int, year: int | None) -> Record:
    """The Record of a stats / SpecDecoding line the scanner accepted (``raw``: the line as read; ``plen``:
    the length of its process prefixes once cleaned, before ``INFO MM-DD hh:mm:ss [file:line] …``), as the
    per-line stages make it."""
    VLLM_REST, Record = _late()  # noqa: N806 - the imported names
    rest = scan.clean_line(raw)[plen:]
    m = VLLM_REST.match(rest, 5)
    return Record(path, line, origin, "vllm", "INFO", m.group(1), year, m.group(2), to_int(m.group(3)), None,
                  rest[m.end() :])


class RowRecord:
    """A metric row's Record, built when first called for. An interval series keeps one per row (bounded
    by its cap) and shows a handful as evidence, so most are never built; it holds the row's bytes as read
    (cleaned when built), not the block they came in."""

    __slots__ = ("path", "line", "origin", "raw", "plen", "year", "_rec")

    def __init__(self, path: str, line: int, origin: Origin, raw: bytes, plen: int, year: int | None) -> None:
        self.path, self.line, self.origin, self.raw, self.plen, self.year = path, line, origin, raw, plen, year
        self._rec: Record | None = None

    def __call__(self) -> Record:
        if self._rec is None:
            self._rec = metric_record(self.path, self.line, self.origin, self.raw, self.plen, self.year)
        return self._rec


class MetricRows:
    """Consecutive stats / SpecDecoding lines of one input with no other record between them, for the
    observers that declare ``tables = {"metrics"}`` (``observe_metrics``).

    vLLM prints one such pair per engine every logging interval; on a busy metric-dense log they are a
    tenth of the lines, and an Event per line cost more than all the rest of the analysis. Row ``k``:
    ``kinds[k]`` (``"stats"`` / ``"spec"``), ``lines[k]``, ``origins[k]``; its time, parsed fields and
    Record on demand. A line the Python path read comes as a batch of one (``from_event``). Valid only
    while ``observe_metrics`` runs: keep ``record_ref(k)`` or numbers, never the batch.
    """

    __slots__ = ("path", "year", "kinds", "lines", "origins", "_rows", "_plens", "_stamps", "_view", "_events", "_times")

    def __init__(self, path: str, year: int | None, view: BlockView | None = None) -> None:
        self.path = path
        self.year = year
        self.kinds: list[str] = []
        self.lines: list[int] = []
        self.origins: list[Origin] = []
        self._rows: list[int] = []
        self._plens: list[int] = []
        self._stamps: list[int] = []
        self._view = view
        self._events: list[Event] | None = None
        self._times: list[float | None] | None = None

    def add(self, kind: str, row: int, line: int, origin: Origin, plen: int, stamp: int) -> None:
        """Row ``row`` of the view's ``kind`` table (``plen``: its cleaned process prefixes' length; ``stamp``:
        its ``stamp`` column). Its line is sliced from the block only when its Record is asked for."""
        self.kinds.append(kind)
        self._rows.append(row)
        self.lines.append(line)
        self.origins.append(origin)
        self._plens.append(plen)
        self._stamps.append(stamp)

    @classmethod
    def of_columns(cls, path: str, year: int | None, view: BlockView, kinds: list[str], rows: list[int],
                   lines: list[int], origins: list[Origin], plens: list[int], stamps: list[int]) -> MetricRows:
        """A whole batch at once (``add`` for every row: the same lists, built a column at a time)."""
        batch = cls(path, year, view)
        batch.kinds, batch._rows, batch.lines, batch.origins = kinds, rows, lines, origins
        batch._plens, batch._stamps = plens, stamps
        return batch

    @classmethod
    def from_event(cls, ev: Event) -> MetricRows:
        """A stats / SpecDecoding line the per-line stages read (no scanner, a wrapped line, a V0 engine's
        stats line): a batch of one."""
        rec = ev.rec
        rows = cls(rec.path, rec.year)
        rows.kinds.append("spec" if ev.id == "V_SPEC" else "stats")  # V_STATS, or the V0 engine's V_STATS_V0
        rows.lines.append(rec.line)
        rows.origins.append(rec.origin)
        rows._events = [ev]
        return rows

    def __len__(self) -> int:
        return len(self.kinds)

    def times(self) -> list[float | None]:
        """Every row's log time (epoch seconds, ``timeutil``), computed once per batch."""
        if self._times is None:
            if self._view is None:
                from specdiag.timeutil import rec_time

                self._times = [rec_time(ev.rec) for ev in self._events or ()]
            else:
                year = self.year
                self._times = stamp_times(self._stamps, year)
        return self._times

    def stats(self, k: int) -> dict:
        """A stats row's parsed body (``metrics.parse.stats_fields``' keys; a field not printed is None)."""
        if self._view is None:
            from specdiag.metrics.parse import stats_fields

            return stats_fields(self._events[0])
        return scan.stats_row(self._view.res, self._rows[k])

    def spec(self, k: int) -> dict:
        """A SpecDecoding row's parsed body (``metrics.parse.spec_fields``' keys)."""
        if self._view is None:
            from specdiag.metrics.parse import spec_fields

            return spec_fields(self._events[0])
        return scan.spec_row(self._view.res, self._rows[k])

    def stats_values(self, k: int) -> tuple:
        """A stats row's fields in ``metrics.parse.STATS_ORDER`` order."""
        if self._view is None:
            from specdiag.metrics.parse import STATS_ORDER

            return tuple(map(self.stats(k).get, STATS_ORDER))
        return self._view.values("stats")[self._rows[k]]

    def spec_values(self, k: int) -> tuple:
        """A SpecDecoding row's fields in ``metrics.parse.SPEC_ORDER`` order."""
        if self._view is None:
            from specdiag.metrics.parse import SPEC_ORDER

            return tuple(map(self.spec(k).get, SPEC_ORDER))
        return self._view.values("spec")[self._rows[k]]

    def values(self) -> list[tuple]:
        """Every row's ``stats_values`` or ``spec_values`` (by its kind), for a whole batch at once."""
        if self._view is None:
            return [self.stats_values(0) if self.kinds[0] == "stats" else self.spec_values(0)]
        stats, spec = self._view.values("stats"), self._view.values("spec")
        return [stats[i] if kind == "stats" else spec[i] for kind, i in zip(self.kinds, self._rows, strict=True)]

    def columns_at(self, stats_rows: list[int], spec_rows: list[int]) -> tuple[list, list] | None:
        """The values of the stats table's rows ``stats_rows`` and of the SpecDecoding table's ``spec_rows``
        (``table_rows``) as columns; None for a batch the per-line stages made."""
        if self._view is None:
            return None
        return _pick(self._view.columns("stats"), stats_rows), _pick(self._view.columns("spec"), spec_rows)

    def table_rows(self, ks: list[int]) -> list[int]:
        """The rows of their tables that batch rows ``ks`` are (for ``columns_at`` and ``engines_at``)."""
        rows = self._rows
        return [rows[k] for k in ks]

    def refs(self) -> list[RowRecord | Record]:
        """Every row's ``record_ref``."""
        if self._view is None:
            return [self._events[0].rec]
        return list(map(RowRecord, repeat(self.path), self.lines, self.origins, map(self._view.raw, self.kinds, self._rows),
                        self._plens, repeat(self.year)))

    def engine(self, k: int) -> tuple[int | None, int | None]:
        """A stats row's ``Engine N`` and ``N Engines Aggregated`` numbers (None where not printed)."""
        if self._view is None:
            f = self._events[0].f
            return (None if f.get("engine") is None else int(f["engine"]),
                    None if f.get("n_engines") is None else int(f["n_engines"]))
        cols, i = self._view.res.columns["stats"], self._rows[k]
        engine, n_engines = cols["engine"][i], cols["n_engines"][i]
        return (None if engine == NA else engine, None if n_engines == NA else n_engines)

    def engines_at(self, idx: list[int]) -> list[tuple[int | None, int | None]] | None:
        """The ``engine`` pair of each of the stats table's rows ``idx`` (``table_rows``; None: no scanned
        rows). A data-parallel server's API process prints a stats line per engine in turn."""
        if self._view is None or not idx:
            return None
        cols = self._view.res.columns["stats"]
        engines, n_engines = scan.gather(cols["engine"], idx), scan.gather(cols["n_engines"], idx)
        if engines.count(engines[0]) == len(engines) and n_engines.count(n_engines[0]) == len(n_engines):
            return [(None if engines[0] == NA else engines[0], None if n_engines[0] == NA else n_engines[0])] * len(idx)
        return [(None if e == NA else e, None if m == NA else m) for e, m in zip(engines, n_engines, strict=True)]

    def record_ref(self, k: int) -> RowRecord | Record:
        """What to keep of row ``k`` for evidence: its Record, or a ``RowRecord`` that builds it when called."""
        if self._view is None:
            return self._events[0].rec
        return RowRecord(self.path, self.lines[k], self.origins[k], self._view.raw(self.kinds[k], self._rows[k]),
                         self._plens[k], self.year)

    def record(self, k: int) -> Record:
        ref = self.record_ref(k)
        return ref() if isinstance(ref, RowRecord) else ref

    @property
    def read_events(self) -> list[Event] | None:
        """The Event of a batch of one that the per-line stages read (``from_event``); None for scanned rows,
        whose Events the events layer builds (``events.rows.metric_events``) from ``event_fields``."""
        return self._events if self._view is None else None

    def event_fields(self, k: int, rec: Record) -> dict:
        """Row ``k``'s V_STATS / V_SPEC template fields (``rec``: its ``record(k)``), with the parsed body
        (``metrics.parse`` caches it as ``_kv``) taken from the columns instead of parsed again."""
        table, i = self.kinds[k], self._rows[k]
        fields = metric_fields(table, rec.raw)
        fields["_kv"] = scan.stats_row(self._view.res, i) if table == "stats" else scan.spec_row(self._view.res, i)
        return fields


_LATE: tuple | None = None


def _late() -> tuple:
    """``(VLLM_REST, Record)``, imported once on first use: the envelope module is imported by the
    records path after this one, so it is not imported at load time."""
    global _LATE
    if _LATE is None:
        from specdiag.ingest.envelope import VLLM_REST, Record

        _LATE = (VLLM_REST, Record)
    return _LATE


_AGGREGATED = _W.ENGINES_AGGREGATED + _W.KEY_END


def metric_fields(table: str, msg: bytes) -> dict:
    """The V_STATS / V_SPEC template's fields of a message the scanner accepted, sliced instead of matched:
    the scanner checked the shape (``Engine N: `` / ``N Engines Aggregated: `` then ``Avg prompt
    throughput: …``; ``SpecDecoding metrics: …``), printable ASCII; a test holds it equal to the match."""
    if table == "spec":
        return {"body": msg[len(scan.S_SPEC) :].decode()}
    if msg.startswith(_W.ENGINE):
        colon = msg.index(_W.KEY_END, len(_W.ENGINE))
        return {"engine": msg[len(_W.ENGINE) : colon].decode(), "n_engines": None,
                "body": msg[colon + len(_W.KEY_END) :].decode()}
    cut = msg.index(_AGGREGATED)
    return {"engine": None, "n_engines": msg[:cut].decode(), "body": msg[cut + len(_AGGREGATED) :].decode()}


#: metric rows become events (``events.rows.metric_events``): counted as events, not as scanner counts
_NOT_COUNTED = ("V_STATS", "V_SPEC")


class HotTally:
    """Per input: lines per scanner template (summed over processes) and the first row of each."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, Record] = {}
        #: lines of counted templates the per-line stages read (a wrapped line), by the deployment their
        #: wrapper names (``Origin.deployment``; None: unnamed, shared like the scanner's counts)
        self.named: dict[str | None, dict[str, int]] = {}
        self.named_first: dict[str | None, dict[str, Record]] = {}

    def add_line(self, tid: str, rec: Record) -> None:
        """One counted line (a complete store or retrieve) that the per-line stages read."""
        dep = rec.origin.deployment
        counts = self.named.get(dep)
        if counts is None:
            if len(self.named) >= 4096:
                dep = None
                counts = self.named.setdefault(None, {})
            else:
                counts = self.named[dep] = {}
        counts[tid] = counts.get(tid, 0) + 1
        self.named_first.setdefault(dep, {}).setdefault(tid, rec)

    def add(self, view: BlockView, deployment: str | None = None) -> int:
        """Count one block's hot lines (flagged ones excepted: those become events); returns how many. With
        ``deployment`` (a block whose every line a wrapper attributed to it), counted as the per-line stages
        count such lines (:meth:`add_line`): for that deployment alone."""
        res = view.res
        if deployment is None:
            counts, first = self.counts, self.first
        else:
            counts = self.named.get(deployment)
            if counts is None:
                counts = self.named.setdefault(deployment if len(self.named) < 4096 else None, {})
            first = self.named_first.setdefault(deployment if deployment in self.named else None, {})
        n = 0
        for (_prefix, tid), k in res.counts.items():
            if tid in _NOT_COUNTED:
                continue
            counts[tid] = counts.get(tid, 0) + k
            n += k
        flagged = res.columns["flagged"]["tid"]
        for t in flagged:
            tid = scan.TEMPLATES[t]
            counts[tid] -= 1
        for tid, table in (("S1", "stores"), ("R4", "retrieves"), ("L1", "lookups")):
            if tid not in first and res.columns[table]["line"]:
                first[tid] = view.record(table, self._first_full(res, table))
        return n - len(flagged)

    @staticmethod
    def _first_full(res: scan.ScanResult, table: str) -> int:
        """The first row that is not a flagged (short) retrieve: the evidence of a *counted* line."""
        if table != "retrieves":
            return 0
        cols = res.columns[table]
        for i, (got, req) in enumerate(zip(cols["retrieved"], cols["required"], strict=True)):
            if got >= req:
                return i
        return 0


#: look-back needle → (scanner table, template id of the Python path's events)
_NEEDLES = {_W.RETRIEVED: ("retrieves", "R4"), _W.STORED: ("stores", "S1"), _W.REQID.rstrip(): ("lookups", "L1")}


class HotWindow:
    """The look-back of ``RunState.event_before``: the last two blocks' hot rows, and the last few hot
    records the Python path read (wrapped lines), per process."""

    def __init__(self, path: str) -> None:
        self.path = path
        # the block being read and the fewest blocks before it that hold LOOKBACK_LINES lines (a one-line
        # block that joins a line cut between reads counts for one)
        self.views: deque[BlockView] = deque(maxlen=8)
        self.noted: dict[tuple[str, str], deque[Record]] = {}

    def push(self, view: BlockView) -> None:
        views = self.views
        views.append(view)
        while len(views) > 2 and sum(v.res.lines for v in list(views)[1:-1]) >= LOOKBACK_LINES:
            views.popleft()

    def note(self, rec: Record, tid: str) -> None:
        """A store/retrieve/lookup line that reached the rules as a record (not scanned)."""
        key = (rec.origin.key, tid)
        d = self.noted.get(key)
        if d is None:
            if len(self.noted) >= 4096:
                return
            d = self.noted[key] = deque(maxlen=8)
        d.append(rec)

    def clear(self) -> None:
        self.views.clear()
        self.noted.clear()

    def find_back(self, before: int, needle: bytes, origin_key: str, limit: int = LOOKBACK_LINES) -> Record | None:
        """The nearest such line of process ``origin_key`` in ``[before - limit, before)``."""
        spec = _NEEDLES.get(needle)
        if spec is None:
            return None
        table, tid = spec
        best = self._noted_before(before, tid, origin_key, limit)
        floor = best.line if best is not None else before - limit
        for view in reversed(self.views):
            hit = self._row_before(view, table, before, floor, origin_key)
            if hit is not None:
                return view.record(table, hit)
        return best

    def _noted_before(self, before: int, tid: str, key: str, limit: int) -> Record | None:
        for rec in reversed(self.noted.get((key, tid), ())):
            if before - limit <= rec.line < before:
                return rec
        return None

    @staticmethod
    def _row_before(view: BlockView, table: str, before: int, floor: int, key: str) -> int | None:
        cols = view.res.columns[table]
        lines, procs = cols["line"], cols["proc"]
        for i in range(bisect_left(lines, before) - 1, -1, -1):
            if lines[i] <= floor:
                return None
            if view.origin(procs[i]).key == key:
                return i
        return None


__all__ = ["BlockView", "HotTally", "HotWindow", "LookupRows", "MetricRows", "RowRecord"]
