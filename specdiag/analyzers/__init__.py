"""Rules, one module per rule or rule family, registered by code (see ``base.REGISTRY``)."""

import specdiag.analyzers.chat_requests  # noqa: F401
import specdiag.analyzers.client_aborts  # noqa: F401
import specdiag.analyzers.config_rejected  # noqa: F401
import specdiag.analyzers.engine_health  # noqa: F401
import specdiag.analyzers.engine_stall  # noqa: F401
import specdiag.analyzers.kv_cache_saturation  # noqa: F401
import specdiag.analyzers.nccl  # noqa: F401
import specdiag.analyzers.request_context  # noqa: F401
import specdiag.analyzers.sd_acceptance  # noqa: F401
import specdiag.analyzers.sd_dynamic_k  # noqa: F401
import specdiag.analyzers.sd_k  # noqa: F401
import specdiag.analyzers.sd_prefix  # noqa: F401
import specdiag.analyzers.server_errors  # noqa: F401
import specdiag.analyzers.sleep_mode  # noqa: F401
import specdiag.analyzers.structured_output  # noqa: F401
from specdiag.analyzers import (  # noqa: F401
    kv_accounting,
    kv_config,
    kv_crashes,
    kv_degraded,
    kv_hits,
    kv_load_failure,
    kv_mp,
    kv_mp_protocol,
    kv_offload,
    kv_precursors,
    kv_pressure,
    kv_remote_monitor,
    kv_shortfall,
    kv_transfer,
    kv_writes,
    upstream_lines,
)
