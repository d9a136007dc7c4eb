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

from specdiag.metrics.parse import spec_fields, stats_fields
from specdiag.timeutil import rec_time

STATS_EVENTS = frozenset({"V_STATS", "V_STATS_V0"})
SPEC_EVENTS = frozenset({"V_SPEC"})


class Interval:
    """One logging interval of one engine. ``acc``/``dr`` are None when no SpecDecoding line followed."""

    __slots__ = (
        "t", "path", "line", "rec", "engine", "running", "waiting", "kv", "kv_device", "prefix", "ext", "preempt",
        "prompt_tps", "gen_tps", "acc", "dr", "mal", "rate", "pos", "ndrafts", "spec_rec", "n",
    )

    def __init__(self, t, path, line, rec, engine) -> None:
        self.t = t
        self.path = path
        self.line = line
        self.rec = rec
        self.engine = engine
        self.running = self.waiting = self.kv = self.kv_device = self.prefix = self.ext = self.preempt = None
        self.prompt_tps = self.gen_tps = None
        self.acc = self.dr = self.mal = self.rate = self.pos = self.ndrafts = self.spec_rec = None
        self.n = 1

    # ------------------------------------------------------------------ filling
    def set_stats(self, d: dict) -> None:
        self.running = d.get("running_reqs")
        self.waiting = d.get("waiting_reqs")
        self.kv = d.get("kv_cache_usage")
        self.kv_device = d.get("kv_device")
        self.prefix = d.get("prefix_cache_hit_rate")
        self.ext = d.get("external_prefix_cache_hit_rate")
        self.preempt = d.get("preemptions")
        self.prompt_tps = d.get("prompt_throughput")
        self.gen_tps = d.get("generation_throughput")

    def set_spec(self, d: dict, rec) -> None:
        self.acc = d.get("accepted_tokens")
        self.dr = d.get("drafted_tokens")
        self.mal = d.get("mean_acceptance_length")
        self.rate = d.get("draft_acceptance_rate")
        self.pos = d.get("per_position")
        self.ndrafts = d.get("num_drafts")
        self.spec_rec = rec
        if self.t is None:
            self.t = rec_time(rec)

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


def merge(a: Interval, b: Interval) -> Interval:
    """A new interval covering a and b (a first); shared objects are never mutated."""
    m = Interval(a.t, a.path, a.line, a.rec, a.engine)
    m.n = a.n + b.n

    def mx(x, y):
        return y if x is None else x if y is None else max(x, y)

    def mean(x, y):
        return y if x is None else x if y is None else (x + y) / 2

    m.running, m.waiting, m.kv = mx(a.running, b.running), mx(a.waiting, b.waiting), mx(a.kv, b.kv)
    m.kv_device = a.kv_device or b.kv_device
    m.prefix, m.ext = mean(a.prefix, b.prefix), mean(a.ext, b.ext)
    m.preempt = mx(a.preempt, b.preempt)
    m.prompt_tps, m.gen_tps = mean(a.prompt_tps, b.prompt_tps), mean(a.gen_tps, b.gen_tps)
    if a.has_spec or b.has_spec:
        m.acc = (a.acc or 0) + (b.acc or 0)
        m.dr = (a.dr or 0) + (b.dr or 0)
        m.rate = m.acc / m.dr if m.dr else None
        if a.ndrafts is not None or b.ndrafts is not None:
            m.ndrafts = (a.ndrafts or 0) + (b.ndrafts or 0)
            m.mal = 1 + m.acc / m.ndrafts if m.ndrafts else (a.mal or b.mal)
        else:
            m.mal = mean(a.mal, b.mal)
        if a.pos and b.pos and len(a.pos) == len(b.pos):
            wa, wb = a.ndrafts or a.dr or 1, b.ndrafts or b.dr or 1
            m.pos = [None if x is None or y is None else (x * wa + y * wb) / (wa + wb) for x, y in zip(a.pos, b.pos, strict=False)]
        else:
            m.pos = a.pos or b.pos
        m.spec_rec = a.spec_rec or b.spec_rec
    return m


def compact(items: list[Interval]) -> list[Interval]:
    out = []
    for i in range(0, len(items) - 1, 2):
        out.append(merge(items[i], items[i + 1]))
    if len(items) % 2:
        out.append(items[-1])
    return out


def engine_label(ev) -> str:
    f = ev.f
    if f.get("engine") is not None:
        return f"engine {int(f['engine'])}"
    if f.get("n_engines") is not None:
        return f"{int(f['n_engines'])} engines aggregated"
    return "engine"


class SeriesTracker:
    """Feeds stats/SpecDecoding events into per-engine interval lists (bounded by ``cap``)."""

    def __init__(self, cap: int = 20000) -> None:
        self.cap = cap
        self.engines: dict[tuple, list[Interval]] = {}
        self.last: dict[tuple, Interval] = {}  # (path, process key) → last interval (for the SpecDecoding line)

    def observe(self, ev) -> Interval | None:
        f = ev.f
        rec = ev.rec
        pkey = (rec.path, rec.origin.key)
        iv = f.get("_iv")
        if ev.id in STATS_EVENTS:
            if iv is None:
                iv = Interval(rec_time(rec), rec.path, rec.line, rec, engine_label(ev))
                iv.set_stats(stats_fields(ev))
                f["_iv"] = iv
            self.last[pkey] = iv
            self._append((rec.path, rec.origin.key, iv.engine), iv)
            return iv
        if ev.id in SPEC_EVENTS:
            if iv is None:
                d = spec_fields(ev)
                prev = self.last.get(pkey)
                if prev is not None and not prev.has_spec and prev.spec_rec is None:
                    prev.set_spec(d, rec)
                    f["_iv"] = prev
                    f["_new"] = False
                    return prev
                iv = Interval(rec_time(rec), rec.path, rec.line, rec, prev.engine if prev else "engine")
                iv.set_spec(d, rec)
                f["_iv"] = iv
                f["_new"] = True
            if f.get("_new"):
                self._append((rec.path, rec.origin.key, iv.engine), iv)
            self.last[pkey] = iv
            return iv
        return None

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
