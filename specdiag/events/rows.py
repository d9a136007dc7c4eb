"""The rows of the high-volume lines as the rules see them, and the few things a rule does with a row.

Rules never import ingest (``tests/test_layering.py``): the events layer is the one seam they see. The
scanner's batches (``LookupRows``, ``MetricRows``), its missing-value marker ``NA``, the cache of process
prefixes (``OriginCache``), the scanner's numbers of a message (``message_values``) and its request-id
hash (``rid_hash``, to join a retrieve to its lookup row) are ingest's, named here so a rule can use them
without reaching into ingest; they stay there because the scanner itself uses them. The operations
below turn a row back into what the per-line stages would have made (a Record, an Event), which is the
events layer's job: ingest hands on bytes and columns, and does not build Events itself.
"""

from __future__ import annotations

from specdiag.events import Event, default_matcher, template
from specdiag.ingest.envelope import Record
from specdiag.ingest.hot import NA, LookupRows, MetricRows
from specdiag.ingest.origin import OriginCache
from specdiag.ingest.scan import hot_record, message_values, rid_hash

#: a metric row's kind → the template id of the Event the per-line stages make of such a line
METRIC_TIDS = {"stats": "V_STATS", "spec": "V_SPEC"}


def row_record(kept: Record | bytes, path: str, line: int, origins: OriginCache | None = None) -> Record:
    """The Record of a row kept with ``LookupRows.keep`` (its raw line, or the Record the Python path made),
    built only when a rule needs it for evidence or a time; ``origins`` shares parsed process prefixes."""
    if isinstance(kept, Record):
        return kept
    return hot_record(kept, 0, len(kept), line, path, origins if origins is not None else OriginCache())


def revive(kept: Record | bytes, path: str, line: int, origins: OriginCache) -> Event | None:
    """The L1 Event of a row kept with ``LookupRows.keep``: a rule keeps a row's bytes (cheap) and pays for
    the template match only when a shortfall asks for its lookup."""
    return default_matcher().match(row_record(kept, path, line, origins))


def lookup_event(rows: LookupRows, i: int) -> Event:
    """Row ``i`` as the L1 Event the Python path would have made (fields parsed on demand), for a rule
    that shows the lookup as evidence."""
    ev = rows.read_event
    if ev is not None:
        return ev
    rec = rows.record(i)
    ev = default_matcher().match(rec)
    if ev is None or ev.id != "L1":  # pragma: no cover - the scanner's grammar is a subset of L1's
        raise ValueError(f"line {rec.line}: a scanned lookup row is not an L1 line")
    return ev


def metric_events(rows: MetricRows) -> list[Event]:
    """The batch as the V_STATS / V_SPEC Events the per-line stages make, for observers that list those
    templates in ``events`` (a plug-in, the events store): built only for them, from the columns."""
    read = rows.read_events
    if read is not None:
        return read
    out = []
    for k, kind in enumerate(rows.kinds):
        rec = rows.record(k)
        tid = METRIC_TIDS[kind]
        out.append(Event(tid, rec, rows.event_fields(k, rec), template(tid)))
    return out


__all__ = ["METRIC_TIDS", "NA", "LookupRows", "MetricRows", "OriginCache", "lookup_event", "message_values",
           "metric_events", "revive", "rid_hash", "row_record"]
