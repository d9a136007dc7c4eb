"""Layout and columns of the events store (``specdiag.events/1``), shared by the writer and the reader.

    DIR/records/deployment=<id>/day=<YYYY-MM-DD|unknown>/part-<n>.parquet   one row per event
    DIR/counts/deployment=<id>/part-0.parquet                               counted lines per template
    DIR/firsts/deployment=<id>/part-0.parquet                               the first counted line of each
    DIR/series/deployment=<id>/part-0.parquet                               stats/SpecDecoding intervals
    DIR/store.json                                                          schema id and deployments

Deployment ids are percent-encoded in folder names (hive partitioning: DuckDB, Spark and pyarrow read the
``deployment`` and ``day`` columns from the path).
"""

from __future__ import annotations

from urllib.parse import quote, unquote

SCHEMA = "specdiag.events/1"
RECORD_COLUMNS = [
    ("t", "float64"), ("path", "string"), ("line", "int64"), ("end_line", "int64"), ("proc", "string"),
    ("pid", "int64"), ("host", "string"), ("role", "string"), ("tp", "int64"), ("pp", "int64"), ("dp", "int64"),
    ("ep", "int64"), ("rank", "string"), ("kind", "string"), ("level", "string"),
    ("ts", "string"), ("year", "int64"), ("file", "string"), ("src_line", "int64"), ("logger", "string"),
    ("template", "string"), ("text", "string"), ("fields", "string"),
]


def partition(dep_id: str) -> str:
    return f"deployment={quote(dep_id, safe='')}"


def dep_from_partition(name: str) -> str:
    return unquote(name.split("=", 1)[1])
