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
from typing import TYPE_CHECKING

from specdiag.ingest import scan
from specdiag.ingest.origin import Origin, OriginCache
from specdiag.numbers import to_int

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.events import Event
    from specdiag.ingest.records import Record

NA = scan.NA
#: look-back reach in lines (as the raw-line window it replaces)
LOOKBACK_LINES = 2000


class BlockView:
    """One scanned block of one input, shared by the rows cut from it: its bytes, result and origins."""

    __slots__ = ("path", "block", "off", "res", "year", "_origins", "_by_proc")

    def __init__(self, path: str, block: bytes, off: int, res: scan.ScanResult, origins: OriginCache,
                 year: int | None) -> None:
        self.path = path
        self.block = block  # the bytes read; the scanned lines start at ``off`` (row offsets are relative to it)
        self.off = off
        self.res = res
        self.year = year
        self._origins = origins
        self._by_proc: list[Origin | None] = [None] * len(res.prefixes)

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
        _event_cls, _templates, VLLM_REST, Record = _late()  # noqa: N806 - the imported names
        cols = self.res.columns[table]
        proc = cols["proc"][i]
        rest = scan.clean_line(self.raw(table, i))[len(self.res.prefixes[proc]) :]
        m = VLLM_REST.match(rest, 5)
        return Record(self.path, cols["line"][i], self.origin(proc), "vllm", "INFO", m.group(1), self.year,
                      m.group(2), to_int(m.group(3)), None, rest[m.end() :])

    def raw(self, table: str, i: int) -> bytes:
        cols, off = self.res.columns[table], self.off
        return self.block[off + cols["start"][i] : off + cols["end"][i]]


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

    def event(self, i: int) -> Event:
        """Row ``i`` as the L1 Event the Python path would have made (fields parsed on demand)."""
        if self._event is not None:
            return self._event
        from specdiag.events import default_matcher

        rec = self.record(i)
        ev = default_matcher().match(rec)
        if ev is None or ev.id != "L1":  # pragma: no cover - the scanner's grammar is a subset of L1's
            raise ValueError(f"line {rec.line}: a scanned lookup row is not an L1 line")
        return ev

    def keep(self, i: int) -> Record | bytes:
        """What to keep of row ``i`` to rebuild it later (``revive``): its raw bytes, or its Record."""
        return self._event.rec if self._event is not None else self._view.raw("lookups", i)

    def kept_rows(self) -> list[Record | bytes]:
        """``keep(i)`` for every row, in order (one slice per row, no per-row lookups)."""
        if self._event is not None:
            return [self._event.rec]
        cols = self._view.res.columns["lookups"]
        block, off, lo, hi = self._view.block, self._view.off, self.lo, self.hi
        return [block[off + s : off + e] for s, e in zip(cols["start"][lo:hi], cols["end"][lo:hi], strict=True)]

    def origin(self, i: int) -> Origin:
        if self._event is not None:
            return self._event.rec.origin
        return self._view.origin(self.proc[i])


def revive(kept: Record | bytes, path: str, line: int, origins: OriginCache) -> Event | None:
    """The L1 Event of a row kept with ``LookupRows.keep``."""
    from specdiag.events import default_matcher
    from specdiag.ingest.records import Record

    rec = kept if isinstance(kept, Record) else scan.hot_record(kept, 0, len(kept), line, path, origins)
    return default_matcher().match(rec)


_LATE: tuple | None = None


def _late() -> tuple:
    """``(Event, {table: (tid, template)}, VLLM_REST, Record)``, imported once on first use: records and
    events import this module, so it cannot import them at load time."""
    global _LATE
    if _LATE is None:
        from specdiag.events import Event, template
        from specdiag.ingest.records import VLLM_REST, Record

        _LATE = (Event, {t: (tid, template(tid)) for t, tid in (("stats", "V_STATS"), ("spec", "V_SPEC"))},
                 VLLM_REST, Record)
    return _LATE


def metric_fields(table: str, msg: bytes) -> dict:
    """The V_STATS / V_SPEC template's fields of a message the scanner accepted, sliced instead of matched:
    the scanner checked the shape (``Engine N: `` / ``N Engines Aggregated: `` then ``Avg prompt
    throughput: …``; ``SpecDecoding metrics: …``), printable ASCII; a test holds it equal to the match."""
    if table == "spec":
        return {"body": msg[22:].decode()}
    if msg.startswith(b"Engine "):
        colon = msg.index(b": ", 7)
        return {"engine": msg[7:colon].decode(), "n_engines": None, "body": msg[colon + 2 :].decode()}
    cut = msg.index(b" Engines Aggregated: ")
    return {"engine": None, "n_engines": msg[:cut].decode(), "body": msg[cut + 21 :].decode()}


def metric_event(view: BlockView, table: str, i: int, rec: Record) -> Event:
    """The V_STATS / V_SPEC event of a metric row: the template's own fields, and the parsed body
    (``metrics.parse`` caches it as ``_kv``) taken from the columns instead of parsed again."""
    event_cls, templates, _rest, _rec = _late()
    tid, t = templates[table]
    fields = metric_fields(table, rec.raw)
    fields["_kv"] = scan.stats_row(view.res, i) if table == "stats" else scan.spec_row(view.res, i)
    return event_cls(tid, rec, fields, t)


#: metric rows become events (``metric_event``): counted as events, not as scanner counts
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

    def add(self, view: BlockView) -> int:
        """Count one block's hot lines (flagged ones excepted: those become events); returns how many."""
        res = view.res
        counts = self.counts
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
            if tid not in self.first and res.columns[table]["line"]:
                self.first[tid] = view.record(table, self._first_full(res, table))
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
_NEEDLES = {b"Retrieved ": ("retrieves", "R4"), b"Stored ": ("stores", "S1"), b"Reqid:": ("lookups", "L1")}


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


__all__ = ["BlockView", "HotTally", "HotWindow", "LookupRows", "revive"]
