"""Signal families: what kind of trouble a WARNING-or-worse upstream message is about.

Assigned once, when ``scripts/gen_catalog.py`` builds the catalog, from the module the message lives in,
keywords of its format and a short table of curated exceptions; stored in the data so a report can group
unknown-but-catalogued warnings without re-deriving anything per line. Order matters: the first rule that
fits wins, keyword rules for cross-cutting causes (deprecation, memory, pins) before module rules.
"""

from __future__ import annotations

#: family -> the one-line description reports show next to it
FAMILIES: dict[str, str] = {
    "memory-pressure": "memory ran short: allocation failures, full buffers, out-of-memory, eviction under pressure",
    "backend-io": "a KV storage backend (local disk, GDS, file system, object store) failed to read or write",
    "remote-connection": "a remote cache or transfer peer could not be reached, timed out or dropped the connection",
    "pin-accounting": "KV chunks pinned or unpinned inconsistently (reference counts, leaked pins)",
    "lookup-retrieve": "LMCache lookup, store or retrieve of a request's KV chunks went wrong or fell short",
    "cache-init": "LMCache engine or manager initialisation, health monitoring and degraded mode",
    "configuration": "a configuration value, environment variable or option is invalid, ignored or overridden",
    "engine-death": "the engine core process died, hung or shut down unexpectedly",
    "engine-core": "engine core and its client: request handling, outputs, timeouts short of death",
    "worker-death": "a worker or executor process died, failed to start or lost its peers",
    "worker": "worker and executor warnings short of death: model runner, device setup, profiling",
    "spec-decode": "speculative decoding: draft models, EAGLE/MTP/n-gram proposers, acceptance",
    "offload-tier": "KV offloading to CPU or another tier (vLLM offload, LMCache offload tiers)",
    "controller-p2p": "LMCache controller, cache-sharing and peer-to-peer transfer between instances",
    "mp-server": "LMCache multiprocess server mode and its adapters",
    "kv-connector": "vLLM KV connectors (LMCache, NIXL, P2P, Mooncake, ...) and disaggregated prefill",
    "distributed": "collective communication, parallel groups, NCCL and device communicators",
    "model-loading": "model, weights, tokenizer, LoRA and Hugging Face configuration loading",
    "scheduler": "request scheduling, KV block management and prefix caching",
    "api-server": "OpenAI-compatible API server, request validation, chat templates, tool parsers",
    "platform": "hardware platform and device detection (CUDA, ROCm, CPU, TPU, XPU, HPU)",
    "compilation": "torch.compile, CUDA graphs and compilation caches",
    "kernels": "attention backends, quantisation methods, custom ops and kernels",
    "input-processing": "multimodal inputs, tokenisation and prompt processing",
    "structured-output": "structured output and guided decoding: grammar compilation and the grammar matcher "
                         "(xgrammar, outlines, guidance, lm-format-enforcer)",
    "metrics": "metrics, tracing, usage statistics and observability",
    "deprecation": "a deprecated option, API or behaviour is in use",
    "other": "anything not covered by a more specific family",
}

#: curated exceptions: (project, module substring, format substring) -> family; checked first
EXCEPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("vllm", "v1/engine/core_client.py", "died unexpectedly", "engine-death"),
    ("vllm", "v1/engine/", "EngineCore encountered a fatal error", "engine-death"),
    ("vllm", "v1/engine/", "Engine core initialization failed", "engine-death"),
    ("vllm", "", "AsyncLLM output_handler failed", "engine-death"),
    ("vllm", "logging_utils/dump_input.py", "", "engine-death"),  # printed only while the engine core crashes
    ("vllm", "v1/fault_tolerance/", "", "engine-death"),
    ("vllm", "v1/core/sched/", "grammar rejected", "structured-output"),  # the scheduler advancing a grammar
    ("lmcache", "integration/vllm/", "Num retrieved tokens", "lookup-retrieve"),
    ("lmcache", "", "PYTHONHASHSEED", "configuration"),
)

_DEATH = ("died", "dead", "crash", "fatal", "terminat", "killed", "unexpectedly", "shutting down", "shut down",
          "hang", "heartbeat", "not responding", "exited")
_MEMORY = ("out of memory", "oom", "not enough memory", "insufficient memory", "memory is full",
           "exceeds the available", "failed to allocate", "allocation fail", "no free", "cannot allocate",
           "memory pressure", "evict")
_CONNECT = ("connect", "timeout", "timed out", "unreachable", "refused", "socket", "network", "rpc",
            "broken pipe", "reset by peer")
_CONFIG = ("config", "environment variable", "env var", "not supported", "unsupported", "invalid", "ignored",
           "override", "overrid", "setting", "option", "argument", "must be", "should be")

#: (path substring, family) for LMCache modules, first match wins
_LMCACHE_PATHS: tuple[tuple[str, str], ...] = (
    ("multiprocess/", "mp-server"), ("mp_", "mp-server"), ("sdk/", "mp-server"), ("standalone/", "mp-server"),
    # the 0.5 storage manager under v1/distributed/: its L2 adapters (S3, NIXL, Valkey, raw block, DAX, Mooncake)
    # are storage tiers (connection trouble refined to remote-connection below), its memory manager allocates,
    # its storage controllers move chunks between tiers for the multi-process server
    ("l2_adapters", "backend-io"), ("distributed/memory_manager", "memory-pressure"),
    ("storage_controllers", "mp-server"),
    ("cache_controller", "controller-p2p"), ("controller", "controller-p2p"), ("p2p", "controller-p2p"),
    ("distributed/", "controller-p2p"), ("transfer_channel", "controller-p2p"), ("lookup_server", "controller-p2p"),
    ("offload", "offload-tier"), ("memory_orchestrator", "offload-tier"),
    ("storage_backend/connector", "remote-connection"), ("remote_backend", "remote-connection"),
    ("redis", "remote-connection"), ("mooncake", "remote-connection"), ("valkey", "remote-connection"),
    ("infinistore", "remote-connection"), ("lm_server", "remote-connection"), ("server/", "remote-connection"),
    ("nixl", "remote-connection"),
    ("storage_backend", "backend-io"), ("gds", "backend-io"), ("disk", "backend-io"), ("s3", "backend-io"),
    ("memory_management", "memory-pressure"), ("memory_allocator", "memory-pressure"), ("allocator", "memory-pressure"),
    ("health_monitor", "cache-init"), ("manager.py", "cache-init"), ("internal_api_server", "cache-init"),
    ("config", "configuration"), ("platform", "platform"),
    ("integration/", "lookup-retrieve"), ("cache_engine", "lookup-retrieve"), ("token_database", "lookup-retrieve"),
    ("gpu_connector", "lookup-retrieve"), ("compute/", "lookup-retrieve"), ("kv_codec", "lookup-retrieve"),
    ("blend", "lookup-retrieve"), ("lookup", "lookup-retrieve"), ("v1/", "lookup-retrieve"),
    ("observability", "metrics"), ("stats", "metrics"), ("usage", "metrics"),
    ("cli/", "configuration"), ("tools/", "configuration"),
)

#: (path substring, family) for vLLM modules, first match wins
_VLLM_PATHS: tuple[tuple[str, str], ...] = (
    ("spec_decode", "spec-decode"), ("eagle", "spec-decode"), ("medusa", "spec-decode"), ("mtp", "spec-decode"),
    ("kv_transfer", "kv-connector"), ("kv_connector", "kv-connector"),
    ("kv_offload", "offload-tier"), ("offload", "offload-tier"),
    ("v1/engine/", "engine-core"), ("engine/", "engine-core"),
    ("structured_output", "structured-output"), ("guided_decoding", "structured-output"),
    # model_executor/ before executor/, which its name contains: layers and kernels, models and their loader
    ("model_loader", "model-loading"), ("model_executor/models", "model-loading"),
    ("model_executor/warmup", "worker"), ("model_executor/", "kernels"),
    ("executor/", "worker"), ("worker/", "worker"), ("v1/worker", "worker"),
    ("distributed/", "distributed"),
    ("transformers_utils", "model-loading"), ("lora", "model-loading"),
    ("tokenizer", "model-loading"), ("models/", "model-loading"),
    ("snapshot/", "model-loading"),
    ("core/sched", "scheduler"), ("v1/core", "scheduler"), ("core/", "scheduler"),
    ("entrypoints/", "api-server"), ("tool_parsers", "api-server"), ("reasoning", "api-server"),
    ("parser/", "api-server"), ("gc_utils", "platform"), ("import_utils", "platform"),
    ("platforms/", "platform"), ("device", "platform"),
    ("compilation", "compilation"), ("cuda_graph", "compilation"),
    ("attention", "kernels"), ("model_executor/layers", "kernels"), ("quantization", "kernels"),
    ("_custom_ops", "kernels"), ("kernels", "kernels"), ("triton", "kernels"), ("ops/", "kernels"),
    ("fused_moe", "kernels"),
    ("multimodal", "input-processing"), ("inputs", "input-processing"), ("sampling_params", "input-processing"),
    ("renderers", "input-processing"), ("sample", "input-processing"),
    ("metrics", "metrics"), ("tracing", "metrics"), ("usage", "metrics"), ("profiler", "metrics"),
    ("config", "configuration"), ("envs.py", "configuration"), ("arg_utils", "configuration"),
    ("plugins", "configuration"),
)


def assign(project: str, module: str, level: str, fmt: str | None) -> str | None:
    """The family of one catalog entry; None below WARNING (families are for signals, not chatter)."""
    if level not in ("WARNING", "ERROR", "CRITICAL"):
        return None
    text = (fmt or "").lower()
    for proj, mod, needle, family in EXCEPTIONS:
        if proj == project and mod in module and needle.lower() in text:
            return family
    if "deprecat" in text:
        return "deprecation"
    if any(k in text for k in _MEMORY):
        return "memory-pressure"
    if project == "lmcache" and ("unpin" in text or " pin" in text or "ref_count" in text or "refcount" in text):
        return "pin-accounting"
    family = _by_path(project, module)
    return _refine(project, module, family, text)


def _by_path(project: str, module: str) -> str:
    """The family a module's path names, ``other`` when none does."""
    table = _LMCACHE_PATHS if project == "lmcache" else _VLLM_PATHS
    for needle, family in table:
        if needle in module:
            return family
    return "other"


def _refine(project: str, module: str, family: str, text: str) -> str:
    """Keyword refinements within a path family: death in engine/worker code, connection vs I/O, config."""
    dying = any(k in text for k in _DEATH)
    if family == "engine-core" and dying:
        return "engine-death"
    if family == "worker" and dying:
        return "worker-death"
    if project == "vllm" and family == "other" and ("executor" in text or "worker" in text) and dying:
        return "worker-death"
    if family == "backend-io" and any(k in text for k in _CONNECT + ("connection",)):
        return "remote-connection"
    if family == "remote-connection" and not any(k in text for k in _CONNECT) and project == "lmcache" \
            and "storage_backend" in module:
        return "backend-io"
    if family == "other" and any(k in text for k in _CONFIG):
        return "configuration"
    if family == "other" and any(k in text for k in _CONNECT):
        return "remote-connection"
    return family
