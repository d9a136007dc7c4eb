"""The cause catalog: one row per cause id, shared by every KV rule.

A cause id means the same thing, and carries the same fix, in every finding that names it: the rules
decide *how likely* a cause is; this table says *what it is*, how to fix it, which experiment confirms
it, which versions it concerns, where the mechanism lives upstream, and which log lines would decide
for or against it when the input lacks them (fragment mode's "what to collect").

Upstream locations are LMCache 0.5.6 unless a version is named (``vllm_v1_adapter.py`` is
``lmcache/integration/vllm/vllm_v1_adapter.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CauseInfo:
    id: str
    mechanism: str
    fix: str
    confirm: str
    versions: str
    references: tuple[str, ...]
    #: the log lines (or log level, files) that would confirm or exclude it
    collect: str = ""


def _c(id: str, mechanism: str, fix: str, confirm: str, versions: str, refs: tuple[str, ...], collect: str = "") -> CauseInfo:
    return CauseInfo(id, mechanism, fix, confirm, versions, refs, collect)


_ROWS = [
    # ---- KV001: retrieved < expected ----------------------------------------------------------------
    _c("lookup-retrieve-eviction",
       "A chunk the lookup counted (and pinned) was evicted from that rank's cache before its retrieve; the "
       "retrieve stops at the first missing chunk, so the tail of the prefix is lost in whole chunks.",
       "Give the local CPU tier room (max_local_cpu_size) or reduce concurrent long distinct prefixes so looked-up "
       "chunks are not evicted before the load.",
       "specdiag repro --preset eviction",
       "structural on ranks ≠ 0 before 0.3.3 (only rank 0 pinned); later only with lost pins or remote tiers",
       ("v1/storage_backend/local_cpu_backend.py (eviction)", "LMCache PR #1101, PR #1154", "LMCache issue #910"),
       "memory-pressure warnings of that rank in the minutes before ('No eviction candidates found …', 'Failed to "
       "allocate memory block …', 'Local cpu memory under pressure …'); LMCACHE_LOG_LEVEL=DEBUG for 'Evicting N chunks'; "
       "metric lmcache:local_cpu_evict_count"),
    _c("pin-accounting-bug",
       "A double unpin drove a pin count negative; unpin clamps it to 0, so a chunk still needed by a pending "
       "retrieve became evictable.",
       "The double unpin is an open LMCache bug (issues #2954, #5090; proposed fixes such as PR #5095 open, #3004 "
       "closed unmerged): use a release whose notes name a pin-count fix, and until then avoid the layerwise, "
       "blending and async-loading paths that double-unpin.",
       "watch lmcache:pinned_memory_objs_count and the 'Pin count of MemoryObj ... is negative' warning",
       "reported on layerwise, blending and async-loading paths up to 0.5.x",
       ("v1/memory_management.py:846 (negative pin count)", "LMCache issues #4133, #2954, #3650, #3381, #5090"),
       "'Pin count of MemoryObj … is negative' / 'Ref count of MemoryObj … is negative' warnings of that rank"),
    _c("pin-leak",
       "Chunks pinned that nothing unpins: a path that pins and never releases (LMCache PR #2785: LocalCPUBackend."
       "contains(pin=True) pinned objects that touch_cache() never unpinned) leaves them pinned, unevictable, until "
       "the PinMonitor force-unpins them after pin_timeout_sec. A pin count above 1 at the timeout (one lookup pins a "
       "chunk once) and most of the pinned objects forced at once point at such a path, not at one request's wait.",
       "Run an LMCache release with the pin fix for the path in use (PR #2785 for contains(pin=True) under P/D and "
       "Mooncake); raising pin_timeout_sec only keeps leaked pins longer.",
       "watch lmcache:pinned_memory_objs_count while idle: it should fall to 0 once no request is in flight",
       "LMCache 0.3.12+ (PinMonitor)",
       ("v1/pin_monitor.py:151, :179", "LMCache PR #2785"),
       "'Pin timeout detected for MemoryObj … Pin count: N' and 'Force unpinned N timeout objects in M pinned_objects' "
       "warnings, with the request traffic at the time"),
    _c("pin-timeout",
       "The request waited longer than pin_timeout_sec between lookup and retrieve; the PinMonitor force-unpinned "
       "its chunks and eviction took them.",
       "Raise pin_timeout_sec above the longest lookup→load wait, or relieve vLLM KV-block pressure that keeps "
       "looked-up requests waiting.",
       "specdiag repro --preset pin-timeout --toggle pin_timeout_sec=1,300",
       "0.3.12+ (PinMonitor)",
       ("v1/pin_monitor.py:151, :179",),
       "'Pin timeout detected for MemoryObj …' / 'Force unpinned N timeout objects …' warnings, and the request's "
       "'Reqid: …' lookup line (its time gives the lookup→load wait)"),
    _c("remote-backend-loss",
       "Remote and shared backends cannot pin: the remote store evicted, lost or desynchronised data between the "
       "lookup (key present) and the get.",
       "Remote backends cannot pin: size the remote store so it does not evict (Redis maxmemory/noeviction), or put "
       "a local CPU tier in front of it (local_cpu: true).",
       "specdiag repro --preset remote-eviction",
       "all versions with remote_url or storage plugins",
       ("v1/storage_backend/remote_backend.py", "v1/storage_backend/connector/redis_connector.py:308",
        "LMCache PR #3410", "LMCache issues #1467, #1690"),
       "the config dump (remote_url, local_cpu), Redis 'Key exists but KV cache does not exist' warnings, the remote "
       "store's own eviction statistics"),
    _c("backend-read-failure",
       "A backend reported the chunk present but its read failed (API mismatch, I/O error, timeout); LMCache logs "
       "'in the storage, but it can't be retrieved' and drops everything from that chunk on.",
       "Fix the backend read path named in the preceding backend error (API mismatch, I/O errors, timeouts: "
       "blocking_timeout_secs).",
       "reproduce the backend error in isolation; compare with the backend disabled (local_cpu only)",
       "0.3.5+ (the warning); mooncake store API mismatch in 0.3.5",
       ("v1/cache_engine.py:1793", "LMCache issues #1514, #1686, #2106"),
       "the backend's own ERROR/WARNING lines just before 'The cache block is in the storage, but it can't be "
       "retrieved' (disk, mooncake, redis, timeouts), and which backends the config dump enables"),
    _c("backend-not-connected",
       "The remote backend never came up: its client could not be set up (a client library whose API this LMCache "
       "build does not call: 'has no attribute setup_lmcache'; a remote_url whose scheme this build has no connector "
       "for: 'No adapter found for URL'), or every connection was refused or reset (a wrong port, TLS or "
       "authentication the connector does not speak). Nothing was stored there, so remote lookups miss; no cached "
       "chunk was lost.",
       "Check remote_url's scheme against the connectors of the LMCache release in use (lm://, redis://, mooncakestore:"
       "//, …), match a client library to the LMCache build (the Mooncake or Redis client version its release names), "
       "or fix the endpoint (host, port, TLS, password) in remote_url / the backend config; restart the workers.",
       "connect to the remote endpoint from a worker host with the backend's own client (redis-cli -u URL ping; the "
       "Mooncake master's address) and check that no connection failure follows 'Connected to remote storage'",
       "all",
       ("v1/storage_backend/remote_backend.py:124, :184", "LMCache issues #839, #929"),
       "every remote-connection line from start-up on: whether any connection ever succeeded"),
    _c("nixl-side-channel-mismatch",
       "The NIXL handshake reached another engine than the one the request's kv_transfer_params name: the side "
       "channel (VLLM_NIXL_SIDE_CHANNEL_HOST / _PORT) of several instances or DP ranks on one host collide, or the "
       "host is left at its default, so the decode side asks the wrong agent and vLLM raises 'Remote NIXL agent "
       "engine ID mismatch'.",
       "Give every prefill instance and DP rank its own reachable VLLM_NIXL_SIDE_CHANNEL_HOST / "
       "VLLM_NIXL_SIDE_CHANNEL_PORT and let the proxy pass the prefill's kv_transfer_params unchanged.",
       "compare the engine id in the error with each prefill instance's startup line; list which process listens "
       "on the side-channel port on the prefill host",
       "0.10+ (the engine id check)",
       ("distributed/kv_transfer/kv_connector/v1/nixl_connector.py", "vLLM issue #27083")),
    _c("nixl-unreachable",
       "The decode side could not complete the NIXL handshake with the prefill instance's agent: its side channel "
       "is not reachable (a firewall or pod network, a wrong host, an instance that restarted) or the transport "
       "(UCX) could not connect.",
       "Make the prefill's VLLM_NIXL_SIDE_CHANNEL_HOST an address the decode hosts reach and open its port; check "
       "that both sides run the same vLLM and NIXL versions.",
       "from the decode host, connect to the prefill's side-channel host:port; rerun with UCX_LOG_LEVEL=info",
       "0.9.2+",
       ("distributed/kv_transfer/kv_connector/v1/nixl_connector.py", "…/nixl/worker.py (0.20+)"),
       "the exception logged under 'Handshake with … failed'"),
    _c("backend-write-failure",
       "The storage backend refused or failed LMCache's writes: the store is full (Redis 'OOM command not allowed "
       "when used memory > maxmemory'), the connector and its client library disagree ('unsupported format string "
       "passed to bytes.__format__'), or the store's master rejected the put (Mooncake 'RPC_FAIL'). The chunks are "
       "not kept there, so later lookups of them miss.",
       "Fix the write path the error names: room in the store (maxmemory, or an eviction policy that frees it), a "
       "client library version the connector supports, the store's master or metadata service.",
       "after the fix, compare the store's own put count (Redis INFO keyspace, Mooncake's put metrics) with the "
       "'Stored N out of N' lines, and look for remote hits on repeated prompts",
       "0.3.x+ (remote connectors)",
       ("v1/storage_backend/remote_backend.py:220", "v1/storage_backend/connector/instrumented_connector.py:118, :186",
        "LMCache issues #1518, #2166"),
       "the backend's own error lines around the first failed put, and its server-side log"),
    _c("unknown-config-key",
       "LMCache's configuration loader does not know the key (a misspelling, a key of another LMCache release, a key "
       "put in the wrong section): it warns and ignores it, so the setting it was meant to make keeps its default.",
       "Check the key against the configuration reference of the LMCache release in use (lmcache/v1/config.py); fix "
       "its spelling, move it, or use a release that knows it.",
       "restart and check that the config dump ('Creating LMCacheEngine with config: …') shows the value",
       "0.3.x+",
       ("v1/config_base.py:187, :212, :602", "LMCache issue #2854")),
    _c("pd-buffer-full",
       "The P/D receiver allocates each incoming transfer's memory objects from its transfer buffer (pd_buffer_size; "
       "0.3.x nixl_buffer_size) and, when it is full, retries every 10 ms or less, with no limit, until transfers "
       "in flight free it: the sender's transfer and its request wait. It never frees when one prompt's KV is larger than the "
       "buffer, or when memory objects are not released.",
       "Size pd_buffer_size (per rank, on the receiver) to the KV of the prompts in flight at once (tokens x the KV "
       "bytes per token of one rank), or lower the concurrency of long prompts sent to this receiver. Retries that "
       "never stop under no load mean the buffer is not being freed: try an LMCache release that fixes it.",
       "count the retry lines per second under a fixed load before and after raising pd_buffer_size; check whether "
       "they stop when the load stops",
       "LMCache 0.3.3+",
       ("v1/storage_backend/pd_backend.py:489 (0.3.9), :943 (0.5.6); connector/nixl_connector_v3.py:567 (0.3.3)",
        "LMCache issues #1030, #1337, #1990")),
    _c("pd-kv-not-read",
       "In P/D disaggregation the prefill instance keeps a request's KV blocks until its decode instance reads them "
       "over NIXL and says so; when none did within VLLM_NIXL_ABORT_REQUEST_TIMEOUT (120 s by default) or the "
       "blocks' lease, it frees them. No decode worker read them: the decode instance never got the request (the "
       "proxy sent it elsewhere, or the client cancelled it), could not reach the prefill instance (a failed "
       "handshake, KV015), or waited longer than the timeout in its own queue.",
       "Read the decode instance's log for these request ids: no line of them means the proxy or the client; a "
       "handshake or transfer failure means the side channel (KV015); a long queue means a decode side too small "
       "for the load, or a timeout too short (VLLM_NIXL_ABORT_REQUEST_TIMEOUT on the prefill side).",
       "grep the decode instance's log for one of the request ids named here, and for 'Handshake' / 'NIXL transfer "
       "failure'",
       "vLLM 0.10.1+",
       ("distributed/kv_transfer/kv_connector/v1/nixl_connector.py:1048 (0.10.2), nixl/base_worker.py:3439 (0.34.0)",
        "vLLM issue #25562")),
    _c("config-rejected",
       "vLLM checks its configuration before anything starts: argparse the command line (an unknown option, a value "
       "that does not parse, e.g. a JSON option that is not JSON), then each config dataclass its values "
       "(SpeculativeConfig, VllmConfig, … __post_init__ and pydantic validation), raising on the first it rejects; "
       "the process exits and no engine is created.",
       "Correct the option the message names and start again: the message says what is wrong with it.",
       "start the server again with the corrected option; vllm serve --help=<option> shows its form",
       "vLLM 0.6.0+",
       ("entrypoints/cli (argparse), config/ (SpeculativeConfig, VllmConfig), engine/arg_utils.py "
        "(create_engine_config)", "vLLM issues #19448, #20375, #50708")),
    _c("worker-hang",
       "vLLM's engine core and its workers pass every step's input and output through a shared-memory message queue "
       "(shm_broadcast.py, MessageQueue); a side that waits VLLM_RINGBUFFER_WARNING_INTERVAL (60 s) for the other "
       "logs 'No available shared memory broadcast block found in 60 seconds' and again each interval. While "
       "serving, a step never takes a minute: a worker is stuck — in a collective waiting for a peer rank that "
       "stopped or died, in a kernel that does not return, or in a deadlock — and the engine makes no progress "
       "until it returns or the RPC times out.",
       "Dump the stacks of the engine's processes while it waits (py-spy dump --pid <pid> for the engine core and "
       "each worker): a worker in a collective waits for the peer rank that is elsewhere; read that rank's last "
       "lines, NCCL's (NCCL_DEBUG=INFO) and the GPU's state (nvidia-smi, Xid errors in dmesg).",
       "py-spy dump --pid <worker pid> while the message repeats; rerun with NCCL_DEBUG=INFO",
       "vLLM 0.6.0+ (INFO from 0.11.0)",
       ("distributed/device_communicators/shm_broadcast.py (MessageQueue.acquire_read / acquire_write)",
        "vLLM PR #25566 (the message reworded: not a shared-memory size problem)")),
    _c("ray-placement",
       "vLLM's Ray executor asks Ray for a placement group of one GPU bundle per rank (tensor x pipeline parallel "
       "size) and waits for it, logging 'Waiting for creating a placement group of specs for N seconds' while Ray "
       "has no room, and gives up with 'Cannot provide a placement group requiring N GPUs … within S seconds' "
       "(executor/ray_utils.py). Ray has no room when the cluster's free GPUs are fewer than the bundles, or when a "
       "node's IP differs from VLLM_HOST_IP so the bundle pinned to the driver's node never fits.",
       "Check `ray status` and `ray list nodes`: free or add GPUs, lower the parallel size, or make VLLM_HOST_IP the "
       "node's address in Ray.",
       "ray status before starting: the free GPUs must reach the group's bundle count",
       "vLLM 0.6+ (Ray executor)",
       ("v1/executor/ray_utils.py (_wait_until_pg_ready, PG_WAIT_TIMEOUT = 1800, 0.32)", "vllm-project/aibrix issue #927",
        "gpustack issue #5181")),
    _c("long-startup-work",
       "While the engine starts, a worker can spend minutes on work before its first reply: torch.compile and "
       "CUDA-graph capture, loading and quantizing weights or the KV cache of a large model; the engine core waits "
       "on the shared-memory message queue meanwhile and logs each 60 s (VLLM_RINGBUFFER_WARNING_INTERVAL).",
       "Wait for start-up to finish, or cut its work (--enforce-eager or a warm torch.compile cache, pre-quantized "
       "weights); only when the message repeats past what a start-up of this model takes is it a hang (worker-hang).",
       "compare with the time the same model took to start before; py-spy dump --pid <worker pid> shows compile or "
       "load frames",
       "vLLM 0.6.0+",
       ("distributed/device_communicators/shm_broadcast.py", "vLLM PR #25566")),
    # ---- SRV005: structured output ---------------------------------------------------------------------------
    _c("so-spec-decode-drafts",
       "With speculative decoding the scheduler checks each drafted token against the request's grammar (it masks "
       "the target's logits at the drafted positions and advances the grammar by the tokens accepted); when drafted "
       "tokens the grammar refuses are accepted anyway (a draft across the reasoning end, a rollback that missed the "
       "grammar) the grammar rejects them: 'Failed to advance FSM', 'grammar rejected tokens', 'rejected draft token'.",
       "Upgrade vLLM to a release with the fix for the drafting method in use (the issues below), or serve "
       "structured-output requests on a server without speculative decoding.",
       "send the same structured-output requests to a server started without --speculative-config: the lines stop",
       "vLLM 0.8.1+ (V1 structured output)",
       ("v1/structured_output/__init__.py (grammar_bitmask, draft tokens)", "v1/core/sched/scheduler.py",
        "vLLM issues #44006, #46118, #53777; PRs #44297, #44993"),
       "the server's non-default args (speculative_config) and its SpecDecoding metrics lines"),
    _c("so-async-scheduling",
       "With --async-scheduling the scheduler plans step N+1 before step N's tokens are back, so the grammar mask "
       "of a structured-output request can be computed from a grammar state one step behind the tokens sampled; "
       "the grammar then refuses them.",
       "Serve structured-output requests without --async-scheduling, or upgrade to a release that fixed the "
       "combination.",
       "send the same requests to a server started without --async-scheduling: the lines stop",
       "vLLM 0.11+ (async scheduling)",
       ("v1/core/sched/async_scheduler.py", "v1/structured_output/__init__.py", "vLLM issues #29379, #26292"),
       "the server's non-default args (async_scheduling)"),
    _c("so-reasoning-boundary",
       "With a reasoning parser the grammar applies only after the reasoning ends (the parser's end token); a "
       "token the model writes at that boundary that the grammar does not allow first (a code fence or a blank "
       "line after </think>, a reasoning-end token inside a draft) is refused: the same token id, request after "
       "request.",
       "Upgrade vLLM to a release that fixed the reasoning parser's boundary with structured output, or send "
       "structured-output requests with reasoning off for that model.",
       "send one failing request with reasoning disabled (chat_template_kwargs enable_thinking=false): the line "
       "stops; the refused token id decodes to the boundary text",
       "vLLM 0.8+ (reasoning parsers with structured output)",
       ("v1/structured_output/__init__.py (should_advance, reasoning_ended)", "reasoning/ parsers",
        "vLLM issues #22483, #46118, #44006"),
       "the server's non-default args (reasoning_parser) and the refused token ids decoded with the tokenizer"),
    _c("so-grammar-desync",
       "The grammar and the tokens went out of step for another reason than speculative decoding, async "
       "scheduling or a reasoning boundary in the log: a grammar that had already ended (its stop token accepted) "
       "while the model went on, or a tokenizer whose vocabulary differs from the model's.",
       "Collect the request (its schema or tool definitions) and the server's start-up lines; report it upstream "
       "as the message asks ('Please file an issue').",
       "replay the failing request alone with the same schema; decode the refused token ids with the tokenizer",
       "vLLM 0.8.1+ (V1 structured output)",
       ("v1/structured_output/backend_xgrammar.py (accept_tokens)", "vLLM issue #53181"),
       "the server's start-up lines (non-default args) to rule the known combinations in or out"),
    # ---- SRV010: aborted requests ---------------------------------------------------------------------------------
    _c("client-timeout",
       "The API server aborts a request in the engine when its client goes away (the connection closed, the stream "
       "cancelled). Many at once, with no engine error, are one timeout firing for requests that started together: the "
       "client's (the OpenAI Python client waits 600 s by default), a proxy's read timeout (nginx 60 s), a gateway's or "
       "a benchmark's. A stalled engine makes clients time out too.",
       "Raise the client's and any proxy's timeout above the longest request (max_tokens at the generation rate the "
       "stats lines show), stream the responses, or shorten the requests; if the engine was not generating, find why.",
       "log request arrivals (--enable-log-requests): the aborted requests' age at the abort is the same for each, "
       "the timeout's",
       "every release", ("engine/async_llm_engine.py (abort)", "v1/engine/async_llm.py (abort)", "vLLM issue #2484"),
       "the aborted requests' arrival lines ('Received request …' / 'Added request …') and the client's timeout"),
    # ---- SRV009: HTTP 5xx answers ------------------------------------------------------------------------------------
    _c("server-failed-requests",
       "The API server answered requests it had accepted with a 5xx status: an exception while it handled them "
       "(its handlers turn any unhandled exception, and an engine that died, into HTTP 500). After an engine death "
       "every request gets one; an API-server exception fails only its own request.",
       "Read the engine's and API server's lines just before the first 5xx: an engine death there (SRV001) fails every "
       "request after it; an exception of the API server fails only its own.",
       "grep -n -B40 -m1 '\" 5[0-9][0-9] ' <full log>: the lines before the first 5xx",
       "every release", ("entrypoints/openai/api_server.py (exception handlers)",),
       "the API server's and engine's lines of the minute before the first 5xx"),
    # ---- SRV008: sleep mode's allocator --------------------------------------------------------------------------
    _c("sleep-wake-oom",
       "With sleep mode, vLLM allocates the weights and KV cache through its CuMemAllocator (cuMemCreate and cuMemMap "
       "on handles it keeps); sleep unmaps and frees them so another process can use the GPU, and wake_up creates and "
       "maps them again. When the other process (a colocated RL trainer) still holds that memory, cuMemCreate fails "
       "with out of memory and the engine cannot run.",
       "Free the other process's GPU memory before wake_up (offload the trainer's model and optimizer state, "
       "torch.cuda.empty_cache()), lower the engine's gpu_memory_utilization, or wake the weights first and the KV "
       "cache after the trainer's memory is released (wake_up(tags=['weights']) where the release has tags).",
       "print torch.cuda.mem_get_info() in the trainer right before wake_up: the free memory must cover what sleep "
       "freed ('Sleep mode freed … GiB')",
       "vLLM 0.7.3+ (sleep mode)", ("csrc/cumem_allocator.cpp", "device_allocator/cumem.py (wake_up, create_and_map)",
                                    "vLLM issue #13941", "verl issue #302"),
       "the engine's 'Sleep mode freed … GiB' / 'CuMemAllocator: sleep freed …' lines, and the trainer's memory use "
       "before wake_up"),
    _c("sleep-map-failed",
       "vLLM's sleep-mode allocator got an error other than out of memory from a CUDA driver call (cuMemMap, "
       "cuMemSetAccess): a driver without virtual memory management for this device, or a handle freed twice.",
       "Check that the driver supports CUDA virtual memory management on this GPU (not on some vGPU or MIG set-ups), "
       "and that sleep and wake_up alternate; start without --enable-sleep-mode to confirm.",
       "start without --enable-sleep-mode: the error goes away",
       "vLLM 0.7.3+ (sleep mode)", ("csrc/cumem_allocator.cpp",), "the lines of the sleep and wake_up calls before it"),
    # ---- SRV007: NCCL's WARN lines ---------------------------------------------------------------------------------
    _c("nccl-ib-network",
       "NCCL's InfiniBand/RoCE transport (net_ib.cc) failed a verbs call (ibv_modify_qp, a completion with an error): "
       "the queue pair to a peer on another node could not be set up or broke. The fabric between the nodes, the HCA "
       "or GID NCCL chose, or a peer that went away.",
       "Check the fabric between the nodes (ibstat, ibv_devinfo, the switch); name the HCAs NCCL may use "
       "(NCCL_IB_HCA) and, on RoCE, the GID index (NCCL_IB_GID_INDEX); in containers give the pods the RDMA devices.",
       "run again with NCCL_IB_DISABLE=1 (TCP sockets): if it then works, the IB/RoCE path is at fault",
       "NCCL 2.x", ("nccl src/transport/net_ib.cc", "OpenRLHF PR #335, #621"),
       "NCCL_DEBUG=INFO lines of both nodes: 'NET/IB : Using […]', the HCA and GID each rank chose"),
    _c("nccl-socket-network",
       "NCCL's TCP sockets (its bootstrap, or its socket transport) could not connect to or accept from a peer: the "
       "interface NCCL chose is not the one the nodes reach each other on, a port is blocked, or the peer is gone.",
       "Name the interface the nodes reach each other on (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME), and open the ports "
       "between them (firewall, Kubernetes network policy); every rank must reach the master address.",
       "run again with NCCL_SOCKET_IFNAME set to the interface of the nodes' own addresses",
       "NCCL 2.x", ("nccl src/misc/socket.cc", "nccl src/bootstrap.cc", "nccl src/proxy.cc"),
       "NCCL_DEBUG=INFO lines: 'NET/Socket : Using […]' and 'Bootstrap : Using […]' of each rank"),
    _c("nccl-cuda-transport",
       "A CUDA call inside NCCL failed: the peer-to-peer transport (p2p.cc: CUDA IPC handles, cudaMemcpy between "
       "GPUs) or NCCL's own buffers. GPUs that cannot reach each other peer-to-peer (a PCIe topology, a VM, "
       "containers that do not share the IPC namespace), or a driver and CUDA runtime that do not match.",
       "Check that the GPUs can reach each other (nvidia-smi topo -m) and that the driver and the container's CUDA "
       "match; containers need --ipc=host (or a shared IPC namespace) for CUDA IPC.",
       "run again with NCCL_P2P_DISABLE=1 (copies through host memory): if it then works, the peer-to-peer path is "
       "at fault",
       "NCCL 2.x", ("nccl src/transport/p2p.cc", "verifiers issue #181"),
       "NCCL_DEBUG=INFO lines: 'Channel … via P2P/IPC' (the transport each pair chose) and nvidia-smi topo -m"),
    _c("nccl-cuda-init",
       "A CUDA call NCCL makes while it creates the communicator (init.cc: device attributes, cuMem allocations, "
       "before any transport is chosen) failed: the driver or the virtual GPU lacks a feature that NCCL release uses "
       "('operation not supported': a vGPU profile with unified memory off, a driver older than NCCL expects). No "
       "peer-to-peer path is involved yet.",
       "Give the GPU what NCCL needs (enable unified memory on the vGPU profile, a driver the NCCL release supports), "
       "or run an NCCL release that does without it; NCCL_CUMEM_ENABLE=0 turns off its cuMem allocations.",
       "run again with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT: the CUDA call before the WARN line is the one refused",
       "NCCL 2.19+ (cuMem at init)", ("nccl src/init.cc", "NVIDIA/nccl #2101"),
       "NCCL_DEBUG=INFO lines of the failing rank from 'NCCL version' to the WARN line, and nvidia-smi -q (vGPU, "
       "driver)"),
    _c("nccl-nvls",
       "NCCL's NVLink SHARP transport (transport/nvls.cc), which it uses on NVSwitch systems when every GPU of a node "
       "is in the communicator (8 on an HGX board), failed a CUDA call while it set up its multicast memory: the "
       "fabric manager is not running or does not match the driver, or the container cannot reach it. Fewer GPUs do "
       "not use NVLS, which is why the same job passes with 2.",
       "Check nvidia-fabricmanager on the host (running, the driver's version) and that the container sees the fabric "
       "(the IMEX channels on GB200); or run without NVLS (NCCL_NVLS_ENABLE=0).",
       "run again with NCCL_NVLS_ENABLE=0: if it then works, NVLS is at fault",
       "NCCL 2.17+", ("nccl src/transport/nvls.cc", "vLLM issue #6732"),
       "NCCL_DEBUG=INFO lines 'NVLS multicast support is available' and systemctl status nvidia-fabricmanager"),
    _c("nccl-shm",
       "NCCL's shared-memory transport could not create or grow its segment in /dev/shm: containers get 64 MiB of "
       "/dev/shm by default, too little for NCCL's buffers between the ranks of one node.",
       "Give the container a larger /dev/shm (docker --shm-size=16g, --ipc=host; Kubernetes: an emptyDir with medium: "
       "Memory mounted at /dev/shm).",
       "run again with NCCL_SHM_DISABLE=1: if it then works, /dev/shm is too small",
       "NCCL 2.x", ("nccl src/transport/shm.cc", "nccl src/misc/shmutils.cc"),
       "df -h /dev/shm inside the container"),
    _c("nccl-duplicate-gpu",
       "Two ranks of one NCCL communicator were placed on the same GPU: NCCL refuses it (init.cc) with invalid usage. "
       "The processes' CUDA_VISIBLE_DEVICES (or Ray's GPU assignment) gave two ranks one device.",
       "Give each rank its own GPU: check CUDA_VISIBLE_DEVICES per process, the Ray placement (a Ray version that sets "
       "it per actor; RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES), and that trainer and engine do not share a device "
       "in one group.",
       "print torch.cuda.current_device() and CUDA_VISIBLE_DEVICES in every rank before the group is made",
       "NCCL 2.x", ("nccl src/init.cc (Duplicate GPU detected)", "verl issue #161"),
       "each rank's CUDA_VISIBLE_DEVICES and device index"),
    _c("nccl-other",
       "NCCL failed a call for a reason its WARN line states in its own words, of no transport this rule knows.",
       "Read the WARN line with NCCL's source (the file and line it names), and the NCCL_DEBUG=INFO lines before it.",
       "run again with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the transport each rank chose",
       "NCCL 2.x", ("nccl src/debug.cc",), "NCCL_DEBUG=INFO lines of every rank around the failure"),
    # ---- SRV011: chat requests refused while their prompt was rendered ------------------------------------------
    _c("no-chat-template",
       "vLLM renders a chat request's messages into one prompt with the tokenizer's chat template; since transformers "
       "4.44 there is no default template, so a tokenizer without one (a base model's) cannot render any chat request "
       "and vLLM refuses it (ChatTemplateResolutionError, HTTP 400) before the engine sees it.",
       "Give the server a template (--chat-template FILE, e.g. from the model family's instruct repo) or serve the "
       "model's instruct variant; send base models /v1/completions requests, which render no template.",
       "python -c \"from transformers import AutoTokenizer as T; print(T.from_pretrained('MODEL').chat_template)\" "
       "prints None",
       "transformers 4.44+ with every vLLM release",
       ("entrypoints/chat_utils.py (apply_hf_chat_template)", "renderers/hf.py (safe_apply_chat_template, 0.11+)",
        "agent-lightning #57", "vLLM #35679"),
       "the model's tokenizer_config.json (its chat_template key) and the server's --chat-template"),
    _c("tokenizer-mode-unsupported",
       "--tokenizer-mode names a tokenizer implementation; a mode a model card asks for (deepseek_v32, mistral) "
       "that this vLLM release does not register cannot be built, and chat requests are refused.",
       "Upgrade vLLM to a release that registers the mode (the model card's minimum), or serve with a mode this "
       "release has (auto) and a chat template.",
       "python -c 'import vllm; print(vllm.__version__)' against the model card's required release",
       "the mode's first release and later",
       ("tokenizers/registry.py", "transformers_utils/tokenizer.py (get_tokenizer)", "vLLM #30933"),
       "the server's --tokenizer-mode and vLLM version"),
    _c("tokenizer-rejects-argument",
       "vLLM calls the tokenizer's apply_chat_template with the keywords its release knows (reasoning_effort for "
       "mistral-common v15+ tokenizers in 0.18); an installed tokenizer library that does not take one raises, and "
       "every such chat request is refused.",
       "Install the tokenizer library version the vLLM release pins (pip check), or upgrade vLLM to a release that "
       "passes only what the tokenizer takes (vLLM PRs #38448, #41251).",
       "pip show vllm transformers mistral-common: compare with the release's requirements",
       "vLLM 0.18 with mistral-common tokenizers",
       ("renderers/mistral.py (safe_apply_chat_template)", "transformers tokenization_mistral_common.py",
        "vLLM #38560"),
       "the versions of vllm, transformers and mistral-common in the serving environment"),
    _c("chat-request-invalid",
       "mistral-common validates a conversation before it renders it (roles in a fixed order: no user message right "
       "after a tool result); a client that breaks the rule gets HTTP 400.",
       "Change the client: send the conversation in the order the model's tokenizer accepts (an assistant turn "
       "after each tool result).",
       "resend the request with the messages reordered: it is served",
       "mistral-common tokenizers (--tokenizer-mode mistral)",
       ("mistral_common protocol/instruct/validator.py", "renderers/mistral.py", "mistral-vibe #454"),
       "the request's messages (the API server's request log, --enable-log-requests)"),
    # ---- SRV006: requests longer than the context ---------------------------------------------------------------
    _c("prompt-over-context",
       "vLLM checks each request's tokens against the context (max_model_len) before it schedules it: a prompt, or a "
       "prompt plus the output tokens asked for (max_tokens), longer than the context is refused with a validation "
       "error (the client's HTTP 400; V0's scheduler ignores it instead). The engine never sees the request.",
       "Send less: truncate or summarise the prompt (truncate_prompt_tokens), ask for fewer output tokens (max_tokens "
       "≤ context − prompt), or serve a longer context (--max-model-len, up to the model's own and what the KV cache "
       "holds).",
       "resend the request with max_tokens lowered to the context minus its prompt: it is served",
       "every release (the wording changed in 0.11 and 0.32)",
       ("entrypoints/openai/serving_engine.py (_validate_input, 0.4-0.10)", "renderers/params.py (_token_len_check, 0.32)",
        "v1/engine/input_processor.py (_validate_model_input)"),
       "the request's prompt length and max_tokens (the API server's request log, --enable-log-requests)"),
    _c("prompt-over-batch-budget",
       "V0's scheduler takes a prompt only whole in one step when chunked prefill is off: its prompt limit is then the "
       "smaller of max_model_len and max_num_batched_tokens (scheduler._get_prompt_limit), and a longer prompt is "
       "ignored (the request ends with no output, finish_reason 'length'). A long max_model_len with chunked prefill "
       "turned on by vLLM and then off (or unsupported by a feature) leaves the 2048-token default budget.",
       "Give --max-num-batched-tokens at least the longest prompt, or keep chunked prefill on; the context "
       "(--max-model-len) is not what refused it.",
       "start with --max-num-batched-tokens equal to --max-model-len: the prompt is served",
       "vLLM V0 (0.4-0.10: core/scheduler.py)", ("core/scheduler.py (_get_prompt_limit)", "vLLM issue #13209"),
       "the engine config line's max_num_batched_tokens / enable_chunked_prefill and the non-default args"),
    _c("context-capped",
       "The server runs with a shorter context than it was started with: --max-model-len was lowered at start (to what "
       "the KV cache holds, or to the tokenizer's model_max_length in some releases), so requests the operator meant "
       "to serve are refused.",
       "Read the engine's config line (max_seq_len) against --max-model-len; give the KV cache room for the context "
       "(--gpu-memory-utilization, fewer --max-num-seqs) or upgrade past the release that capped it.",
       "grep -m1 -o 'max_seq_len=[0-9]*' <full log>, and the non-default args' max_model_len",
       "vLLM 0.9.1 (tokenizer model_max_length, issue #20241); any release fitting max_model_len to memory",
       ("config/model.py (max_model_len)", "vLLM issue #20241"),
       "the start-up lines: 'non-default args' and 'Initializing a V1 LLM engine … with config: … max_seq_len=…'"),
    _c("so-grammar-compile",
       "The structured-output backend could not compile the request's JSON schema, regex or grammar (a schema "
       "feature it does not support, an invalid schema): the request fails; in releases before the request-level "
       "handling the exception reached the engine core and killed it.",
       "Simplify the schema to what the backend supports, or choose another backend (--structured-outputs-config "
       "backend=guidance); upgrade vLLM so that a bad schema fails only its request.",
       "compile the schema with the backend alone (xgrammar.Grammar.from_json_schema); the error names the feature",
       "vLLM 0.26+ (the message); earlier releases raise in the engine core",
       ("v1/structured_output/__init__.py (_create_grammar)", "vLLM PRs #30346, #47312"),
       "the request's schema"),
    _c("lmcache-mp-protocol-mismatch",
       "In multiprocess mode vLLM's LMCache connector (LMCacheMPConnector) sends each lookup, store and retrieve to "
       "the lmcache server as a typed request; the server's message queue runs the handler its modules registered for "
       "that type, and logs 'No handler registered for request type …' (or that the handler takes other arguments) "
       "when none fits: the connector was built against another protocol than the server's (another LMCache version "
       "on one side), or the server was started without the module that serves the request (CacheBlend's).",
       "Install the same LMCache version in the vLLM image and in the lmcache server, and start the server with the "
       "modules the connector uses (for CacheBlend, the engine type the connector's version expects).",
       "pip show lmcache in both environments; the server's 'Available handlers' line against the type requested",
       "LMCache 0.4.0+ (multiprocess mode)",
       ("v1/multiprocess/mq.py (MessageQueueServer: handlers by request type)", "v1/multiprocess/transport/zmq_impl/mq.py",
        "LMCache issue #4267")),
    _c("connector-library-missing",
       "A vLLM KV connector imports its transport library when it is created (NIXL's nixl._api for NixlConnector, "
       "mooncake for the Mooncake connector); when the package is not installed, or not built for this platform (a "
       "ROCm image without NIXL), it logs that the library is not available and raises, so the engine does not start "
       "with that connector.",
       "Install the transport library in the serving image (pip install nixl, or the build for this GPU platform; "
       "mooncake-transfer-engine), or choose a connector the image has.",
       "python -c 'import nixl' (or 'import mooncake') in the serving environment",
       "vLLM 0.9+",
       ("distributed/kv_transfer/kv_connector/v1/nixl_connector.py (NixlWrapper None: 'NIXL is not available')",
        "llm-d issue #139")),
    _c("nixl-telemetry-disabled",
       "vLLM's NIXL connector reads a finished transfer's telemetry before it releases the handle "
       "(nixl/base_worker.py: check_xfer_state DONE, then get_xfer_telemetry). A NIXL agent whose telemetry is not "
       "enabled raises there ('getXferTelemetry: cannot return values when telemetry is not enabled', "
       "nixl_agent.cpp), and vLLM counts the transfer, which completed, as a 'transfer_exception' failure: its blocks "
       "are marked invalid and recomputed, or the request fails (kv_load_failure_policy).",
       "Use a NIXL release that does not raise for disabled telemetry (1.3.2 or later: ai-dynamo/dynamo #12952), or "
       "enable NIXL's telemetry in the serving processes.",
       "start the decode instance with NIXL's telemetry enabled: the 'NIXL transfer failure: transfer_exception' "
       "lines stop while the same transfers run",
       "vLLM 0.32 (NixlConnector, nixl/base_worker.py), NIXL 1.3.1",
       ("distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py (_pop_done_transfers, 0.32)",
        "ai-dynamo/dynamo issue #12952")),
    _c("kv-transfer-failed",
       "A vLLM KV connector (NIXL, Mooncake, MoRIIO, P2P NCCL, 3FS, …) logs at ERROR when it could not send, pull, "
       "store or load a request's KV: the peer was unreachable or did not answer in time, the transport (UCX, RDMA, "
       "TCP) failed the transfer, or the blocks were read after the prefill side released them. For a failed load "
       "vLLM (0.10+) marks the request's blocks invalid and recomputes or fails it (kv_load_failure_policy); a "
       "connector whose own transfer thread raised can leave the request waiting for KV that never comes.",
       "Act on what the quoted messages name: make the peer's transfer address and ports reachable from this "
       "instance (the side channel, the transfer engine's segment, RDMA NICs), raise the connector's timeout "
       "(VLLM_NIXL_ABORT_REQUEST_TIMEOUT, the Mooncake connector's) when the peer was only slow, and run the same vLLM "
       "and connector (NIXL, Mooncake) versions on both sides.",
       "read the peer instance's log at the same time for the request ids named; rerun one request with the "
       "connector's debug logging (UCX_LOG_LEVEL=info, MC_LOG_LEVEL) on both sides",
       "vLLM 0.9+",
       ("distributed/kv_transfer/kv_connector/v1/ (nixl_connector.py _log_failure 0.14-0.19, nixl/worker.py 0.20+, "
        "mooncake/mooncake_connector.py 0.25+)", "vLLM-Ascend vllm_ascend/distributed/mooncake_connector.py")),
    _c("cpu-staging-exhausted",
       "Loading from disk or a remote store needs a CPU staging buffer; none could be allocated, so the load "
       "returned partial results.",
       "Increase max_local_cpu_size so disk/remote loads can be staged; check unpin leaks.",
       "specdiag repro --toggle max_local_cpu_size=0.01,1",
       "async disk path 0.4.4+ ('Returning partial results'); remote receive 0.5.6",
       ("v1/storage_backend/local_disk_backend.py:629", "LMCache PR #1429"),
       "'Memory allocation failed during async disk load … Returning partial results' / 'Failed to allocate memory "
       "during remote receive' warnings of that rank"),
    _c("adapter-token-accounting-bug",
       "The adapter truncated tokens or subtracted skip_last_n_tokens differently for lookup and retrieve, so the "
       "expected count was wrong on every rank alike.",
       "Upgrade LMCache past 0.3.1 (PR #911); remove skip_last_n_tokens.",
       "compare expected vs hit − computed in the Reqid line of the same request",
       "≤ 0.3.1 and unreleased development builds",
       ("vllm_v1_adapter.py start_load_kv / get_num_new_matched_tokens", "LMCache issues #889, #910", "LMCache PR #911"),
       "the LMCache version ('LMCache initialized … with version'), skip_last_n_tokens in the config, and the "
       "request's 'Reqid: …' line"),
    _c("p2p-retrieve-bug",
       "The P2P branch of retrieve did not set the returned mask, so 0 tokens were counted although data arrived.",
       "Upgrade LMCache (P2P retrieve reimplemented as a storage backend) or disable enable_p2p.",
       "specdiag repro --toggle lmcache.enable_p2p=true,false",
       "~0.3.2",
       ("v1/cache_engine.py retrieve", "LMCache issues #1094, #1055"),
       "enable_p2p in the config dump"),
    _c("rank-disagreement",
       "TP/PP ranks held different chunk sets; the lookup took the minimum, but one rank still lost data afterwards.",
       "Find why ranks hold different chunks (per-rank eviction, remote loss); give every rank the same capacity; "
       "collect every rank's log.",
       "compare the per-rank hit counts in 'Lookup results ... differ across ranks' with each rank's pressure lines",
       "warning + minimum since ~0.3.4 (PR #1426); a crash before",
       ("v1/lookup_client/lmcache_lookup_client.py:150", "LMCache issues #1379, #1357, #1770"),
       "the engine-core log's 'Lookup results (number of hit tokens) differ across … ranks' warning, and every "
       "rank's log"),
    _c("hash-inconsistency",
       "Chunk hashes differ between processes or restarts (builtin hash without PYTHONHASHSEED, NONE_HASH "
       "mismatch): lookups miss. That lowers hits; it does not make a promised chunk disappear.",
       "Export the same PYTHONHASHSEED (e.g. 0) to every vLLM process, or set pre_caching_hash_algorithm to a "
       "sha256 variant; restart and replay the prompts.",
       "restart with PYTHONHASHSEED=0 and compare the LMCache hit rate for the same prompts",
       "all; NONE_HASH from vLLM since 0.3.12",
       ("v1/token_database.py:100-170", "LMCache issues #1739, #2136, #2979"),
       "startup warnings 'Using builtin hash without PYTHONHASHSEED set' and each process's NONE_HASH line"),
    _c("async-loading-partial",
       "The async prefetch stopped at the first chunk not (yet) present and answered the scheduler with a shorter "
       "prefix than was later expected.",
       "Disable enable_async_loading or upgrade LMCache (PRs #2559, #1665).",
       "specdiag repro --toggle async_loading=true,false",
       "enable_async_loading 0.3.9+",
       ("v1/storage_backend/storage_manager.py:648", "LMCache issue #3381"),
       "enable_async_loading in the config dump and 'Responding to scheduler for lookup id … with retrieved length N'"),
    _c("unfull-chunk-mismatch",
       "A hit ended mid-chunk because an unfull last chunk was stored, and the reader cut its token list to a chunk "
       "multiple: it retrieved less than one chunk short, without any read failure.",
       "Use the same save_unfull_chunk / discard_partial_chunks on every writer and reader.",
       "compare the settings of every instance sharing the store",
       "save_unfull_chunk defaulted to True before 0.3.12; PD and blending force it",
       ("vllm_v1_adapter.py:351-364 vs :855-863",),
       "the retrieve line 'Retrieved X out of Y required tokens (from Z total tokens)' (is Z a chunk multiple?) and "
       "save_unfull_chunk of every instance writing to the store"),
    _c("decode-cache-not-saved",
       "save_decode_cache only decides whether decode-phase chunks are stored; a lookup counts only stored chunks, so "
       "by itself it explains misses, never retrieved < expected. Its decode-phase stores can add the pressure that "
       "evicts chunks a lookup already counted: then the eviction cause (lookup-retrieve-eviction, pin-timeout, "
       "remote-backend-loss) is the mechanism and the flag only its trigger.",
       "No change needed for this error: save_decode_cache only decides whether decode-phase chunks are stored.",
       "specdiag repro --preset save-decode-cache",
       "honoured from 0.3.5",
       ("vllm_v1_adapter.py ReqMeta.from_request_tracker", "LMCache issue #736, PR #973"),
       "nothing: the flag cannot produce this error"),
    # ---- KV007 / KV008: pressure and rank disagreement -------------------------------------------------
    _c("cache-too-small",
       "The working set of distinct prefixes is larger than the CPU tier on every rank: stores are cut short.",
       "Raise max_local_cpu_size (GB per worker) or add a disk/remote tier.",
       "specdiag repro --preset eviction",
       "all", ("v1/storage_backend/local_cpu_backend.py", "v1/cache_engine.py:519"),
       "the pressure lines of every rank (all ranks alike points here) and 'Adjusted CPU memory size'"),
    _c("pinned-chunks-block-eviction",
       "Nothing can be evicted because every chunk is pinned by lookups whose requests wait for vLLM blocks.",
       "Lower pin_timeout_sec moderately or relieve the vLLM block pressure that keeps looked-up requests (and their "
       "pins) waiting.",
       "watch lmcache:pinned_memory_objs_count during the pressure",
       "0.3.5+", ("v1/storage_backend/local_cpu_backend.py:724",),
       "'No eviction candidates found in local cpu backend' warnings"),
    _c("rank-local-leak",
       "Only one rank of several is under memory pressure: on that rank pins or reference counts are not released "
       "(an unpin/ref_count_down that never runs), so its chunks stay unevictable while the other ranks, storing "
       "the same data, are fine.",
       "Restart the affected worker as a stopgap and do not just enlarge the cache for everyone; use an LMCache "
       "release whose notes name a pin or ref-count fix (the double-unpin bug, issues #2954 / #5090, was open with "
       "its proposed fixes unmerged).",
       "compare lmcache:pinned_memory_objs_count per rank; look for 'is being garbage collected with ref_count' on it",
       "0.3.3+",
       ("v1/memory_management.py:705, :787, :846",),
       "every rank's log (do the other ranks show pressure?), 'MemoryObj … garbage collected with ref_count' and "
       "'Pin count … is negative' warnings of that rank"),
    _c("per-rank-eviction",
       "Ranks evict independently, so after pressure on some ranks they hold different chunk sets.",
       "Give every rank the same cache capacity; compare per-rank pressure lines.",
       "count memory-pressure lines per rank (KV007)",
       "all", ("v1/lookup_client/lmcache_lookup_client.py:150",),
       "each rank's memory-pressure lines"),
    # ---- KV003 hits -----------------------------------------------------------------------------------
    _c("lookup-timeout",
       "The lookup RPC to a worker timed out, so that lookup reported 0 hits.",
       "Find why the lookup RPC times out (degraded workers, lookup_timeout_ms).",
       "count 'Timeout occurred for rank' lines against lookups",
       "0.3.9+", ("v1/rpc/zmq_transport.py:121",), "'Timeout occurred for rank N' errors"),
    _c("capacity-eviction",
       "Chunks were evicted before the repeat arrived, so the repeat missed.",
       "Enlarge max_local_cpu_size or add a tier.", "specdiag repro --preset eviction",
       "all", ("v1/storage_backend/local_cpu_backend.py",), "memory-pressure lines; DEBUG 'Evicting N chunks'"),
    _c("prompt-shorter-than-chunk",
       "Prompts shorter than chunk_size never fill a chunk, so nothing is stored for them (save_unfull_chunk False).",
       "Prompts shorter than chunk_size never fill a chunk; lower chunk_size.",
       "compare prompt lengths with chunk_size", "0.3.12+ (save_unfull_chunk False by default)",
       ("vllm_v1_adapter.py:351-364",), "the 'Reqid: … Total tokens' lines and chunk_size"),
    _c("prefix-served-by-vllm",
       "vLLM's own prefix cache already holds the prefix, so LMCache has nothing to load.",
       "Nothing to fix: vLLM's own prefix cache already serves the repeats.",
       "run with --no-enable-prefix-caching and compare", "all", ("vllm_v1_adapter.py:1476",),
       "'Inference Engine computed tokens' in the Reqid lines"),
    # ---- KV: multi-process mode -------------------------------------------------------------------------
    _c("mp-server-unhealthy", "The lmcache server process stopped answering; the connector bypasses it.",
       "Check the lmcache server process (crash, overload, timeouts) and its log.",
       "curl the LMCache server's health endpoint; look for 'LOOKUP to … timed out'",
       "0.5.6 multi-process mode", ("integration/vllm/vllm_multi_process_adapter.py:614, :1306",),
       "the lmcache server's own log"),
    _c("mp-l2-store-failure",
       "The lmcache server's store controller writes each stored chunk from its L1 (CPU) tier to its L2 adapters (a "
       "local disk, Redis/Valkey, S3, a remote or P2P tier); an adapter that fails a store task leaves those chunks in "
       "L1 only. Nothing fails at once: a later lookup misses them once L1 evicts them, and another instance never "
       "sees them.",
       "Read the server's own log around the failed task for the adapter's error (the L2 backend unreachable, full, or "
       "refusing the key); check the adapter's backend (redis-cli ping, free disk) and its configuration.",
       "watch the server's L2 store counts (its metrics or DEBUG log) after fixing the backend: the failures stop",
       "LMCache 0.5.6+ multi-process server", ("v1/distributed/storage_controllers/store_controller.py:791",
                                                "LMCache issue #5123"),
       "the lmcache server's log at DEBUG around the failed task, and its L2 adapter configuration"),
    _c("mp-retrieve-failure", "The lmcache server failed a retrieve request.",
       "Read the server log around the failed request ids; upgrade LMCache (MP retrieve fixes) or fall back to the "
       "in-process connector.",
       "replay the failing request ids with the in-process LMCacheConnectorV1",
       "0.5.6 multi-process mode", ("integration/vllm/vllm_multi_process_adapter.py:2139",), "the server log"),
    _c("kv-offload-transfer-failure",
       "vLLM's OffloadingConnector copies each request's blocks to the offload tier (a store, GPU to CPU) and back (a "
       "load) as asynchronous jobs of its worker. Through 0.33 the worker supports no failed job: get_finished asserts "
       "each transfer's success, so the first failure raises in the worker and the engine dies; from 0.34 a failed "
       "store drops its chunks and a failed load is not tried again. Known failures: a load from the middle of a CPU "
       "block larger than the GPU's (vLLM #28950, fixed by PR #28951), cuMemcpyBatchAsync's batch copy (#40259, PR "
       "#46379), the shared offload region larger than /dev/shm (#46949).",
       "Upgrade vLLM past the fix for the failing transfer, or serve without KV offloading (no --kv-offloading-size, no "
       "OffloadingConnector in --kv-transfer-config) until then.",
       "serve the same load without KV offloading: the failures and the engine's death stop",
       "vLLM 0.11+ (OffloadingConnector)",
       ("distributed/kv_transfer/kv_connector/v1/offloading/worker.py (0.32.0: get_finished)",
        "v1/kv_offload/worker/worker.py (0.11-0.24)", "v1/kv_offload/cpu/gpu_worker.py (0.34)",
        "vLLM issues #28950, #40259"),
       "the server's start-up lines (kv_transfer_config, --kv-offloading-size) and the worker's traceback"),
    _c("remote-backend-unhealthy",
       "LMCache's RemoteMonitor (0.3.3-0.3.12) pings the remote connector every ping interval; a ping that fails, "
       "times out or raises switches the remote backend to its blackhole connector until a ping succeeds: remote "
       "puts are dropped and remote gets miss, silently. The store is down, unreachable from this pod (address, "
       "network policy, TLS), or answers slower than the ping timeout.",
       "Check the remote store (its process and log) and that this pod reaches the address in remote_url; raise the "
       "ping timeout if the store is only slow under load.",
       "from the vLLM pod, connect to the remote_url host and port (redis-cli -h … ping, nc -zv …) while the lines "
       "appear",
       "LMCache 0.3.3-0.3.12 (RemoteMonitor)",
       ("v1/storage_backend/remote_monitor.py (0.3.10: the ping loop, _safe_switch_connector)", "LMCache PR #764"),
       "the remote store's own log for the same minutes"),
    _c("mp-kv-unregistered",
       "In multiprocess mode each vLLM worker registers its KV cache with the lmcache server (register_kv_cache: its "
       "instance id, model and world size); a lookup finds the registration by model and world size, a store or "
       "retrieve by the worker's id. With none there the server logs 'No GPU context found for model … during "
       "lookup!' and answers no hit, and a store asserts 'KV cache not registered for GPU ID …': the server was "
       "restarted after the workers registered, it dropped the registration (unregister_kv_cache; a liveness reaper "
       "of idle workers in some releases; one instance unregistering dropped the layout another instance of the same "
       "model and world size still used, LMCache #3448), or the worker's registration failed or named another model "
       "or world size.",
       "Restart the vLLM workers after any restart of the lmcache server so that they register again; check the "
       "server's 'Registered KV cache for GPU ID …' and 'Unregistered KV cache' lines against the ids it refuses; "
       "upgrade LMCache where a reaper, or another instance's unregistering, dropped live workers.",
       "grep the lmcache server log for 'Registered KV cache for GPU ID' and 'Unregistered KV cache' around the first "
       "refusal",
       "LMCache 0.4+ (multiprocess mode)",
       ("v1/multiprocess/server.py (register_kv_cache, unregister_kv_cache, lookup, store; 0.4.3)", "LMCache issues "
        "#4038, #3448, PR #2884"),
       "the lmcache server's log from its start (its registration lines)"),
    _c("mp-hit-mismatch", "Several lmcache servers answered different hit counts; the connector took the minimum.",
       "Give every server the same capacity; check evictions per server.",
       "compare the per-server hit lists in the mismatch lines",
       "0.5.6 multi-process mode", ("integration/vllm/vllm_multi_process_adapter.py:1060",), "each server's log"),
    _c("worker-lookup-server-slow", "A worker's lookup server answered too late (blocked loop, starved CPU, crash).",
       "Look at the named rank's worker: blocked event loop, CPU starvation, crashed lookup server.",
       "compare the timeout times with that worker's log", "0.3.9+", ("v1/rpc/zmq_transport.py:121",),
       "that worker's log at the timeout times"),
    _c("async-lookup-timeout-too-low", "The async lookup gave up after lookup_timeout_ms and reported 0 hits.",
       "Raise lookup_timeout_ms (default 3000).", "specdiag repro --toggle lmcache.lookup_timeout_ms=3000,10000",
       "0.3.12+", ("v1/lookup_client/lmcache_async_lookup_client.py:177",), "lookup_timeout_ms in the config dump"),
    # ---- KV degraded / crashes / load failures -----------------------------------------------------------
    _c("no-device-connector", "LMCache found no connector for this device and runs in degraded mode (recompute).",
       "LMCache has no connector for this device (e.g. vLLM's CPU backend): use a supported GPU, a CPU connector "
       "plugin (the CPU tier of specdiag's repro command ships one), or drop --kv-transfer-config.",
       "look for 'No supported <device> connector found' in the worker log", "0.3.15+", ("v1/manager.py:107",),
       "the traceback inside 'Failed to initialize LMCacheManager components'"),
    _c("init-failure", "LMCache's manager failed to initialise and runs in degraded mode (recompute).",
       "Read the exception inside 'Failed to initialize LMCacheManager components' and fix that (config, backend "
       "reachability, versions).", "restart with LMCACHE_LOG_LEVEL=DEBUG", "0.3.15+", ("v1/manager.py:107",),
       "the traceback inside 'Failed to initialize LMCacheManager components'"),
    _c("health-monitor", "The health monitor declared LMCache unhealthy: stores and loads are skipped.",
       "Find why the health monitor declared LMCache unhealthy (backend down, timeouts).",
       "watch for 'HealthMonitor: System recovered'", "0.5.6", ("v1/health_monitor/base.py:281",),
       "backend errors before 'HealthMonitor: System unhealthy'"),
    _c("lmcache-torch-abi",
       "LMCache's compiled extension (lmcache/c_ops*.so) links against the C++ symbols of the torch it was built "
       "with (c10::…); under another torch they are missing ('undefined symbol: _ZN3c10…'), so importing LMCache "
       "fails, vLLM cannot create its LMCache connector and the server does not start.",
       "Install the LMCache build made for this torch (the wheel matching the vLLM/torch pair, or the "
       "lmcache/vllm-openai image), or build LMCache from source against it (pip install --no-build-isolation).",
       "python -c 'import lmcache.c_ops' in the server environment; pip show torch lmcache",
       "any LMCache with compiled ops",
       ("lmcache/c_ops (csrc/), imported by v1 storage and GPU connectors; vLLM "
        "distributed/kv_transfer/kv_connector/v1/lmcache_connector.py", "LMCache issues #681, #1294")),
    _c("lmcache-vllm-version",
       "LMCache's vLLM adapter imports vLLM modules by name (vllm.utils.torch_utils, vllm.v1.…); a vLLM that lacks "
       "one (older, or one that moved it) fails the import, so the connector cannot be created and the server does "
       "not start. LMCache releases follow vLLM's: each supports a range of vLLM versions.",
       "Install the LMCache release made for this vLLM (or the vLLM it was made for); the module named in the error "
       "dates the pair.",
       "python -c 'import lmcache.integration.vllm.vllm_v1_adapter' in the server environment; pip show vllm lmcache",
       "LMCache 0.3.x+",
       ("lmcache/integration/vllm/vllm_v1_adapter.py (its vllm imports)",
        "LMCache issue #1840 (0.3.8 with vLLM 0.11.0, fixed in 0.3.9)")),
    _c("vendored-adapter-import", "vLLM's vendored adapter could not import the installed LMCache.",
       "Use LMCache's own adapter (drop use_native) or install a matching LMCache.",
       "python -c 'import lmcache' in the server environment", "vLLM 0.32.0 + LMCache 0.5.6",
       ("vLLM distributed/kv_transfer/kv_connector/v1/lmcache_connector.py",), "the ImportError traceback"),
    _c("async-loading-invalidated-object", "Asynchronous loading touched a memory object that was already freed.",
       "Set enable_async_loading: false, or upgrade LMCache past the async pin fixes.",
       "specdiag repro --toggle async_loading=true,false", "0.3.9+",
       ("v1/memory_management.py:865",), "'Trying to access an invalidated MemoryObj' before the crash"),
    _c("ref-count-bug", "A double free drove a reference count negative.",
       "Upgrade LMCache; report the double free.", "look for 'Ref count of MemoryObj … is negative'", "0.3.3+",
       ("v1/memory_management.py:787",), "'Ref count of MemoryObj … is negative' warnings"),
    _c("draft-layer-count-mismatch",
       "With method=draft_model LMCache counts no draft layers, so its KV layout does not match vLLM's.",
       "Avoid LMCache + method=draft_model on this LMCache version (use ngram/EAGLE/MTP or disable the KV connector "
       "for this deployment).",
       "specdiag repro --preset dynamic-k --toggle lmcache=off,on",
       "0.5.6", ("integration/vllm/utils.py:569-597",), "'num_draft_layers' in the startup line"),
    _c("policy-fail", "vLLM's kv_load_failure_policy=fail turns a KV load failure into a failed request.",
       'Set "kv_load_failure_policy": "recompute" in --kv-transfer-config while the cause is fixed.',
       "rerun with kv_load_failure_policy=recompute and count client errors", "vLLM 0.13+ (default fail from 0.20)",
       ("vLLM v1/core/sched/scheduler.py",), "vLLM's 'Failing N request(s) due to KV load failure' line"),
    _c("connector-load-failure", "The KV connector could not load blocks it had promised.",
       "Diagnose the connector-side loss (KV001 when LMCache logged the error pair).",
       "look for LMCache 'Num retrieved tokens' errors at the same time", "vLLM 0.11.2+",
       ("vLLM v1/core/sched/scheduler.py",), "the connector's own error lines at the same time"),
]

CATALOG: dict[str, CauseInfo] = {r.id: r for r in _ROWS}


def cause(cid: str) -> CauseInfo:
    """The catalog row of a cause id (KeyError for an unknown id: every rule's ids must be catalogued)."""
    return CATALOG[cid]


def fix_and_confirm(cid: str) -> dict[str, str]:
    """Keyword arguments for ``CauseBoard.add`` / ``Cause``: the one fix text and experiment of this id."""
    c = CATALOG[cid]
    return {"fix": c.fix, "confirm_with": c.confirm}
