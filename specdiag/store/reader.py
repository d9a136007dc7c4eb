"""Replaying an events store through the engine's observers (``fleet --from-events``).

The stored rows become Records again and are matched against *today's* template table, so a new rule or
template applies to old data. What the store cannot give back: the raw look-back window (the retrieve
line just before a shortfall is a counted line, not stored), so rules that use ``event_before`` see None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from specdiag.deployments import DeploymentResult, DeploymentRun
from specdiag.events import Event, default_matcher, template
from specdiag.ingest.envelope import Record
from specdiag.ingest.origin import NO_ORIGIN, Origin
from specdiag.store.schema import SCHEMA, dep_from_partition, partition


def _b(v: Any) -> bytes | None:
    return None if v is None else str(v).encode("utf-8", "replace")


def deployments_in(store: str) -> list[str]:
    """The deployment ids a store holds (from its partition folders)."""
    found: set[str] = set()
    for table in ("records", "counts", "series"):
        folder = os.path.join(store, table)
        if os.path.isdir(folder):
            found.update(dep_from_partition(n) for n in os.listdir(folder) if n.startswith("deployment="))
    if not found and not os.path.isfile(os.path.join(store, "store.json")):
        raise ValueError(f"{store}: not a specdiag events store (no records/ or store.json)")
    return sorted(found)


def _origin(row: dict[str, Any], cache: dict[tuple, Origin]) -> Origin:
    if row.get("pid") is None and not row.get("proc"):
        return NO_ORIGIN
    key = (row.get("proc"), row.get("pid"), row.get("host"), row.get("role"), row.get("tp"), row.get("pp"),
           row.get("dp"), row.get("ep"))
    if key not in cache:
        cache[key] = Origin(proc=row.get("proc") or "", pid=row.get("pid"), host=row.get("host"),
                            role=row.get("role") or "", tp=row.get("tp"), pp=row.get("pp"), dp=row.get("dp"),
                            ep=row.get("ep"))
    return cache[key]


def _records(store: str, dep_id: str, table_name: str = "records") -> Iterator[Record]:
    for _template, rec in _stored(store, dep_id, table_name):
        yield rec


def _firsts(store: str, dep_id: str) -> dict[str, Event]:
    """The first counted line of each template (evidence the run state gives as ``first(tid)``)."""
    return {tid: Event(tid, rec, None, template(tid)) for tid, rec in _stored(store, dep_id, "firsts") if tid}


def _stored(store: str, dep_id: str, table_name: str) -> Iterator[tuple[str | None, Record]]:
    import pyarrow.dataset as ds

    folder = os.path.join(store, table_name, partition(dep_id))
    if not os.path.isdir(folder):
        return
    table = ds.dataset(folder, format="parquet", partitioning="hive").to_table()
    rows = sorted(table.to_pylist(), key=lambda r: (r.get("path") or "", r.get("line") or 0))
    origins: dict[tuple, Origin] = {}
    for row in rows:
        text = row.get("text") or ""
        first, _, rest = text.partition("\n")
        rec = Record(row.get("path") or "", int(row.get("line") or 0), _origin(row, origins), row.get("kind") or "",
                     row.get("level") or "", _b(row.get("ts")), row.get("year"), _b(row.get("file")),
                     row.get("src_line"), _b(row.get("logger")), first.encode("utf-8", "replace"))
        if rest:
            rec.cont = [x.encode("utf-8", "replace") for x in rest.split("\n")]
        rec.end_line = int(row.get("end_line") or rec.line)
        yield row.get("template"), rec


def _counts(store: str, dep_id: str) -> dict[str, int]:
    import pyarrow.parquet as pq

    path = os.path.join(store, "counts", partition(dep_id), "part-0.parquet")
    if not os.path.isfile(path):
        return {}
    return {r["template"]: int(r["count"]) for r in pq.read_table(path).to_pylist()}


def _year_of(rec: Record) -> int | None:
    """The year a stored record carries (LMCache timestamps print one; vLLM's inferred one was stored)."""
    ts = rec.ts or ""
    if rec.kind == "lmcache" and ts[:4].isdigit():
        return int(ts[:4])
    return rec.year


def replay(store: str, dep_id: str, run: DeploymentRun) -> DeploymentResult:
    """Feed one deployment's stored events to ``run``'s observers; returns its result."""
    matcher = default_matcher()
    run.run.begin_source(f"{store}:{dep_id}", None)
    year = None
    for rec in _records(store, dep_id):
        if year is None:
            year = _year_of(rec)
        if rec.origin is not run.last_origin:
            run.last_origin = rec.origin
            run.run.saw_origin(rec.origin)
        run.note_record(rec)
        ev = matcher.match(rec)
        if ev is not None:
            run.deliver(ev)
        else:
            run.deliver_unmatched(rec)
    run.run.add_counts(_counts(store, dep_id), _firsts(store, dep_id))
    run.run.end_source(year)
    return run.finish()


def write_manifest(store: str, deployments: list[str]) -> None:
    from specdiag.outfile import write_output

    write_output(os.path.join(store, "store.json"), json.dumps({"schema": SCHEMA, "deployments": deployments},
                                                                indent=2) + "\n")
