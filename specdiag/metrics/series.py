"""Per-engine intervals of the periodic stats line and its SpecDecoding line.

vLLM prints, every ``VLLM_LOG_STATS_INTERVAL`` seconds (default 10) and per engine, a stats line and —
only when at least one draft was verified in that interval — a SpecDecoding line right after it, from the
same process (the API server, or ``MainProcess`` offline). An ``Interval`` joins the two. Intervals are
attributed to an engine key: the input file, the printing process and the ``Engine NNN`` /
``N Engines Aggregated`` label.

Memory is bounded and the cost per line small: while it reads, the series keeps each interval as a flat
row (a list, ``_ROW``'s fields), and an engine's rows are folded in groups of ``stride`` lines: below
``cap`` rows the stride is 1 (one row a stats line); at ``cap`` rows neighbouring rows are folded in groups
of ``FAN_IN`` and the stride grows as much, so every row of a series covers the same number of stats lines
and a GB log keeps between ``cap / FAN_IN`` and ``cap`` rows per engine. A fold (``fold``) works a column at a time with
built-ins: on a metric-dense log it runs about once per line, where a field-by-field merge of two objects
cost more than all the other work of the line. ``Interval`` objects are made only when a rule or the
timeline asks for the series (``engines``), after the run.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_not, itemgetter, mul, truediv

from specdiag.timeutil import rec_time

STATS_EVENTS = frozenset({"V_STATS", "V_STATS_V0"})
SPEC_EVENTS = frozenset({"V_SPEC"})
#: (engine, n_engines) → label (few distinct: one per engine)
_LABELS: dict[tuple, str] = {}

#: a row's fields: time, line, stats Record (or ``hot.RowRecord``), stats lines covered, the stats values
#: (``metrics.parse.STATS_ORDER``), the SpecDecoding values (``SPEC_ORDER``) and its Record
_ROW = ("t", "line", "_rec", "n", "running", "waiting", "kv", "kv_device", "prefix", "ext", "preempt", "prompt_tps",
        "gen_tps", "acc", "dr", "mal", "rate", "pos", "ndrafts", "_spec_rec")
T, LINE, REC, N = 0, 1, 2, 3
_SPEC, DR, SPEC_REF = 13, 14, 19
_NO_SPEC = (None,) * 7  # the SpecDecoding values and Record of a row without a SpecDecoding line
_NO_STATS = (None,) * 9
#: rows folded into one when a series reaches its cap: 4 keeps between a quarter of the cap and the cap,
#: with half the folds of pairs (each stats line is folded about once either way; the compactions are fewer)
FAN_IN = 4


class Interval:
    """One logging interval of one engine (or, past the cap, ``n`` of them folded). ``acc``/``dr`` are None
    when no SpecDecoding line followed."""

    __slots__ = ("path", "engine", *_ROW)

    def __init__(self, t, path, line, rec, engine) -> None:
        self.path = path
        self.engine = engine
        (self.t, self.line, self._rec, self.n, self.running, self.waiting, self.kv, self.kv_device, self.prefix,
         self.ext, self.preempt, self.prompt_tps, self.gen_tps, self.acc, self.dr, self.mal, self.rate, self.pos,
         self.ndrafts, self._spec_rec) = (t, line, rec, 1, *_NO_STATS, *_NO_SPEC)

    @classmethod
    def of_row(cls, path: str, engine: str, row: list) -> Interval:
        iv = cls.__new__(cls)
        iv.path, iv.engine = path, engine
        (iv.t, iv.line, iv._rec, iv.n, iv.running, iv.waiting, iv.kv, iv.kv_device, iv.prefix, iv.ext, iv.preempt,
         iv.prompt_tps, iv.gen_tps, iv.acc, iv.dr, iv.mal, iv.rate, iv.pos, iv.ndrafts, iv._spec_rec) = row
        return iv

    def row(self) -> list:
        return [getattr(self, name) for name in _ROW]

    @property
    def rec(self):
        """The stats line's Record (for evidence; built on first use for a scanned row)."""
        return _resolved(self._rec)

    @property
    def spec_rec(self):
        """The SpecDecoding line's Record, None when none followed."""
        return _resolved(self._spec_rec)

    # ------------------------------------------------------------------ filling
    def fill_stats(self, v: tuple) -> None:
        """The stats line's fields in ``metrics.parse.STATS_ORDER`` (what ``ingest.hot.MetricRows.values`` gives)."""
        (self.running, self.waiting, self.kv, self.kv_device, self.prefix, self.ext, self.preempt, self.prompt_tps,
         self.gen_tps) = v

    def fill_spec(self, v: tuple, rec, t: float | None = None) -> None:
        """The SpecDecoding line's fields in ``SPEC_ORDER`` (``t``: its time, when ``rec`` is not yet a Record)."""
        self.acc, self.dr, self.mal, self.rate, self.pos, self.ndrafts = v
        self._spec_rec = rec
        if self.t is None:
            self.t = rec_time(rec) if t is None else t

    # ------------------------------------------------------------------ views
    @property
    def has_spec(self) -> bool:
        return self.dr is not None

    @property
    def acceptance(self) -> float | None:
        """Accepted / Drafted of the interval (fraction), None without drafts."""
        if self.dr:
            return (self.acc or 0) / self.dr
        return self.rate

    @property
    def generating(self) -> bool:
        return bool(self.gen_tps and self.gen_tps > 0) or bool(self.running and self.running > 0)

    def evidence_rec(self):
        return self.spec_rec or self.rec


def _resolved(rec):
    return rec() if callable(rec) else rec


# ---------------------------------------------------------------------------------------------- folding
def fold(rows: list[list]) -> list:
    """One row for consecutive rows (the first first): the largest of the gauges (``max``: the first of
    equals, NaN where ``max`` keeps it), the mean of the printed rates and throughputs, sums of the token
    counts with the acceptance rate and mean acceptance length recomputed from them, the per-position
    rates weighted by drafts; time, line and Records of the first row (the first SpecDecoding Record).
    Rows are never mutated: a fold is a new row. Each field is one built-in over its column (a fold runs
    about once per stats line on a long log)."""
    first = rows[0]
    if len(rows) == 1:
        return list(first)
    (_t, _line, _rec, n, running, waiting, kv, dev, prefix, ext, preempt, prompt, gen, acc, dr, mal, rate, pos, nd,
     spec_ref) = zip(*rows, strict=True)
    return [first[T], first[LINE], first[REC], sum(n), _max(running), _max(waiting), _max(kv),
            next(filter(None, dev), dev[-1]), _mean(prefix), _mean(ext), _max(preempt), _mean(prompt), _mean(gen),
            *_fold_spec(acc, dr, mal, rate, pos, nd), next(filter(None, spec_ref), None)]


def _max(col: tuple):
    """The largest printed value (None when none was)."""
    return max(col) if None not in col else max(_printed(col), default=None)


def _printed(col: tuple) -> list:
    return list(compress(col, map(is_not, col, repeat(None))))


def _mean(col: tuple) -> float | None:
    """The mean of the printed values (one printed value as it is; None when none was)."""
    c = col if None not in col else _printed(col)
    return (c[0] if len(c) == 1 else sum(c) / len(c)) if c else None


def _total(col: tuple) -> int | float:
    """The sum of the printed values (a missing one counts 0)."""
    return sum(col) if None not in col else sum(_printed(col))


def _fold_spec(accs: tuple, drs: tuple, mals: tuple, rates: tuple, poss: tuple, nds: tuple) -> tuple:
    """``fold``'s SpecDecoding fields (``SPEC_ORDER``): counts summed where any row had drafted counts."""
    if None not in accs and None not in drs and None not in nds:  # every row had a SpecDecoding line
        acc, dr, nd = sum(accs), sum(drs), sum(nds)
        mal = 1 + acc / nd if nd else next(filter(None, mals), None)
        return (acc, dr, mal, acc / dr if dr else None, _fold_positions(poss, nds, drs), nd)
    if drs.count(None) == len(drs):  # no row had drafted counts (an old line: the rate and mal only)
        return (None, None, _mean(mals), _mean(rates), next(filter(None, poss), poss[-1]), None)
    acc, dr = _total(accs), _total(drs)
    if nds.count(None) != len(nds):
        nd = _total(nds)
        mal = 1 + acc / nd if nd else next(filter(None, mals), None)
    else:
        nd, mal = None, _mean(mals)
    return (acc, dr, mal, acc / dr if dr else None, _fold_positions(poss, nds, drs), nd)


def _fold_positions(poss: tuple, nds: tuple, drs: tuple) -> list | None:
    """Per-position acceptance of the group, each row weighted by its drafts (``num_drafts``, else the
    drafted tokens, else 1); rows whose list is shorter or longer than the first row's are left out, a
    position any of the others left unknown (None) is unknown."""
    if None not in poss and (first := poss[0]):
        lens = list(map(len, poss))
        if lens.count(lens[0]) == len(lens):  # the common group: every row printed as many positions
            weights = nds if None not in nds and 0 not in nds else [nd or dr or 1 for nd, dr in zip(nds, drs, strict=True)]
            total = sum(weights)
            return [None if None in col else sum(map(mul, col, weights)) / total for col in zip(*poss, strict=True)]
    first = next(filter(None, poss), None)
    if first is None:
        return poss[-1]
    width = len(first)
    keep = [bool(p) and len(p) == width for p in poss]
    weights = [nd or dr or 1 for nd, dr in compress(zip(nds, drs, strict=True), keep)]
    if len(weights) == 1:
        return first
    total = sum(weights)
    return [None if None in col else sum(map(mul, col, weights)) / total
            for col in zip(*compress(poss, keep), strict=True)]


def fold_groups(rows: list[list], s: int) -> list[list]:
    """``fold`` of every group of ``s`` consecutive rows (``len(rows)`` a multiple of ``s``), the same rows,
    computed a column at a time over all the groups at once: each field is one built-in mapped over the
    groups' tuples (``zip`` of the column's ``s`` strided slices), so a compaction or a batch past the cap
    costs C-level passes, not one ``fold`` call per group. A column holding None (a value not printed) or
    a group whose positions or counts need ``fold``'s special cases goes through ``fold``'s own helpers,
    group by group: the result is ``fold``'s to the bit (``tests/test_series_fold.py``)."""
    if s == 1 or len(rows) <= s:
        return [fold(rows[i : i + s]) for i in range(0, len(rows), s)]
    return fold_columns(list(zip(*rows, strict=True)), s)


def fold_columns(cols: list, s: int) -> list[list]:
    """``fold_groups`` of the rows whose columns (``_ROW``'s fields, equal lengths, a multiple of ``s``) are
    ``cols``: a batch past the cap arrives as columns and is folded without being made rows first."""

    def groups(col: tuple):
        return zip(*(col[k::s] for k in range(s)), strict=True)

    def first(col: tuple):
        return col[0::s]

    def maxes(col: tuple):
        return list(map(max if None not in col else _max, groups(col)))

    def means(col: tuple):
        return [x / s for x in map(sum, groups(col))] if None not in col else list(map(_mean, groups(col)))

    def first_set(col: tuple, default_last: bool):
        heads = col[0::s]
        if all(heads):
            return heads
        return [next(filter(None, grp), grp[-1] if default_last else None) for grp in groups(col)]

    (_t, _line, _rec, n, running, waiting, kv, dev, prefix, ext, preempt, prompt, gen, acc, dr, mal, rate, pos, nd,
     spec_ref) = cols
    out = [first(cols[T]), first(cols[LINE]), first(cols[REC]), list(map(sum, groups(n))), maxes(running),
           maxes(waiting), maxes(kv), first_set(dev, True), means(prefix), means(ext), maxes(preempt),
           means(prompt), means(gen)]
    spec = _spec_columns(acc, dr, mal, pos, nd, groups)
    if spec is None:  # a special case somewhere: fold's own SpecDecoding helper, group by group
        spec = list(zip(*map(_fold_spec, *(groups(c) for c in (acc, dr, mal, rate, pos, nd))), strict=True))
    out.extend(spec)
    out.append(first_set(spec_ref, False))
    return list(map(list, zip(*out, strict=True)))


def _spec_columns(accs: tuple, drs: tuple, mals: tuple, poss: tuple, nds: tuple, groups) -> list | None:
    """``_fold_spec`` of every group a column at a time, for the common columns only: every row with a
    SpecDecoding line (counts, draft counts), non-zero draft counts, positions printed by every row with one
    width; None otherwise (the caller folds group by group)."""
    if None in accs or None in drs or None in nds or 0 in nds or None in poss:
        return None
    widths = set(map(len, poss))
    if len(widths) != 1 or not (width := widths.pop()):
        return None
    position_cols = [list(map(itemgetter(j), poss)) for j in range(width)]
    if any(None in col for col in position_cols):
        return None
    acc, dr, nd = (list(map(sum, groups(c))) for c in (accs, drs, nds))
    if 0 in nd:  # counts that cancel out: fold's own rule for the mean acceptance length
        return None
    mal = [1 + a / d for a, d in zip(acc, nd, strict=True)]  # nd > 0: every count is
    rate = [a / d if d else None for a, d in zip(acc, dr, strict=True)]
    per_position = [list(map(truediv, map(sum, groups(tuple(map(mul, col, nds)))), nd)) for col in position_cols]
    pos = list(map(list, zip(*per_position, strict=True)))
    return [acc, dr, mal, rate, pos, nd]


def merge(a: Interval, b: Interval) -> Interval:
    """A new interval covering a and b (a first): ``fold`` of their rows."""
    return Interval.of_row(a.path, a.engine, fold([a.row(), b.row()]))


def compact(items: list[Interval]) -> list[Interval]:
    """Neighbouring intervals merged in pairs (the last alone when odd): half as many points."""
    out = [merge(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
    if len(items) % 2:
        out.append(items[-1])
    return out


# ---------------------------------------------------------------------------------------------- tracking
def _label(engine: int | None, n_engines: int | None) -> str:
    """``engine 0`` (vLLM's ``Engine 000:``), ``2 engines aggregated``, or ``engine`` (no label printed)."""
    if engine is not None:
        return f"engine {engine}"
    if n_engines is not None:
        return f"{n_engines} engines aggregated"
    return "engine"


def _label_of(engine: tuple[int | None, int | None]) -> str:
    """``_label`` of ``MetricRows.engine``'s pair, made once per pair."""
    label = _LABELS.get(engine)
    return label if label is not None else _LABELS.setdefault(engine, _label(*engine))


def _joined_columns(rows, at: list[int], partner: list[int | None], stats: list, spec: list, refs: tuple) -> list:
    """``_ROW``'s columns of one row per stats line ``at`` (batch rows), each joined by its SpecDecoding line
    ``partner`` (None: none followed): ``stats``/``spec`` are the values of those lines as columns, ``refs``
    the rows' stats and SpecDecoding Records (``_kept_refs``)."""
    times, lines = rows.times(), rows.lines
    t = [times[k] if times[k] is not None or p is None else times[p] for k, p in zip(at, partner, strict=True)]
    if len(spec[0]) != len(at):  # spread the SpecDecoding values over the rows they join
        place = iter(range(len(spec[0])))
        slot = [None if p is None else next(place) for p in partner]
        spec = [[None if j is None else col[j] for j in slot] for col in spec]
    return [t, [lines[k] for k in at], refs[0], [1] * len(at), *stats, *spec, refs[1]]


def _kept_refs(rows, at: list[int], partner: list[int | None], eng: _EngineRows) -> tuple[list, list]:
    """The stats and SpecDecoding Records (``record_ref``) of rows ``at`` joined by ``partner``, as the engine
    will keep them: below the cap every row's; past it a row lands in a group of ``stride`` that is folded, and
    a fold keeps its first row's Record and its first SpecDecoding Record only (``fold``), so only those
    are made (a RowRecord per line cost as much as the rest of the column path). The last row keeps its
    SpecDecoding Record whatever its group: a next SpecDecoding line joins only a row without one."""
    if eng.stride == 1:
        refs = rows.refs()
        return [refs[k] for k in at], [None if p is None else refs[p] for p in partner]
    ref, stride, opened = rows.record_ref, eng.stride, len(eng.pending)  # pending: the open group's rows
    has_spec = any(row[SPEC_REF] is not None for row in eng.pending)
    stats_refs: list = []
    spec_refs: list = []
    last = len(at) - 1
    for j, (k, p) in enumerate(zip(at, partner, strict=True)):
        first = (opened + j) % stride == 0
        if first:
            has_spec = False
        stats_refs.append(ref(k) if first else None)
        keep = p is not None and (not has_spec or j == last)
        spec_refs.append(ref(p) if keep else None)
        has_spec = has_spec or keep
    return stats_refs, spec_refs


def _stats_and_partners(kinds: list[str], lo: int) -> tuple[list[int], list[int | None]]:
    """The stats lines of a batch from ``lo`` on and the SpecDecoding line right after each (None: none); the
    common batch, a stats line and its SpecDecoding line in turn, without a loop in Python."""
    n = len(kinds)
    if kinds[lo::2].count("stats") == (n - lo + 1) // 2 and kinds[lo + 1 :: 2].count("spec") == (n - lo) // 2:
        return list(range(lo, n, 2)), [*range(lo + 1, n, 2), *([None] if (n - lo) % 2 else [])]
    at = [k for k in range(lo, n) if kinds[k] == "stats"]
    return at, [k + 1 if k + 1 < n and kinds[k + 1] == "spec" else None for k in at]


def _by_engine(engines: list[tuple]) -> dict[tuple, list[int]]:
    """Each engine's positions in ``engines`` (a batch's stats lines in turn), engines in first-seen order."""
    if engines.count(engines[0]) == len(engines):
        return {engines[0]: list(range(len(engines)))}
    groups: dict[tuple, list[int]] = {}
    for j, engine in enumerate(engines):
        groups.setdefault(engine, []).append(j)
    return groups


class _EngineRows:
    """One engine's rows: ``done`` (each covering ``stride`` stats lines) and ``pending``, the newest rows
    not yet folded (the last one may still be joined by its SpecDecoding line)."""

    __slots__ = ("cap", "done", "pending", "stride")

    def __init__(self, cap: int) -> None:
        #: rows kept before folding, fixed when the engine is first seen (``SeriesTracker._engine``)
        self.cap = cap
        self.done: list[list] = []
        self.pending: list[list] = []
        self.stride = 1

    def settle(self, cap: int) -> None:
        """Fold every complete group of ``pending`` but its last row, in order; whenever ``done`` reaches
        ``cap`` rows, fold it in groups of ``FAN_IN`` and widen the stride as much (a batch settles as its
        rows one by one would)."""
        pending, done = self.pending, self.done
        while len(pending) > self.stride:
            s = self.stride
            if s == 1:
                take = min(len(pending) - 1, cap - len(done))
                done.extend(pending[:take])
            else:  # every complete group but the one holding the last row, up to the cap
                take = min((len(pending) - 1) // s, cap - len(done)) * s
                done.extend(fold_groups(pending[:take], s))
            del pending[:take]
            done = self._compact(cap)

    def extend_columns(self, cols: list, cap: int) -> None:
        """``pending.extend(rows)`` then ``settle(cap)``, for rows given as columns (``_ROW``'s fields) at a
        stride above 1: the complete groups are folded from the columns; only the rows left pending are
        made (the last one may still be joined by its SpecDecoding line)."""
        s = self.stride
        if self.pending:
            cols = [(*p, *c) for p, c in zip(zip(*self.pending, strict=True), cols, strict=True)]
        take = min((len(cols[0]) - 1) // s, cap - len(self.done)) * s
        if take:
            self.done.extend(fold_columns([c[:take] for c in cols], s))
        self.pending = list(map(list, zip(*(c[take:] for c in cols), strict=True)))
        self._compact(cap)
        self.settle(cap)

    def _compact(self, cap: int) -> list[list]:
        """At ``cap`` rows: ``done`` folded in groups of ``FAN_IN``, the stride as much wider."""
        done = self.done
        if len(done) >= cap:
            whole = len(done) - len(done) % FAN_IN
            self.done = done = fold_groups(done[:whole], FAN_IN) + ([fold(done[whole:])] if whole < len(done) else [])
            self.stride *= FAN_IN
        return done

    def rows(self) -> list[list]:
        """Every row, the pending ones folded as one (the newest, shorter group)."""
        return self.done + ([fold(self.pending)] if self.pending else [])


#: engines (path, process, engine label) whose interval series are kept, and how many of them keep the full
#: ``cap`` of rows (the others an eighth of it): a data-parallel server has a handful of engines, while a
#: log that names a new engine every few lines must not grow memory with its size (at most
#: 8 × cap + 56 × cap / 8 rows whatever it holds)
MAX_ENGINES = 64
FULL_ENGINES = 8
#: SpecDecoding lines held per process before its first stats line names their engine (``SeriesTracker._orphans``)
MAX_ORPHANS = 16
#: seconds between a stats line and the SpecDecoding line of the same interval: vLLM prints both in one call
#: (``LoggingStatLogger.log``), so their times differ by at most the second that may tick between them
SAME_CALL_S = 1.5


def _same_call(stats_t: float | None, spec_t: float | None) -> bool:
    """Whether a stats line and a SpecDecoding line may be one interval's, by their times (unknown: yes); a paste
    with lines cut between them has a SpecDecoding line minutes after the stats line it follows."""
    return stats_t is None or spec_t is None or abs(spec_t - stats_t) <= SAME_CALL_S


class SeriesTracker:
    """Feeds stats/SpecDecoding rows into per-engine rows (bounded by ``cap`` per engine)."""

    def __init__(self, cap: int = 20000) -> None:
        self.cap = max(2, cap)
        self._engines: dict[tuple, _EngineRows] = {}
        #: stats/SpecDecoding rows of engines past ``MAX_ENGINES``, counted and dropped
        self.untracked_rows = 0
        self.last: dict[tuple, tuple[list, tuple]] = {}  # (path, process key) → its last row and engine key
        #: (path, process key) → SpecDecoding rows before the process's first stats line: a paste that starts
        #: between a stats line and its SpecDecoding line; they join the engine that line names, before it
        self._orphans: dict[tuple, list[list]] = {}
        self._built: dict[tuple, list[Interval]] | None = None

    def observe(self, ev) -> None:
        """One stats / SpecDecoding event (a line the per-line stages read): a batch of one row."""
        if ev.id in STATS_EVENTS or ev.id in SPEC_EVENTS:
            from specdiag.ingest.hot import MetricRows

            self.observe_rows(MetricRows.from_event(ev))

    def observe_rows(self, rows) -> None:
        """A batch of stats / SpecDecoding rows (``ingest.hot.MetricRows``): a row per stats line, the
        SpecDecoding line after it (same process) joined to it, one on its own otherwise; a scanned row
        keeps a ``RowRecord`` and builds its Record only if shown."""
        self._built = None
        n = len(rows)
        lo = 1 if n and rows.kinds[0] == "spec" else 0  # the SpecDecoding line of the last batch's stats line
        if n - lo >= 4 and self._observe_joined(rows, lo):
            return
        self._observe_each(rows, 0, n)

    def _observe_joined(self, rows, lo: int) -> bool:
        """The batch from ``lo`` on a column at a time, when it is one process's stats lines, each with or
        without the SpecDecoding line right after it (vLLM prints one only for an interval that verified
        drafts), of one engine or several in turn (a data-parallel server): a row per stats line, joined by
        its SpecDecoding line, per engine, as one line at a time makes them. False, having done nothing, for
        any other batch (a SpecDecoding line after another, engines past ``MAX_ENGINES``)."""
        kinds, origins = rows.kinds, rows.origins
        n = len(kinds)
        if kinds[lo] != "stats" or origins.count(origins[0]) != n or (rows.path, origins[0].key) in self._orphans:
            return False
        at, partner = _stats_and_partners(kinds, lo)
        if len(at) + sum(p is not None for p in partner) != n - lo:  # a SpecDecoding line after another
            return False
        times = rows.times()
        if not all(p is None or _same_call(times[k], times[p]) for k, p in zip(at, partner, strict=True)):
            return False  # lines cut between a stats line and the next SpecDecoding line: one line at a time
        engines = rows.engines_at(rows.table_rows(at))
        if engines is None:
            return False
        pkey = (rows.path, origins[0].key)
        groups = _by_engine(engines)
        keys = [(rows.path, pkey[1], _label_of(engine)) for engine in groups]
        if not self._room_for(keys):
            return False
        if lo:  # row 0 joins the last batch's row first (or is a row of its own)
            self._observe_each(rows, 0, 1)
        engs = [self._engine(ekey) for ekey in keys]  # made in the order one line at a time makes them
        if None in engs:  # row 0 took the last free engine: one line at a time, as that path counts
            self._observe_each(rows, lo, n)
            return True
        for positions, eng in zip(groups.values(), engs, strict=True):
            sub_at, sub_partner = [at[j] for j in positions], [partner[j] for j in positions]
            spec_at = [p for p in sub_partner if p is not None]
            values = rows.columns_at(rows.table_rows(sub_at), rows.table_rows(spec_at))
            refs = _kept_refs(rows, sub_at, sub_partner, eng)
            self._extend(eng, _joined_columns(rows, sub_at, sub_partner, *values, refs))
        ekey = (rows.path, pkey[1], _label_of(engines[-1]))
        if pkey in self.last or len(self.last) < MAX_ENGINES:
            self.last[pkey] = (self._engines[ekey].pending[-1], ekey)
        return True

    def _room_for(self, keys: list[tuple]) -> bool:
        """Whether the engines ``keys`` are tracked or can be (the first ``MAX_ENGINES``; a log naming a new
        engine on every line goes one line at a time, which counts the rest as untracked)."""
        new = sum(k not in self._engines for k in keys)
        return len(keys) <= MAX_ENGINES and len(self._engines) + new <= MAX_ENGINES

    @staticmethod
    def _extend(eng: _EngineRows, columns: list) -> None:
        """Rows given as ``_ROW``'s columns to the engine: past the cap the complete groups are folded from the
        columns; below it every stats line keeps a row of its own."""
        if eng.stride > 1:
            eng.extend_columns(columns, eng.cap)
        else:
            eng.pending.extend(map(list, zip(*columns, strict=True)))
            eng.settle(eng.cap)

    def _observe_each(self, rows, lo: int, hi: int) -> None:
        """Rows ``lo .. hi-1``, one at a time; each engine they reach settles once, after the last of them (a
        batch settles as its rows one by one would: ``_EngineRows.settle``; a SpecDecoding line joins the
        last row, which settling never folds)."""
        path, last = rows.path, self.last
        reached: dict[int, _EngineRows] = {}
        refs = [rows.record_ref(k) for k in range(lo, hi)]
        kinds, times, lines, origins, values = (x[lo:hi] for x in (
            rows.kinds, rows.times(), rows.lines, rows.origins, rows.values()))
        for k, (kind, t, line, origin, ref, vals) in enumerate(
                zip(kinds, times, lines, origins, refs, values, strict=True), lo):
            pkey = (path, origin.key)
            if kind == "stats":
                self._add(pkey, (path, pkey[1], _label_of(rows.engine(k))), [t, line, ref, 1, *vals, *_NO_SPEC],
                          reached)
                continue
            prev = last.get(pkey)
            if (prev is not None and prev[0][DR] is None and prev[0][SPEC_REF] is None
                    and _same_call(prev[0][T], t)):
                row = prev[0]
                row[_SPEC:SPEC_REF] = vals
                row[SPEC_REF] = ref
                if row[T] is None:  # a stats line without a time takes its SpecDecoding line's
                    row[T] = t
                continue
            row = [t, line, ref, 1, *_NO_STATS, *vals, ref]
            held = self._orphans.get(pkey)
            if prev is None and (len(held) < MAX_ORPHANS if held is not None else len(self._orphans) < MAX_ENGINES):
                self._orphans.setdefault(pkey, []).append(row)  # its engine is named by the first stats line
                continue
            self._add(pkey, (path, pkey[1], prev[1][2] if prev is not None else "engine"), row, reached)
        for eng in reached.values():
            eng.settle(eng.cap)

    def _add(self, pkey: tuple, ekey: tuple, row: list, reached: dict[int, _EngineRows]) -> None:
        """``row`` to its engine's pending rows (settled by the caller: ``reached``)."""
        eng = self._engine(ekey)
        if eng is None:
            self.untracked_rows += 1
            return
        if row[DR] is None and (held := self._orphans.pop(pkey, None)):
            eng.pending.extend(held)  # a stats line: the SpecDecoding lines before it are its engine's earlier ones
        eng.pending.append(row)
        reached[id(eng)] = eng
        if pkey in self.last or len(self.last) < MAX_ENGINES:
            self.last[pkey] = (row, ekey)

    def _engine(self, ekey: tuple) -> _EngineRows | None:
        """The engine's rows; None for an engine past the first ``MAX_ENGINES`` (its rows are counted in
        ``untracked_rows``, not kept): a log naming a new engine on every line must not grow memory."""
        eng = self._engines.get(ekey)
        if eng is None:
            n = len(self._engines)
            if n >= MAX_ENGINES:
                return None
            cap = self.cap if n < FULL_ENGINES else max(2, self.cap // FULL_ENGINES)
            eng = self._engines[ekey] = _EngineRows(cap)
        return eng

    @property
    def engines(self) -> dict[tuple, list[Interval]]:
        """(path, process key, engine label) → its intervals in log order (made when first asked for)."""
        if self._built is None:
            self._built = {key: [Interval.of_row(key[0], key[2], row) for row in eng.rows()]
                           for key, eng in self._engines.items()}
            for (path, proc), held in self._orphans.items():  # a process that printed no stats line after them
                self._built.setdefault((path, proc, "engine"), []).extend(
                    Interval.of_row(path, "engine", row) for row in held)
        return self._built
    def labels(self) -> dict[tuple, str]:
        """Readable labels: ``engine 0`` when one process printed stats, else with file and pid."""
        keys = list(self.engines)
        procs = {(k[0], k[1]) for k in keys}
        paths = {k[0] for k in keys}
        out = {}
        for k in keys:
            path, pkey, eng = k
            if len(procs) <= 1:
                out[k] = eng
            else:
                proc, pid, _host = (pkey.split(":") + ["", "", ""])[:3]
                who = f"{proc} pid={pid}" if pid not in ("", "None") else ""
                where = path.rsplit("/", 1)[-1] if len(paths) > 1 else ""
                out[k] = " ".join(x for x in (where, who, eng) if x)
        return out

    def main_series(self) -> list[Interval]:
        """The engine with the most SpecDecoding intervals (else the longest series)."""
        best, score = [], (-1, -1)
        for lst in self.engines.values():
            s = (sum(1 for iv in lst if iv.has_spec), len(lst))
            if s > score:
                best, score = lst, s
        return best
