"""An observer that writes every event of its deployment to the events store (bounded buffers)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from specdiag.events import Event
from specdiag.events.rows import LookupRows, lookup_event
from specdiag.metrics.frames import interval_row
from specdiag.metrics.series import SPEC_EVENTS, STATS_EVENTS, SeriesTracker
from specdiag.observe import PROBLEM_LEVELS, Observer, RunState
from specdiag.sanitize import json_safe
from specdiag.store.schema import RECORD_COLUMNS, partition
from specdiag.timeutil import rec_time

FLUSH_ROWS = 50_000


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise RuntimeError("the events store needs pyarrow: pip install pyarrow") from e
    return pa, pq


def record_row(ev: Event) -> dict[str, Any]:
    rec = ev.rec
    o = rec.origin
    try:  # the template's fields; keys with "_" are caches of the pipeline (a parsed body, an interval)
        fields = json.dumps(json_safe({k: v for k, v in ev.f.items() if not k.startswith("_")}),
                            ensure_ascii=False, default=str)
    except Exception:  # noqa: BLE001 - a field that cannot be parsed is stored as unparsed
        fields = None
    return {"t": rec_time(rec), "path": rec.path, "line": rec.line, "end_line": rec.end_line, "proc": o.proc or None,
            "pid": o.pid, "host": o.host, "role": o.role or None, "tp": o.tp, "pp": o.pp, "dp": o.dp, "ep": o.ep,
            "rank": o.rank_label, "kind": rec.kind, "level": rec.level, "ts": rec.ts,
            "year": rec.year, "file": rec.file, "src_line": rec.src_line, "logger": rec.logger, "template": ev.id,
            "text": rec.text, "fields": fields}


class EventSink(Observer):
    """Every event → ``records``; at the end the counted lines → ``counts`` and the intervals → ``series``."""

    tables = frozenset({"lookups"})
    #: warnings and errors no template knows are stored too (as ``UNKNOWN_EVENT``): a replay names them
    levels = PROBLEM_LEVELS

    def __init__(self, deployment: str, out_dir: str, all_events: frozenset[str]) -> None:
        self.events = all_events - {"L1"}  # lookup lines arrive as rows (``observe_rows``), whichever path read them
        self.deployment = deployment
        self.base = out_dir
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.parts = 0
        self.written = 0
        self.series = SeriesTracker(cap=10_000_000)

    def observe(self, ev: Event) -> None:
        row = record_row(ev)
        day = datetime.fromtimestamp(row["t"], timezone.utc).strftime("%Y-%m-%d") if row["t"] is not None else "unknown"
        bucket = self.rows.setdefault(day, [])
        bucket.append(row)
        if ev.id in STATS_EVENTS or ev.id in SPEC_EVENTS:
            self.series.observe(ev)
        if len(bucket) >= FLUSH_ROWS:
            self._flush(day)

    def observe_rows(self, rows: LookupRows) -> None:
        for i in range(rows.lo, rows.hi):
            self.observe(lookup_event(rows, i))

    def _flush(self, day: str) -> None:
        pa, pq = _pyarrow()
        rows = self.rows.pop(day, [])
        if not rows:
            return
        schema = pa.schema([(name, getattr(pa, typ)()) for name, typ in RECORD_COLUMNS])
        folder = os.path.join(self.base, "records", partition(self.deployment), f"day={day}")
        os.makedirs(folder, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), os.path.join(folder, f"part-{self.parts}.parquet"))
        self.parts += 1
        self.written += len(rows)

    def finish(self, ctx: Any, run: RunState) -> list:
        pa, pq = _pyarrow()
        for day in list(self.rows):
            self._flush(day)
        counts = [{"template": k, "count": v} for k, v in sorted(run.counts.items())]
        self._table("counts", counts, pa.schema([("template", pa.string()), ("count", pa.int64())]))
        record_schema = pa.schema([(name, getattr(pa, typ)()) for name, typ in RECORD_COLUMNS])
        self._table("firsts", [record_row(ev) for ev in run.firsts.values()], record_schema)
        self._write_series(pa)
        return []

    def _write_series(self, pa: Any) -> None:
        from specdiag.metrics.frames import FLOAT_COLS, INT_COLS, TEXT_COLS, columns

        labels = self.series.labels()
        rows = [interval_row(labels[key], iv) for key, items in self.series.engines.items() for iv in items]
        pos_n = max((sum(1 for k in r if k.startswith("pos_")) for r in rows), default=0)
        cols = columns(pos_n)
        types = {**{c: pa.string() for c in TEXT_COLS}, **{c: pa.int64() for c in INT_COLS},
                 **{c: pa.float64() for c in FLOAT_COLS}}
        schema = pa.schema([(c, types.get(c, pa.float64())) for c in cols])
        self._table("series", [{c: r.get(c) for c in cols} for r in rows], schema)

    def _table(self, name: str, rows: list[dict[str, Any]], schema: Any) -> None:
        pa, pq = _pyarrow()
        if not rows:
            return
        folder = os.path.join(self.base, name, partition(self.deployment))
        os.makedirs(folder, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), os.path.join(folder, "part-0.parquet"))
