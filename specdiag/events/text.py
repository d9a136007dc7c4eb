"""Lines outside any logger envelope: exception lines of raw tracebacks, the LMCache banner.

These match against a raw line or a whole joined traceback (the last exception line wins). They are searched
from every position, so none may start with ``.*`` or let a start inside a run of its own characters scan far
(an exception name may start only at a name boundary, checked by a look-behind after its first letter,
which keeps the engine's first-character skip); tests/test_hostile_regex.py times them.
"""

from __future__ import annotations

from specdiag.events import Template

T = Template
X = "text"

TEXT_TEMPLATES: list[Template] = [
    T("E_ENGINE_DEAD", X, None, "EngineDeadError", r"EngineDeadError(?P<detail>.*)", "0.8.5+", "v1/engine/exceptions.py",
      "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."),
    T("E_OOM", X, None, "out of memory", r"(?P<exc>(?:torch\.)?(?:cuda\.)?OutOfMemoryError)(?:: |\('Error in model execution[^:\n]{0,300}: )(?P<detail>.{0,40}?out of memory.*)",
      "torch", "torch", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    T("E_NO_CACHE_MEM", X, None, "No available memory for the cache blocks",
      r"(?P<exc>ValueError): (?P<detail>No available memory for the cache blocks.*)", "0.8.5+",
      "v1/core/kv_cache_utils.py", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."),
    # V0's start-up check of the KV cache against max_model_len (raised, not logged: a traceback's last line, or the
    # message quoted alone in a paste)
    T("E_MAX_LEN_KV", X, None, "is larger than the maximum number of tokens that can be stored in KV cache",
      r"(?:ValueError: )?(?P<detail>The model's max seq len \((?P<max_len>\d{1,9})\) is larger than the maximum number "
      r"of tokens that can be stored in KV cache \((?P<kv_tokens>\d{1,12})\).{0,300})", "0.6–0.10 (V0)",
      "worker/worker.py (raise_if_cache_size_invalid)",
      "ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in "
      "KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
      "the engine.", ints=("max_len", "kv_tokens")),
    T("E_NO_CONNECTOR", X, None, "connector found", r"RuntimeError: (?P<detail>No supported (?P<device>\w+) connector found\.?)",
      "LMCache 0.5.x", "v1/gpu_connector/__init__.py:247", "RuntimeError: No supported cpu connector found."),
    T("E_INVALIDATED_ASSERT", X, None, "memory_obj.tensor is not None",
      r"(?P<detail>assert memory_obj\.tensor is not None)", "LMCache 0.5.6", "v1/cache_engine.py",
      "    assert memory_obj.tensor is not None"),
    T("E_INDEX_LAYERS", X, None, "out of bounds for dimension",
      r"IndexError: (?P<detail>index (?P<index>\d+) is out of bounds for dimension (?P<dim>\d+) with size (?P<size>\d+))",
      "LMCache + draft_model", "v1/gpu_connector", "IndexError: index 2 is out of bounds for dimension 1 with size 2",
      ints=("index", "dim", "size")),
    T("E_MISMATCH_ASSERT", X, None, "Mismatch in tokens to load",
      r"AssertionError: (?P<detail>Mismatch in tokens to load: .*)", "LMCache", "integration/vllm/vllm_v1_adapter.py:1596",
      "AssertionError: Mismatch in tokens to load: 256 vs 512 (tokens in lmcache) - 256 (tokens in vllm) - 0 (full lmcache hits subtracts last token to recalculate logits) for request cmpl-1"),
    T("E_IMPORT", X, None, "ImportError", r"(?P<exc>ImportError|ModuleNotFoundError): (?P<detail>.*)", "any", "python",
      "ImportError: cannot import name 'CudaIPCWrapper' from 'lmcache.v1.multiprocess.custom_types'"),
    T("E_WORKER_FAILED", X, None, "RuntimeError: Worker failed with error",
      r"RuntimeError: Worker failed with error '(?P<detail>.*)'(?:, please check|[ \t]*$)", "0.32.0", "v1/engine/core.py:1512",
      "RuntimeError: Worker failed with error 'index 2 is out of bounds for dimension 1 with size 2', please check the stack trace above for the root cause",
      near=8192),
    T("E_INIT_FAILED", X, None, "Engine core initialization failed",
      r"RuntimeError: (?P<detail>Engine core initialization failed.*)", "0.10+", "v1/engine/utils.py",
      "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"),
    T("E_SPEC_UNSUPPORTED", X, None, "not supported", r"(?P<detail>(?:spec decode is not supported|Draft model speculative decoding is not supported yet|Speculative "
      r"decoding with draft model is not supported yet).*)",
      "0.9.2-0.15.1", "v1/worker/cpu_model_runner.py; config/speculative.py __post_init__ (0.13)",
      "AssertionError: spec decode is not supported."),
    # V0's speculative worker at start (spec_decode/spec_decode_worker.py create_worker): an EAGLE drafter with TP > 1
    T("E_EAGLE_TP", X, None, "EAGLE does not support TP", r"(?P<detail>EAGLE does not support TP > 1 yet.*)",
      "0.5–0.10 (V0)", "spec_decode/spec_decode_worker.py (create_worker)",
      "NotImplementedError: EAGLE does not support TP > 1 yet"),
    # CPython's multiprocessing when a process's target raised (its traceback follows; the process exits with code 1).
    # Alone: the excerpt holds the banner and not the traceback (the next lines are another process's)
    T("E_PROCESS_RAISED", X, "Process", "Process ", r"\AProcess (?P<proc>[\w.-]{1,64}):[ \t]*\Z", "any",
      "CPython multiprocessing/process.py (BaseProcess._bootstrap)", "Process EngineCore_DP0:"),
    # vLLM's CUDACHECK macro in its C++/CUDA kernels (csrc/custom_all_reduce.cuh, …): printf, then exit(EXIT_FAILURE)
    T("E_CUDACHECK", X, "Failed:", "Cuda error",
      r"Failed: (?P<detail>Cuda error (?P<file>[^\s:']{1,300}):(?P<line>\d{1,7}) '(?P<error>[^'\n]{1,300})')", "0.4+",
      "csrc/custom_all_reduce.cuh (CUDACHECK)", "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid "
      "argument'", ints=("line",)),
    # flash-attention's CHECK_CUDA (its csrc, built into vLLM's vllm-flash-attn and xformers): fprintf, then exit(1)
    T("E_FLASH_CHECK_CUDA", X, None, "CUDA error (",
      r"(?P<detail>CUDA error \((?P<file>[^\s():]{1,300}):(?P<line>\d{1,7})\): [^\n]{1,200})", "any",
      "flash-attention csrc (CHECK_CUDA)",
      "CUDA error (/__w/xformers/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:188): invalid "
      "argument", ints=("line",)),
    # a GPU kernel's device-side assert, as CUDA prints it from the device (torch's and Triton's kernels: an index
    # out of range); the CUDA context is unusable after it, so the process that ran it fails at its next CUDA call
    T("E_DEVICE_ASSERT", X, None, "] Assertion `",
      r"block: \[\d{1,6},\d{1,6},\d{1,6}\], thread: \[\d{1,6},\d{1,6},\d{1,6}\] Assertion `(?P<detail>[^`\n]{1,400})",
      "any", "CUDA device assert (torch / Triton kernels)",
      "/tmp/torchinductor_root/jk/x.py:45: unknown: block: [143,0,0], thread: [96,0,0] Assertion `index out of bounds: "
      "0 <= tmp10 < 32768` failed."),
    # torch_npu's report of an Ascend NPU kernel's fault (the device's aicore/aivec exception, as 'EZ9999: … The error
    # from device(chipId:5, dieId:0), serial number is 11, there is an exception of aivec error, …'); the NPU
    # counterpart of CUDA's illegal memory access
    T("E_NPU_FAULT", X, None, "there is an exception of",
      r"(?P<detail>there is an exception of (?:fftsplus )?(?:aicore|aivec) error[^\n]{0,300})", "torch_npu",
      "torch_npu (the device's error report)",
      "EZ9999: [PID: 37027] 2025-09-14-11:34:42.060.622 The error from device(chipId:5, dieId:0), serial number is 11, "
      "there is an exception of aivec error, core id is 2, error code = 0x800000"),
    # the ROCm runtime when a GPU kernel faults or a queue is aborted: it prints this, then aborts the process
    T("E_HIP_FAULT", X, None, "Memory access fault by GPU",
      r"(?P<detail>Memory access fault by GPU node-(?P<node>\d{1,4})[^\n]{0,300})", "ROCm", "ROCm runtime (ROCr)",
      "Memory access fault by GPU node-5 (Agent handle: 0x460e3a50) on address 0x7ec4dfe0e000. Reason: Write access to a "
      "read-only page."),
    T("E_HSA_ABORT", X, None, "aborting with error : HSA_STATUS_ERROR",
      r"Queue (?P<queue>0x[0-9a-fA-F]{1,16}) aborting with error : (?P<detail>HSA_STATUS_ERROR_\w{1,80}[^\n]{0,300})",
      "ROCm", "ROCm runtime (ROCr queue callback)",
      "Callback: Queue 0x7ee7b4200000 aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent "
      "attempted to access memory beyond the largest legal address. code: 0x29"),
    # vLLM's NCCL wrapper (distributed/device_communicators/pynccl_wrapper.py NCCL_CHECK): an NCCL call returned an
    # error and the rank raises
    T("E_NCCL_ERROR", X, None, "NCCL error: ", r"RuntimeError: (?P<detail>NCCL error: [^\n]{1,300})", "0.4+",
      "distributed/device_communicators/pynccl_wrapper.py (NCCL_CHECK)",
      "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)"),
    # vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp, CUDA_CHECK: the driver's error string, then Python raises
    # or the next call fails): ``CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62``
    T("E_CUMEM_ERROR", X, None, "cumem_allocator.cpp:",
      r"CUDA Error: (?P<detail>[^\n]{1,200}?) at (?P<file>[^\s:]{0,300}cumem_allocator\.cpp):(?P<line>\d{1,7})",
      "0.7.3+", "csrc/cumem_allocator.cpp (CUDA_CHECK)",
      "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62", ints=("line",)),
    # the shell's report that the process it ran got SIGKILL (bash's job status): the kernel's OOM killer, most often
    T("E_SHELL_KILLED", X, None, "Killed", r"^(?P<detail>Killed)[ \t]*$", "any", "the shell (bash job status)", "Killed"),
    # NCCL's own report of a failed call (its debug.cc WARN, printed at NCCL_DEBUG=WARN or lower, the default in
    # vLLM's images): ``host:pid:tid [dev] file.cc:line NCCL WARN message``; the place before it is read by the rule
    T("E_NCCL_WARN", X, None, "NCCL WARN ", r"NCCL WARN (?P<detail>[^\n]{1,400})", "NCCL 2.x",
      "nccl src/debug.cc (ncclDebugLog, WARN)",
      "node-0:1112:13532 [0] ibvwrap.c:160 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out"),
    # NCCL's reason for a failed call as torch relays it under 'Last error:' (the text of its last WARN line, without
    # NCCL's own header): a connection that failed, a proxy that could not reach a rank, two ranks on one GPU
    T("E_NCCL_CONNECT", X, None, "socketStartConnect", r"(?P<detail>socketStartConnect: [^\n]{1,300})", "NCCL 2.x",
      "nccl src/misc/socket.cc", "socketStartConnect: Connect to 169.254.0.1<40815> failed : Software caused connection abort"),
    T("E_NCCL_PROXY", X, None, "Proxy Call to rank", r"(?P<detail>Proxy Call to rank \d{1,7} failed[^\n]{0,200})",
      "NCCL 2.x", "nccl src/proxy.cc", "Proxy Call to rank 7 failed (Connect)"),
    T("E_NCCL_SHM", X, None, "Error while creating shared memory segment",
      r"(?P<detail>Error while creating shared memory segment [^\n]{1,300})", "NCCL 2.x", "nccl src/misc/shmutils.cc",
      "Error while creating shared memory segment /dev/shm/nccl-F9ffgB (size 9637888)"),
    T("E_NCCL_DUP_GPU", X, None, "Duplicate GPU detected", r"(?P<detail>Duplicate GPU detected[^\n]{0,200})", "NCCL 2.x",
      "nccl src/init.cc", "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10"),
    # CPython's faulthandler (enabled by torch and Ray): a fatal signal in native code, then the Python stack
    # ``Stack (most recent call first):`` / ``Current thread … (most recent call first):``
    T("E_FATAL_PYTHON", X, None, "Fatal Python error", r"Fatal Python error: (?P<detail>[^\n]{1,200})", "any",
      "CPython faulthandler", "Fatal Python error: Segmentation fault"),
    # apache-tvm-ffi's SIGSEGV handler (FlashInfer's and xgrammar's runtime, in vLLM's processes): the banner, then the
    # native stack innermost first (``envelope.SEGFAULT_BANNER``); the process dies of the signal
    T("E_SEGFAULT_TVM", X, None, "Segfault encountered",
      r"!{7} (?P<detail>Segfault encountered) !{7}",
      "any", "apache-tvm-ffi (its SIGSEGV handler)",
      "!!!!!!! Segfault encountered !!!!!!!\n  File \"<unknown>\", line 0, in swap_blocks(at::Tensor&, at::Tensor&, "
      "long, at::Tensor const&)"),
    # argparse's error exit of vLLM's command line (``vllm serve``; the process exits with code 2 before anything
    # starts): the option it rejected and why
    T("E_CLI_ARG", X, None, ": error: ",
      r"(?P<prog>vllm(?: [a-z][a-z-]{0,20})?|api_server\.py): error: (?:argument (?P<arg>-[\w/-]{1,80}): )?(?P<detail>[^\n]{1,600})",
      "any", "vllm/entrypoints/cli (argparse)",
      'vllm serve: error: argument --speculative-config: invalid loads value: "{\'method\': \'ngram\'}"'),
    # SchedulerConfig's check of the batch against the context when chunked prefill is off (raised at start, not
    # logged: config.py ``_verify_args`` to 0.10, ``config/scheduler.py`` after): one step must hold a whole sequence
    T("E_BATCH_LT_LEN", X, None, "is smaller than max_model_len",
      r"(?:ValueError: )?(?P<detail>max_num_batched_tokens \((?P<batched>\d{1,9})\) is smaller than max_model_len "
      r"\((?P<max_len>\d{1,9})\)\.?[^\n]{0,300})", "0.6+", "config.py / config/scheduler.py (SchedulerConfig)",
      "ValueError: max_num_batched_tokens (8192) is smaller than max_model_len (9216). This effectively limits the "
      "maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
      "max_num_batched_tokens or decrease max_model_len.", ints=("batched", "max_len")),
    # V0's MQLLMEngine client when the engine's process is gone (engine/multiprocessing/client.py, raised, and
    # logged as its repr by the client's health loop)
    T("E_ENGINE_PROC_DIED", X, None, "Engine process (pid", r"Engine process \(pid (?P<pid>\d{1,10})\) died",
      "0.6.0–0.10.2 (V0)", "engine/multiprocessing/client.py", "RuntimeError('Engine process (pid 76) died.')",
      ints=("pid",)),
    # the GPU worker's start-up check (v1/worker/gpu_worker.py init_device, raised as ValueError): less memory is free
    # than --gpu-memory-utilization asks for, because something else holds the device's memory
    T("E_FREE_MEM", X, None, "less than desired GPU memory utilization",
      r"(?P<detail>Free memory on device(?: (?P<device>[\w:]{1,40}))? \((?P<free>\d{1,6}(?:\.\d{1,4})?)/"
      r"(?P<total>\d{1,6}(?:\.\d{1,4})?) GiB\) on startup is less than desired GPU memory utilization "
      r"\((?P<util>\d(?:\.\d{1,4})?), (?P<want>\d{1,6}(?:\.\d{1,4})?) GiB\)[^\n]{0,300})", "0.10+",
      "v1/worker/gpu_worker.py (init_device)",
      "ValueError: Free memory on device (18.17/22.08 GiB) on startup is less than desired GPU memory utilization "
      "(0.9, 19.88 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
      floats=("free", "total", "util", "want")),
    # exceptions of the environment whose line names no ``…Error``: Triton's launch check (compiler/compiler.py: the
    # kernel's shared memory above the GPU's), the linker under Triton's launcher build (backends/nvidia/driver.py),
    # huggingface_hub's offline mode (utils/_http.py); engine_environment.py classes them
    T("E_OUT_OF_RESOURCES", X, None, "OutOfResources: ",
      r"(?P<exc>OutOfResources): (?P<detail>out of resource: [^\n]{1,300})", "triton", "triton/compiler/compiler.py",
      "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536. "
      "Reducing block sizes or `num_stages` may help."),
    T("E_LINK_LIBCUDA", X, None, "cannot find -l",
      r"(?P<detail>cannot find -l(?::libcuda\.so[.\d]{0,12}|cuda)\b[^\n]{0,200})", "GNU ld (Triton's launcher build)",
      "triton/backends/nvidia/driver.py", "/usr/bin/ld: cannot find -lcuda: No such file or directory"),
    T("E_PTXAS", X, None, "ptxas fatal",
      r"(?P<detail>ptxas fatal\s{0,8}: [^\n]{1,300})", "CUDA's ptxas (Triton's compile)",
      "triton/backends/nvidia/compiler.py", "ptxas fatal: Value 'sm_121a' is not defined for option 'gpu-name'"),
    T("E_HF_OFFLINE", X, None, "OfflineModeIsEnabled: ",
      r"(?P<exc>OfflineModeIsEnabled): (?P<detail>[^\n]{1,400})", "huggingface_hub", "huggingface_hub/utils/_http.py",
      "huggingface_hub.utils._http.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/bigcode/starcoder: "
      "offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable."),
    T("E_GENERIC", X, None, "Error", r"(?P<exc>[A-Za-z_](?<![\w.].)[\w.]{0,200}?(?:Error|Exception)): (?P<detail>.*)$",
      "any", "python", "RuntimeError: CPU Generator does not use offset"),
    # pydantic's reason under ``N validation error(s) for XConfig`` (a vLLM config dataclass rejected a value in its
    # ``__post_init__`` or a validator; ``[type=value_error, input_value=ArgsKwargs(…`` after it on one line), pasted
    # alone or under a header pasted alone. After E_GENERIC, so a traceback holding its header stays that exception's.
    # The reason runs to the line's end (greedy: no backtracking); SRV004 splits off pydantic's ``[type=…``
    T("E_PYDANTIC_VALUE", X, None, "error, ", r"(?:Value|Assertion) error, (?P<detail>[^\n]{1,600})",
      "0.10+", "vllm/config (pydantic dataclasses)",
      "  Value error, Eagle3 is only supported for Llama models. Got self.target_model_config.hf_text_config.model_type="
      "'qwen3' [type=value_error, input_value=ArgsKwargs((), {'method':...able_log_stats': False}), input_type=ArgsKwargs]"),
    # last resort for a traceback record with frames but no exception line (the excerpt ends mid-trace)
    T("E_TB_FRAMES", X, None, 'File "', r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[\w<>.]+)', "any",
      "python", '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 728, in run_busy_loop',
      ints=("line",)),
    T("E_BANNER", X, None, "LMCache v", r"LMCache v(?P<version>\d+\.\d+\.\d+\S*)", "0.5.x", "lmcache/banner.py",
      "| |   |  \\/  |  / ___|__ _  ___| |__   ___      LMCache v0.5.6 (g3e11e108)"),
]
