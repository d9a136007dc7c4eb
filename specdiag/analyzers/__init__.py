"""Rules, one module per rule or rule family, registered by code (see ``base.REGISTRY``)."""

from specdiag.analyzers import kv_crashes, kv_degraded, kv_hits, kv_load_failure, kv_pressure, kv_shortfall  # noqa: F401
