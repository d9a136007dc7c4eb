"""Ingest: open inputs and turn their lines into records. Knows nothing of KV caches."""

from specdiag.ingest.envelope import Record
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import InputError, Source, SourceStats, expand_inputs

__all__ = ["InputError", "Record", "Source", "SourceStats", "expand_inputs", "iter_records"]
