"""Per-engine intervals of the periodic stats line and its SpecDecoding line.

vLLM prints, every ``VLLM_LOG_STATS_INTERVAL`` seconds (default 10) and per engine, a stats line and —
only when at least one draft was verified in that interval — a SpecDecoding line right after it, from the
same process (the API server, or ``MainProcess`` offline). An ``Interval`` joins the two. Intervals are
attributed to an engine key: the input file, the printing process and the ``Engine NNN`` /
``N Engines Aggregated`` label.

Memory is bounded: each rule keeps pointers to *shared* Interval objects (the first observer of an event
builds it and caches it on the event), and a series longer than ``cap`` is compacted by merging
neighbouring intervals (sums for token counts, max for gauges), so GB logs keep a few MB of state.
"""

from __future__ import annotations

from specdiag.timeutil import rec_time

STATS_EVENTS = frozenset({"V_STATS", "V_STATS_V0"})
#: (engine, n_engines) → label (few distinct: one per engine)
_LABELS: dict[tuple, str] = {}
SPEC_EVENTS = frozenset({"V_SPEC"})


class Interval:
    """One logging interval of one engine. ``acc``/``dr`` are None when no SpecDecoding line followed."""

    __slots__ = (
        "t", "path", "line", "_rec", "engine", "running", "waiting", "kv", "kv_device", "prefix", "ext", "preempt",
        "prompt_tps", "gen_tps", "acc", "dr", "mal", "rate", "pos", "ndrafts", "_spec_rec", "n",
    )

    def __init__(self, t, path, line, rec, engine) -> None:
        self.t = t
        self.path = path
        self.line = line
        self._rec = rec  # a Record, or a callable that builds it (a scanned row's ``hot.RowRecord``)
        self.engine = engine
        self.running = self.waiting = self.kv = self.kv_device = self.prefix = self.ext = self.preempt = None
        self.prompt_tps = self.gen_tps = None
        self.acc = self.dr = self.mal = self.rate = self.pos = self.ndrafts = self._spec_rec = None
        self.n = 1

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


def _mean(x, y):
    return y if x is None else x if y is None else (x + y) / 2


def merge(a: Interval, b: Interval) -> Interval:
    """A new interval covering a and b (a first); shared objects are never mutated."""
    m = Interval.__new__(Interval)  # every field is set below, once (compaction merges about once per line)
    m.t, m.path, m.line, m._rec, m.engine, m.n = a.t, a.path, a.line, a._rec, a.engine, a.n + b.n
    # max (the first of equals, NaN as max() keeps it) and mean written out: a merge runs about once per
    # stats line on a long log
    x, y = a.running, b.running
    m.running = y if x is None else x if y is None else y if y > x else x
    x, y = a.waiting, b.waiting
    m.waiting = y if x is None else x if y is None else y if y > x else x
    x, y = a.kv, b.kv
    m.kv = y if x is None else x if y is None else y if y > x else x
    x, y = a.preempt, b.preempt
    m.preempt = y if x is None else x if y is None else y if y > x else x
    m.kv_device = a.kv_device or b.kv_device
    x, y = a.prefix, b.prefix
    m.prefix = y if x is None else x if y is None else (x + y) / 2
    x, y = a.ext, b.ext
    m.ext = y if x is None else x if y is None else (x + y) / 2
    x, y = a.prompt_tps, b.prompt_tps
    m.prompt_tps = y if x is None else x if y is None else (x + y) / 2
    x, y = a.gen_tps, b.gen_tps
    m.gen_tps = y if x is None else x if y is None else (x + y) / 2
    if a.dr is None and b.dr is None:  # neither has a SpecDecoding line
        m.acc = m.dr = m.mal = m.rate = m.pos = m.ndrafts = m._spec_rec = None
        return m
    m.acc = acc = (a.acc or 0) + (b.acc or 0)
    m.dr = dr = (a.dr or 0) + (b.dr or 0)
    m.rate = acc / dr if dr else None
    if a.ndrafts is not None or b.ndrafts is not None:
        m.ndrafts = nd = (a.ndrafts or 0) + (b.ndrafts or 0)
        m.mal = 1 + acc / nd if nd else (a.mal or b.mal)
    else:
        m.ndrafts = None
        m.mal = _mean(a.mal, b.mal)
    pa, pb = a.pos, b.pos
    if pa and pb and len(pa) == len(pb):
        wa, wb = a.ndrafts or a.dr or 1, b.ndrafts or b.dr or 1
        w = wa + wb
        m.pos = [None if x is None or y is None else (x * wa + y * wb) / w for x, y in zip(pa, pb, strict=True)]
    else:
        m.pos = pa or pb
    m._spec_rec = a._spec_rec or b._spec_rec
    return m


def compact(items: list[Interval]) -> list[Interval]:
    out = []
    for i in range(0, len(items) - 1, 2):
        out.append(merge(items[i], items[i + 1]))
    if len(items) % 2:
        out.append(items[-1])
    return out


def _label(engine: int | None, n_engines: int | None) -> str:
    """``engine 0`` (vLLM's ``Engine 000:``), ``2 engines aggregated``, or ``engine`` (no label printed)."""
    if engine is not None:
        return f"engine {engine}"
    if n_engines is not None:
        return f"{n_engines} engines aggregated"
    return "engine"


class SeriesTracker:
    """Feeds stats/SpecDecoding events into per-engine interval lists (bounded by ``cap``)."""

    def __init__(self, cap: int = 20000) -> None:
        self.cap = cap
        self.engines: dict[tuple, list[Interval]] = {}
        self.last: dict[tuple, Interval] = {}  # (path, process key) → last interval (for the SpecDecoding line)

    def observe(self, ev) -> None:
        """One stats / SpecDecoding event (a line the per-line stages read): a batch of one row."""
        if ev.id in STATS_EVENTS or ev.id in SPEC_EVENTS:
            from specdiag.ingest.hot import MetricRows

            self.observe_rows(MetricRows.from_event(ev))

    def observe_rows(self, rows) -> None:
        """A batch of stats / SpecDecoding rows (``ingest.hot.MetricRows``): an Interval per stats line, the
        SpecDecoding line after it joined to it; a scanned row's interval keeps a ``RowRecord`` and builds
        its Record only if shown."""
        path, last, labels, append = rows.path, self.last, _LABELS, self._append
        for k, (kind, t, line, origin, ref, values) in enumerate(
                zip(rows.kinds, rows.times(), rows.lines, rows.origins, rows.refs(), rows.values(), strict=True)):
            pkey = (path, origin.key)
            if kind == "stats":
                engine = rows.engine(k)
                label = labels.get(engine) or labels.setdefault(engine, _label(*engine))
                iv = Interval(t, path, line, ref, label)
                iv.fill_stats(values)
                last[pkey] = iv
                append((path, pkey[1], label), iv)
                continue
            prev = last.get(pkey)
            if prev is not None and prev.dr is None and prev._spec_rec is None:
                prev.fill_spec(values, ref, t)
                continue
            iv = Interval(t, path, line, ref, prev.engine if prev else "engine")
            iv.fill_spec(values, ref, t)
            append((path, pkey[1], iv.engine), iv)
            last[pkey] = iv

    def _append(self, key: tuple, iv: Interval) -> None:
        lst = self.engines.get(key)
        if lst is None:
            lst = self.engines[key] = []
        lst.append(iv)
        if len(lst) > self.cap:
            self.engines[key] = compact(lst)

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
