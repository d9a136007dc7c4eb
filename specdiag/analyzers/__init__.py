"""Rules, one module per rule or rule family, registered by code (see ``base.REGISTRY``)."""

from specdiag.analyzers import kv_shortfall  # noqa: F401
