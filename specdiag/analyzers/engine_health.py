"""SRV001 — the engine died: its first root error, not the cascade (tables in ``engine_death_tables``)."""

from __future__ import annotations

import re
from collections import deque
from itertools import compress, islice, repeat
from operator import eq

from specdiag.analyzers.base import Rule, register, shape_claim
from specdiag.analyzers.engine_death_tables import (
    ASYNC_CUDA_WORDS,
    CASCADE,
    CAUSE_FIX,
    DEVICE_MEMORY_WORDS,
    EXCEPTION_NAMES,
    EXIT_SEEN_FROM_OUTSIDE,
    FATAL_CLASSES,
    FATAL_CODE,
    FATAL_FRAMES,
    GRAMMAR_COMPILE_WORDS,
    HARD,
    HEADER_TEXT,
    HEADERS,
    KV_CHECK_FRAMES,
    NO_KERNEL_WORDS,
    ROOT_CLASSES,
    ROOTS,
    SIGNATURE_CLASSES,
    SOFT,
    START_CLASSES,
    START_CODE,
    START_CONFIRM,
    START_FAILURES,
    START_FRAMES,
    START_WORDS,
    TB_ROWS,
    TRACEBACK_HEADERS,
    WORKER_DEATHS,
)
from specdiag.analyzers.engine_environment import environment_class, environment_note, package_note
from specdiag.analyzers.sd_common import dedupe_evidence, method_of
from specdiag.context import Context
from specdiag.events import (
    CATALOG_EVENT,
    UNKNOWN_EVENT,
    Event,
    entry_of,
    frame_path,
    frame_place,
    innermost_frame,
    native_stack,
    template,
)
from specdiag.events.torch import NCCL_REPORT
from specdiag.findings import Cause, CauseBoard, Evidence, Finding, evidence_of, with_primary
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import fmt_log_time, fmt_time, rec_time

_FRAME_FUNC = lazy(rb', line \d+, in ([\w<>.]+)')
#: numpy's error when a list of per-layer pointers is longer than the array LMCache sized for them
_MORE_CACHES = lazy(r"could not broadcast input array from shape \((\d{1,6}),\) into shape \((\d{1,6}),\)")
_SCHED_REQ = lazy(r"req_ids=\[([^\]]*)\]|req_id='?([\w.:-]+)")
_SCHED_TOKENS = lazy(r"total_num_scheduled_tokens=(\d+)")
_SCHED_SPEC = lazy(r"scheduled_spec_decode_tokens=\{(.)")
_EXIT_CODE = lazy(r"exit code: (-?\d+)")
#: a dtype's capability check: ``Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Quadro
#: RTX 6000 GPU has compute capability 7.5.``
_DTYPE_CAPABILITY = lazy(r"(\w{1,20}) is only supported on GPUs with compute capability of at least (\d{1,2}\.\d{1,2})"
                         r"\. Your ([^.\n]{1,80}?) GPU has compute capability (\d{1,2}\.\d{1,2})")
#: the CPU backend's KV cache check (v1/worker/cpu_worker.py): node, available / total GiB, requested GiB
_CPU_KV = lazy(r"Available memory on node (\d{1,4}) \(([\d.]{1,12})/([\d.]{1,12}) GiB\) on kv cache allocation is "
               r"less than requested memory for kv \(([\d.]{1,12})")
#: exit codes of a process ended by a signal sent from outside: SIGKILL, SIGTERM, SIGINT (negated, or 128+N)
_SIGNALLED = {"-9": "SIGKILL (kernel OOM killer or the orchestrator)", "137": "SIGKILL (kernel OOM killer or the orchestrator)",
              "-15": "SIGTERM (a stop someone asked for: the orchestrator, a user, a shutdown)",
              "143": "SIGTERM (a stop someone asked for: the orchestrator, a user, a shutdown)",
              "-2": "SIGINT (Ctrl-C)", "130": "SIGINT (Ctrl-C)"}
#: the root error V0's MQEngineDeadError quotes: ``… to find the original error: RuntimeError('…')``
#: the most message parts the finding claims from LOG001 (death headers, logged exceptions, exception rests)
MAX_CLAIMS = 32
#: the speculative-decoding drafter in an error: a frame in ``v1/spec_decode/``, a proposer class (``EagleProposer``,
#: ``MedusaProposer``, ``NgramProposer``), or the drafter's state (``draft_attn_metadatas``, ``draft_token_ids``)
#: the drafter's code or state: v1/spec_decode/, a proposer, a draft_* name, or an EAGLE drafter's model class
#: (models/llama_eagle3.py ``Eagle3LlamaForCausalLM``, a checkpoint's ``EagleQwen2ForCausalLM`` the registry lacks)
_DRAFTER = lazy(r"/v1/spec_decode/|\b[A-Z]\w{0,40}Proposer\b|\bdraft_\w{1,40}|\bEagle\w{0,40}(?:Model|ForCausalLM)\b")
_ORIGINAL = lazy(r"original error: (?P<exc>[A-Za-z_][\w.]{0,100})\((?P<q>['\"])(?P<detail>[^\n]{1,600}?)(?P=q)\)")
#: the last line of a traceback that is only an exception name (``AssertionError`` from a bare ``assert``)
_BARE_EXC = lazy(r"^\s*((?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception)|StopIteration|StopAsyncIteration))\s*\Z",
                 re.M)

#: an exception's line inside a pasted traceback: its name, and its message when it has one
_INNER_EXC = lazy(r"^((?:[A-Za-z_]\w{0,60}\.){0,8}[A-Za-z_]\w{0,60}(?:Error|Exception))(?:: (.{0,600}))?$", re.M)


def _inner_exception(text: str) -> tuple[str, str] | None:
    """The last exception line above a traceback's final one that is not a cascade's (``CASCADE``: ``EngineDeadError``,
    …):
    (name, message), the message empty for a bare ``assert``'s; None without one."""
    found = None
    for m in islice(_INNER_EXC.finditer(text, 0, 20000), 64):
        if m.end() >= len(text.rstrip()):
            break  # the final line: the cascade's own
        name = m.group(1)
        if not any(c in name for c in CASCADE):
            found = (name.rsplit(".", 1)[-1], (m.group(2) or "").strip())
    return found


def _caret_row_before(first: tuple, key: tuple) -> bool:
    """Whether ``first`` is a traceback's caret row (``^^^^``: an excerpt that starts on one) and ``key`` a later row
    of the same process that shows code or a frame: the better line to cite."""
    ev, nxt = first[2], key[2]
    caret = ev.id == "V_TB_CODE" and not ev.rec.msg.strip(" ^~")
    return caret and bool(nxt.rec.msg.strip(" ^~")) and ev.rec.origin.key == nxt.rec.origin.key


def _start_frame(ev: Event, funcs: list[str]) -> str | None:
    """The function vLLM runs only while it starts (building the engine core or its executor, a worker's
    device, model, memory profile, KV caches or CUDA graphs) that a traceback, or one of its frames
    (``funcs``), passes through; None when it passes through none."""
    if ev.id != "V_TB_FRAME":
        raw = ev.rec.raw_text
        code = next((c for c in START_CODE if c in raw), None)
        if code is not None:
            return START_CODE[code]
    return next((f for f in funcs if f in START_FRAMES), None)


#: the packages whose objects vLLM builds only while its engine starts (the model and its layers, attention layers and
#: backends, the V1 worker and model runner, the Ascend plugin's): three of their constructors in a row are a start
_BUILT_AT_START = ("vllm/model_executor/", "vllm/attention/", "vllm/v1/attention/", "vllm/v1/worker/",
                   "vllm_ascend/worker/", "vllm_ascend/attention/")


#: what a death reported from outside the engine's process says, and why it is a death: Ray Serve's report of a
#: replica it stopped, the shell's 'Killed', else a worker process's death (``WORKER_DEATHS``)
_REPORTED_DEATHS = {
    "R_SERVE_REPLICA_FAILED": ("Ray Serve's report that it stopped the replica ({where})",
                               "its controller stops a replica whose start raised (deployment_state.py, check_ready); the "
                               "replica is the whole vLLM server, and its own exception ends the controller's traceback "
                               "that follows. Collect that traceback's last lines and the replica's own log."),
    "E_SHELL_KILLED": ("The shell's 'Killed' ({where})",
                       "the shell prints it when the process it ran, the server or script itself, got SIGKILL: no Python "
                       "exception and no header are printed then. Most often the kernel's OOM killer took it when host "
                       "memory ran out (CPU swap space, LMCache's CPU buffer, loading weights into RAM); dmesg says which "
                       "(dmesg -T | grep -i 'killed process')."),
}
_WORKER_GONE = ("neither vLLM's multiprocessing nor its Ray executor replaces a dead worker, so the engine fails at its "
                "next step that needs it (confidence medium: a process that is no vLLM worker, or a server already "
                "stopping, prints the same). Collect the engine core's lines after it to read the header.")


def _frame_list(ev: Event) -> list[tuple[str, str]]:
    """The (function, file) of a traceback's frames, or of a frame row's one frame (the first 64)."""
    if ev.id == "V_TB_FRAME":
        return [(ev.f.get("func") or "", ev.f.get("file") or "")]
    if b", line " not in ev.rec.raw_text:
        return []
    return [(m.group("func").decode("utf-8", "replace"), m.group("file").decode("utf-8", "replace"))
            for m in islice(template("E_TB_FRAMES").compiled.finditer(ev.rec.raw_text), 64)]


def _frame_funcs(ev: Event) -> list[str]:
    """The functions of a traceback's frames (of a frame line: its one function)."""
    if ev.id == "V_TB_FRAME":
        return [ev.f.get("func") or ""]
    raw = ev.rec.raw_text
    return [m.decode() for m in _FRAME_FUNC.findall(raw)] if b", line " in raw else []


#: the packages of vLLM's own call chain, as ``frame_path`` names a frame's file (vLLM, its platform plugins, torch,
#: Ray); a frame of another package, or of a script, under a worker's busy loop is a caller's code
_OWN_PACKAGES = ("vllm/", "vllm_ascend/", "lmcache/", "torch/", "ray/")
#: a CUDA error that leaves the process's context unusable: every later CUDA call fails, so its process is done
_STICKY_CUDA = "an illegal memory access was encountered"
#: the engine core's wrapper of a worker's error (v1/engine/core.py), as E_GENERIC reads it when the line ends inside
#: the quoted error (a multi-line message: an NPU runtime's error text)
_WORKER_FAILED = "Worker failed with error '"


def _callers_code(file: str) -> bool:
    """Whether a frame's file is neither vLLM's call chain (``_OWN_PACKAGES``) nor the interpreter's: a caller's."""
    path = frame_path(file)
    return bool(path) and not path.startswith(_OWN_PACKAGES) and "/python3" not in path and path[:1] != "<"


def _says(tid: str, text: str) -> bool:
    """Whether ``text`` holds the message a text template reads (``E_NPU_FAULT``, ``E_FREE_MEM``): its wording lives
    in the template, wherever the line came from (a raw line, or a row under vLLM's header)."""
    t = template(tid)
    return t.needle in text and t.match(text) is not None


def _clipped(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word before ``limit`` characters with an ellipsis: a verdict line is
    shortened at its last clause boundary, which in an exception line is the colon after its name."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", limit // 2, limit - 1)
    return text[: cut if cut > 0 else limit - 1] + "…"


#: a file path of three or more parts in a root's text (flash-attention's ``CUDA error (/__w/…/x.h:188): …``)
_LONG_PATH = lazy(r"/(?:[^\s/():'\"]{1,200}/){2,40}([^\s/():'\"]{1,200})")


def _short_paths(text: str) -> str:
    """A headline's root with each long path cut to its file name: a verdict line has 85 characters, and a path
    left whole pushes the error's words out of it."""
    return _LONG_PATH.sub(r"…/\1", text[:400])


def _root_line(ev: Event) -> str:
    """A root error as its exception line reads (``torch.OutOfMemoryError: CUDA out of memory. …``): the
    exception and its detail where the template parsed them, else the line's message."""
    exc, detail = ev.f.get("exc"), ev.f.get("detail")
    if exc and detail:
        return f"{exc}: {detail}"
    return detail or ev.rec.msg


def _header_printed_at(ev: Event) -> str | None:
    """The death header (``TRACEBACK_HEADERS``) the catalog says vLLM prints at the place of a traceback line
    printed under the vLLM header (``logger.exception`` repeats the header on every line): that call's
    traceback, whichever release printed it; None elsewhere."""
    entry = entry_of(ev)
    fmt = entry.fmt if entry is not None else None
    return fmt if fmt in _header_texts() else None


def _header_by_place(ev: Event) -> str | None:
    """The death header some release prints at a traceback row's place when its text matched no other message
    there: a frame or code row is printed only by a call that logs a traceback, so where releases print other
    messages at the same place too (core.py:1233 is the fatal header in 0.24.0-0.25.1 and 'Unexpected error
    pre-processing request' in 0.15), the header is it. Which header (failed to start, or fatal error) is then
    only as sure as the release: a build no catalogued release is may print the other one there."""
    rec = ev.rec
    if ev.id not in TB_ROWS or rec.file is None or rec.src_line is None:
        return None
    from specdiag.catalog import catalog

    headers = [e.fmt for e in catalog().at(rec.file.rsplit("/", 1)[-1], rec.src_line, project="vllm")
               if e.fmt in _header_texts() and e.level == rec.level]
    return headers[0] if len(set(headers)) == 1 else None


def _header_texts() -> frozenset[str]:
    """The catalogued formats of the header lines whose logging call prints a traceback (the entries their
    templates' samples are messages of)."""
    global _HEADER_TEXTS
    if _HEADER_TEXTS is None:
        from specdiag.catalog import catalog

        entries = (catalog().match(template(t).sample, project="vllm") for t in TRACEBACK_HEADERS)
        _HEADER_TEXTS = frozenset(e.fmt for e in entries if e is not None and e.fmt)
    return _HEADER_TEXTS


_HEADER_TEXTS: frozenset[str] | None = None


def failing_step(dump: str) -> dict:
    """What the scheduler-output dump says about the step that crashed: request ids, tokens scheduled."""
    out: dict = {}
    ids = []
    for m in _SCHED_REQ.finditer(dump[:20000]):
        found = [x.strip(" '\"") for x in m.group(1).split(",")] if m.group(1) is not None else [m.group(2)]
        ids += [x for x in found if x and x not in ids][: 8 - len(ids)]
    if ids:
        out["request_ids"] = ids
    if m := _SCHED_TOKENS.search(dump):
        out["scheduled_tokens"] = int(m.group(1))
    if (spec := _SCHED_SPEC.search(dump)) is not None:
        out["speculative_tokens_scheduled"] = spec.group(1) != "}"  # a step that verified drafts
    return out


#: the scheduler-side assertions of LMCache's vLLM adapter (0.5.6 vllm_v1_adapter.py:1596-1611, :1793-1798,
#: :1746-1750), lower-cased: raised inside vLLM's scheduler, they kill the engine core
_ADAPTER_ASSERTS = ("mismatch in tokens to load", "(full_hit_adj=", "is not in _unfinished_requests, but it is scheduled")


def _classify(text: str, tid: str) -> str:
    if (cls := WORKER_DEATHS.get(tid, ("", None))[1]) is not None:
        return cls
    t = text.lower()
    if "out of memory" in t or "outofmemoryerror" in t or any(w in t for w in DEVICE_MEMORY_WORDS):
        return "cuda-oom"
    if (tid == "E_NO_CACHE_MEM" or "no available memory for the cache blocks" in t or "kv cache is needed" in t
            or "maximum number of tokens that can be stored in kv cache" in t
            or "to serve at least one request with the model's max seq len" in t
            or "on kv cache allocation is less than requested memory for kv" in t):  # the CPU backend, host memory
        return "kv-cache-memory"
    if tid == "E_INDEX_LAYERS" or ("out of bounds for dimension" in t and "index" in t):
        return "lmcache-draft-layers"
    if (m := _MORE_CACHES.search(text)) is not None and int(m.group(1)) > int(m.group(2)):
        # more KV caches than the pointers LMCache sized (gpu_connector, one per layer): a whole multiple is
        # several caches per layer (158 = 2 x 79: MLA's and a sparse indexer's), a few more a drafter's layers
        caches, layers = int(m.group(1)), int(m.group(2))
        return "lmcache-kv-layout" if layers and caches % layers == 0 else "lmcache-draft-layers"
    if tid == "V_ITER_TIMEOUT" or ("TimeoutError" in text and "run_engine_loop" in text):
        return "engine-iteration-timeout"  # V0's background loop: a step past ENGINE_ITERATION_TIMEOUT_S
    if "no heartbeat received from mqllmengine" in t or "engine loop has died" in t:
        return "engine-heartbeat-lost"  # V0's MQLLMEngine client: a step past VLLM_RPC_TIMEOUT (engine/multiprocessing)
    if (env := environment_class(t)) is not None:
        return env
    if any(w in t for w in NO_KERNEL_WORDS):
        return "gpu-arch-unsupported"
    if _says("E_NPU_FAULT", text):
        return "native-crash"
    if _says("E_NCCL_ERROR", text):
        return "nccl-error"  # vLLM's NCCL wrapper's error, logged under a worker's header (V_EXC) rather than raw
    if "hybrid kv cache manager is disabled but failed to convert" in t:
        return "hybrid-kv-disabled"
    if "cannot provide a placement group requiring" in t:
        return "ray-placement"
    if tid == "E_FREE_MEM" or _says("E_FREE_MEM", text):
        return "gpu-memory-in-use"
    if tid in ("E_SPEC_UNSUPPORTED", "E_EAGLE_TP") or "spec decode is not supported" in t or (
            "speculative decoding is not supported" in t):
        return "spec-unsupported"
    if _DRAFTER.search(text) is not None:
        return "drafter-error"
    if tid == "E_MISMATCH_ASSERT" or any(a in t for a in _ADAPTER_ASSERTS):
        return "lmcache-adapter-assertion"
    if tid == "E_IMPORT" or "importerror" in t or "modulenotfounderror" in t or t.startswith("no module named ") \
            or "could not run '_c::" in t:  # torch: an operator vLLM's compiled extension was built without
        return "import-error"
    if any(w in t for w in GRAMMAR_COMPILE_WORDS):
        return "so-grammar-compile"
    if tid == "V_PROC_DIED":
        return "process-killed"
    if ("rpc call to" in t and "timed out" in t) or "raychanneltimeouterror" in t:
        return "worker-hang"  # the engine core gave up waiting for a worker's reply (its RPC, or Ray's compiled graph)
    if tid == "V_WORKER_PID_DIED" and (code := _EXIT_CODE.search(text)) is not None:
        # a signal's number, negated: SIGKILL, SIGTERM, SIGINT came from outside; another signal (SIGABRT, SIGSEGV)
        # is a crash in native code; a positive code, an exit the worker chose
        return "process-killed" if code.group(1) in _SIGNALLED else "native-crash" if code.group(1).startswith("-") \
            else "worker-exception"
    if "ur_result_error_device_lost" in t:
        return "native-crash"  # Level Zero lost the GPU (a hang or reset): no Python exception to fix
    return "native-crash" if tid in ("R_UNHANDLED", "E_CUDACHECK") else "worker-exception"


def _collective_read(f: dict) -> str:
    """What the timed-out collective's numbers say: which rank waited how long for which collective, and how
    far into its process group's life (SeqNum counts the group's collectives from its creation)."""
    seq, ran, limit = f.get("seq"), f.get("ran_ms"), f.get("timeout_ms")
    out = f"rank {f.get('rank')} waited {ran / 1000:,.0f} s (timeout {limit / 1000:,.0f} s) for {f.get('op')} #{seq}"
    if seq is not None and seq <= 10:
        out += ": among its group's first collectives, so at or right after start-up (the communication set-up)"
    elif seq is not None and seq >= 10_000:
        out += ": the group had run that many collectives, so it hung while serving"
    return out


def _drafter_layers_possible(ctx: Context, text: str) -> bool:
    """Whether a drafter's layers can be what LMCache did not count: the index error needs a draft model the
    build counts none for; a pointer list one layer longer than LMCache sized (EAGLE on builds that counted no
    draft layer) needs only that speculation is not known to be off."""
    if method_of(ctx) == "draft_model" or ctx.num_draft_layers == 0:
        return True
    spec = ctx.speculative or {}
    return _MORE_CACHES.search(text) is not None and spec.get("enabled") is not False


def _free_memory_read(text: str) -> str:
    """The start-up memory check's numbers (E_FREE_MEM) and the utilization that would have fit, or ''."""
    f = template("E_FREE_MEM").match(text)
    if not f or not f.get("total"):
        return ""
    fits = int(f["free"] / f["total"] * 100) / 100  # rounded down: vLLM compares free memory with util x total
    return (f"{f['free']} of {f['total']} GiB were free at start and --gpu-memory-utilization {f['util']} asks "
            f"{f['want']} GiB: {fits:.2f} or lower would fit what was free")


def _root_note(cls: str, rev: Event, text: str) -> str | None:
    """What the root's own line adds to its class: the collective that timed out, the memory check's numbers, the
    switch that confirms a native exit (custom all-reduce, flash-attention, ROCm), a device-side assert's input."""
    f = rev.f
    if rev.id == "T_NCCL_TIMEOUT":
        hccl = ("; the process group is HCCL (Ascend, torch_npu's mirror of NCCL's watchdog): read NCCL as HCCL, and "
                "HCCL_EXEC_TIMEOUT / HCCL_CONNECT_TIMEOUT for its timeouts." if "WorkHCCL" in text else "")
        return _collective_read(f) + hccl
    if cls == "gpu-memory-in-use":
        return _free_memory_read(text) or None
    if rev.id in ("E_HIP_FAULT", "E_HSA_ABORT"):
        return ("a GPU kernel faulted on an AMD GPU (ROCm): AMD_SERIALIZE_KERNEL=3 names the kernel; a fault while CUDA "
                "graphs are captured is tested by starting with --enforce-eager")
    if rev.id == "E_DEVICE_ASSERT":
        return ("a kernel asserted on its input ('" + (f.get("detail") or "")[:80] + "'): an index past its table (a "
                "position past the rope table's length, a token id past the vocabulary) is the common case; "
                "CUDA_LAUNCH_BLOCKING=1 shows the call that launched it")
    if rev.id == "E_FLASH_CHECK_CUDA":
        return (f"flash-attention's kernel ({(f.get('file') or '').rsplit('/', 1)[-1]}) failed to launch and exited the "
                "process: a build of it without this GPU's architecture, or a shape it does not support; another "
                "attention backend confirms it (--attention-backend, VLLM_ATTENTION_BACKEND in older releases, "
                "--mm-encoder-attn-backend for a vision encoder)")
    if rev.id == "E_CUDACHECK" and "custom_all_reduce" in (f.get("file") or ""):
        return ("the failing CUDA call is in vLLM's custom all-reduce kernel (csrc/custom_all_reduce.cuh): start with "
                "--disable-custom-all-reduce, which sends all-reduce through NCCL, to confirm")
    if cls == "kv-cache-memory" and (m := _CPU_KV.search(text)) is not None:
        return (f"vLLM's CPU backend sizes the KV cache in the host memory of NUMA node {m.group(1)}: "
                f"{m.group(4)} GiB asked, {m.group(2)} GiB available of {m.group(3)}; lower VLLM_CPU_KVCACHE_SPACE or "
                "--kv-cache-memory-bytes (or --gpu-memory-utilization, which sizes it from host memory when neither is "
                "set), or free host memory: a container's memory limit counts, not the host's")
    if cls == "kv-cache-memory" and (fits := _kv_fit_read(text, f)):
        return fits
    if cls == "gpu-arch-unsupported" and (need := _capability_read(text)):
        return need
    if (env := environment_note(cls, text)) is not None:
        return env
    if cls == "import-error" and (said := package_note(text)) is not None:
        return said
    if _says("E_NPU_FAULT", text):
        return ("an NPU kernel faulted (Ascend's aicore/aivec exception, the counterpart of CUDA's illegal memory access; "
                "'DDR address … out of range' is an out-of-bounds access): ASCEND_LAUNCH_BLOCKING=1 and the device's "
                "plog name the operator")
    if "UR_RESULT_ERROR_" in text:
        return ("the device is an Intel GPU (XPU, Level Zero): " + (
            "UR_RESULT_ERROR_DEVICE_LOST is the driver losing the GPU (a hang or reset), not an error in Python: the "
            "kernel log (dmesg: xe/i915 resets) and the driver and compute-runtime versions tell why"
            if "DEVICE_LOST" in text else "out of device memory or resources there; read the fix's CUDA flags as "
                                          "the same options of vLLM's XPU backend"))
    if cls == "cuda-oom" and (shared := _processes_on_gpu(text)):
        return shared
    if cls == "cuda-oom" and "NPU out of memory" in text:
        return ("the device is an Ascend NPU (vllm-ascend, torch_npu): out of device memory there, not CUDA's; read the "
                "fix's GPUs as NPUs")
    return None


#: torch's out-of-memory message lists every process that holds memory on the device (``Process 4057874 has 20.04 GiB
#: memory in use.``), this one among them
_PROCESS_MEMORY = lazy(r"Process (\d{1,10}) has ([\d.]{1,10}) (GiB|MiB) memory in use")


def _processes_on_gpu(text: str) -> str:
    """Two or more processes holding GiBs of the device that ran out: it is shared (a second server or replica, a
    process left from an earlier run), and no setting of this one frees the other's memory."""
    held = [(pid, float(n) / (1024 if unit == "MiB" else 1)) for pid, n, unit in islice(_PROCESS_MEMORY.findall(text), 16)]
    big = sorted(((g, pid) for pid, g in held if g >= 1.0), reverse=True)
    if len(big) < 2:
        return ""
    listed = ", ".join(f"pid {pid} {g:.2f} GiB" for g, pid in big[:4])
    return (f"{len(big)} processes each hold more than a GiB of this GPU ({listed}): the GPU is shared, with another "
            "server or replica or a process left from an earlier run; one server per GPU (or stopping the other) frees "
            "it, where a lower --gpu-memory-utilization only shrinks this one")


#: a kernel's or quantization method's minimum compute capability against the GPU's (``requires capability 80, current
#: compute capability is 75``; ``Minimum capability: 90. Current capability: 86``)
_CAPABILITY = lazy(r"(?:requires capability|Minimum capability:) (\d{2,3})[.,] ?[Cc]urrent (?:compute {1,2})?"
                   r"capability(?: is|:) (\d{2,3})")


def _capability_read(text: str) -> str:
    """What the capability numbers say: the GPU is older than every kernel the message names needs."""
    if (m := _DTYPE_CAPABILITY.search(text)) is not None:
        dtype, need, gpu, have = m.groups()
        return (f"{dtype} needs compute capability {need} and the {gpu} has {have}: serve in another dtype "
                "(--dtype half) or on a newer GPU")
    pairs = [(int(a), int(b)) for a, b in islice(_CAPABILITY.findall(text), 16)]
    if not pairs or any(need <= have for need, have in pairs):
        return ""
    have = pairs[0][1]
    return (f"the GPU's compute capability is {have / 10:.1f} and the kernels named need "
            f"{min(n for n, _ in pairs) / 10:.1f} or more: no build supports this method on this GPU; a quantization "
            "or kernel that runs on it (or a newer GPU) does")


#: V1's start-up check (v1/core/kv_cache_utils.py): the context asked, the cache needed and had, the context that fits
_KV_FIT = lazy(r"max seq len \((\d{1,9})\), \(([\d.]{1,12}) GiB KV cache is needed, which is larger than the "
               r"available KV cache memory \(([\d.]{1,12}) GiB\)\. Based on the available memory, the estimated "
               r"maximum model length is (\d{1,9})")


def _kv_fit_read(text: str, f: dict) -> str:
    """The numbers of a KV cache too small for one request at max_model_len, and the --max-model-len that fits: V1's
    message gives them (and its estimate), V0's the tokens the cache holds (E_MAX_LEN_KV's fields); else ''."""
    if (m := _KV_FIT.search(text)) is not None:
        asked, need, have, fits = m.groups()
        return (f"one request of max_model_len {asked} needs {need} GiB of KV cache and {have} GiB was left for it: "
                f"--max-model-len {fits} (vLLM's own estimate) or lower starts, or give the cache more memory")
    v0 = f if f.get("max_len") and f.get("kv_tokens") else template("E_MAX_LEN_KV").match(text)
    if v0 and v0.get("max_len") and v0.get("kv_tokens"):
        return (f"max_model_len {v0['max_len']} is more than the {v0['kv_tokens']} tokens the KV cache holds: "
                f"--max-model-len {v0['kv_tokens']} or lower starts, or give the cache more memory")
    return ""


def _weigh_drafter(b: CauseBoard, cls: str, ctx: Context) -> None:
    """LMCache's pointer count against the KV caches: whether the input shows the speculative config that would
    make a drafter (or a draft model as deep as the target) the reason."""
    method = method_of(ctx)
    if cls == "lmcache-kv-layout" and method is None:
        b.oppose(cls, 1, "the input does not show speculative_config: a draft model with as many layers as the "
                         "target would double the caches too; collect the 'non-default args' line")
    if cls == "lmcache-draft-layers" and method is None:
        b.oppose(cls, 1.5, "the input does not show speculative_config: a drafter is inferred from the KV caches "
                           "outnumbering the layers LMCache sized for; collect the 'non-default args' line")
    elif cls == "lmcache-draft-layers":
        b.support(cls, 2, f"method {method}, LMCache num_draft_layers {ctx.num_draft_layers}")


def _fault_function(rest: str) -> str:
    """The function the signal handler names at the faulting address (``  (unknown)  addProxyOpIfNeeded()``),
    or "" when it could not (``(unknown)``)."""
    words = rest.split()
    name = words[-1] if words else ""
    return "" if name.startswith("(unknown") or name.isdigit() else name[:120]


def _cuda_fault_cause(ev: Event) -> Cause:
    """The root class when only torch's CUDA error text is left of the exception: the CUDA error it names."""
    code = ev.f.get("code") or "a CUDA error"
    fix, _confirm = CAUSE_FIX["worker-exception"]
    return Cause("worker-exception", 0.5,
                 for_=[f"the lines name {code} ({ev.rec.path}:{ev.rec.line}): a CUDA kernel failed in that process; "
                       "CUDA reports it asynchronously, at a later call than the kernel that faulted"],
                 against=["the exception line itself is not in the excerpt"],
                 fix=f"{fix} Rerun the failing load with CUDA_LAUNCH_BLOCKING=1 to find the kernel that faulted.",
                 confirm_with="collect the exception line above 'Search for `cudaError…'' and rerun with "
                              "CUDA_LAUNCH_BLOCKING=1")


#: what Python prints before a traceback that did not end its process: a thread's exception (``threading.excepthook``),
#: one raised in a finaliser or callback it could only report
_NOT_THE_PROCESS = (b"Exception in thread", b"Exception ignored in")
#: frames that name a cause when a traceback's exception line is cut: vLLM's KV-cache size check (``KV_CHECK_FRAMES``,
#: which raises only when the cache cannot hold one request of max_model_len); the executor's wait for its workers' replies
#: (``get_response``) and below it the message queue's read (``dequeue`` / ``acquire_read``), whose timeout is a
#: worker that did not answer; the structured-output backend compiling a request's grammar (``compile_grammar``);
#: Python importing a module (``_IMPORT_FRAMES``); V0's run_engine_loop waiting in asyncio.wait, which its iteration
#: timeout cancels (``_LOOP_WAIT``); the API server's output processor in V1's detokenizer (``_DETOKENIZING``, by file)
_GET_RESPONSE, _MQ_READ, _GRAMMAR, _IMPORTING, _KV_CHECK, _LOOP_WAIT, _DETOKENIZING = 1, 2, 4, 8, 16, 32, 64
#: Python's import machinery in a traceback: the error was raised while a module was being imported
_IMPORT_FRAMES = ("_find_and_load", "_call_with_frames_removed", "exec_module")


def _frame_marks(funcs: list[str], marks: int) -> int:
    """The bits of ``_GET_RESPONSE`` / ``_MQ_READ`` / ``_GRAMMAR`` / ``_IMPORTING`` / ``_KV_CHECK`` / ``_LOOP_WAIT`` that a
    traceback's (or a frame's) functions set."""
    out = _GET_RESPONSE if "get_response" in funcs else 0
    if (marks | out) & _GET_RESPONSE and ("dequeue" in funcs or "acquire_read" in funcs):
        out |= _MQ_READ
    if "compile_grammar" in funcs:
        out |= _GRAMMAR
    if any(f in _IMPORT_FRAMES for f in funcs):
        out |= _IMPORTING
    if any(f in KV_CHECK_FRAMES for f in funcs):
        out |= _KV_CHECK
    if "run_engine_loop" in funcs and "_wait" in funcs:
        out |= _LOOP_WAIT
    return out


def _frame_cause(marks: int) -> Cause | None:
    """The cause the frames name, its exception line not in the excerpt."""
    if marks & _KV_CHECK:
        cid, why = "kv-cache-memory", (f"the traceback passes through {KV_CHECK_FRAMES[0]}, which raises only when the KV "
                                       "cache cannot hold one request of max_model_len")
    elif marks & _GET_RESPONSE and marks & _MQ_READ:
        cid, why = "worker-hang", ("the traceback passes through the executor's get_response into the message queue's "
                                   "dequeue: the engine core waiting for its workers' reply, which raises when a worker "
                                   "does not answer in time")
    elif marks & _GRAMMAR:
        cid, why = "so-grammar-compile", ("the traceback passes through the structured-output backend's compile_grammar: "
                                          "a request's grammar that did not compile, raised in the engine core")
    elif marks & _DETOKENIZING:
        cid, why = "detokenizer-error", ("the traceback passes through the API server's output processor into the "
                                         "detokenizer (v1/engine/detokenizer.py): the API server failed turning the "
                                         "engine's token ids into text, not the engine core")
    elif marks & _LOOP_WAIT:
        cid, why = "engine-iteration-timeout", ("the traceback passes through V0's run_engine_loop into asyncio.wait: "
                                                "the loop's iteration timeout (asyncio_timeout) cancels that wait when a "
                                                "step runs past VLLM_ENGINE_ITERATION_TIMEOUT_S, and raises TimeoutError")
    elif marks & _IMPORTING:
        cid, why = "import-error", ("the traceback passes through Python's import machinery (_find_and_load, "
                                    "exec_module): the error was raised while a module was imported, most often a "
                                    "package built for another version of vLLM, LMCache or torch")
    else:
        return None
    fix, confirm = CAUSE_FIX[cid]
    return Cause(cid, 0.6, for_=[why], against=["its exception line is not in the excerpt"], fix=fix,
                 confirm_with=confirm)


#: rows of an exception's message printed below its line (``Reasons:`` and a line per reason) read with it
MAX_CONTINUED = 6


def _uncaught_in_core(ev: Event) -> bool:
    """An exception the engine core process printed raw, with no logger header: Python prints an exception that
    escaped a process's target as the process exits (V1's ``run_engine_core`` logs it, then re-raises it), and vLLM
    prefixes the process's output with its name. A paste that begins below the logged copy and CPython's
    ``Process EngineCore_DP0:`` banner holds only this raw copy. Only a traceback through vLLM's own code: a library's
    callback (awscrt's) or thread prints its traceback the same way and the process goes on."""
    rec = ev.rec
    return (rec.kind == "traceback" and rec.origin.role == "EngineCore" and rec.level in ("ERROR", "CRITICAL")
            and b"/vllm/" in rec.raw_text and not rec.raw_text.startswith(_NOT_THE_PROCESS))


def _died_without_exception(ev: Event) -> bool:
    """A worker's death (or one with an exit code) is a kill or native crash; an engine core's may be either.

    Workers report Python exceptions back to the engine core (``WorkerProc hit an exception``), so a worker
    that "died unexpectedly" ended without one. The API server's ``Engine core proc … died unexpectedly``
    also follows an engine core that logged its own traceback elsewhere, so alone it names no cause.
    """
    return WORKER_DEATHS.get(ev.id, ("", None))[1] is not None or ev.id == "V_WORKER_PID_DIED" or (
        ev.id == "V_PROC_DIED" and (ev.f.get("what") == "Worker proc" or "exit code" in ev.rec.msg))


@register
class EngineDeath(Rule):
    """The vLLM engine died; report its first root error, not the EngineDeadError cascade.

    Detects: engine-death lines (``EngineCore failed to start``, ``EngineCore encountered a fatal error``,
    ``WorkerProc hit an exception``, ``WorkerProc failed to start``, ``Worker/Engine core proc … died
    unexpectedly``, ``engine core exited unexpectedly``, ``AsyncLLM output_handler failed``, ``EngineDeadError``;
    before 0.8.5 ``EngineCore hit an exception: …``, and V0's ``Engine background task failed``) and picks, among the errors
    logged since the last healthy stats line, the *first* one that is not itself a consequence
    (``EngineDeadError``, ``CancelledError``, ``Engine core initialization failed`` …): CUDA OOM,
    ``No available memory for the cache blocks``, the worker's exception.

    A normal shutdown is not a failure: vLLM 0.32 prints ``AsyncLLM output_handler failed`` and an
    ``EngineDeadError`` after ``[shutdown] API server: shutdown triggered`` / ``signal=SIGTERM``; those are
    ignored when nothing failed before the shutdown began.

    Pasted excerpts often start below the death line. The crash dump (``Dumping input data for V1 LLM
    engine (vX) with config: …``, ``Dumping scheduler output for model execution: …``) is printed only on
    the engine core's except path before the exception is re-raised, and a traceback whose frames pass
    through a loop vLLM never survives (``run_engine_core``, ``run_busy_loop``, ``worker_busy_loop``,
    ``output_handler`` …) escaped that loop: both are a death even without their header. So is a traceback
    printed under vLLM's header at a place where the catalog says a death line's ``logger.exception`` prints
    (``core.py:1757`` in 0.34: ``EngineCore failed to start.``). The dump also
    gives the vLLM version and the requests of the failing step. When the excerpt holds no root error, the
    single cause is ``cause-not-in-excerpt`` with what to collect, not every class at an equal share.

    Why it matters: the cascade (one ``EngineDeadError`` per in-flight and later request) buries the one
    line that explains the outage.

    Causes weighed: ``cuda-oom``, ``kv-cache-memory``, ``lmcache-draft-layers`` (LMCache's layer count misses
    draft-model layers: ``IndexError … out of bounds for dimension 1``), ``lmcache-kv-layout`` (a whole multiple of
    LMCache's layer count in KV caches: several caches per layer, ``could not broadcast … (158,) into shape (79,)``),
    ``engine-iteration-timeout`` (V0's ``Engine iteration timed out``, or a ``TimeoutError`` through its
    ``run_engine_loop``), ``gpu-memory-in-use`` (the start-up check ``Free memory on device (F/T GiB) on startup is
    less than desired GPU memory utilization``), ``nccl-error`` (vLLM's NCCL wrapper raised ``NCCL error: …``), the
    environment's classes, each named by its message alone (``engine_environment.py``): ``cuda-driver-mismatch``
    (``Error 803`` / ``Error 804`` from ``cudaGetDeviceCount()``, PTX of an unsupported toolchain),
    ``jit-toolchain`` (``ld: cannot find -lcuda`` under Triton's launcher build, FlashInfer's ``Could not find
    nvcc``), ``model-files-unreadable`` (a truncated safetensors shard, no weights of the load format),
    ``model-hub-access`` (huggingface_hub's ``RepositoryNotFoundError``, ``GatedRepoError``,
    ``OfflineModeIsEnabled``), ``kernel-exceeds-gpu`` (Triton's ``out of resource: shared memory``),
    ``ep-dispatch-timeout`` (DeepEP's ``CPU recv timeout``: a peer never joined the all-to-all),
    ``deepgemm-unsupported`` (DeepGEMM's own assertion: ``Unknown recipe``),
    ``spec-unsupported``, ``drafter-error`` (raised in the speculative-decoding drafter, ``v1/spec_decode/``, or naming a proposer or its state: ``'EagleProposer'
    object has no attribute 'positions'``),
    ``lmcache-adapter-assertion`` (the adapter's scheduler-side assertions: ``Mismatch in tokens to load``, a
    preempted request's computed tokens, a request no longer tracked — LMCache 0.5.6 ``vllm_v1_adapter.py``
    :1596-1611, :1793-1798, :1746-1750), ``so-grammar-compile`` (a structured-output grammar raised through
    ``compile_grammar`` or xgrammar's JSON-schema converter, SRV005's cause), ``import-error``, ``process-killed`` (a
    worker died without an exception: kernel OOM killer, SIGKILL),
    ``native-crash`` (a C++ exception nothing caught, a fatal signal, vLLM's CUDACHECK exit, the ROCm runtime's GPU
    memory access fault or queue abort, an Ascend NPU's aicore/aivec exception, an Intel GPU lost by Level Zero),
    ``nccl-timeout`` (torch's NCCL watchdog: a collective timed out), ``worker-exception``; ``cause-not-in-excerpt``
    when no root error is in the lines given. V0's and V1 0.7's ``# GPU blocks: 0`` is ``kv-cache-memory`` (the start
    raises 'No available memory for the cache blocks' next); an exception line above a cascade's own inside one pasted
    traceback (a bare ``AssertionError``, then ``EngineDeadError``) is the root. ``cuda-oom`` includes other devices' words for device memory (Level
    Zero's ``UR_RESULT_ERROR_OUT_OF_RESOURCES``, Neuron's ``Allocation Failure``, XLA's ``RESOURCE_EXHAUSTED``);
    ``gpu-arch-unsupported`` a kernel's minimum compute capability above the GPU's (``requires capability 80,
    current compute capability is 75``). An exception the engine core process printed raw (no logger header: Python's
    report of what escaped the process's target) is its death. With the exception line cut, the frames name the
    class at 0.6: the KV-cache size check (``kv-cache-memory``), the executor's wait for its workers' reply
    (``get_response`` into ``dequeue``: ``worker-hang``), ``compile_grammar`` (``so-grammar-compile``), Python's import
    machinery (``import-error``).

    Death lines of two or more engine-core processes (data-parallel cores, or several servers in one paste) are
    said to be that many (``dead_engine_cores``), each with a line; the root error is the first one found.

    Under the Ray executor a worker is a Ray actor: when it dies in native code Ray, not vLLM, says so
    (``events/ray.py``: the terminate handler's ``Unhandled exception: … what(): …``, the failure-signal
    handler's ``*** SIGSEGV received at time=… ***``, the raylet's ``A worker died or was killed …``). Each is
    a death (vLLM never replaces a worker), inferred when vLLM's own header is not in the excerpt; the
    exception is the root, else the signal (``native-crash``), else the raylet's report (``process-killed``,
    capped: Ray lists the reasons it cannot tell apart). A SIGTERM is a stop that was asked for, and the
    engine core's ``ActorDiedError`` / ``RayChannelError`` are the cascade of the worker's death.

    Outside Ray, a segmentation fault in native code is reported by CPython's faulthandler (``Fatal Python error:
    Segmentation fault``) or by apache-tvm-ffi's handler, loaded with FlashInfer and xgrammar (``!!!!!!! Segfault
    encountered !!!!!!!`` and the native stack innermost first): the root, ``native-crash``, raised where that
    stack's first frames say (``native code: cudaMemcpyAsync <- swap_blocks``: a KV block copy).

    A TP worker waits in NCCL collectives. When one does not complete within the process group's timeout,
    torch's watchdog logs it (``[rank0]:[E ProcessGroupNCCL.cpp:…] [Rank 0] Watchdog caught collective operation
    timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, …) ran for 600059 milliseconds``; ``events/torch.py``) and, with
    async error handling on (torch's default), takes the process down (``To avoid data inconsistency, we are taking
    the entire process down``; V0's worker monitor then reports exit code -6). Each is a death; the timed-out
    collective is the root (``nccl-timeout``), read with its numbers: the rank, how long it waited, and its
    sequence number (among a group's first collectives: the communication set-up; after thousands: a hang while
    serving). V0's ``Worker … pid … died, exit code: N`` without a reason is classified by its code (-9: killed,
    another signal: a native crash).

    Fix: the top cause's fix; the engine must be restarted either way.

    References: vLLM ``logging_utils/dump_input.py`` (0.9.2–0.11.0 :69, 0.11.2+ :72), ``v1/engine/core.py``
    (0.32.0 :1510/:1512), ``v1/engine/async_llm.py:906``,
    ``v1/executor/multiproc_executor.py:315/:1063``, ``v1/engine/core_client.py:817``; Ray 2.x
    ``src/ray/util/logging.cc``, ``src/ray/raylet/node_manager.cc``; torch 2.x
    ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` (``WorkNCCL::checkTimeout``, ``watchdogHandler``); vLLM
    0.6–0.10 ``executor/multiproc_worker_utils.py:120``; reference ``log-formats.md`` §9;
    ``spec-decode.md`` §6–§7.
    """

    code = "SRV001"
    name = "engine-death"
    title = "The vLLM engine died"
    severity = "error"
    family = "SRV"
    cause_ids = tuple(CAUSE_FIX)
    defaults = {"window_s": 300.0, "max_candidates": 256}
    events = HARD | SOFT | ROOTS | frozenset({"V_GPU_BLOCKS", "V_SHUTDOWN_STEP", "V_SIGTERM_OLD", "V_STATS_V0", "R_SIGNAL_STACK", "V_CUDA_HINT",
                                              "E_NO_CONNECTOR", *TB_ROWS, "E_TB_FRAMES", "E_PROCESS_RAISED",
                                              *NCCL_REPORT})
    tables = frozenset({"metrics"})  # the V1 stats lines: the engine was alive then
    #: every ERROR line: a catalog line printed where vLLM prints a death header is that header's traceback text
    levels = frozenset({"ERROR", "CRITICAL"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.claims: tuple[str, ...] = ()  # the death headers whose traceback text this finding accounts for
        self.last_exc: Event | None = None  # the last exception line under vLLM's header (``_exception_rest``)
        self.seq = 0
        self.last_t: dict[str, float] = {}
        self.shutdown: tuple | None = None  # (t, seq, ev)
        self.death: tuple | None = None
        self.hard_first: tuple | None = None
        self.cascade = 0
        self.first_cascade: Event | None = None
        self.cascade_kinds: dict[str, int] = {}  # what the cascade lines were (bounded)
        #: root error candidates, (t, seq, event); a deque bounded by ``max_candidates`` once the first comes (its
        #: block is half a KiB of every deployment, and most never print a root error)
        self.cands: deque | tuple = ()
        self.last_stats_t: float | None = None
        self.stats_after_death = 0
        self.wrapper_detail: tuple | None = None
        self.dump: dict = {}  # what the crash dump (dump_input.py) said: vLLM version, failing step
        self.fatal_frame: str | None = None
        self.header: Event | None = None  # the first line that announces the death itself (HEADERS)
        self.banner: Event | None = None  # multiprocessing's 'Process EngineCore_…:' banner (its target raised)
        self.child_banner: Event | None = None  # the same banner of another process (the DP coordinator's)
        self.dump_ev: Event | None = None  # the first crash-dump line (dump_input.py)
        #: a traceback frame printed where a header line's logging call prints (its message, the frame's event)
        self.header_place: tuple[str, Event] | None = None
        self.header_by_place = False  # that header is known by its place alone: which one it is, not sure
        self.frames_after_header = 0  # frames of the traceback under the header: an excerpt cut inside it
        self.worker_death: Event | None = None  # the first line that a worker process died (WORKER_DEATHS)
        self.worker_death_lines: dict[str, Event] = {}  # the first line of each kind of them: evidence
        self.fault_function: str | None = None  # the function at the faulting address (``PC: @ …``), when named
        self.cuda_fault: Event | None = None  # torch's 'Search for `cudaError…'' line: the CUDA error's name
        self.dead_cores: dict[str, Event] = {}  # engine-core processes with a line that proves a death (bounded)
        #: frames that name a cause when the exception line is cut (``_frame_marks``), as bits
        self.frame_marks = 0
        #: lines that proved the death other than a worker's busy loop reporting an exception it answered with
        self.other_marks = 0
        self.busy_loops: set[str] = set()  # processes with a worker_busy_loop frame (bounded)
        self.ctor_runs: dict[tuple, int] | None = None  # a process's vLLM constructor frames in a row (bounded; lazy)
        self.outside_call: str | None = None  # a frame of code outside vLLM under that loop: a caller's RPC
        self.at_start = False  # a line says the engine (or a worker) failed to start: no request was served
        self.frames: dict[str, str] = {}  # each process's last traceback frame under vLLM's header (bounded)
        self.raised_in: dict[int, str] = {}  # a root candidate's (by its seq) innermost frame, where it was raised

    def _cand_room(self) -> bool:
        """Whether another root candidate is kept (the deque drops the oldest past ``max_candidates``)."""
        return len(self.cands) < int(self.options["max_candidates"])

    def _t(self, ev: Event) -> float | None:
        return self._time_at(ev.rec.path, rec_time(ev.rec))

    def _time_at(self, path: str, t: float | None) -> float | None:
        """A line's time, or (a line without one) the last time seen in its input."""
        if t is None:
            return self.last_t.get(path)
        self.last_t[path] = t
        return t

    def observe_metrics(self, rows) -> None:
        """Stats lines (``ingest.hot.MetricRows``): each one is the engine alive at its time. No event
        comes between the rows of a batch, so the batch counts at once: its stats lines, and the time of
        the last one (the last time seen where it printed none)."""
        times = list(compress(rows.times(), map(eq, rows.kinds, repeat("stats"))))
        if not times:
            return
        self.seq += len(times)
        known = [t for t in times if t is not None]
        if known:
            self.last_t[rows.path] = known[-1]
        if self.death is None:
            self.last_stats_t = self.last_t.get(rows.path)
        else:
            self.stats_after_death += len(times)

    def _stats_line(self, t: float | None) -> None:
        if self.death is None:
            self.last_stats_t = t
        else:
            self.stats_after_death += 1

    def _no_death_line(self, tid: str, ev: Event, key: tuple) -> bool:
        """Take the lines that say the engine lived or was being stopped, and a signal's stack; True when the
        line was one of them (it is no death nor root error)."""
        if tid == "V_STATS_V0":
            self._stats_line(key[0])
        elif tid == "V_SHUTDOWN_STEP":
            what = ev.f.get("what", "")
            if self.shutdown is None and ("shutdown triggered" in what or "signal=" in what):
                self.shutdown = key
        elif tid == "V_SIGTERM_OLD" or (tid == "R_FATAL_SIGNAL" and ev.f.get("signal") == "SIGTERM"):
            self.shutdown = self.shutdown or key  # Ray's signal handler prints a requested stop's SIGTERM too
        elif tid == "V_CUDA_HINT":
            self.cuda_fault = self.cuda_fault or ev
        elif tid == "R_SIGNAL_STACK":
            if self.fault_function is None and ev.rec.msg.startswith("PC:"):
                self.fault_function = _fault_function(ev.f.get("rest") or "")
        elif tid == "R_SERVE_REPLICA_FAILED" and "llm" not in (ev.f.get("deployment") or "").lower():
            pass  # another deployment of the same Ray Serve application: not the engine's
        else:
            if tid in WORKER_DEATHS:
                self.worker_death = self.worker_death or ev
                self.worker_death_lines.setdefault(tid, ev)
            return False
        return True

    def observe(self, ev: Event) -> None:
        if ev.id == "V_GPU_BLOCKS":
            if ev.f.get("gpu") != 0:
                return
            # no GPU block for the KV cache: the start raises 'No available memory for the cache blocks' next
            ev = Event("E_NO_CACHE_MEM", ev.rec, {"exc": "", "detail": f"{ev.rec.msg.strip()}: no GPU memory was left "
                                                  "for the KV cache (the start raises 'No available memory for the "
                                                  "cache blocks' next)"})
        tid = "V_EXC" if ev.id == "V_EXC_REPR" else ev.id  # V0's repr of the exception: the exception line
        if ev.id not in self.events:
            self._other_error(ev)
            return
        if tid == "V_EXC":
            self.last_exc = ev
        self.seq += 1
        key = (self._t(ev), self.seq, ev)
        if self._no_death_line(tid, ev, key) or self._banner_or_frame(tid, ev, key):
            return
        text = ev.rec.msg
        detail = ev.f.get("detail") or ""
        exc = ev.f.get("exc") or ""
        cascade_kind = next((c for c in CASCADE if c in text or c in exc or c in detail), None)
        is_cascade = cascade_kind is not None
        if tid == "V_EXC" and "EngineDeadError" in exc:
            tid = "E_ENGINE_DEAD"
        if (tid in START_FAILURES or any(w in text or w in detail for w in START_WORDS)
                or ev.f.get("method") in START_FRAMES):  # V0: 'Exception in worker … while processing method load_model'
            self.at_start = True
        if tid in SOFT or (is_cascade and tid in ("V_EXC", "E_GENERIC")):
            self._cascade_line(tid, ev, key, cascade_kind)
            return
        hard = tid in HARD or (tid in ("V_EXC", "E_GENERIC") and (_classify(detail, tid) in FATAL_CLASSES
                                                                  or _STICKY_CUDA in detail or _uncaught_in_core(ev)))
        if tid in ("V_EXC", "E_GENERIC") and detail.startswith(_WORKER_FAILED):
            tid, hard = "E_WORKER_FAILED", True  # the engine core's 'Worker failed with error' whose quote the line cut
            ev.f["detail"] = detail = detail[len(_WORKER_FAILED):]  # the worker's error, as E_WORKER_FAILED reads it
        if tid == "V_EXC" and self.header is None and (said := _header_printed_at(ev)) is not None:
            self.header_place = self.header_place or (said, ev)  # the exception line of a death header's traceback
            hard = True
        if tid in TB_ROWS and _says("E_NPU_FAULT", text) and self._cand_room():
            # torch_npu's report of the device's kernel fault, printed inside the worker's traceback: its root
            self._candidate((key[0], key[1], Event("E_GENERIC", ev.rec, {"exc": "", "detail": text.strip()})))
        loop_only = False  # the only proof is a worker's busy loop reporting an exception it answered with
        if not self._header_or_dump(tid, ev) and (tid in TB_ROWS or ev.rec.kind == "traceback"):
            proof = self._frames(tid, ev)
            loop_only = proof == "worker_busy_loop" and not hard
            hard = bool(proof) or hard
            if tid == "E_TB_FRAMES" and (bare := _BARE_EXC.search(ev.rec.text)):
                ev.f["detail"] = bare.group(1)  # frames, then an exception without message: that is the error
                tid = "E_GENERIC"
            elif tid in TB_ROWS or tid == "E_TB_FRAMES":
                if hard:
                    self._mark_death(key, worker_loop=loop_only)
                return
        if tid == "V_WORKER_EXC_V0" and detail.strip() and self._cand_room():
            # V0's worker header quotes its exception before the traceback ('… method load_model: <message>, Traceback')
            self._candidate((key[0], key[1], Event("E_GENERIC", ev.rec, {"exc": "", "detail": detail.strip()})))
        if tid == "E_WORKER_FAILED":
            if (ev.f.get("detail") or "").strip():  # 'Worker failed with error ''': the worker's own error is elsewhere
                self.wrapper_detail = self.wrapper_detail or key
        elif tid in ROOTS and not is_cascade:
            if self._cand_room() or self.death is None:
                self._candidate(key)
        if hard:
            if not self._mark_death(key, worker_loop=loop_only or tid == "V_WORKER_EXC"):  # WorkerProc hit an exception
                return
            if tid in ("E_OOM", "E_NO_CACHE_MEM", "E_MAX_LEN_KV") and not any(c[2] is ev for c in self.cands):
                self._candidate(key)

    def _cascade_line(self, tid: str, ev: Event, key: tuple, cascade_kind: str | None) -> None:
        """A line that follows from a death (EngineDeadError and its kin): counted, the first one kept, and the
        death dated by it when nothing earlier dated it. V0's MQEngineDeadError quotes its root: that becomes a
        candidate as its own line would say it."""
        text = ev.rec.msg
        quoted = _ORIGINAL.search(ev.rec.text[-4096:] if ev.rec.cont else text)
        if quoted is not None and self._cand_room():
            # "… to find the original error: RuntimeError('Aborted due to the lack of CPU swap space …')"
            self._candidate((key[0], key[1], Event("E_GENERIC", ev.rec, {"exc": quoted.group("exc"),
                                                                         "detail": quoted.group("detail")})))
        elif _classify(text, tid) in FATAL_CLASSES and self._cand_room():
            self._candidate(key)
        elif ev.rec.kind == "traceback" and self._cand_room() and (inner := _inner_exception(ev.rec.text)) is not None:
            # an exception above the cascade's own in one pasted traceback (a bare ``AssertionError`` under the frame
            # that raised it, then ``EngineDeadError``): what killed the engine
            exc, said = inner
            self._candidate((key[0], key[1], Event("E_GENERIC", ev.rec, {"exc": exc if said else "",
                                                                         "detail": said or exc})))
        elif (ev.rec.kind == "traceback" and "run_engine_loop" in ev.rec.text and "TimeoutError" in ev.rec.text
              and self._cand_room()):
            # V0's 'AsyncEngineDeadError: Task finished unexpectedly' chained under the loop's TimeoutError: an
            # engine step ran past ENGINE_ITERATION_TIMEOUT_S, the root the traceback holds above the cascade
            self._candidate((key[0], key[1], Event("V_ITER_TIMEOUT", ev.rec, {
                "exc": "TimeoutError", "detail": "an engine iteration timed out in run_engine_loop"})))
        self.cascade += 1
        self.first_cascade = self.first_cascade or ev
        kind = "output handler" if tid == "V_OUTPUT_HANDLER" else cascade_kind or "EngineDeadError"
        if kind in self.cascade_kinds or len(self.cascade_kinds) < 6:
            self.cascade_kinds[kind] = self.cascade_kinds.get(kind, 0) + 1
        if self.death is None and self.shutdown is None:
            self.death = key

    def _header_or_dump(self, tid: str, ev: Event) -> bool:
        """Keep a death header and the crash dump's fields (version, failing step); True when the line was a
        dump line those fields come from (it is then no traceback row)."""
        if tid in HEADERS:
            self.header = self.header or ev
        elif tid in ("V_DUMP_INPUT", "V_DUMP_SCHED", "V_DUMP_SCHED_OBJ"):
            self.dump_ev = self.dump_ev or ev
        if tid == "V_DUMP_INPUT":
            self.dump.setdefault("vllm_version", ev.f.get("version"))
            return True
        if tid == "V_DUMP_SCHED_OBJ" or (tid == "V_DUMP_SCHED" and (ev.f.get("what") or "").startswith("output")):
            self.dump.setdefault("failing_step", failing_step(ev.f.get("dump") or ""))
            return True
        return False

    def _banner_or_frame(self, tid: str, ev: Event, key: tuple) -> bool:
        """Note a frame's place (where a root was raised) and take multiprocessing's banner; True for the banner,
        which is nothing more."""
        if tid == "V_TB_FRAME" and (ev.rec.origin.key in self.frames or len(self.frames) < 64):
            f = ev.f
            self.frames[ev.rec.origin.key] = frame_place(f.get("file") or "", f.get("line"), f.get("func"))
        if tid != "E_PROCESS_RAISED":
            return False
        # CPython's banner of a process whose target raised: it exits with code 1
        proc = ev.f.get("proc") or ""
        if proc.startswith("EngineCore") and self._mark_death(key):
            self.banner = self.banner or ev
        elif proc and not proc.startswith("EngineCore"):
            self.child_banner = ev  # the traceback below it is that process's, its outer frames its parent's
        return True

    def _under_header(self, ev: Event) -> None:
        """A line printed where vLLM prints a death header, the header's text not in it: that call's traceback text
        (``logger.exception`` under 'WorkerProc hit an exception.': torch's CUDA hint lines, chained-exception
        lines) of an excerpt that holds no frame. The death is that header's; the line is claimed from LOG001."""
        entry = entry_of(ev)
        fmt = entry.fmt if entry is not None else None
        if fmt not in _header_texts() or ev.rec.msg.startswith(fmt[:24]):
            return
        self.seq += 1
        key = (self._t(ev), self.seq, ev)
        if self.header is None and self._mark_death(key):
            self.header_place = self.header_place or (fmt, ev)
            self._claim(fmt)

    def _claim(self, part: str) -> None:
        """Account for the lines of ``part`` (a format, a shape, an entry's id) in this finding, not LOG001's; at most
        ``MAX_CLAIMS`` of them (a hostile log must not grow the tuple every line is checked against)."""
        if part not in self.claims and len(self.claims) < MAX_CLAIMS:
            self.claims = (*self.claims, part)

    def _other_error(self, ev: Event) -> None:
        """An ERROR line of no template this rule reads (``levels``): a death header's text, a logged exception, the
        rest of an exception's message."""
        if ev.id == CATALOG_EVENT:
            if (exc := self._same_call(ev)) is not None:
                self._continue_message(exc, ev.rec.msg)
            self._under_header(ev)
            self._exception_logged(ev) or self._logged_root(ev)
        elif ev.id == UNKNOWN_EVENT:
            self._exception_rest(ev)
            self._logged_root(ev)

    def _logged_root(self, ev: Event) -> bool:
        """An ERROR line, logged rather than raised, whose error kills the engine wherever it happens: out of memory
        (``[linear.py:210] Failed to create unquantized linear weights: CUDA out of memory …`` right before
        ``EngineCore failed to start.``), no kernel for the device, an NPU kernel's fault: a root candidate, claimed
        from LOG001."""
        msg = ev.rec.msg
        if not self._cand_room() or (
                _classify(msg, ev.id) not in FATAL_CLASSES and not _says("E_NPU_FAULT", msg)):
            return False
        self.seq += 1
        self._candidate((self._t(ev), self.seq, Event("E_GENERIC", ev.rec, {"exc": "", "detail": ev.rec.msg.strip()})))
        entry = entry_of(ev)
        self._claim((entry.fmt or entry.id) if entry is not None else shape_claim(ev.rec.msg))
        return True

    def _same_call(self, ev: Event) -> Event | None:
        """The last exception line under vLLM's header when ``ev`` was printed by the same call (same process, place
        and second), else None."""
        exc = self.last_exc
        rec, at = ev.rec, exc.rec if exc is not None else None
        if (at is None or rec.origin.key != at.origin.key or rec.file != at.file or rec.src_line != at.src_line
                or rec.ts != at.ts):
            return None
        return exc

    def _exception_rest(self, ev: Event) -> None:
        """A row printed right after an exception line under vLLM's header, by the same call (same process, place and
        second) and known to no release: the rest of that exception's message (torch's ``CUDA kernel errors might be
        asynchronously reported …`` under ``torch.AcceleratorError: CUDA error: …``), claimed from LOG001."""
        exc = self._same_call(ev)
        if exc is not None:
            self._claim(shape_claim(ev.rec.msg))
            self._continue_message(exc, ev.rec.msg)

    @staticmethod
    def _continue_message(exc: Event, row: str) -> None:
        """A message that goes on below its exception line ('… the WNA16 linear layer. Reasons: ', then one row per
        kernel refused): the rows are read with it (a few, bounded)."""
        detail = exc.f.get("detail") or ""
        n = exc.f.get("continued", 0)
        if (n or detail.rstrip().endswith(":")) and n < MAX_CONTINUED and len(detail) < 1000:
            exc.f["detail"], exc.f["continued"] = f"{detail.rstrip()} {row.strip()}", n + 1

    def _exception_logged(self, ev: Event) -> bool:
        """A line the catalog says is a caught exception logged as the message (``logger.exception(e)``, V0's
        ``run_mp_engine``: ``No module named 'lmcache.experimental'`` above its traceback): that exception's text, a
        root candidate as its own exception line would be; the line is claimed from LOG001."""
        entry = entry_of(ev)
        if entry is None or entry.fmt is not None or entry.expr not in EXCEPTION_NAMES or not self._cand_room():
            return False
        self.seq += 1
        self._candidate((self._t(ev), self.seq, Event("E_GENERIC", ev.rec, {"exc": "", "detail": ev.rec.msg.strip()})))
        self._claim(entry.id)
        return True

    def _candidate(self, key: tuple) -> None:
        """A root error candidate, with where it was raised: the innermost frame of its raw traceback, or the last
        frame its process printed under vLLM's header before it."""
        ev = key[2]
        raw = ev.rec.raw_text if ev.rec.kind in ("traceback", "text") else None
        if ev.id == "E_SEGFAULT_TVM":  # a native stack, innermost first
            frame = native_stack(raw) if raw else None
        else:
            frame = innermost_frame(raw) if raw and b'File "' in raw else self.frames.get(ev.rec.origin.key)
        if frame is not None:
            if len(self.raised_in) >= 2 * int(self.options["max_candidates"]):
                self.raised_in.clear()
            self.raised_in[key[1]] = frame
        if not self.cands:
            self.cands = deque(maxlen=int(self.options["max_candidates"]))
        self.cands.append(key)

    def _frames(self, tid: str, ev: Event) -> str | None:
        """Read a traceback (or one frame of it): what in its frames proves a death — a loop vLLM never survives
        (its function), a start-only function at ERROR (nothing catches an error raised while starting), or a
        frame printed where the release prints a death header (that header); None when nothing does."""
        self.frames_after_header += tid == "V_TB_FRAME" and self.header is not None
        funcs = _frame_funcs(ev)  # the traceback is parsed once for the three questions below
        fatal = next((f for f in funcs if f in FATAL_FRAMES), None)
        if fatal is None and ev.rec.kind == "traceback":
            fatal = next((FATAL_CODE[c] for c in FATAL_CODE if c in ev.rec.raw_text), None)
            if fatal is not None and ev.rec.msg.startswith("Process "):  # the banner read with its traceback
                self._child_banner(ev)
        frames = _frame_list(ev)
        self._rpc_from_outside(ev, frames)
        start = _start_frame(ev, funcs) or self._constructing(ev.rec.origin.key, frames)
        self.at_start = self.at_start or start is not None
        self.frame_marks |= _frame_marks(funcs, self.frame_marks)
        if any(file.endswith("/v1/engine/detokenizer.py") for _, file in frames):
            self.frame_marks |= _DETOKENIZING
        if fatal is not None:
            self.fatal_frame = self.fatal_frame or fatal
            return fatal
        if start is not None and ev.rec.level in ("ERROR", "CRITICAL"):
            self.fatal_frame = self.fatal_frame or start
            return start
        if tid in TB_ROWS and self.header is None and (said := _header_printed_at(ev)) is not None:
            self.header_place = self.header_place or (said, ev)
            return said
        if tid in TB_ROWS and self.header is None and (said := _header_by_place(ev)) is not None:
            self.header_place = self.header_place or (said, ev)
            self.header_by_place = True
            return said
        return None

    def _rpc_from_outside(self, ev: Event, frames: list[tuple[str, str]]) -> None:
        """A frame of code outside vLLM (a trainer's ``update_weights_from_ipc``) under a worker's busy loop: the
        worker ran a caller's RPC (``collective_rpc``); its exception went back to that caller, and the engine,
        which ran no step, lives on. Frames come one a row under vLLM's header, or all in a raw traceback."""
        key = ev.rec.origin.key
        for func, file in frames:
            if func == "worker_busy_loop" and len(self.busy_loops) < 64:
                self.busy_loops.add(key)
            elif key in self.busy_loops and self.outside_call is None and _callers_code(file):
                self.outside_call = frame_path(file)[-120:]

    def _constructing(self, key: tuple, frames: list[tuple[str, str]]) -> str | None:
        """A start when a traceback (or its frames, one a row) builds the engine's objects: a model class's constructor
        (models are built only while loading), or three constructors in a row of the model, attention or V1 worker
        packages (``_BUILT_AT_START``: a model runner building its buffers, 'UVA is not available'); a step calls
        functions, which end the run. The API server's engine client and V0's per-step input builders are not those."""
        runs = self.ctor_runs
        if runs is None:
            if not any(f in ("__init__", "<lambda>") for f, _ in frames):
                return None
            runs = self.ctor_runs = {}
        run = runs.get(key, 0)
        for func, file in frames:
            if func not in ("__init__", "<lambda>") or not frame_path(file).startswith(_BUILT_AT_START):
                run = 0
                continue
            run += 1
            if run >= 3 or (func == "__init__" and "vllm/model_executor/models/" in file):
                runs.pop(key, None)
                return "building the model or its runner"
        if run or key in runs:
            runs[key] = run
            if len(runs) > 64:
                runs.pop(next(iter(runs)))
        return None

    def _mark_death(self, key: tuple, worker_loop: bool = False) -> bool:
        """Record a line that proves the engine died; False when it belongs to a requested shutdown. ``worker_loop``:
        the proof is only a worker's busy loop reporting an exception, which it answers to whoever called it."""
        if self.shutdown is not None and self.hard_first is None:
            return False  # killed during a requested shutdown
        self.other_marks += not worker_loop
        if self.hard_first is None or _caret_row_before(self.hard_first, key):
            self.hard_first = key
        if self.death is None or _caret_row_before(self.death, key):
            self.death = key
        origin = key[2].rec.origin
        if origin.role == "EngineCore" and origin.pid is not None and len(self.dead_cores) < 16:
            self.dead_cores.setdefault(origin.key, key[2])
        return True

    @staticmethod
    def _order(k):
        return (k[0] if k[0] is not None else float("inf"), k[1])

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.death is None:
            return []
        dt, dseq, dev = self.death
        if self.hard_first is None and self.shutdown is not None and self.shutdown[1] < dseq:
            return []  # EngineDeadError after a requested shutdown: normal 0.32 shutdown noise
        if (self.outside_call is not None and not self.other_marks and not self.cascade
                and (self.header is None or self.header.id == "V_WORKER_EXC") and self.wrapper_detail is None):
            return []  # a caller's RPC into the workers raised: no step failed (LOG001 lists its lines)
        root = self._root(dt, dseq)
        causes = self._causes(root, ctx, self.cuda_fault, self.frame_marks)
        at_start = self._failed_at_start(causes)
        if root is None and self.hard_first is None and not at_start:
            causes[0].against.append("only EngineDeadError / output-handler lines: vLLM 0.32 prints them at a normal "
                                     "SIGTERM shutdown too; check whether the server was being stopped")
        evs = []
        if root is not None:
            evs.append(evidence_of(root[2], 400))
        evs.append(evidence_of(dev, 400))
        if self.first_cascade is not None:
            evs.append(evidence_of(self.first_cascade, 400))
        evs += [evidence_of(e, 400) for e in self.worker_death_lines.values()]
        root_txt = _clipped(root[2].f.get("detail") or root[2].rec.msg, 240) if root is not None else "not in the excerpt"
        stop = "" if root_txt.endswith((".", "…", "!", "?")) else "."
        summary = (f"The engine died at {fmt_log_time(dt)}, line {dev.rec.path}:{dev.rec.line}; first root error: {root_txt}{stop} "
                   f"{self.cascade} cascade line(s) follow from it{self._cascade_named()}.")
        if root is None:
            cut = (" The excerpt stops inside the traceback printed under it, before its exception line."
                   if self.frames_after_header else "")
            summary += (f"{cut} The lines given show the death, not its cause: collect the rest of its traceback and "
                        "the lines before it (see next steps).")
        measurements = {"died_at": fmt_time(dt), "root_error": root_txt, "cascade_lines": self.cascade,
                        "root_cause_class": causes[0].id, "stats_lines_after_death": self.stats_after_death}
        summary += self._where_it_failed(measurements, root, at_start)
        summary, evs = self._inferred(summary, evs, measurements, causes)
        summary, evs = self._several_cores(summary, evs, measurements)
        died = "engine died (inferred)" if measurements.get("death_inferred") else "engine died"
        head = (f"{died} at {fmt_log_time(dt)}: {_clipped(_short_paths(_root_line(root[2])), 85)}" if root is not None
                else f"{died} at {fmt_log_time(dt)}; its first root error is not in the excerpt")
        for cause in causes if at_start else ():  # no request to rerun: the server never served one
            cause.confirm_with = START_CONFIRM.get(cause.id, cause.confirm_with)
        steps = [causes[0].fix, f"Confirm: {causes[0].confirm_with}",
                 "The engine failed while starting: no request was served; start it again once the cause is fixed."
                 if at_start else self._restart_step()]
        return [Finding(
            rule=self.code, severity="error", title=self.title, summary=summary, count=max(1, self.cascade),
            evidence=dedupe_evidence(evs), causes=causes, measurements=measurements, headline=head,
            identity=f"{causes[0].id}|{root_txt[:80]}", first_seen=dt, next_steps=steps,
        )]

    def _restart_step(self) -> str:
        """What the death did to clients: said only when the log shows the engine serving (a stats line before it, a
        request's error after it); a death with neither may have come before any request."""
        if self.last_stats_t is not None or self.cascade:
            return "Restart the engine; clients saw errors for every request in flight."
        return ("Restart the engine once the cause is fixed; whether it was serving requests when it died the excerpt "
                "does not show (no stats line before it, no request's error after it).")

    def _root(self, dt: float | None, dseq: int) -> tuple | None:
        """The first root candidate from the last stats line (less 10 s) to 2 s after the death (by line order
        where a line has no time), else the worker's quoted error, else a death that needs no exception."""
        lo = (self.last_stats_t - 10.0) if self.last_stats_t is not None else float("-inf")
        if dt is not None and self.last_stats_t is None:
            lo = dt - 1e9
        roots = []
        for k in self.cands:
            t = k[0]
            if t is not None and dt is not None and not (lo <= t <= dt + 2.0):
                continue
            if t is None and k[1] > dseq + 50:
                continue
            roots.append(k)
        roots.sort(key=self._order)
        if roots:
            return roots[0]
        if self.wrapper_detail is not None:
            return self.wrapper_detail
        if self.hard_first is not None and _died_without_exception(self.hard_first[2]):
            return self.hard_first
        return None

    def _where_it_failed(self, measurements: dict, root: tuple | None, at_start: bool) -> str:
        """The crash dump, the fatal frame, the faulting function, whether it failed while starting and where
        the root was raised, into ``measurements`` (in the report's order); the summary's sentences on them."""
        said = ""
        if self.dump:
            measurements["crash_dump"] = {k: v for k, v in self.dump.items() if v}
        if self.fatal_frame:
            measurements["fatal_frame"] = self.fatal_frame
        if self.fault_function:
            measurements["fault_function"] = self.fault_function
            said += f" The fatal signal's faulting address is in {self.fault_function}."
        measurements["failed_at_start"] = at_start
        raised = self.raised_in.get(root[1]) if root is not None else None
        if raised is not None:
            measurements["raised_in"] = raised
            text = (root[2].f.get("detail") or root[2].rec.msg).lower()
            said += (f" It surfaced in {raised}: CUDA reports a kernel's fault at a later call, so the kernel that "
               "faulted ran earlier (CUDA_LAUNCH_BLOCKING=1 names it)."
               if any(w in text for w in ASYNC_CUDA_WORDS) else f" It was raised in {raised}.")
        return said

    def _cascade_named(self) -> str:
        """What the cascade lines were (``EngineDeadError`` ×12, a Ray actor's ``ActorDiedError``), for the summary."""
        if not self.cascade_kinds:
            return ""
        return " (" + ", ".join(f"{k} ×{n}" for k, n in self.cascade_kinds.items()) + ")"

    def _failed_at_start(self, causes: list[Cause]) -> bool:
        """Whether the engine died while starting: a line or frame said so, the root is a KV cache that cannot
        fit (checked only at start-up), or the traceback was printed where the release prints 'failed to start'."""
        return self.at_start or causes[0].id in START_CLASSES or (
            self.header_place is not None and "failed to start" in self.header_place[0] and not self.header_by_place)

    def _several_cores(self, summary: str, evs: list[Evidence], measurements: dict) -> tuple[str, list[Evidence]]:
        """Death lines of more than one engine-core process: several engines (or the data-parallel cores of one
        server) died. Say so, with a line of each, rather than tell one engine's death from their mixed lines."""
        if len(self.dead_cores) < 2:
            return summary, evs
        origins = [e.rec.origin for e in self.dead_cores.values()]
        names = [f"{o.proc} pid={o.pid}" + (f" in {o.host_process}" if o.host_process else "") for o in origins]
        measurements["dead_engine_cores"] = names
        hosts = {o.host_process for o in origins if o.host_process}
        twice = len({o.proc for o in origins}) < len(origins)
        if len(hosts) > 1 or twice:
            why = (f"under {len(hosts)} different host processes" if len(hosts) > 1
                   else "two processes of one name, which one server never runs at once")
            what = (f"{why}: as many servers (or one started again) died, each with its own engine; this finding "
                    "joins their lines, and the time and root error above are those of the first found")
        else:
            what = ("as many engines, or the data-parallel cores of one server, died; the root error above is the "
                    "first one found, and each may have its own")
        summary += (f" The death lines come from {len(names)} engine-core processes ({', '.join(names[:4])}"
                    f"{' …' if len(names) > 4 else ''}): {what}.")
        evs = evs + [evidence_of(e, 400) for e in list(self.dead_cores.values())[:4]]
        return summary, evs

    def _child_banner(self, ev: Event) -> None:
        """A traceback opened by multiprocessing's banner of a process other than an engine core's: that process's."""
        m = template("E_PROCESS_RAISED").match(ev.rec.msg.strip())
        if m is not None and not m["proc"].startswith("EngineCore"):
            self.child_banner = Event("E_PROCESS_RAISED", ev.rec, {"proc": m["proc"]})

    def _through_fatal(self, measurements: dict) -> str:
        """The basis a fatal frame gives; the API server's ``run_server`` under another process's multiprocessing
        banner is that process's traceback, whose outer frames its parent's stack copied when it started it."""
        if not self.fatal_frame:
            return ""
        child = self.child_banner
        if self.fatal_frame != "run_server" or child is None:
            return f"a traceback through {self.fatal_frame}"
        proc = child.f.get("proc") or "?"
        measurements["process"] = proc
        what = (" (the data-parallel coordinator, which the API server of a DP deployment starts while it starts: "
                "it balances requests across the DP engines and keeps their waves in step)"
                if "DP_Coordinator" in proc else "")
        return (f"the traceback of the API server's child process '{proc}'{what}, after multiprocessing's banner "
                f"'Process {proc}:' ({child.rec.path}:{child.rec.line}); its frames through run_server are the API "
                "server's, copied when it started the process, so that process raised, not the API server's main")

    def _inferred(self, summary: str, evs: list[Evidence], measurements: dict,
                  causes: list[Cause]) -> tuple[str, list[Evidence]]:
        """Say when the death is inferred rather than read: the header is missing, the dump proves the crash.

        vLLM prints the crash dump (``Dumping input data for V1 LLM engine …``, logging_utils/dump_input.py
        0.9.2+) only on the engine core's except path, before it re-raises into ``run_engine_core``, which
        logs the fatal error and exits (v1/engine/core.py). A dump, or a traceback through a loop vLLM never
        survives, is therefore a death even when the excerpt starts below its header line.
        """
        measurements["crashed"] = True
        inferred = self.header is None and (self.dump_ev is not None or self.fatal_frame is not None
                                            or self.header_place is not None or self.worker_death is not None
                                            or self.banner is not None)
        measurements["death_inferred"] = inferred
        if not inferred:
            return summary, evs
        placed = ""
        if self.header_place is not None:
            said, fev = self.header_place
            where = (f"where a catalogued release prints '{said}' (the build is not known: which of its messages is "
               "not sure)" if self.header_by_place else f"where vLLM prints '{said}'")
            placed = f"a traceback printed at {fev.rec.file}:{fev.rec.src_line}, {where}"
        banner = (f"multiprocessing's banner '{self.banner.rec.msg.strip()}' (printed when the process's target "
                  "raised; the process then exits with code 1)") if self.banner is not None else ""
        basis = " and ".join(x for x in ("the crash dump (dump_input.py)" if self.dump_ev else "",
                                         self._through_fatal(measurements), placed, banner) if x)
        measurements["missing"] = HEADER_TEXT
        what = "the dump" if self.dump_ev is not None else "the first of these lines"
        if self.frame_marks & _DETOKENIZING and self.header is None:  # the API server's handler, not the engine core
            summary += (f" Inferred, not read: {HEADER_TEXT} is not in the excerpt, and none is to be looked for: "
                        f"{basis or 'the traceback'} is the API server's output handler raising in its detokenizer. The "
                        "handler task is gone, so every request after it fails, while the engine core may run on.")
        elif "process" in measurements:  # another process's traceback: its death, the engine's only as a consequence
            summary += (f" Inferred, not read: {HEADER_TEXT} is not in the excerpt; {basis}. The server needs it (the API "
                        "server waits for it while it starts, and its engines' request waves go through it), so this "
                        f"finding reports its death as the engine's (confidence medium). Collect the lines after {what}: that "
                        "process's exception line, and what the API server printed when the process ended.")
        elif basis:
            summary += (f" Inferred, not read: {HEADER_TEXT} is not in the excerpt; {basis} appear only when the "
                        f"engine core failed (its step raised, or it failed to start), so the engine died (confidence "
                        f"high). Against: without the header, the time of death is that of {what}. Collect the lines "
                        f"around {what} to read the header.")
        else:
            r = self.worker_death.rec
            said, why = _REPORTED_DEATHS.get(self.worker_death.id, (
                f"The report of a worker process's death ({WORKER_DEATHS[self.worker_death.id][0]}, {{where}})",
                _WORKER_GONE))
            basis = said.replace("{where}", f"{r.path}:{r.line}")
            summary += f" Inferred, not read: {HEADER_TEXT} is not in the excerpt. {basis}: {why}"
        causes[0].against.append(f"the death is inferred from {basis}: {HEADER_TEXT} is missing")
        if self.dump_ev is not None:
            r = self.dump_ev.rec
            evs = with_primary(evs, Evidence(r.path, r.line, r.display()[:400]))
        return summary, evs

    @staticmethod
    def _causes(root: tuple | None, ctx: Context, cuda_fault: Event | None = None, marks: int = 0) -> list[Cause]:
        """Rank the root-error classes; without a root error, say so instead of listing every class as filler.

        A death line (fatal error, dead process, crash dump, EngineDeadError) proves the engine died but
        carries no cause: giving each class the same small share would read as a diagnosis.
        """
        if root is None and cuda_fault is not None:
            return [_cuda_fault_cause(cuda_fault)]
        if root is None and (named := _frame_cause(marks)) is not None:
            return [named]
        if root is None:
            fix, confirm = CAUSE_FIX["cause-not-in-excerpt"]
            return [Cause("cause-not-in-excerpt", 0.4, for_=["death lines without the exception that caused them "
                                                                "(the excerpt starts after it, or the log level hid it)"],
                          fix=fix, confirm_with=confirm)]
        rev = root[2]
        rtext = (rev.f.get("detail") or rev.rec.msg) if rev.id != "V_PROC_DIED" else rev.rec.msg
        text = rev.rec.text if rev.rec.kind == "traceback" else rev.rec.msg
        if rev.f.get("continued"):
            text = f"{text} {rtext}"  # the rows of its message below the exception line
        cls = _classify(text, rev.id)
        if cls == "lmcache-draft-layers" and not _drafter_layers_possible(ctx, text):
            cls = "worker-exception"
        elif cls == "lmcache-kv-layout" and method_of(ctx) == "draft_model":
            cls = "lmcache-draft-layers"  # a draft model as deep as the target doubles the caches too
        b = CauseBoard()
        for cid in ROOT_CLASSES:  # a class read only from its own message is no alternative where it is not printed
            if cid not in SIGNATURE_CLASSES or cid == cls:
                fix, confirm = CAUSE_FIX[cid]
                b.add(cid, 0.1, fix=fix, confirm_with=confirm)
        b.support(cls, 30, f"first root error at {rev.rec.path}:{rev.rec.line}: {rtext[:160]}")
        if (note := _root_note(cls, rev, text)) is not None:
            b.note_for(cls, note)
        _weigh_drafter(b, cls, ctx)
        cap = None
        if rev.id in EXIT_SEEN_FROM_OUTSIDE:
            b.oppose(cls, 1, "Ray saw the worker's process exit without knowing why: the reasons its message lists "
                             "(the OOM killer, 'ray stop --force', a native crash) are possibilities, not findings; "
                             "the worker's own last lines (Worker PID in the message) and dmesg tell which")
            cap = {cls: 0.6}
        elif cls == "process-killed":
            code = _EXIT_CODE.search(rev.rec.msg)
            if code and code.group(1) in _SIGNALLED:
                b.note_for(cls, f"exit code {code.group(1)}: {_SIGNALLED[code.group(1)]}")
            elif not ctx.startup_seen:
                # "no exception" is an absence: an excerpt that starts late may just not show the worker's error
                b.oppose(cls, 1, "the excerpt does not show the worker's earlier lines: its own error may precede them")
                cap = {cls: 0.6}
        return b.ranked(ceiling=0.9, cap=cap)
