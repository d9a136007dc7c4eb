"""SRV001's tables: which lines prove a death, which are its cascade, which frames run only at start-up, and what
each root class means. Data the rule reads (``engine_health.EngineDeath``), apart so the rule's module holds its logic."""

from __future__ import annotations

from specdiag.analyzers.causes import CATALOG
from specdiag.analyzers.engine_environment import CLASSES as ENV_CLASSES

#: the lines that prove a worker process died outside Python's reach (events/ray.py, events/text.py): Ray's
#: terminate handler aborts after an exception nothing caught, the failure-signal handler (Ray's, or CPython's
#: faulthandler) re-raises the signal, the raylet saw the process exit. Neither vLLM executor replaces a worker,
#: so the engine fails at the next step that needs it. Per id: what it reports (for the summary) and the root
#: class it gives (None: classified by its text, as an exception is)
WORKER_DEATHS: dict[str, tuple[str, str | None]] = {
    "R_UNHANDLED": ("a C++ exception nothing caught", None),
    "R_FATAL_SIGNAL": ("a fatal signal", "native-crash"),
    "E_FATAL_PYTHON": ("Fatal Python error", "native-crash"),
    "E_SEGFAULT_TVM": ("a segmentation fault (apache-tvm-ffi's handler printed the native stack)", "native-crash"),
    "R_WORKER_DIED": ("the raylet: a worker died or was killed", "process-killed"),
    "E_SHELL_KILLED": ("the shell: the process it ran got SIGKILL", "process-killed"),
    "R_ACTOR_DEAD": ("Ray: the actor's worker process died", "process-killed"),
    "R_ACTOR_DEAD_RAW": ("Ray: the actor's worker process died", "process-killed"),
    "T_NCCL_TIMEOUT": ("torch's NCCL watchdog: a collective timed out", "nccl-timeout"),
    "T_NCCL_TAKEDOWN": ("torch's NCCL watchdog took the process down", "nccl-timeout"),
    "V_WORKER_PID_DIED": ("V0's worker monitor: a worker process exited", None),
    "R_SERVE_REPLICA_FAILED": ("Ray Serve stopped an LLM replica whose start raised", None),
    # csrc's CUDACHECK (custom all-reduce and other kernels): printf, then exit(EXIT_FAILURE)
    "E_CUDACHECK": ("vLLM's CUDACHECK: a CUDA call in its kernels failed and the process exited", "native-crash"),
    "E_FLASH_CHECK_CUDA": ("flash-attention's CHECK_CUDA: a kernel launch failed and the process exited", "native-crash"),
    "E_DEVICE_ASSERT": ("a kernel's device-side assert (the CUDA context is unusable after it)", "native-crash"),
    "E_NPU_FAULT": ("torch_npu: an Ascend NPU kernel's aicore/aivec exception", "native-crash"),
    "E_HIP_FAULT": ("the ROCm runtime: a GPU memory access fault (it aborts the process)", "native-crash"),
    "E_HSA_ABORT": ("the ROCm runtime aborted a GPU queue (and the process)", "native-crash"),
    "E_NCCL_ERROR": ("vLLM's NCCL wrapper: an NCCL call failed and the rank raised", "nccl-error"),
}
#: those Ray reports from outside the dead process: it saw the exit, not why
EXIT_SEEN_FROM_OUTSIDE = frozenset(t for t, (_what, cls) in WORKER_DEATHS.items() if cls == "process-killed")
#: exceptions that are consequences of an engine death, never its root
CASCADE = ("EngineDeadError", "EngineGenerateError", "CancelledError", "Engine core initialization failed",
           "BrokenPipeError", "ConnectionResetError", "EOFError", "SystemExit", "KeyboardInterrupt",
           "ClosedResourceError", "ZMQError", "RemoteProtocolError",
           # a Ray actor (a vLLM worker under the Ray executor) that died: the engine's side of the death
           "ActorDiedError", "RayActorError", "The actor died unexpectedly", "RayChannelError",
           # wrappers that point at another process's traceback: V0's API server, V1's worker start
           "Engine process failed to start", "WorkerProc initialization failed",
           # V0's MQLLMEngine client when the engine's process is gone
           "Engine process (pid",
           # CUDA's cudaErrorStreamCaptureInvalidated: an earlier error during a graph capture invalidated it
           "operation failed due to a previous error during capture")
HARD = frozenset({"V_CORE_FAILED", "V_WORKER_EXC_V0", "V_CORE_FATAL", "V_WORKER_EXC", "V_PROC_DIED", "V_CORE_EXITED", "E_OOM",
                  "E_NO_CACHE_MEM", "E_MAX_LEN_KV", "E_WORKER_FAILED", "E_INIT_FAILED", "V_DUMP_INPUT", "V_DUMP_SCHED", "V_DUMP_SCHED_OBJ",
                  "V_CORE_HIT_EXC", "V_BG_TASK_FAILED", "V_WORKER_START_FAILED", "V_ITER_TIMEOUT", "V_API_ENGINE_DEAD",
                  "V_MP_FATAL_SIGNAL", "E_ENGINE_PROC_DIED", "E_FREE_MEM", "E_EAGLE_TP", "E_SPEC_UNSUPPORTED",
                  "E_OUT_OF_RESOURCES", "E_LINK_LIBCUDA", "E_HF_OFFLINE", "E_PTXAS"}) | frozenset(WORKER_DEATHS)
#: the names a caught exception has where a call logs it as its message (``logger.exception(e)``: the catalog's
#: entry has no format, its expression is the variable)
EXCEPTION_NAMES = frozenset({"e", "err", "exc", "ex", "error", "exception"})
#: frames of the loops whose exceptions vLLM never survives: an exception seen passing through one of them
#: escaped the engine core's busy loop (``run_engine_core`` then logs the fatal error and the core exits),
#: a worker's busy loop (the core raises ``Worker failed with error``), or the API server's output handler;
#: ``step_with_batch_queue`` is the engine core's step with a batch queue (pipeline parallelism, async
#: scheduling), called only as ``step_fn`` from that busy loop (v1/engine/core.py, 0.9+)
FATAL_FRAMES = frozenset({"run_engine_core", "run_busy_loop", "_process_engine_step", "execute_model_with_error_logging",
                          "step_with_batch_queue",
                          "worker_busy_loop", "worker_main", "output_handler",
                          # V0's AsyncLLMEngine background loop (engine/async_llm_engine.py): what escapes it ends the
                          # engine ("Engine background task failed", then AsyncEngineDeadError)
                          "run_engine_loop",
                          # V0's engine process (engine/multiprocessing/engine.py 0.6-0.10): logs what escaped the
                          # engine, then re-raises it out of the process
                          "run_mp_engine"})
#: the code rows of the API server's main (entrypoints/openai/api_server.py ``<module>``, cli/serve.py ``cmd``): a raw
#: traceback through one is the server process leaving its main with an exception, the server gone
FATAL_CODE = {b"uvloop.run(run_server(": "run_server"}
#: functions vLLM runs only while the engine starts (v1/engine/core.py, v1/executor/*, v1/worker/*, V0's
#: executor and worker; 0.6–0.32): a traceback through one is a failure to start, before any request
START_FRAMES = frozenset({"_initialize_kv_caches", "_init_executor", "init_device", "load_model",
                          "determine_available_memory", "profile_run", "initialize_from_config", "capture_model",
                          "initialize_cache", "wait_for_ready", "_init_workers_ray", "check_enough_kv_cache_memory",
                          "init_worker_distributed_environment", "_check_enough_kv_cache_memory",
                          "from_engine_args", "from_vllm_config", "make_async_mp_client", "make_client",
                          "build_async_engine_client", "build_async_engine_client_from_engine_args",
                          "wait_for_engine_startup", "_wait_for_engine_startup",
                          "compile_or_warm_up_model", "_dummy_sampler_run", "init_worker",
                          # V0's executor asks its workers for these while it starts (executor/*, worker/worker.py)
                          "determine_num_available_blocks"})
# (from_engine_args / from_vllm_config: V0's MQLLMEngine or V1's AsyncLLM / LLMEngine built at start; make_*client:
# the API server's client of the engine core, made once, when it starts the core; build_async_engine_client*: the
# API server's context manager around all of that, entered once before it serves; *wait_for_engine_startup: the
# client waiting for the engine cores' start-up handshake, v1/engine/utils.py and core_client.py)
#: vLLM's KV-cache size checks (v1/core/kv_cache_utils.py): they raise only 'No available memory for the cache
#: blocks' or 'To serve at least one request with the model's max seq len …'
KV_CHECK_FRAMES = ("check_enough_kv_cache_memory", "_check_enough_kv_cache_memory")
#: the code line of V1's ``run_engine_core`` that builds the engine core (0.8–0.32): a traceback through it
#: failed while the core was being built
START_CODE = {b"engine_core = EngineCoreProc(": "EngineCoreProc.__init__",
              b"engine_core = DPEngineCoreProc(": "EngineCoreProc.__init__",
              b"= EngineCoreProc(*args": "EngineCoreProc.__init__",
              # the API server entering its engine client (entrypoints/openai/api_server.py run_server_worker, 0.9+)
              b"async with build_async_engine_client(": "build_async_engine_client",
              # a CUDA graph being captured (compilation/cuda_graph.py): V1 captures them while it starts (capture_model)
              b"with torch.cuda.graph(": "CUDA graph capture"}
SOFT = frozenset({"E_ENGINE_DEAD", "V_OUTPUT_HANDLER"})
#: lines that say the engine or a worker failed to start (``V_CORE_FAILED``: "EngineCore failed to start")
START_FAILURES = frozenset({"V_CORE_FAILED", "V_WORKER_START_FAILED", "E_INIT_FAILED", "R_SERVE_REPLICA_FAILED", "E_FREE_MEM",
                            "E_EAGLE_TP", "E_SPEC_UNSUPPORTED"})
START_WORDS = ("Engine process failed to start", "WorkerProc initialization failed", "Engine core initialization failed",
               "ModelRunner init failed")  # vllm-ascend's NPUModelRunner, quoted by the engine core
#: the experiment of a cause when the engine died while starting (no request to rerun)
START_CONFIRM = {"worker-exception": "start the server again with VLLM_LOGGING_LEVEL=DEBUG"}
#: root classes whose error kills the engine wherever it is raised (a start that cannot fit, a step out of memory,
#: kernels the device cannot run, a hybrid model's KV cache that cannot be laid out)
FATAL_CLASSES = ("cuda-oom", "kv-cache-memory", "gpu-arch-unsupported", "hybrid-kv-disabled", *ENV_CLASSES)
#: root classes raised only while the engine starts (the KV cache's sizing and layout, the free-memory check)
START_CLASSES = frozenset({"kv-cache-memory", "hybrid-kv-disabled", "gpu-memory-in-use", "ray-placement",
                           "model-files-unreadable", "model-hub-access"})
#: other devices' words for running out of device memory, lower case: Intel's Level Zero
#: (``UR_RESULT_ERROR_OUT_OF_RESOURCES``, ``UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY``), AWS Neuron's runtime
#: (``nrt_tensor_allocate status=4 message="Allocation Failure"``), XLA on TPU (``RESOURCE_EXHAUSTED: Error allocating``)
DEVICE_MEMORY_WORDS = ("ur_result_error_out_of_resources", "ur_result_error_out_of_device_memory",
                       'message="allocation failure"', "resource_exhausted: error allocating")
#: what says a structured-output grammar failed to compile (xgrammar's converter and compiler frames, vLLM's own
#: message), lower case
GRAMMAR_COMPILE_WORDS = ("json_schema_converter", "in compile_json_schema", "in compile_grammar",
                         "failed to compile grammar")
#: what says the build has no kernel for the device (torch's ``CUDA error: no kernel image is available for execution
#: on the device``; a kernel library's own refusal: FlashInfer-CUTLASS MoE ``does not support current device
#: sm_120``, vLLM's ``block scaled fp8 gemm is not implemented for Blackwell``), lower case
NO_KERNEL_WORDS = ("no kernel image is available for execution on the device", "does not support current device sm_",
                   # a quantization method's or kernel's minimum compute capability (``Minimum capability: 90. Current
                   # capability: 86``; each WNA16 kernel refused: ``requires capability 80, current compute capability
                   # is 75``)
                   "current capability: ", "current compute capability is", "current compute  capability is",
                   "is not implemented for blackwell",
                   # a dtype the GPU has no kernels for (V0's worker _check_if_gpu_supports_dtype, platforms' checks):
                   # ``Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your … has 7.5``
                   "is only supported on gpus with compute capability",
                   # FlashInfer's JIT when no architecture of the device's major version is in its list (a GB10, sm_121,
                   # against a kernel built for major 10 only: flashinfer/compilation_context.py)
                   "no supported cuda architectures found for major versions",
                   # CUTLASS kernels guarded to one architecture (csrc/cutlass_extensions/common.hpp enable_sm120_only)
                   "this kernel only supports sm")
#: CUDA errors raised when the kernel that faulted ran earlier: the frame they name is where CUDA noticed, lower case
ASYNC_CUDA_WORDS = ("illegal memory access", "device-side assert triggered", "misaligned address",
                    "unspecified launch failure", "illegal instruction")
#: the lines that announce a death themselves; without one, a death seen only in the crash dump and the
#: fatal traceback body is inferred (the excerpt was cut above its header)
HEADERS = frozenset({"V_CORE_FATAL", "V_WORKER_EXC_V0", "V_CORE_FAILED", "V_WORKER_EXC", "V_PROC_DIED", "V_CORE_EXITED",
                     "V_CORE_HIT_EXC", "V_BG_TASK_FAILED", "V_WORKER_START_FAILED", "V_API_ENGINE_DEAD", "V_MP_FATAL_SIGNAL",
                     "E_ENGINE_PROC_DIED"})
HEADER_TEXT = "the 'EngineCore encountered a fatal error' / 'Engine core proc … died unexpectedly' header"
#: the header lines whose logging call prints the traceback under them: a frame printed at the place where
#: the catalog says vLLM prints one of these is that call's traceback, so the death is inferred from it
TRACEBACK_HEADERS = ("V_CORE_FAILED", "V_WORKER_EXC_V0", "V_CORE_FATAL", "V_WORKER_EXC", "V_CORE_HIT_EXC", "V_BG_TASK_FAILED",
                     "V_WORKER_START_FAILED")
ROOTS = frozenset({"V_EXC_REPR", "V_ITER_TIMEOUT", "E_FREE_MEM", "E_EAGLE_TP", "E_CUDACHECK", "E_SEGFAULT_TVM", "E_OOM", "E_NO_CACHE_MEM", "E_MAX_LEN_KV", "E_WORKER_FAILED", "E_INDEX_LAYERS", "E_SPEC_UNSUPPORTED", "E_IMPORT",
                   "E_GENERIC", "E_MISMATCH_ASSERT", "E_INVALIDATED_ASSERT", "V_EXC", "E_NO_CONNECTOR", "R_UNHANDLED",
                   "T_NCCL_TIMEOUT", "E_OUT_OF_RESOURCES", "E_LINK_LIBCUDA", "E_HF_OFFLINE", "E_PTXAS"})

CAUSE_FIX = {
    "cuda-oom": ("The device ran out of memory outside what vLLM set aside: a step's activations, CUDA graph "
                 "capture, the sampler's warm-up, or another process on the GPU. Leave more room: lower "
                 "--gpu-memory-utilization, reduce --max-num-seqs / --max-num-batched-tokens / --max-model-len, "
                 "capture no CUDA graphs (--enforce-eager) to test, or use more GPUs (TP).",
                 "start again with --enforce-eager and --gpu-memory-utilization 0.1 lower: if it then runs, the "
                 "room outside the KV cache was short"),
    "kv-cache-memory": ("Not enough memory left for the KV cache: raise --gpu-memory-utilization, lower --max-model-len, "
                        "or add GPUs; with a draft model remember it takes weights and KV too.",
                        "specdiag repro --toggle max_model_len=2048,4096"),
    "lmcache-draft-layers": ("LMCache sized its per-layer KV objects for the target model while vLLM registered the "
                             "drafter's layers as KV caches too: LMCache 0.5.6 counts draft layers only for EAGLE/MTP, "
                             "so with method=draft_model its count is short, and older builds counted none (an EAGLE "
                             "layer too many: 'could not broadcast … from shape (81,) into shape (80,)'). Do not "
                             "combine such a build with that drafter: use one that counts its layers, or an EAGLE/MTP "
                             "drafter on LMCache 0.5.6.",
                             "specdiag repro --toggle spec=off,draft_model"),
    "lmcache-kv-layout": ("The model keeps several KV caches per layer, and LMCache's GPU connector sized one pointer "
                          "per layer (LMCache 0.5.6 gpu_connectors.py _initialize_pointers): a sparse-attention model "
                          "registers its indexer's cache as a layer of its own beside the MLA cache (vLLM 0.32 "
                          "models/deepseek_v2.py DeepseekV32IndexerCache: DeepSeek V3.2, GLM-5). This LMCache build "
                          "does not support that layout: serve the model without LMCache, or use a release that "
                          "supports its KV layout.",
                          "specdiag repro --toggle lmcache=off,on"),
    "engine-heartbeat-lost": ("V0's multiprocessing engine (MQLLMEngine, 0.6–0.10) marks itself alive after each step; "
                              "its client's heartbeat check raises 'No heartbeat received from MQLLMEngine' (or sees "
                              "'Engine loop has died') when one step outlasts VLLM_RPC_TIMEOUT: a long prefill or "
                              "compile, a large multimodal input, guided decoding, or a hang. No exception in the step: "
                              "find the long step (py-spy dump of the engine process while it stalls), raise "
                              "VLLM_RPC_TIMEOUT, or upgrade (0.6.4+ checks the engine's pid instead, vLLM PR #9818).",
                              "rerun the same load with VLLM_RPC_TIMEOUT=600000: a slow step then finishes, a hang "
                              "still stops"),
    "engine-iteration-timeout": ("One engine step ran longer than VLLM_ENGINE_ITERATION_TIMEOUT_S (60 s by default): V0's "
                                 "AsyncLLMEngine raised TimeoutError and its background loop died with it "
                                 "(engine/async_llm_engine.py, 0.6–0.10). A step that slow waited on something stuck "
                                 "(a hung worker or collective) or did work that long (large multimodal inputs, a CPU "
                                 "backend): dump the engine's and workers' stacks while it stalls (py-spy dump); if the "
                                 "work is genuinely that slow, raise VLLM_ENGINE_ITERATION_TIMEOUT_S.",
                                 "rerun the same load with VLLM_ENGINE_ITERATION_TIMEOUT_S=600: a slow step then "
                                 "finishes, a hang still times out"),
    "gpu-memory-in-use": ("Less GPU memory was free at start than --gpu-memory-utilization asks for: another process "
                          "(or an earlier vLLM still running) holds memory on the device (v1/worker/gpu_worker.py "
                          "init_device). Free the device, or lower --gpu-memory-utilization to at most the free share.",
                          "nvidia-smi --query-compute-apps=pid,used_memory --format=csv before starting"),
    "nccl-error": ("An NCCL call failed and the rank raised (distributed/device_communicators/pynccl_wrapper.py "
                   "NCCL_CHECK). 'invalid usage' mostly means the NCCL library vLLM loaded does not fit the CUDA "
                   "runtime or driver, or two ranks share a GPU; 'unhandled cuda error' a CUDA fault under NCCL; "
                   "'unhandled system error' the network or shared-memory set-up between ranks. Rerun with "
                   "NCCL_DEBUG=WARN to see NCCL's own reason, and check which libnccl vLLM loads (VLLM_NCCL_SO_PATH) "
                   "on every node.",
                   "rerun with NCCL_DEBUG=WARN: NCCL's 'NCCL WARN' line names the failing call and its reason"),
    "gpu-arch-unsupported": ("The installed build has no kernel for this GPU's architecture: torch's or vLLM's binaries, or "
                             "a kernel library's (FlashInfer, CUTLASS MoE, block-scaled FP8), were not built for its "
                             "compute capability (a new GPU such as sm_120 needs a build that includes it). Install a "
                             "build for this GPU, or choose a backend or quantization whose kernels support it.",
                             "python -c 'import torch; print(torch.cuda.get_device_capability(), "
                             "torch.cuda.get_arch_list())': the device's capability must be in the list"),
    "cuda-driver-mismatch": ("The CUDA driver does not fit what the process runs: the libcuda it loaded is not the host "
                             "driver's (Error 803: a container's cuda-compat copy first on the library path), forward "
                             "compatibility on a GPU without it (Error 804), or a driver older than the CUDA runtime or "
                             "the toolkit that built the kernels (insufficient driver, PTX of an unsupported toolchain). "
                             "torch raises it when it first touches the GPU or launches such a kernel, so nothing runs. "
                             "Make the driver and the build agree: a newer host driver, the build for the driver's CUDA "
                             "version, or the container's compat libraries off the library path.",
                             "nvidia-smi (the driver's CUDA version) and, in the same container, python -c 'import torch; "
                             "print(torch.version.cuda); torch.zeros(1).cuda()'"),
    "jit-toolchain": ("A kernel compiled while the engine starts could not be built: Triton links its launcher against "
                      "libcuda (-lcuda / -l:libcuda.so.1) and the linker found none on its path (a container runtime "
                      "that mounts the driver outside it, such as GKE's /usr/local/nvidia/lib64), or FlashInfer's JIT "
                      "found no nvcc or a toolkit whose compiler and headers differ. Put the driver's folder on "
                      "LIBRARY_PATH (or TRITON_LIBCUDA_PATH), or give the JIT one CUDA toolkit that matches torch "
                      "(CUDA_HOME).",
                      "in the container: ldconfig -p | grep libcuda, and which nvcc; nvcc --version"),
    "model-files-unreadable": ("The model's weight files could not be read: a safetensors shard shorter than its header "
                               "says (a download cut off or a corrupt file), or no file of the load format asked in the "
                               "model's folder. Check the files against the hub (sizes, sha256) and download the bad "
                               "ones again; with --load-format, name a format the folder holds.",
                               "python -c 'from safetensors import safe_open; safe_open(\"SHARD\", \"pt\")' for each "
                               "shard: the bad one raises the same error"),
    "model-hub-access": ("The model's files could not be fetched: the hub answered that the repo or revision does not "
                         "exist for this request (a misspelt id, or a private or gated repo without a token), offline "
                         "mode is on and the files are not cached, or the cache folder named does not exist. Fix the "
                         "repo id or revision, give a token with access (HF_TOKEN), pass the local snapshot folder, or "
                         "mount the cache (HF_HOME).",
                         "huggingface-cli download REPO config.json with the server's environment (token, HF_HOME, "
                         "HF_HUB_OFFLINE) gives the same answer"),
    "kernel-exceeds-gpu": ("A kernel needs more of the GPU than it has: Triton's launch found the kernel's shared memory "
                           "per block above the device's limit ('out of resource: shared memory, "
                           "Required: …, Hardware limit: …'), as a large head size does on a GPU with 64 KiB per block. "
                           "No setting of vLLM's makes the kernel fit: run the model with another attention backend "
                           "(--attention-backend) or on a GPU with more shared memory per block.",
                           "start with another --attention-backend: if the server then starts, that kernel did not fit "
                           "this GPU"),
    "ep-dispatch-timeout": ("Expert parallelism's all-to-all (DeepEP) waited past its timeout for the token counts of "
                            "its peer ranks (csrc/deep_ep.cpp: 'CPU recv timeout' within a node, 'timeout (dispatch CPU)' "
                            "across nodes): a peer never entered the dispatch (it hung, crashed first, or faulted in a "
                            "kernel), or across nodes RDMA/NVSHMEM never delivered. The rank that reports it is a "
                            "victim: read every rank's last lines for the first failure, and check the DeepEP, NVSHMEM "
                            "and vLLM versions together (dual-batch overlap, --enable-dbo, reused DeepEP's buffer too "
                            "early before vLLM PR #27666).",
                            "rerun once with the all-to-all backend changed (--all2all-backend, VLLM_ALL2ALL_BACKEND) "
                            "or without --enable-dbo: if it then serves, the DeepEP path was at fault"),
    "deepgemm-unsupported": ("DeepGEMM's own assertion failed (a C++ header of its JIT kernels: 'Unknown recipe', a "
                             "layout check): the installed DeepGEMM has no kernel for this GPU (sm_120 with the "
                             "version vLLM pinned) or for these shapes. Turn it off (VLLM_USE_DEEP_GEMM=0, vLLM falls "
                             "back to its CUTLASS/Triton FP8 kernels) or install the DeepGEMM version the vLLM release "
                             "pins, one that supports the GPU.",
                             "start with VLLM_USE_DEEP_GEMM=0: if it then serves, DeepGEMM was the failing kernel"),
    "hybrid-kv-disabled": ("The hybrid KV cache manager was turned off and this model's KV cache specs could not then be "
                           "made one type (v1/core/kv_cache_utils.py): the model mixes layer kinds (Mamba or linear "
                           "attention beside full attention, or sliding windows). vLLM turns the manager off for a KV "
                           "connector that does not support it (--kv-transfer-config: its warning 'Turning off hybrid "
                           "kv cache manager because --kv-transfer-config selects a KV connector that does not support "
                           "it'), on platforms without it, or for chunked local attention with EAGLE (config/vllm.py). "
                           "Serve this model without that connector, with a connector that supports it, or on a "
                           "release whose connector does.",
                           "start once without --kv-transfer-config (and without KV offloading): if it starts, the "
                           "connector turned the manager off"),
    "ray-placement": (CATALOG["ray-placement"].fix, CATALOG["ray-placement"].confirm),
    "spec-unsupported": ("This vLLM build does not support the configured speculative decoding: the method, on this "
                         "device or with this parallelism (V0's EAGLE with TP > 1, a separate draft model where the "
                         "message says it is not supported yet). Use a method the build supports, or a release that "
                         "supports this one.",
                         "specdiag repro --toggle spec=off,ngram"),
    "drafter-error": ("The exception was raised in vLLM's speculative-decoding drafter (v1/spec_decode/: the EAGLE, "
                      "MTP or draft-model proposer) or names its state: a drafter bug, or a combination of the "
                      "speculative method with this model, graph mode or release that the drafter does not handle. "
                      "Start without --speculative-config to confirm it, then try another vLLM release or method for "
                      "this model.",
                      "start the server once without --speculative-config and replay the failing load"),
    "lmcache-adapter-assertion": ("LMCache's vLLM adapter found its token accounting out of step with the scheduler "
                                  "(lookup vs allocation, a preempted request's computed tokens, a request it no longer "
                                  "tracks) and asserted: an LMCache/vLLM version pair the adapter does not support, or "
                                  "an adapter bug. Run an LMCache release built for this vLLM version; until then "
                                  "disable the KV connector for the affected deployment.",
                                  "rerun the request with LMCACHE_LOG_LEVEL=DEBUG and compare its 'Reqid: …' lines "
                                  "with the asserted numbers"),
    # a structured-output grammar the backend could not compile, raised in the engine core (releases before the
    # request-level handling): SRV005's cause, one text for both
    "so-grammar-compile": (CATALOG["so-grammar-compile"].fix, CATALOG["so-grammar-compile"].confirm),
    "import-error": ("A package version mismatch (vLLM / LMCache / torch): install matching versions.",
                     "python -c 'import vllm, lmcache' in the serving environment"),
    "process-killed": ("A process died without a Python exception: look for the kernel OOM killer (dmesg), "
                       "container memory limits or a SIGKILL from the orchestrator.",
                       "check `dmesg | grep -i oom` / the pod's last state (OOMKilled, exit code 137)"),
    "native-crash": ("A worker crashed in native code: a C++ exception nothing caught (Ray's 'Unhandled exception: "
                     "… what(): …', after which it aborts) or a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE). "
                     "A CUDA error named there ('an illegal memory access was encountered') is reported asynchronously: "
                     "the kernel that faulted ran before the call that reports it. Rerun the failing load with "
                     "CUDA_LAUNCH_BLOCKING=1 to find the kernel, and check that the vLLM, torch, CUDA driver and "
                     "attention-kernel builds are a supported set.",
                     "grep -n -B40 -A30 -E 'received at time=|Unhandled exception' <full log> (the dead worker's own "
                     "lines and stack, its pid in the prefix)"),
    "nccl-timeout": ("A collective (its type and sequence number in the line) did not complete within the process "
                     "group's timeout on this rank, so torch's NCCL watchdog took the process down "
                     "(ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout; 'To avoid data inconsistency, we are taking the "
                     "entire process down'). The rank that timed out waited for a peer: another rank stopped joining "
                     "collectives (it hung, crashed, or is stuck in a long kernel) or the interconnect failed. Among a "
                     "group's first collectives it is the communication set-up (P2P/NVLink, driver and NCCL versions; "
                     "NCCL_P2P_DISABLE=1 tests the P2P path); after many, a hang while serving: read every rank's "
                     "last lines before the timeout.",
                     "rerun with NCCL_DEBUG=INFO and compare each rank's last collective (SeqNum) before the timeout"),
    # the engine core's RPC to its workers (v1/executor/multiproc_executor.py: 'RPC call to execute_model timed out.')
    # waited longer than its timeout: the worker is stuck, as SRV003's shared-memory waits say (one text for both)
    "worker-hang": (CATALOG["worker-hang"].fix, CATALOG["worker-hang"].confirm),
    # the API server's output handler (v1/engine/async_llm.py output_handler → output_processor → detokenizer) raised
    # turning the engine's token ids into text: the handler task is gone, so every request after it fails
    "detokenizer-error": ("The API server's output handler raised while it turned the engine's token ids into text "
                          "(v1/engine/detokenizer.py): a token id the tokenizer cannot decode (a model whose vocabulary "
                          "is larger than its tokenizer's, an id out of range), or a detokenizer bug. The engine core "
                          "did not fail; the API server's handler did, and every request after it fails. Upgrade to a "
                          "release that catches it and logs the id (vLLM PRs #24351, #26445); check the model's "
                          "vocab_size against the tokenizer's length.",
                          "send that request again with detokenize=False: its token ids "
                          "come back, and the one past the tokenizer's length is the cause"),
    "worker-exception": ("Fix the exception raised in the engine/worker (the first error above, not the "
                         "EngineDeadError cascade).", "rerun the failing request with VLLM_LOGGING_LEVEL=DEBUG"),
    "cause-not-in-excerpt": ("The lines given show that the engine died, not why. vLLM prints the traceback that killed "
                             "it right after 'EngineCore encountered a fatal error', 'EngineCore failed to start' or "
                             "'WorkerProc hit an exception' (logger.exception), ending in the exception line; a worker's "
                             "own traceback comes before the engine core's. Collect from the first death line to the end "
                             "of its traceback, and the lines before it from every vLLM process, at log level INFO or "
                             "lower (VLLM_LOGGING_LEVEL=INFO), and dmesg / the container's exit reason for a kill.",
                             "grep -n -B50 -A200 -m1 -E 'EngineCore encountered a fatal error|EngineCore failed to start|"
                             "Dumping input data|WorkerProc hit an exception|died unexpectedly' <full log>"),
}
#: the rows of a traceback printed through logger.exception under the vLLM header: a frame, another row
TB_ROWS = ("V_TB_FRAME", "V_TB_CODE")
#: the causes a root error can be classified as (all but the "not in the excerpt" placeholder)
ROOT_CLASSES = tuple(c for c in CAUSE_FIX if c != "cause-not-in-excerpt")
#: root classes that only their own message names (a KV layout's whole multiple, V0's iteration timeout, the free-memory
#: check, a build without the GPU's kernels, pynccl's error): weighed only when the root's text is one of them
SIGNATURE_CLASSES = frozenset({*ENV_CLASSES, "lmcache-kv-layout", "engine-iteration-timeout", "gpu-memory-in-use",
                               "gpu-arch-unsupported",
                               "nccl-error", "hybrid-kv-disabled", "ray-placement", "so-grammar-compile"})
