"""Time series of the periodic vLLM stats and SpecDecoding lines, per engine/process.

Plain Python only (no pandas): the collector runs inside every ``analyze``. DataFrames are built by
``specdiag.metrics.frames`` for the ``specdiag metrics`` command, which imports pandas lazily.
"""

from specdiag.metrics.parse import parse_spec_body, parse_stats_body

__all__ = ["parse_spec_body", "parse_stats_body"]
