#!/usr/bin/env python3
"""Regenerate the example logs under ``examples/`` (deterministic, seeded).

    python scripts/gen_example_logs.py            # writes examples/*/serve.log
    python scripts/gen_example_logs.py --out DIR  # somewhere else
    python scripts/gen_example_logs.py --check    # fail if the files on disk differ

Everything here is synthetic: ids, pids, addresses, numbers and times are invented.
The *shapes* of the lines follow ``shared/reference/{vllm,lmcache}/log-formats.md``:

* ``tp8-shortfall``  vLLM 0.25.0 (coloured ``(Worker_TPn pid=N)`` prefixes), TP=8, EAGLE-3 K=3,
  LMCache from the post-0.5.6 development tree (R1/R2 at vllm_v1_adapter.py:878/884),
  local CPU tier only, one retrieval shortfall on Worker_TP2 (6144 tokens = 24 chunks of 256)
  preceded by CPU memory pressure and a double-unpin warning on that rank only.
* ``healthy-ngram``  vLLM 0.25.0 (prefixes without colour), TP=2, ngram K=4, LMCache 0.5.6,
  local CPU tier, plenty of LMCache hits, nothing that should raise a finding.

The module is also imported by ``scripts/gen_bench_log.py`` for the shared line formatters.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

# --------------------------------------------------------------------------------------------
# Line formatting
# --------------------------------------------------------------------------------------------

ESC = "\x1b"
PREFIX_COLOR = ESC + "[1;36m"
PREFIX_RESET = ESC + "[0;0m"
LMC_COLOR = {
    "DEBUG": ESC + "[1m",
    "INFO": ESC + "[32;20m",
    "WARNING": ESC + "[33;20m",
    "ERROR": ESC + "[31;20m",
    "CRITICAL": ESC + "[31;1m",
}
LMC_RESET = ESC + "[0m"
LMC_ITALIC = ESC + "[3m"

# logger names (pre-``lmcache.inprocess`` layout, used by 0.5.6 and the post-0.5.6 dev tree)
LG_ADAPTER = "lmcache.integration.vllm.vllm_v1_adapter"
LG_UTILS = "lmcache.integration.vllm.utils"
LG_FACTORY = "lmcache.integration.vllm.vllm_service_factory"
LG_ENGINE = "lmcache.v1.cache_engine"
LG_TOKDB = "lmcache.v1.token_database"
LG_MEM = "lmcache.v1.memory_management"
LG_CPU = "lmcache.v1.storage_backend.local_cpu_backend"
LG_PIN = "lmcache.v1.pin_monitor"
LG_LOOKUP = "lmcache.v1.lookup_client.lmcache_lookup_client"

# (file, line) of every LMCache message we print, per LMCache tree
# (version-fingerprints.md §2 and log-catalog-by-version.tsv).
LMC_LINES = {
    "0.5.6": {
        "load_cfg": ("utils.py", 198),
        "spec_cfg": ("utils.py", 577),
        "eagle": ("utils.py", 590),
        "c12": ("vllm_service_factory.py", 111),
        "init": ("vllm_v1_adapter.py", 485),
        "register": ("vllm_v1_adapter.py", 748),
        "r1": ("vllm_v1_adapter.py", 876),
        "r2": ("vllm_v1_adapter.py", 882),
        "r3": ("vllm_v1_adapter.py", 964),
        "l1": ("vllm_v1_adapter.py", 1476),
        "c13": ("cache_engine.py", 109),
        "post_init": ("cache_engine.py", 303),
        "storage_mgr": ("cache_engine.py", 315),
        "s4": ("cache_engine.py", 519),
        "s1": ("cache_engine.py", 588),
        "r4": ("cache_engine.py", 985),
        "instance": ("cache_engine.py", 2138),
        "none_hash": ("token_database.py", 100),
        "hash_algo": ("token_database.py", 110),
        "m5": ("memory_management.py", 846),
        "m3": ("memory_management.py", 1452),
        "align": ("local_cpu_backend.py", 428),
        "pin_mon": ("pin_monitor.py", 223),
        "lookup_srv": ("lmcache_lookup_client.py", 270),
    },
}
LMC_LINES["post-0.5.6"] = dict(
    LMC_LINES["0.5.6"],
    load_cfg=("utils.py", 201),
    spec_cfg=("utils.py", 580),
    eagle=("utils.py", 593),
    c12=("vllm_service_factory.py", 115),
    init=("vllm_v1_adapter.py", 487),
    register=("vllm_v1_adapter.py", 750),
    r1=("vllm_v1_adapter.py", 878),
    r2=("vllm_v1_adapter.py", 884),
    r3=("vllm_v1_adapter.py", 966),
    l1=("vllm_v1_adapter.py", 1478),
    instance=("cache_engine.py", 2133),
)
LMC_LOGGER = {
    "load_cfg": LG_UTILS, "spec_cfg": LG_UTILS, "eagle": LG_UTILS, "c12": LG_FACTORY,
    "init": LG_ADAPTER, "register": LG_ADAPTER, "r1": LG_ADAPTER, "r2": LG_ADAPTER,
    "r3": LG_ADAPTER, "l1": LG_ADAPTER, "c13": LG_ENGINE, "post_init": LG_ENGINE,
    "storage_mgr": LG_ENGINE, "s4": LG_ENGINE, "s1": LG_ENGINE, "r4": LG_ENGINE,
    "instance": LG_ENGINE, "none_hash": LG_TOKDB, "hash_algo": LG_TOKDB, "m5": LG_MEM,
    "m3": LG_MEM, "align": LG_CPU, "pin_mon": LG_PIN, "lookup_srv": LG_LOOKUP,
}

# vLLM 0.25.0 (file, line) of the vLLM records we print (vllm/log-formats.md; a few
# init-only lines whose numbers are not catalogued are plausible placeholders).
VLLM_LINES = {
    "logo": ("api_utils.py", 339),
    "args": ("api_utils.py", 273),
    "arch": ("model.py", 619),
    "maxlen": ("model.py", 1776),
    "chunked": ("scheduler.py", 252),
    "async_ngram": ("vllm.py", 1010),
    "engine_cfg": ("core.py", 114),
    "world": ("parallel_state.py", 1607),
    "nccl": ("pynccl.py", 113),
    "assigned": ("parallel_state.py", 1942),
    "connector": ("factory.py", 62),
    "kvbase": ("base.py", 190),
    "lmc_conn": ("lmcache_connector.py", 105),
    "load_model": ("gpu_model_runner.py", 5209),
    "attn": ("cuda.py", 476),
    "load_weights": ("default_loader.py", 430),
    "drafter": ("gpu_model_runner.py", 5262),
    "model_mem": ("gpu_model_runner.py", 5306),
    "dynamo": ("backends.py", 1148),
    "compile": ("backends.py", 393),
    "kv_mem": ("gpu_worker.py", 538),
    "kv_size": ("kv_cache_utils.py", 2146),
    "kv_conc": ("kv_cache_utils.py", 2147),
    "graphs": ("gpu_model_runner.py", 6707),
    "init_engine": ("core.py", 337),
    "tasks": ("api_server.py", 612),
    "serving": ("api_server.py", 616),
    "routes": ("launcher.py", 37),
    "route": ("launcher.py", 46),
    "stats": ("loggers.py", 273),
    "spec": ("metrics.py", 120),
    "v2": ("scheduler.py", 2656),
}


class Fmt:
    """Formats the physical lines of one vLLM server's combined stdout/stderr."""

    def __init__(self, year: int, color_prefix: bool, lmc_tree: str):
        self.year = year
        self.color_prefix = color_prefix
        self.lines = LMC_LINES[lmc_tree]

    def prefix(self, proc: str, pid: int) -> str:
        if self.color_prefix:
            return f"{PREFIX_COLOR}({proc} pid={pid}){PREFIX_RESET} "
        return f"({proc} pid={pid}) "

    @staticmethod
    def vts(t: dt.datetime) -> str:
        return t.strftime("%m-%d %H:%M:%S")

    @staticmethod
    def lts(t: dt.datetime) -> str:
        return t.strftime("%Y-%m-%d %H:%M:%S") + f",{t.microsecond // 1000:03d}"

    def vllm(self, pfx: str, t: dt.datetime, level: str, key: str, msg: str) -> str:
        f, n = VLLM_LINES[key]
        return f"{pfx}{level} {self.vts(t)} [{f}:{n}] {msg}"

    def lmc(self, pfx: str, t: dt.datetime, level: str, key: str, msg: str) -> str:
        f, n = self.lines[key]
        return (
            f"{pfx}{LMC_COLOR[level]}[{self.lts(t)}] LMCache {level}:{LMC_RESET} {msg} "
            f"{LMC_ITALIC}({f}:{n}:{LMC_LOGGER[key]}){LMC_RESET}"
        )


# --------------------------------------------------------------------------------------------
# Static content (config dumps)
# --------------------------------------------------------------------------------------------

def lmcache_config_repr(chunk_size: int, max_cpu_gb: float, *, hash_algo: str = "sha256_cbor") -> str:
    """Python dict repr as printed by `Creating LMCacheEngine with config:` (0.5.x key order).

    Contains a bare ``inf`` (pd_allocation_timeout_sec) exactly like the real dump.
    """
    items = [
        ("chunk_size", chunk_size), ("local_cpu", True), ("max_local_cpu_size", max_cpu_gb),
        ("local_cpu_use_hugepages", False), ("reserve_local_cpu_size", 0.0), ("local_disk", None),
        ("local_disk_path_sharding", "by_gpu"), ("max_local_disk_size", 0.0), ("remote_url", None),
        ("remote_serde", "naive"), ("use_layerwise", False), ("save_decode_cache", False),
        ("pre_caching_hash_algorithm", hash_algo), ("enable_blending", False),
        ("blend_recompute_ratios", None), ("blend_thresholds", None), ("blend_check_layers", None),
        ("blend_min_tokens", 256), ("blend_special_str", " # # "), ("retrieve_locations", None),
        ("store_location", None), ("enable_p2p", False), ("p2p_host", None), ("p2p_init_ports", None),
        ("p2p_lookup_ports", None), ("mp_host", None), ("mp_port", 5555), ("enable_controller", False),
        ("lmcache_instance_id", None), ("controller_pull_url", None), ("controller_reply_url", None),
        ("lmcache_worker_ports", None), ("lmcache_worker_ids", None),
        ("lmcache_worker_heartbeat_delay_time", 10), ("lmcache_worker_heartbeat_time", None),
        ("enable_pd", False), ("pd_role", None), ("pd_buffer_size", None), ("pd_buffer_device", None),
        ("pd_peer_host", None), ("pd_peer_init_port", None), ("pd_peer_alloc_port", None),
        ("pd_peer_query_port", None), ("pd_proxy_host", None), ("pd_proxy_port", None),
        ("pd_allocation_timeout_sec", float("inf")), ("pd_shutdown_timeout_sec", 5.0),
        ("pd_condition_poll_interval_sec", 0.005), ("pd_max_prefill_len", 0),
        ("pd_backend_mode", "async"), ("transfer_channel", None), ("nixl_backends", None),
        ("nixl_buffer_size", None), ("nixl_buffer_device", None), ("gds_path", None),
        ("gds_path_sharding", "by_gpu"), ("gds_buffer_size", None), ("use_gds", True),
        ("gds_backend", "cufile"), ("internal_api_server_host", "0.0.0.0"), ("extra_config", None),
        ("save_unfull_chunk", False), ("blocking_timeout_secs", 10), ("external_lookup_client", None),
        ("py_enable_gc", True), ("cache_policy", "LRU"), ("numa_mode", None),
        ("enable_async_loading", False), ("internal_api_server_enabled", False),
        ("internal_api_server_port_start", 6999), ("priority_limit", None),
        ("runtime_plugin_locations", None), ("storage_plugins", None), ("remote_storage_plugins", None),
        ("lookup_timeout_ms", 3000), ("min_retrieve_tokens", 0), ("hit_miss_ratio", None),
        ("lookup_server_worker_ids", None), ("enable_scheduler_bypass_lookup", False),
        ("enable_lazy_memory_allocator", False), ("enable_kv_events", False),
        ("pin_timeout_sec", 300), ("pin_check_interval_sec", 30), ("remote_config_url", None),
        ("app_id", None),
    ]
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in items) + "}"


def kv_transfer_repr(engine_id: str, policy: str) -> str:
    return (
        f"KVTransferConfig(kv_connector='LMCacheConnectorV1', engine_id='{engine_id}', "
        "kv_buffer_device='cuda', kv_buffer_size=1000000000.0, kv_role='kv_both', kv_rank=None, "
        "kv_parallel_size=1, kv_ip='127.0.0.1', kv_port=14579, kv_connector_extra_config={}, "
        f"kv_connector_module_path=None, enable_permute_local_kv=False, kv_load_failure_policy='{policy}')"
    )


def engine_config_repr(model: str, served: str, spec_repr: str, tp: int, max_len: int) -> str:
    return (
        f"model='{model}', speculative_config={spec_repr}, tokenizer='{model}', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
        f"trust_remote_code=False, dtype=torch.bfloat16, max_seq_len={max_len}, download_dir=None, "
        f"load_format=auto, tensor_parallel_size={tp}, pipeline_parallel_size=1, data_parallel_size=1, "
        "decode_context_parallel_size=1, dcp_comm_backend=ag_rs, disable_custom_all_reduce=False, "
        "quantization=None, quantization_config=None, enforce_eager=False, "
        "enable_return_routed_experts=False, kv_cache_dtype=auto, device_config=cuda, "
        "structured_outputs_config=StructuredOutputsConfig(backend='auto', disable_fallback=False, "
        "disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser='', "
        "reasoning_parser_plugin='', enable_in_reasoning=False), "
        "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, "
        "otlp_traces_endpoint=None, collect_detailed_traces=None, kv_cache_metrics=False, "
        f"kv_cache_metrics_sample=0.01), seed=0, served_model_name={served}, "
        "enable_prefix_caching=True, enable_chunked_prefill=True, pooler_config=None, "
        "compilation_config={'mode': <CompilationMode.VLLM_COMPILE: 3>, 'debug_dump_path': None, "
        "'cache_dir': '', 'compile_cache_save_format': 'binary', 'backend': 'inductor', "
        "'custom_ops': ['none'], 'splitting_ops': ['vllm::unified_attention', "
        "'vllm::unified_attention_with_output', 'vllm::unified_mla_attention', "
        "'vllm::unified_mla_attention_with_output', 'vllm::mamba_mixer2', 'vllm::mamba_mixer', "
        "'vllm::short_conv', 'vllm::linear_attention', 'vllm::plamo2_mamba_mixer', "
        "'vllm::gdn_attention_core', 'vllm::kda_attention', 'vllm::sparse_attn_indexer'], "
        "'compile_mm_encoder': False, 'use_inductor_graph_partition': False, 'pass_config': {}, "
        "'max_cudagraph_capture_size': 512, 'local_cache_dir': None}"
    )


VLLM_LOGO = [
    "",
    "       \u2588     \u2588     \u2588\u2584   \u2584\u2588",
    " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version {ver}",
    "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588  model   {model}",
    "   \u2580\u2580  \u2580\u2580\u2580\u2580\u2580 \u2580\u2580\u2580\u2580\u2580 \u2580     \u2580",
    "",
]

LMCACHE_BANNER = [
    "",
    " _     __  __    ____           _",
    "| |   |  \\/  |  / ___|__ _  ___| |__   ___      LMCache v{ver} ({commit})",
    "| |   | |\\/| | | |   / _` |/ __| '_ \\ / _ \\     Website:  https://lmcache.ai/",
    "| |___| |  | | | |__| (_| | (__| | | |  __/     Docs:     https://docs.lmcache.ai/",
    "|_____|_|  |_|  \\____\\__,_|\\___|_| |_|\\___|",
    "Set LMCACHE_DISABLE_BANNER=1 to hide this banner.",
    "",
]

ROUTES = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/docs/oauth2-redirect", "GET, HEAD"),
    ("/redoc", "GET, HEAD"), ("/health", "GET"), ("/load", "GET"), ("/ping", "POST"),
    ("/ping", "GET"), ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"),
    ("/version", "GET"), ("/v1/responses", "POST"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"), ("/metrics", "GET"),
]


# --------------------------------------------------------------------------------------------
# Scenario model
# --------------------------------------------------------------------------------------------

@dataclass
class Server:
    model: str
    served: str
    tp: int
    num_layer: int          # incl. draft layers LMCache adds
    kv_heads_per_gpu: int
    head_size: int
    draft_layers: int
    spec_args: str          # repr inside non-default args
    spec_repr: str          # SpeculativeConfig(...) repr
    spec_k: int
    accept: tuple[float, ...]
    max_len: int
    max_cpu_gb: float
    lmc_version: str        # as printed by C18
    lmc_tree: str
    vllm_version: str = "0.25.0"
    chunk: int = 256
    block: int = 16
    api_pid: int = 1
    core_pid: int = 140
    worker_pids: list[int] = field(default_factory=list)
    engine_id: str = ""
    failure_policy: str = "fail"
    arch: str = "LlamaForCausalLM"

    @property
    def chunk_bytes(self) -> int:
        return self.num_layer * 2 * self.chunk * self.kv_heads_per_gpu * self.head_size * 2

    def gb(self, tokens: int) -> float:
        return tokens / self.chunk * self.chunk_bytes / 2**30


class Events:
    """Collects (time, seq, line) and writes them in time order."""

    def __init__(self):
        self.items: list[tuple[dt.datetime, int, str]] = []
        self.seq = 0

    def add(self, t: dt.datetime, line: str) -> None:
        self.seq += 1
        self.items.append((t, self.seq, line))

    def render(self) -> str:
        self.items.sort(key=lambda x: (x[0], x[1]))
        return "".join(line + "\n" for _, _, line in self.items)


def ms(x: float) -> dt.timedelta:
    return dt.timedelta(milliseconds=x)


def hexid(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def chat_id(rng: random.Random) -> str:
    return f"chatcmpl-{hexid(rng, 16)}-{hexid(rng, 8)}"


def client_ip(rng: random.Random) -> str:
    return f"10.42.{rng.randint(0, 15)}.{rng.randint(2, 250)}:{rng.randint(32768, 60999)}"


def emit_startup(ev: Events, f: Fmt, s: Server, t0: dt.datetime, rng: random.Random) -> dt.datetime:  # noqa: PLR0915 - predates the 60-statement limit (pyproject); the startup lines in print order
    api = f.prefix("APIServer", s.api_pid)
    core = f.prefix("EngineCore", s.core_pid)
    workers = [f.prefix(f"Worker_TP{r}" if s.tp > 1 else "Worker", p) for r, p in enumerate(s.worker_pids)]
    t = t0
    # one multi-line record: vLLM's NewLineFormatter turns each inner "\n" into "\r\n" + header
    for i, ln in enumerate(VLLM_LOGO):
        cr = "\r" if i < len(VLLM_LOGO) - 1 else ""
        ev.add(t, f.vllm(api, t, "INFO", "logo", ln.format(ver=s.vllm_version, model=s.model)) + cr)
    args = (
        f"{{'model_tag': '{s.model}', 'model': '{s.model}', 'host': '0.0.0.0', 'port': 8000, "
        f"'max_model_len': {s.max_len}, 'served_model_name': ['{s.served}'], "
        f"'tensor_parallel_size': {s.tp}, 'gpu_memory_utilization': 0.92, "
        f"'speculative_config': {s.spec_args}, "
        f"'kv_transfer_config': {kv_transfer_repr(s.engine_id, s.failure_policy)}}}"
    )
    ev.add(t, f.vllm(api, t, "INFO", "args", f"non-default args: {args}"))
    t += dt.timedelta(seconds=7, milliseconds=311)
    ev.add(t, f.vllm(api, t, "INFO", "arch", f"Resolved architecture: {s.arch}"))
    ev.add(t, f.vllm(api, t, "INFO", "maxlen", f"Using max model len {s.max_len}"))
    ev.add(t, f.vllm(api, t, "INFO", "chunked", "Chunked prefill is enabled with max_num_batched_tokens=8192."))
    if "ngram" in s.spec_repr:
        ev.add(t, f.vllm(api, t, "WARNING", "async_ngram",
                         "Async scheduling not supported with ngram-based speculative decoding and will be disabled."))
    t += dt.timedelta(seconds=4, milliseconds=120)
    ev.add(t, f.vllm(core, t, "INFO", "engine_cfg",
                     f"Initializing a V1 LLM engine (v{s.vllm_version}) with config: "
                     + engine_config_repr(s.model, s.served, s.spec_repr, s.tp, s.max_len)))
    t += dt.timedelta(seconds=3)
    port = rng.randint(35000, 45000)
    order = list(range(s.tp))
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "world",
                         f"world_size={s.tp} rank={r} local_rank={r} "
                         f"distributed_init_method=tcp://127.0.0.1:{port} backend=nccl"))
    t += dt.timedelta(seconds=2)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "nccl", "vLLM is using nccl==2.27.5"))
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "assigned",
                         f"rank {r} in world size {s.tp} is assigned as DP rank 0, PP rank 0, "
                         f"PCP rank 0, TP rank {r}, EP rank N/A, EPLB rank N/A"))
    t += dt.timedelta(seconds=1)
    cpu_bytes = int(s.max_cpu_gb * 2**30)
    aligned = cpu_bytes // s.chunk_bytes * s.chunk_bytes
    kv_shape = f"({s.num_layer}, 2, {s.chunk}, {s.kv_heads_per_gpu}, {s.head_size})"
    none_hash = "b'" + "".join(f"\\x{rng.randrange(256):02x}" for _ in range(32)) + "'"
    cfg = lmcache_config_repr(s.chunk, s.max_cpu_gb)
    for r in rng.sample(order, len(order)):
        w = workers[r]
        tw = t + ms(rng.uniform(0, 900))
        ev.add(tw, f.vllm(w, tw, "INFO", "connector",
                          f"Creating v1 connector with name: LMCacheConnectorV1 and engine_id: {s.engine_id}"))
        ev.add(tw, f.vllm(w, tw, "WARNING", "kvbase",
                          "Initializing KVConnectorBase_V1. This API is experimental and subject to change "
                          "in the future as we iterate the design."))
        ev.add(tw, f.vllm(w, tw, "INFO", "lmc_conn", "Initializing latest dev LMCache connector"))
        tw += ms(2.1)
        ev.add(tw, f.lmc(w, tw, "INFO", "load_cfg", "Loading LMCache config file /etc/lmcache/lmcache.yaml"))
        tw += ms(1.8)
        ev.add(tw, f.lmc(w, tw, "INFO", "spec_cfg", f"vllm_config.speculative_config: {s.spec_repr}"))
        if s.draft_layers:
            ev.add(tw, f.lmc(w, tw, "INFO", "eagle", f"EAGLE detected {s.draft_layers} extra layer(s)"))
        ev.add(tw, f.lmc(w, tw, "INFO", "c12",
                         f"num_layer: {s.num_layer}, chunk_size: {s.chunk}, num_kv_head (per gpu): "
                         f"{s.kv_heads_per_gpu}, head_size: {s.head_size}, hidden_dim (D) for KV (per gpu): "
                         f"{s.kv_heads_per_gpu * s.head_size}, use mla: False, kv shape: {kv_shape}, "
                         f"num_draft_layers: {s.draft_layers}"))
        tw += ms(3.0)
        ev.add(tw, f.lmc(w, tw, "INFO", "none_hash", f"Initialized NONE_HASH={none_hash} from vLLM (>= PR#20511)"))
        ev.add(tw, f.lmc(w, tw, "INFO", "hash_algo", "Using hash algorithm: sha256_cbor"))
        tw += ms(10.2)
        ev.add(tw, f.lmc(w, tw, "INFO", "instance", "Creating LMCacheEngine instance vllm-instance"))
        tw += ms(0.7)
        ev.add(tw, f.lmc(w, tw, "INFO", "c13", f"Creating LMCacheEngine with config: {cfg}"))
        tw += ms(rng.uniform(450, 1400))
        ev.add(tw, f.lmc(w, tw, "INFO", "align",
                         f"Auto align cpu size bytes, origin: {cpu_bytes}, aligned: {aligned}, "
                         f"chunk size: {s.chunk_bytes}"))
        tw += ms(20.3)
        ev.add(tw, f.lmc(w, tw, "INFO", "storage_mgr",
                         f"Initialize storage manager on rank {r}, use layerwise: False,save only first rank: False"))
        ev.add(tw, f.lmc(w, tw, "INFO", "pin_mon", "PinMonitor started"))
        tw += ms(49.6)
        ev.add(tw, f.lmc(w, tw, "INFO", "lookup_srv", "lmcache lookup server started"))
        tw += ms(10.1)
        meta = (
            f"LMCacheMetadata(model_name='{s.model}', world_size={s.tp}, local_world_size={s.tp}, "
            f"worker_id={r}, local_worker_id={r}, kv_dtype=torch.bfloat16, kv_shape={kv_shape}, "
            f"use_mla=False, role='worker', served_model_name='{s.served}', chunk_size={s.chunk}, "
            f"kv_layer_groups_manager=None, engine_id='{s.engine_id}', kv_connector_extra_config={{}})"
        )
        ev.add(tw, f.lmc(w, tw, "INFO", "init",
                         f"LMCache initialized for role KVConnectorRole.WORKER with version {s.lmc_version}, "
                         f"vllm version {s.vllm_version}, lmcache cache_engine metadata: {meta}"))
    t += dt.timedelta(seconds=3)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "load_model", f"Starting to load model {s.model}..."))
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "attn",
                         "Using FLASH_ATTN attention backend out of potential backends: "
                         "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']."))
    shards = 30 if s.tp >= 8 else 8
    per = 1.6
    for i in range(shards + 1):
        if i in (0, shards) or i % max(1, shards // 6) == 0:
            pct = int(100 * i / shards)
            el = int(per * i)
            rem = int(per * (shards - i))
            rate = "?it/s" if i == 0 else f"{per:5.2f}s/it"
            eta = "?" if i == 0 else f"00:{rem:02d}" if rem < 60 else f"{rem // 60:02d}:{rem % 60:02d}"
            tt = t + dt.timedelta(seconds=el)
            ev.add(tt, f"{workers[0]}Loading safetensors checkpoint shards: {pct:3d}% Completed | "
                       f"{i}/{shards} [{el // 60:02d}:{el % 60:02d}<{eta}, {rate}]")
    t += dt.timedelta(seconds=int(per * shards) + 1)
    ev.add(t, workers[0])
    for r in rng.sample(order, len(order)):
        secs = per * shards + rng.uniform(-0.5, 0.5)
        ev.add(t, f.vllm(workers[r], t, "INFO", "load_weights", f"Loading weights took {secs:.2f} seconds"))
        if s.draft_layers:
            ev.add(t, f.vllm(workers[r], t, "INFO", "drafter", "Loading drafter model..."))
    t += dt.timedelta(seconds=2)
    gib = 140.0 / s.tp * 1.0 + (0.4 if s.draft_layers else 0.0)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "model_mem",
                         f"Model loading took {gib:.2f} GiB memory and {per * shards + rng.uniform(1, 3):.6f} seconds"))
    t += dt.timedelta(seconds=2)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "dynamo", f"Dynamo bytecode transform time: {rng.uniform(9, 15):.2f} s"))
    t += dt.timedelta(seconds=15)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "compile",
                         "Compiling a graph for compile range (1, 8192) takes 12.50 s"))
    t += dt.timedelta(seconds=16)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "kv_mem", "Available KV cache memory: 98.31 GiB"))
    t += dt.timedelta(seconds=1)
    kv_tokens = 3_145_728 if s.tp >= 8 else 802_816
    ev.add(t, f.vllm(core, t, "INFO", "kv_size", f"GPU KV cache size: {kv_tokens:,} tokens"))
    ev.add(t, f.vllm(core, t, "INFO", "kv_conc",
                     f"Maximum concurrency for {s.max_len:,} tokens per request: {kv_tokens / s.max_len:.2f}x"))
    for r in rng.sample(order, len(order)):
        tw = t + ms(rng.uniform(500, 620))
        ev.add(tw, f.lmc(workers[r], tw, "INFO", "register", "Registering KV caches"))
        tw += ms(20)
        ev.add(tw, f.lmc(workers[r], tw, "INFO", "post_init", "Post initializing LMCacheEngine"))
    t += dt.timedelta(seconds=21)
    for r in rng.sample(order, len(order)):
        ev.add(t, f.vllm(workers[r], t, "INFO", "graphs",
                         f"Graph capturing finished in {rng.randint(14, 19)} secs, took {rng.uniform(1.2, 1.9):.2f} GiB"))
    ev.add(t, f.vllm(core, t, "INFO", "connector",
                     f"Creating v1 connector with name: LMCacheConnectorV1 and engine_id: {s.engine_id}"))
    ev.add(t, f.vllm(core, t, "WARNING", "kvbase",
                     "Initializing KVConnectorBase_V1. This API is experimental and subject to change "
                     "in the future as we iterate the design."))
    ev.add(t, f.vllm(core, t, "INFO", "lmc_conn", "Initializing latest dev LMCache connector"))
    ver, _, commit = s.lmc_version.partition("-")
    for ln in LMCACHE_BANNER:
        ev.add(t, core + ln.format(ver=ver, commit=commit))
    tc = t + ms(rng.uniform(300, 900))
    ev.add(tc, f.lmc(core, tc, "INFO", "load_cfg", "Loading LMCache config file /etc/lmcache/lmcache.yaml"))
    tc += ms(3)
    ev.add(tc, f.lmc(core, tc, "INFO", "none_hash", f"Initialized NONE_HASH={none_hash} from vLLM (>= PR#20511)"))
    ev.add(tc, f.lmc(core, tc, "INFO", "hash_algo", "Using hash algorithm: sha256_cbor"))
    tc += ms(50)
    ev.add(tc, f.lmc(core, tc, "INFO", "init",
                     f"LMCache initialized for role KVConnectorRole.SCHEDULER with version {s.lmc_version}, "
                     f"vllm version {s.vllm_version}, lmcache cache_engine metadata: None"))
    t = tc + dt.timedelta(seconds=1)
    ev.add(t, f.vllm(core, t, "INFO", "init_engine",
                     "init engine (profile, create kv cache, warmup model) took 81.42 s (compilation: 27.50 s)"))
    t += dt.timedelta(seconds=1)
    ev.add(t, f.vllm(api, t, "INFO", "tasks", "Supported tasks: ['generate']"))
    ev.add(t, f.vllm(api, t, "INFO", "serving", "Starting vLLM server on http://0.0.0.0:8000"))
    ev.add(t, f.vllm(api, t, "INFO", "routes", "Available routes are:"))
    for path, methods in ROUTES:
        ev.add(t, f.vllm(api, t, "INFO", "route", f"Route: {path}, Methods: {methods}"))
    ev.add(t, f"{api}INFO:     Started server process [{s.api_pid}]")
    ev.add(t, f"{api}INFO:     Waiting for application startup.")
    ev.add(t, f"{api}INFO:     Application startup complete.")
    return t + dt.timedelta(seconds=2)


@dataclass
class Req:
    rid: str
    arrive: dt.datetime
    total: int
    computed: int
    hit: int
    out_tokens: int
    # per-rank override: rank -> retrieved tokens (shortfall)
    short: dict[int, int] = field(default_factory=dict)
    status: str = "200 OK"
    conv: int = -1
    short_at: dt.datetime | None = None  # when the short rank(s) finish their retrieve
    fail_t: dt.datetime | None = None
    fail_miss: int = 0


class Traffic:
    """Simulates multi-turn chat traffic against one server and emits its lines."""

    def __init__(self, ev: Events, f: Fmt, s: Server, rng: random.Random):
        self.ev, self.f, self.s, self.rng = ev, f, s, rng
        self.api = f.prefix("APIServer", s.api_pid)
        self.core = f.prefix("EngineCore", s.core_pid)
        self.workers = [f.prefix(f"Worker_TP{r}" if s.tp > 1 else "Worker", p)
                        for r, p in enumerate(s.worker_pids)]
        self.convs: list[int] = []          # stored prefix length (chunk-aligned) per conversation
        self.conv_total: list[int] = []
        self.retired: set[int] = {-1}
        # rank -> list of (start, end) windows with CPU memory pressure
        self.pressure: dict[int, list[tuple[dt.datetime, dt.datetime]]] = {}
        self.window: list[Req] = []         # requests finished, for stats
        self.hist: list[tuple[int, int]] = []  # (total, hit) of the last requests, for the hit rate

    def under_pressure(self, rank: int, t: dt.datetime) -> bool:
        return any(a <= t <= b for a, b in self.pressure.get(rank, ()))

    def next_request(self, t: dt.datetime) -> Req:
        rng, c = self.rng, self.s.chunk
        live = [i for i in range(len(self.convs)) if i not in self.retired]
        if not live or rng.random() < 0.35:
            total = int(min(self.s.max_len - 2048, rng.lognormvariate(8.3, 0.9))) + rng.randint(50, 400)
            # shared system prompt of 1536 tokens cached by LMCache half of the time
            hit = 1536 if rng.random() < 0.5 and total > 1800 else 0
            idx = len(self.convs)
            self.convs.append(0)
            self.conv_total.append(0)
        else:
            idx = rng.choice(live)
            total = self.conv_total[idx] + rng.randint(150, 900) + rng.randint(40, 2500)
            total = min(total, self.s.max_len - 1024)
            hit = self.convs[idx]
        hit = min(hit, total // c * c)
        computed = 0
        if hit and rng.random() < 0.25:
            # vLLM still holds part of the prefix in its GPU prefix cache
            computed = min(total - 1, rng.randint(1, hit // self.s.block + 8) * self.s.block)
        self.convs[idx] = max(self.convs[idx], total // c * c)
        self.conv_total[idx] = total
        return Req(chat_id(rng), t, total, computed, hit, rng.randint(40, 900), conv=idx)

    def emit(self, q: Req) -> dt.datetime:
        """Emit all lines of one request; returns its finish time."""
        ev, f, s, rng = self.ev, self.f, self.s, self.rng
        c = s.chunk
        t = q.arrive + ms(rng.uniform(2, 40))
        need = max(q.hit - q.computed - (1 if q.hit == q.total else 0), 0)
        ev.add(t, f.lmc(self.core, t, "INFO", "l1",
                        f"Reqid: {q.rid}, Total tokens {q.total}, Inference Engine computed tokens: "
                        f"{q.computed}, LMCache hit tokens: {q.hit}, need to load: {need}"))
        t_load = t + ms(rng.uniform(5, 60))
        failed = False
        if need > 0:
            required = q.hit - q.computed // c * c
            expected = q.hit - q.computed
            base_ms = s.gb(required) / 20.0 * 1000
            for r in rng.sample(range(s.tp), s.tp):
                got = q.short.get(r, required)
                cost = base_ms * rng.uniform(0.85, 1.3)
                tr = t_load + ms(cost + rng.uniform(0, 3))
                if r in q.short and q.short_at is not None:
                    tr = q.short_at
                size = s.gb(got)
                ev.add(tr, f.lmc(self.workers[r], tr, "INFO", "r4",
                                 f"[req_id={q.rid}] Retrieved {got} out of {required} required tokens "
                                 f"(from {q.hit} total tokens). size: {size:.4f} gb, cost {cost:.4f} ms, "
                                 f"throughput: {size / cost * 1000 if cost else 0:.4f} GB/s;"))
                if got < expected:
                    failed = True
                    tr += ms(0.4)
                    ev.add(tr, f.lmc(self.workers[r], tr, "ERROR", "r1",
                                     f"Request {q.rid}The number of retrieved tokens is less than the "
                                     "expected number of tokens! This should not happen!"))
                    ev.add(tr, f.lmc(self.workers[r], tr, "ERROR", "r2",
                                     f"Num retrieved tokens: {got}, num expected tokens: {expected}"))
                    miss = expected - got
                    tr += ms(0.6)
                    ev.add(tr, f.lmc(self.workers[r], tr, "WARNING", "r3",
                                     f"Request {q.rid} failed to load {miss} tokens across "
                                     f"{-(-miss // s.block)} blocks"))
                    q.fail_t, q.fail_miss = tr, miss
            t_load += ms(base_ms * 1.3 + 5)
        if failed and q.fail_t is not None:
            tf = q.fail_t + ms(rng.uniform(3, 9))
            ev.add(tf, f.vllm(self.core, tf, "ERROR", "v2",
                              f"Failing 1 request(s) due to KV load failure (failure_policy=fail, "
                              f"{q.fail_miss} tokens affected). Request IDs: {{'{q.rid}'}}"))
            tend = tf + ms(rng.uniform(5, 30))
            ev.add(tend, f"{self.api}INFO:     {client_ip(rng)} - \"POST /v1/chat/completions HTTP/1.1\" "
                         "500 Internal Server Error")
            q.status = "500"
            return tend
        # prefill done -> store the new full chunks of the prompt (save_decode_cache=False)
        t_store = t_load + ms(q.total / 12000 * 1000 * rng.uniform(0.8, 1.2))
        skip = q.hit
        new = q.total // c * c - skip
        if new > 0:
            for r in rng.sample(range(s.tp), s.tp):
                ts = t_store + ms(rng.uniform(0, 18))
                stored = new
                if self.under_pressure(r, ts) and rng.random() < 0.7:
                    kept = rng.randint(0, max(0, new // c - 1))
                    stored = kept * c
                    for _ in range(rng.randint(1, 3)):
                        ev.add(ts, f.lmc(self.workers[r], ts, "WARNING", "m3",
                                         f"Failed to allocate memory block of size {s.chunk_bytes} "
                                         "because no memory is available"))
                    ev.add(ts, f.lmc(self.workers[r], ts, "WARNING", "s4",
                                     f"Local cpu memory under pressure so choosing to store only  {kept} "
                                     "total chunks of KV cache."))
                    # this rank now holds a shorter prefix than the others: retire the
                    # conversation so that no later lookup has to disagree across ranks
                    self.retired.add(q.conv)
                    if kept == 0:
                        continue
                size = s.gb(stored)
                cost = size / rng.uniform(15, 30) * 1000
                off = cost * rng.uniform(0.55, 0.8)
                ts += ms(cost)
                ev.add(ts, f.lmc(self.workers[r], ts, "INFO", "s1",
                                 f"[req_id={q.rid}] Stored {stored} out of total {new} tokens. size: "
                                 f"{size:.4f} GB, cost {cost:.4f} ms, throughput: {size / cost * 1000:.4f} GB/s; "
                                 f"offload_time: {off:.4f} ms, put_time: {cost - off:.4f} ms"))
        # decode
        tps = rng.uniform(45, 80)
        tend = t_store + dt.timedelta(seconds=q.out_tokens / tps)
        ev.add(tend, f"{self.api}INFO:     {client_ip(rng)} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK")
        return tend

    def stats(self, t: dt.datetime, done: list[Req], running: int) -> None:
        f, s, rng = self.f, self.s, self.rng
        prompt = sum(q.total - q.hit for q in done) / 10.0
        gen = sum(q.out_tokens for q in done) / 10.0
        for q in done:
            self.hist.append((q.total, q.hit))
        self.hist = self.hist[-1000:]
        tot = sum(a for a, _ in self.hist) or 1
        ext = 100.0 * sum(b for _, b in self.hist) / tot
        local = 100.0 * sum(q.computed for q in done) / max(1, sum(q.total for q in done)) if done else 0.0
        usage = min(95.0, 2.0 + running * rng.uniform(1.5, 4.0))
        ev_line = (
            f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
            f"{gen:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: "
            f"{usage:.1f}%, Prefix cache hit rate: {local:.1f}%, External prefix cache hit rate: {ext:.1f}%"
        )
        api = self.api
        self.ev.add(t, f.vllm(api, t, "INFO", "stats", ev_line))
        if gen > 0:
            acc = [a * rng.uniform(0.93, 1.05) for a in s.accept]
            drafted = int(gen / (1 + sum(acc)) * s.spec_k * 10)
            accepted = int(drafted / s.spec_k * sum(acc))
            mal = 1 + accepted / max(1, drafted // s.spec_k)
            pos = ", ".join(f"{min(a, 1.0):.3f}" for a in acc)
            self.ev.add(t, f.vllm(api, t, "INFO", "spec",
                                  f"SpecDecoding metrics: Mean acceptance length: {mal:.2f}, Accepted throughput: "
                                  f"{accepted / 10:.2f} tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, "
                                  f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position "
                                  f"acceptance rate: {pos}, Avg Draft acceptance rate: "
                                  f"{100.0 * accepted / max(1, drafted):.1f}%"))

    def run(self, start: dt.datetime, end: dt.datetime, rate: float,
            scripted: dict[dt.datetime, Req] | None = None) -> None:
        """Poisson arrivals at `rate` req/s between start and end, plus scripted requests."""
        rng = self.rng
        arrivals: list[tuple[dt.datetime, Req | None]] = []
        t = start
        while t < end:
            t += dt.timedelta(seconds=rng.expovariate(rate))
            arrivals.append((t, None))
        for ts, q in (scripted or {}).items():
            arrivals.append((ts, q))
        arrivals.sort(key=lambda x: x[0])
        finished: list[tuple[dt.datetime, Req]] = []
        for ts, q in arrivals:
            if q is None:
                q = self.next_request(ts)
            fin = self.emit(q)
            finished.append((fin, q))
        # periodic lines: stats every 10 s, /metrics scrape every 15 s, /health every 30 s
        tick = start.replace(microsecond=0) + dt.timedelta(seconds=9 - start.second % 10)
        last_fin = max(f for f, _ in finished) if finished else end
        while tick < max(end, last_fin) + dt.timedelta(seconds=20):
            prev = tick - dt.timedelta(seconds=10)
            done = [q for fin, q in finished if prev < fin <= tick]
            running = sum(1 for fin, q in finished if q.arrive <= tick < fin)
            if done or running:
                self.stats(tick, done, running)
            tick += dt.timedelta(seconds=10)
        tm = start + dt.timedelta(seconds=3.7)
        while tm < last_fin:
            self.ev.add(tm, f"{self.api}INFO:     10.42.0.17:{rng.randint(40000, 60000)} - "
                            "\"GET /metrics HTTP/1.1\" 200 OK")
            if rng.random() < 0.5:
                th = tm + ms(411)
                self.ev.add(th, f"{self.api}INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "
                                "\"GET /health HTTP/1.1\" 200 OK")
            tm += dt.timedelta(seconds=15)


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------

INCIDENT_ID = "chatcmpl-3fb0a91c6d2e47b8-e5c1d07f"


def tp8_server() -> Server:
    """The TP=8 EAGLE-3 server of the user's case (also used by gen_bench_log.py)."""
    return Server(
        model="meta-llama/Llama-3.3-70B-Instruct", served="llama-70b", tp=8,
        num_layer=81, kv_heads_per_gpu=1, head_size=128, draft_layers=1,
        spec_args="{'method': 'eagle3', 'model': 'yuhuili/EAGLE3-LLaMA3.3-Instruct-70B', 'num_speculative_tokens': 3}",
        spec_repr="SpeculativeConfig(method='eagle3', model='yuhuili/EAGLE3-LLaMA3.3-Instruct-70B', num_spec_tokens=3)",
        spec_k=3, accept=(0.79, 0.58, 0.41), max_len=131072, max_cpu_gb=40.0,
        lmc_version="0.5.7.dev38-gb41f7c2e", lmc_tree="post-0.5.6",
        api_pid=1, core_pid=203, worker_pids=[765 + i for i in range(8)],
        engine_id="7c1e5a42-93d0-4b6f-a8e1-2f94d6b0c3e7",
    )


def scenario_tp8_shortfall() -> str:
    rng = random.Random(20260506)
    s = tp8_server()
    f = Fmt(2026, color_prefix=True, lmc_tree=s.lmc_tree)
    ev = Events()
    t = emit_startup(ev, f, s, dt.datetime(2026, 5, 6, 15, 31, 12), rng)
    tr = Traffic(ev, f, s, rng)
    day = dt.date(2026, 5, 6)

    def at(h: int, m: int, sec: int, msec: int = 0) -> dt.datetime:
        return dt.datetime.combine(day, dt.time(h, m, sec, msec * 1000))

    # Worker_TP2 (pid 767) runs out of local CPU cache from 15:51:40 on; the other ranks do not.
    tr.pressure[2] = [(at(15, 51, 40), at(15, 58, 30))]
    # the incident conversation: three turns of a long agentic session
    scripted = {
        at(15, 41, 7, 212): Req("chatcmpl-3fb07e21a8c94d10-5b9d2e64", at(15, 41, 7, 212), 41022, 0, 0, 612),
        at(15, 49, 31, 904): Req("chatcmpl-3fb0d4e6b3f15a72-c02a8f19", at(15, 49, 31, 904), 55873, 0, 40960, 388),
        at(15, 56, 3, 488): Req(INCIDENT_ID, at(15, 56, 3, 488), 56131, 0, 55808, 300,
                                 short={2: 49664}, short_at=at(15, 56, 3, 745)),
    }
    tr.run(t, at(15, 58, 40), rate=0.17, scripted=scripted)
    # one double unpin on Worker_TP2 about 20 s before the incident (M5)
    w2 = tr.workers[2]
    tm5 = at(15, 55, 41, 377)
    ev.add(tm5, f.lmc(w2, tm5, "WARNING", "m5",
                      f"Pin count of MemoryObj {s.chunk_bytes * 1873}is negative: -1.Double unpin occurred "
                      "somewhere.Setting pin count back to 0 as a hack but please find the bug."))
    return ev.render()


def scenario_healthy_ngram() -> str:
    rng = random.Random(20260504)
    s = Server(
        model="Qwen/Qwen2.5-14B-Instruct", served="qwen2.5-14b", tp=2,
        num_layer=48, kv_heads_per_gpu=4, head_size=128, draft_layers=0,
        spec_args="{'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4, 'prompt_lookup_min': 2}",
        spec_repr="SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)",
        spec_k=4, accept=(0.55, 0.36, 0.22, 0.13), max_len=32768, max_cpu_gb=60.0,
        lmc_version="0.5.6-g3e11e108", lmc_tree="0.5.6",
        api_pid=1, core_pid=97, worker_pids=[213, 214],
        engine_id="0e4b9d27-5f61-4c3a-b8d2-91a7c6e40f58", arch="Qwen2ForCausalLM",
    )
    f = Fmt(2026, color_prefix=False, lmc_tree=s.lmc_tree)
    ev = Events()
    t = emit_startup(ev, f, s, dt.datetime(2026, 5, 4, 9, 2, 41), rng)
    tr = Traffic(ev, f, s, rng)
    tr.run(t, t + dt.timedelta(minutes=22), rate=0.35)
    return ev.render()


SCENARIOS = {
    "tp8-shortfall/serve.log": scenario_tp8_shortfall,
    "healthy-ngram/serve.log": scenario_healthy_ngram,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "examples")
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = ap.parse_args(argv)
    rc = 0
    for rel, fn in SCENARIOS.items():
        text = fn()
        path = args.out / rel
        data = text.encode("utf-8")
        if args.check:
            same = path.exists() and path.read_bytes() == data
            print(f"{'ok     ' if same else 'DIFFERS'} {path}")
            rc |= 0 if same else 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"wrote {path} ({len(data) / 1e6:.2f} MB, {text.count(chr(10))} lines)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
