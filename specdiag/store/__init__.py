"""The events store: a deployment's parsed event stream as a partitioned Parquet dataset.

``specdiag events PATH... --out DIR`` writes it; ``specdiag fleet --from-events DIR`` re-analyses from it
without reading the raw logs again (the high-volume lines are already reduced to counts). Schema:
``docs/fleet.md``. Needs pyarrow (the ``parquet`` extra).
"""
