"""vLLM message templates (V1 engine, 0.8.5 → 0.32). Locations are 0.32.0 unless a version is named."""

from __future__ import annotations

from specdiag.catalog import wording as W
from specdiag.catalog.wording import REGEX as E
from specdiag.events import Template

T = Template
V = "vllm"

VLLM_TEMPLATES: list[Template] = [
    T("U5XX", "uvicorn", "INFO:", '" 5', r'INFO:\s+(?P<client>\S+) - "(?P<method>\w+) (?P<path>\S+) [^"]*" (?P<status>5\d\d)',
      "uvicorn", "uvicorn access log", 'INFO:     127.0.0.1:58634 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
      ints=("status",)),
    # a request the client (or a proxy) dropped: the API server aborts it in the engine (V0's AsyncLLMEngine and
    # MQLLMEngine, V1's AsyncLLM with --enable-log-requests: 'Aborted request(s) a, b.' from 0.28)
    T("V_ABORTED", V, "Aborted", "Aborted request", r"Aborted request(?:\(s\))? (?P<ids>[^\n]{1,4000}?)\.?[ \t]*$",
      "0.6.0+", "engine/async_llm_engine.py; v1/engine/async_llm.py", "Aborted request cmpl-1dac86b037d24bbe97d7ce0f776e9250-0."),
    T("V_VERSION", V, "vLLM", "server version", r"vLLM (?:API )?server version (?P<version>\S+?)(?:, serving model (?P<model>.+))?$",
      "0.8.5+", "entrypoints/openai/api_server.py", "vLLM API server version 0.11.0"),
    # the logo's version row only: a message that merely ends in "version X.Y.Z" is another program's version
    # ("NCCL version 2.21.5" closes NCCL's error text) and must not name vLLM's
    T("V_LOGO", V, None, "\u2588 ", ".*?\u2588" r" +version (?P<version>\d+\.\d+\.\d+[\w.+-]*)\s*$", "0.15+ (logo)",
      "entrypoints/serve/utils/api_utils.py:347", "   █▄█▀ █     █     █   version 0.32.0"),
    T("V_ARGS", V, "non-default", "non-default args", r"non-default args: (?P<args>.*)$", "0.9.2+",
      "entrypoints/serve/utils/api_utils.py:286",
      "non-default args: {'model': '/models/m', 'tensor_parallel_size': 4, 'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3}}"),
    T("V_ARGS_OLD", V, "args:", "Namespace(", r"args: (?P<args>Namespace\(.*\))$", "0.8.x",
      "entrypoints/openai/api_server.py", "args: Namespace(model='m', tensor_parallel_size=2, speculative_config=None)"),
    T("V_ENGINE_CFG", V, "Initializing", "with config:", r"Initializing (?:a V[01] LLM|an LLM) engine \(v(?P<version>[^)]+)\) with config: (?P<cfg>.*)$",
      "0.6.0+ (V0's 'an LLM engine', 'a V0 LLM engine')", "v1/engine/core.py:133",
      "Initializing a V1 LLM engine (v0.11.0) with config: model='m', speculative_config=None, tensor_parallel_size=2, pipeline_parallel_size=1, enable_prefix_caching=True"),
    # the blocks the KV cache got (0.6-0.7: V0's executors, V1's first releases); 0 GPU blocks is fatal: the next line
    # raises 'No available memory for the cache blocks' (raise_if_cache_size_invalid, v1 kv_cache_utils)
    T("V_GPU_BLOCKS", V, "#", "# GPU blocks:", r"# GPU blocks: (?P<gpu>\d{1,12})(?:, # CPU blocks: (?P<cpu>\d{1,12}))?",
      "0.6.0–0.7.3", "executor/gpu_executor.py:122", "# GPU blocks: 0, # CPU blocks: 256", ints=("gpu", "cpu")),
    T("V_KV_SIZE", V, None, "KV cache size:", r"(?P<device>\w+) KV cache size: (?P<tokens>[\d,]+) tokens", "0.8.5+",
      "v1/core/kv_cache_utils.py:2327", "GPU KV cache size: 1,048,576 tokens", ),
    T("V_CONNECTOR", V, "Initializing", "LMCache connector", r"Initializing (?P<which>latest dev|native) LMCache connector", "0.11.2+",
      "distributed/kv_transfer/kv_connector/v1/lmcache_connector.py:92", "Initializing latest dev LMCache connector"),
    T("V_CREATE_CONNECTOR", V, "Creating", "connector with name", r"Creating v1 connector with name: (?P<name>\S+)", "0.9+",
      "distributed/kv_transfer/kv_connector/factory.py:63", "Creating v1 connector with name: LMCacheConnectorV1 and engine_id: e1"),
    T("V_STATS", V, None, W.PROMPT_TPS,
      f"(?:{E.ENGINE}(?P<engine>\\d+)|(?P<n_engines>\\d+){E.ENGINES_AGGREGATED}){E.KEY_END}(?P<body>{E.PROMPT_TPS}{E.KEY_END}.*)$",
      "0.8.5+", "v1/metrics/loggers.py:335",
      "Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 96.0 tokens/s, Running: 3 reqs, Waiting: 5 reqs, Preemptions: 2, CPU KV cache usage: 97.3%, Prefix cache hit rate: 41.8%, External prefix cache hit rate: 22.5%"),
    T("V_STATS_V0", V, W.PROMPT_TPS.split()[0], W.PROMPT_TPS, f"(?P<body>{E.PROMPT_TPS}{E.KEY_END}.*)$", "V0 engine",
      "engine/metrics.py",
      "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.",
      outside="vLLM's V0 engine built it at run time from parts (its last releases predate the catalog's 0.9)"),
    T("V_SPEC", V, f"{W.SPEC.split()[0]}|{W.SPEC_OLD.split()[0]}", W.SPEC.rsplit(" ", 1)[1] + W.KEY_END.strip(),
      f"(?:{E.SPEC}|{E.SPEC_OLD}){E.KEY_END}(?P<body>.*)$", "0.8.0+", "v1/spec_decode/metrics.py:120",
      "SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 58.20 tokens/s, Drafted throughput: 121.10 tokens/s, Accepted: 582 tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253, Avg Draft acceptance rate: 48.1%"),
    T("V1", V, "Recovered", "KV load failure",
      r"Recovered from KV load failure: (?P<reqs>\d+) request\(s\) rescheduled \((?P<tokens>\d+) tokens affected\)", "0.11.2+",
      "v1/core/sched/scheduler.py:3426", "Recovered from KV load failure: 1 request(s) rescheduled (768 tokens affected).",
      ints=("reqs", "tokens")),
    T("V2", V, "Failing", "KV load failure",
      r"Failing (?P<reqs>\d+) request\(s\) due to KV load failure \(failure_policy=(?P<policy>\w+), (?P<tokens>\d+) tokens affected\)\. Request IDs: (?P<ids>.*)$",
      "0.13.0+", "v1/core/sched/scheduler.py:3417",
      "Failing 1 request(s) due to KV load failure (failure_policy=fail, 1024 tokens affected). Request IDs: {'cmpl-1'}",
      ints=("reqs", "tokens")),
    # ---- NIXL connector (P/D disaggregation): the decode side's handshake with a prefill instance's agent
    T("V_NIXL_HANDSHAKE", V, "Handshake", "Handshake with", r"Handshake with (?P<engine>\S{1,200}) failed", "0.9.2+",
      "distributed/kv_transfer/kv_connector/v1/nixl_connector.py:548",
      "Handshake with c00824be-282f-4719-9aeb-120dcb516863 failed", level="ERROR"),
    T("V_NIXL_HANDSHAKE_REQ", V, "Handshake", "Handshake failed for request",
      r"Handshake failed for request (?P<req_id>[^\s,]{1,200})", "0.11+",
      "distributed/kv_transfer/kv_connector/v1/nixl_connector.py:1111",
      "Handshake failed for request chatcmpl-1, marking blocks as invalid", level="ERROR"),
    # the prefill side giving up on a request's KV that its decode side never read (after
    # VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 120 s by default; from 0.22 when the blocks' lease ran out)
    T("V_NIXL_EXPIRED", V, "Releasing", "Releasing expired KV blocks",
      r"Releasing expired KV blocks for request (?P<req_id>\S{1,200}) which were retrieved by (?P<readers>\d{1,6}) "
      r"(?:decode|remote) worker\(s\) (?:within (?P<seconds>\d{1,9}) seconds|before lease expired)", "0.10.1+",
      "distributed/kv_transfer/kv_connector/v1/nixl_connector.py:1048",
      "Releasing expired KV blocks for request cmpl-3da205a6-0 which were retrieved by 0 decode worker(s) within "
      "120 seconds.", ints=("readers", "seconds"), level="WARNING"),
    # the shared-memory message queue between the engine core and its workers (MessageQueue.acquire_read /
    # acquire_write): one side waited VLLM_RINGBUFFER_WARNING_INTERVAL (60 s) for the other, then again each interval.
    # At INFO from 0.11.0, at WARNING in 0.6.0-0.6.4; the DEBUG lines of 0.6.5-0.10.2 are not read: the prefilter
    # keeps every DEBUG and INFO record with a template's first word and needle for reading, so the needle is the
    # INFO wording's own ('This typically happens'), which the DEBUG lines do not print
    T("V_SHM_WAIT", V, "No", "This typically happens",
      r"No available shared memory broadcast block found in (?P<seconds>\d{1,9}) seconds", "0.11.0+",
      "distributed/device_communicators/shm_broadcast.py",
      "No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are "
      "hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).", ints=("seconds",)),
    T("V_SHM_WAIT_OLD", V, "No", "block found", r"No available block found in (?P<seconds>\d{1,9}) second", "0.6.0-0.6.4",
      "distributed/device_communicators/shm_broadcast.py", "No available block found in 60 second. ", ints=("seconds",),
      level="WARNING"),
    T("V_NIXL_FAILURE", V, "NIXL", "NIXL transfer failure",
      r"NIXL transfer failure: (?P<kind>\w{1,60})(?:.{0,400}?'request_id': '(?P<req_id>[^']{1,200})')?", "0.14+",
      "distributed/kv_transfer/kv_connector/v1/nixl_connector.py (0.14-0.19), nixl/worker.py:690 (0.20-0.23), "
      "nixl/base_worker.py (0.24+)",
      "NIXL transfer failure: handshake_failed | Context: {'failure_type': 'handshake_failed'}", level="ERROR"),
    # ---- crash dump (logging_utils/dump_input.py): printed only on the except path of the engine core's
    # execute_model before the exception is re-raised, so it marks a crash even when the traceback is cut off
    T("V_DUMP_INPUT", V, "Dumping", "Dumping input data",
      r"Dumping input data for V1 LLM engine \(v(?P<version>[^)]+)\) with config: (?P<cfg>.*)$", "0.9.2+",
      "logging_utils/dump_input.py:72 (0.9.2-0.11.0 :69)",
      "Dumping input data for V1 LLM engine (v0.11.0) with config: model='/models/m', speculative_config=None, "
      "tensor_parallel_size=4, pipeline_parallel_size=1, ", level="ERROR"),
    T("V_DUMP_SCHED", V, "Dumping", "Dumping scheduler",
      r"Dumping scheduler (?P<what>output for model execution|stats): (?P<dump>.*)$", "0.9.2+",
      "logging_utils/dump_input.py:76/:79 (0.11.2+ :77/:79)",
      "Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs=[], "
      "scheduled_cached_reqs=CachedRequestData(req_ids=['chatcmpl-1'], num_computed_tokens=[4100]), "
      "num_scheduled_tokens={chatcmpl-1: 1}, total_num_scheduled_tokens=1)", level="ERROR"),
    # 0.9.1 printed the scheduler output object on a line of its own (``logger.error("%s", scheduler_output)``)
    T("V_DUMP_SCHED_OBJ", V, None, "SchedulerOutput(", r"(?P<dump>SchedulerOutput\(.*)$", "0.9.1",
      "logging_utils/dump_input.py:80 (0.9.1)",
      "SchedulerOutput(scheduled_new_reqs=[], scheduled_cached_reqs=[CachedRequestData(req_id='0', "
      "resumed_from_preemption=false, new_token_ids=[], new_block_ids=[[]], num_computed_tokens=4100)], "
      "num_scheduled_tokens={0: 6}, total_num_scheduled_tokens=6, scheduled_spec_decode_tokens={0: [315, 8991]})",
      level="ERROR"),
    # a traceback frame printed through logger.exception (NewLineFormatter repeats the header on every line),
    # often all that is left of a crash when the excerpt starts below the "Traceback" line
    # (also flush left: a paste that lost the frames' indentation after the header)
    T("V_TB_FRAME", V, "|File", 'File "', r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[\w<>.]+)', "all",
      "traceback lines of logger.exception (NewLineFormatter)",
      '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
      ints=("line",), outside="a traceback line under the vLLM header, not a logging call"),
    T("V_CORE_FAILED", V, "EngineCore", "EngineCore failed to start", r"EngineCore failed to start", "0.8.5+", "v1/engine/core.py:1510",
      "EngineCore failed to start."),
    T("V_CORE_FATAL", V, "EngineCore", "encountered a fatal error", r"EngineCore encountered a fatal error", "0.8.5+",
      "v1/engine/core.py:1512", "EngineCore encountered a fatal error."),
    T("V_WORKER_EXC", V, "WorkerProc", "WorkerProc hit an exception", r"WorkerProc hit an exception", "0.8.5+",
      "v1/executor/multiproc_executor.py:1063", "WorkerProc hit an exception."),
    # V0's multiprocessing worker (executor/multiproc_worker_utils.py, 0.6.3-0.10.2): its method raised; the
    # exception goes back to the driver, which raises it in the engine loop
    T("V_WORKER_EXC_V0", V, "Exception", "while processing method",
      # (the message of the exception follows, then ``, Traceback (most recent call last):`` and its traceback)
      r"Exception in worker (?P<worker>\S{1,100}) while processing method (?P<method>\w{1,100})"
      r"(?:: (?P<detail>[^\n]{1,2000}?), Traceback \(most recent call last\):)?", "0.6.3-0.10.2 (V0)",
      "executor/multiproc_worker_utils.py:240",
      "Exception in worker VllmWorkerProcess while processing method start_worker_execution_loop.", level="ERROR"),
    # the deaths of older releases: the V1 core's handler before 0.8.5 printed the traceback into its message,
    # V0's AsyncLLMEngine its background loop's; a worker that fails to start takes the engine's start with it
    T("V_CORE_HIT_EXC", V, "EngineCore", "EngineCore hit an exception", r"EngineCore hit an exception: ?(?P<detail>.*)",
      "0.7.0–0.8.4", "v1/engine/core.py:387 (0.8.4)", "EngineCore hit an exception: Traceback (most recent call last):"),
    T("V_BG_TASK_FAILED", V, "Engine", "Engine background task failed", r"Engine background task failed", "0.6.0–0.10.2",
      "engine/async_llm_engine.py:64 (V0)", "Engine background task failed"),
    # V0's AsyncLLMEngine: one engine step ran past VLLM_ENGINE_ITERATION_TIMEOUT_S (60 s); it raises TimeoutError and
    # the background loop dies with it ("Engine background task failed", AsyncEngineDeadError after)
    T("V_ITER_TIMEOUT", V, "Engine", "Engine iteration timed out", r"Engine iteration timed out\. This should never happen!",
      "0.6.0–0.10.2", "engine/async_llm_engine.py:960 (0.6.0) to :767 (0.10.2)",
      "Engine iteration timed out. This should never happen!", level="ERROR"),
    # V0's API server when its engine (AsyncLLMEngine, or MQLLMEngine's process) is dead: it exits
    T("V_API_ENGINE_DEAD", V, None, "is already dead, terminating server process",
      r"(?P<engine>AsyncLLMEngine|MQLLMEngine) is already dead, terminating server process", "0.6.0–0.8.5.post1",
      "entrypoints/launcher.py:98 (0.6.0) to :116 (0.8.5.post1)", "MQLLMEngine is already dead, terminating server process"),
    # V1's multiprocessing executor before 0.9 when a worker process died (its own traceback is above)
    T("V_MP_FATAL_SIGNAL", V, "MulitprocExecutor", "got fatal signal from worker processes",
      r"MulitprocExecutor got fatal signal from worker processes", "0.7.0–0.8.5.post1",
      "v1/executor/multiproc_executor.py:46 (0.7.0) to :49 (0.8.5.post1)",
      "MulitprocExecutor got fatal signal from worker processes, shutting down. See stack trace above for root cause issue."),
    # V0's scheduler when it preempts a sequence for want of KV-cache blocks (a warning per preemption, with the
    # running total); V1 counts them in the stats line's Preemptions instead
    T("V_PREEMPTED", V, "Sequence", "is preempted by",
      r"Sequence group (?P<group>\S{1,200}) is preempted by (?:PreemptionMode\.)?(?P<mode>\w{1,40}) mode because there is "
      r"not enough KV cache space\.(?:.{0,400}?total_num_cumulative_preemption=(?P<total>\d{1,12}))?",
      "0.6.0–0.10.2", "core/scheduler.py:1775",
      "Sequence group 165 is preempted by PreemptionMode.SWAP mode because there is not enough KV cache space. This can "
      "affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV "
      "cache memory. total_num_cumulative_preemption=151", ints=("total",), level="WARNING"),
    # the Ray executor waiting for Ray to place its workers' GPU bundles (printed at growing intervals until it fits
    # or gives up with 'Cannot provide a placement group …')
    T("V_PG_WAIT", V, "Waiting", "Waiting for creating a placement group",
      r"Waiting for creating a placement group of specs for (?P<seconds>\d{1,9}) seconds", "0.6.0+",
      "executor/ray_utils.py:212",
      "Waiting for creating a placement group of specs for 30 seconds. specs=[{'node:10.1.2.3': 0.001, 'GPU': 1.0}, "
      "{'GPU': 1.0}]. Check `ray status` to see if you have enough resources.", ints=("seconds",)),
    T("V_WORKER_START_FAILED", V, "WorkerProc", "WorkerProc failed to start", r"WorkerProc failed to start", "0.8.5+",
      "v1/executor/multiproc_executor.py:1091", "WorkerProc failed to start."),
    # V0's worker monitor (multiprocessing executor): a worker process that exited, with its exit code
    T("V_WORKER_PID_DIED", V, "Worker", "died, exit code", r"Worker (?P<name>\S+) pid (?P<pid>\d{1,10}) died, exit code: "
      r"(?P<code>-?\d{1,6})", "0.6.0–0.10", "executor/multiproc_worker_utils.py:120",
      "Worker VllmWorkerProcess pid 1159 died, exit code: -6", ints=("pid", "code"), level="ERROR"),
    T("V_PROC_DIED", V, None, "died unexpectedly", r"(?P<what>Engine core proc|Worker proc) (?P<name>\S+) died unexpectedly", "0.8.5+",
      "v1/executor/multiproc_executor.py:315", "Worker proc VllmWorker-1 died unexpectedly, shutting down executor."),
    T("V_CORE_EXITED", V, "[shutdown]", "engine core exited unexpectedly", r"\[shutdown\] MPClient: engine core exited unexpectedly", "0.25.0+",
      "v1/engine/core_client.py:817", "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup"),
    T("V_OUTPUT_HANDLER", V, "AsyncLLM", "output_handler failed", r"AsyncLLM output_handler failed", "0.8.5+",
      "v1/engine/async_llm.py:906", "AsyncLLM output_handler failed."),
    T("V_SHUTDOWN", V, None, "Shutting down", r".*Shutting down", "all", "various", "Shutting down FastAPI HTTP server."),
    T("V_SPEC_ASYNC_OFF", V, "Async", "speculative decoding and will be disabled",
      r"Async scheduling not supported with ngram-based speculative decoding", "0.14.1+", "config/vllm.py:1605",
      "Async scheduling not supported with ngram-based speculative decoding and will be disabled."),
    T("V_DYNAMIC_K_DP", V, "Dynamic", "falling back to static", r"Dynamic speculative decoding is not supported with data parallelism",
      "0.26.0+", "config/vllm.py:1067",
      "Dynamic speculative decoding is not supported with data parallelism because data-parallel ranks can select different speculative-token counts, causing DP divergence and deadlocks. Disabling num_speculative_tokens_per_batch_size and falling back to static num_speculative_tokens=3."),
    T("V_DRAFT_LOADED", V, None, "Draft model loaded for speculative decoding",
      r"Draft model loaded for speculative decoding: (?P<model>\S+)", "vllm-metal", "vllm_metal/v1/draft_model_proposer.py:230",
      "Draft model loaded for speculative decoding: /models/d (layers=2, kv_heads=2, head_dim=64, patched=0, committed_blocks=4, scratch_blocks=2)",
      outside="the vllm-metal plugin's message, not a vLLM release's"),
    T("V_PREFIX_HASH", V, None, "prefix_caching_hash_algo", r".*prefix_caching_hash_algo=(?P<algo>\w+)", "0.10.2+", "config/cache.py",
      "Using prefix_caching_hash_algo=sha256"),
    # ---- speculative decoding / serving health (issue #3) ----------------------------------------------
    T("V_ARCH", V, "Resolved", "Resolved architecture", r"Resolved architecture: (?P<arch>\S+)", "0.10+", "config/model.py:733",
      "Resolved architecture: Qwen3NextForCausalLM"),
    T("V_SHUTDOWN_STEP", V, "[shutdown]", "[shutdown]", r"\[shutdown\] (?P<who>[^:]+): (?P<what>.*)$", "0.25.0+",
      "entrypoints/launchers (0.32.0 launcher.py:254), v1/engine/core.py:1454",
      "[shutdown] API server: shutdown triggered"),
    T("V_SIGTERM_OLD", V, None, "SIGTERM", r".*(?:received signal SIGTERM|signal=SIGTERM|Received SIGTERM)", "≤0.20",
      "v1/engine/core.py", "EngineCore received signal SIGTERM",
      outside="a wording no catalogued logging call prints (0.23+ logs '[shutdown] EngineCore: trigger received "
              "signal=%s', read as V_SHUTDOWN_STEP); kept for the builds that printed it"),
    T("V_INVALIDATED_ASSERT", V, None, "memory_obj.tensor is not None", r"\s*(?P<detail>assert memory_obj\.tensor is not None)",
      "LMCache 0.5.6", "v1/cache_engine.py (retrieve → batched_to_gpu), inside a logger.exception traceback",
      "    assert memory_obj.tensor is not None", level="ERROR", outside="a traceback line under the vLLM header, not a logging call"),
    # the exception line of a traceback; a bare ``AssertionError`` (a failed assert without message) has no detail
    # no needle: an exception's name ends in Error or Exception (or is 'Exception'), and only ERROR records are tried
    # torch's CUDA error text goes on under the exception line (``Search for `cudaErrorIllegalAddress' in …``):
    # printed under a logger.exception header, it names the CUDA error when the exception line is cut off
    T("V_CUDA_HINT", V, "Search", "cudaError", r"Search for `(?P<code>cudaError\w{1,60})'", "torch 2.x",
      "c10/cuda/CUDAException.cpp", "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.",
      outside="a line of torch's CUDA error text under a logger.exception header, not a logging call"),
    # the exception a NIXL handshake raises when the side channel answered for another engine (tried before
    # V_EXC, which would take any exception line)
    T("V_NIXL_ENGINE_MISMATCH", V, None, "NIXL agent engine ID mismatch",
      r"(?:RuntimeError: )?Remote NIXL agent engine ID mismatch", "0.10+",
      "distributed/kv_transfer/kv_connector/v1/nixl_connector.py",
      "RuntimeError: Remote NIXL agent engine ID mismatch. Expected e1_dp0,received e2_dp0.",
      outside="an exception's text under the connector's logger.exception, not a logging call"),
    # V0's MQLLMEngine logs the repr of the exception that ended its engine loop (``logger.exception(repr(e))``,
    # engine/multiprocessing/engine.py), its traceback under it; its client logs ``RuntimeError('Engine process …')``
    T("V_EXC_REPR", V, None, "(", r"(?P<exc>(?:[A-Za-z_]\w{0,100}\.){0,20}[A-Za-z_]\w{0,100}(?:Error|Exception))"
      r"\((?P<q>['\"])(?P<detail>.*)(?P=q)\)\s*$", "0.6.0–0.10.2 (V0)", "engine/multiprocessing/engine.py",
      "OutOfMemoryError('Error in model execution (input dumped to /tmp/err.pkl): CUDA out of memory. Tried to allocate "
      "3.82 GiB.')", level="ERROR", outside="the repr of an exception, logged as the message of logger.exception"),
    T("V_EXC", V, None, "", r"(?P<exc>(?:[A-Za-z_]\w{0,100}\.){0,20}(?:[A-Za-z_]\w{0,100}(?:Error|Exception)|Exception|StopIteration"
      r"|StopAsyncIteration))"
      r"(?:: (?P<detail>.*))?\s*$", "all",
      "traceback lines of logger.exception (NewLineFormatter)",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", level="ERROR",
      outside="a traceback line under the vLLM header, not a logging call"),
    # the other rows of such a traceback (its code lines, Python 3.11's carets), at ERROR as logger.exception
    # prints them: a start-only call (``engine_core = EngineCoreProc(…)``) shows the engine failed to start.
    # Tried last: an indented row another template reads (an assert's code line) is that template's
    T("V_TB_CODE", V, None, "  ", r"\s{2,}(?P<code>\S.*)", "all",
      "traceback lines of logger.exception (NewLineFormatter)", "    engine_core = EngineCoreProc(*args, **kwargs)",
      level="ERROR", outside="a traceback line under the vLLM header, not a logging call"),
]
