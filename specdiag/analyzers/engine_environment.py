"""SRV001's root classes whose message names the environment, not vLLM: the CUDA driver the process loaded, the
toolchain of a kernel built at run time, the model's files, the model hub, and a GPU too small for a kernel.

Each of these exceptions ends the engine wherever it is raised (torch's CUDA initialisation, a kernel's launch, the
weight loader, the config's download), and its own words say which part of the environment failed, so the class is
read from the message alone (``environment_class``) and the message's numbers or kind refine the advice
(``environment_note``). Apart from ``engine_health`` so that module holds the rule's logic.
"""

from __future__ import annotations

from specdiag.patterns import lazy

#: the CUDA driver does not fit what the process runs (lower case): torch's ``cudaGetDeviceCount`` failing with
#: Error 803 (the libcuda loaded is not the kernel driver's: a container's cuda-compat copy) or 804 (forward
#: compatibility on a GPU or driver without it), the runtime newer than the driver, kernels' PTX built by a newer
#: toolkit than the driver compiles (c10/cuda/CUDAFunctions.cpp, the CUDA runtime's error strings)
DRIVER_WORDS = ("error 803:", "error 804:", "unsupported display driver / cuda driver combination",
                "forward compatibility was attempted on non supported hw",
                "cuda driver version is insufficient for cuda runtime version",
                "provided ptx was compiled with an unsupported toolchain", "cudaerrorunsupportedptxversion",
                "the nvidia driver on your system is too old")
#: a kernel built at run time could not be built (lower case): Triton's launcher links ``-lcuda`` /
#: ``-l:libcuda.so.1`` (backends/nvidia/driver.py, ``ldconfig -p`` or TRITON_LIBCUDA_PATH), FlashInfer's JIT needs
#: nvcc and headers of one CUDA toolkit
TOOLCHAIN_WORDS = ("cannot find -lcuda", "cannot find -l:libcuda", "could not find nvcc",
                   # Triton's bundled ptxas older than the GPU (``ptxas fatal : Value 'sm_121a' is not defined for option
                   # 'gpu-name'``: a DGX Spark or Jetson Thor with the ptxas of CUDA 12.8)
                   "is not defined for option 'gpu-name'",
                   "cuda compiler and cuda toolkit headers are incompatible",
                   # gcc failing on the launcher Triton builds (its command in torch inductor's CalledProcessError)
                   "/cuda_utils.c'")
#: the model's weight files cannot be read (lower case): safetensors' header check (the file is shorter than its
#: header says: a truncated or corrupt download), vLLM's loader finding no file of the load format
#: (model_loader/weight_utils.py, default_loader.py ``_prepare_weights``)
MODEL_FILE_WORDS = ("error while deserializing header", "metadataincompletebuffer", "headertoolarge",
                    "incomplete metadata, file not fully covered", "cannot find any model weights with")
#: the model's files could not be fetched from the hub or found in its cache (lower case): huggingface_hub's errors
#: (utils/_http.py hf_raise_for_status, file_download.py, _cache_manager.py)
HUB_WORDS = ("repositorynotfounderror", "gatedrepoerror", "cannot access gated repo", "offlinemodeisenabled",
             "repository not found for url", "you must have access to it and be authenticated",
             "localentrynotfounderror", "revisionnotfounderror", "we couldn't connect to 'https://huggingface.co'",
             # huggingface_hub's CacheNotFound (_cache_manager.py), by its advice: the words alone are too common
             "argument or set `hf_hub_cache`")
#: a kernel needs more of the GPU than it has (lower case): Triton's launch check (compiler/compiler.py,
#: OutOfResources: the kernel's shared memory per block above the device's, a large head size on a small GPU)
GPU_LIMIT_WORDS = ("out of resource: shared memory",)
#: a kernel library built for newer GPUs only (lower case): flash-attention's SM 8.0+ check (csrc flash_api.cpp)
OLD_GPU_WORDS = ("flashattention only supports ampere gpus or newer",)

#: expert parallelism's all-to-all library waited for its peers' token counts past its timeout (lower case): DeepEP's
#: ``DeepEP error: CPU recv timeout`` (intranode) / ``timeout (dispatch CPU)`` (internode), csrc/deep_ep.cpp
EP_TIMEOUT_WORDS = ("deepep error: cpu recv timeout", "deepep error: timeout (")
#: DeepGEMM's own assertions (its C++ headers: ``Assertion error (…/utils/layout.hpp:76): Unknown recipe``, ``…
#: smxx_layout.hpp:136 'mn % 4 == 0 …'``): the installed DeepGEMM does not support this GPU or these shapes
DEEPGEMM_WORDS = ("/jit_kernels/impls/", "layout.hpp:76): unknown recipe", "deepgemm-src/csrc/")

_CLASSES = (("ep-dispatch-timeout", EP_TIMEOUT_WORDS), ("deepgemm-unsupported", DEEPGEMM_WORDS),
            ("cuda-driver-mismatch", DRIVER_WORDS), ("jit-toolchain", TOOLCHAIN_WORDS),
            ("model-files-unreadable", MODEL_FILE_WORDS), ("model-hub-access", HUB_WORDS),
            ("kernel-exceeds-gpu", GPU_LIMIT_WORDS), ("gpu-arch-unsupported", OLD_GPU_WORDS))
#: the classes this module adds to SRV001's (gpu-arch-unsupported is the rule's own)
CLASSES = ("cuda-driver-mismatch", "jit-toolchain", "model-files-unreadable", "model-hub-access", "kernel-exceeds-gpu",
           "ep-dispatch-timeout", "deepgemm-unsupported")

#: Triton's numbers: ``out of resource: shared memory, Required: 98304, Hardware limit: 65536``
_SHARED_MEMORY = lazy(r"shared memory,\s{0,4}Required: (\d{1,9}), Hardware limit: (\d{1,9})")


def environment_class(lower: str) -> str | None:
    """The environment class a root error's lower-cased text names, or None."""
    for cls, words in _CLASSES:
        if any(w in lower for w in words):
            return cls
    return None


def environment_note(cls: str, text: str) -> str | None:
    """What the message's own kind or numbers add to its class's advice, or None."""
    t = text.lower()
    if cls == "cuda-driver-mismatch":
        return _driver_note(t)
    if cls == "model-hub-access":
        return _hub_note(t)
    if cls == "jit-toolchain" and "option 'gpu-name'" in t:
        return ("ptxas does not know this GPU's architecture: Triton's bundled ptxas is older than the GPU; point "
                "TRITON_PTXAS_PATH at the ptxas of a CUDA toolkit that knows it, or upgrade Triton")
    if cls == "jit-toolchain" and "cuda_utils.c'" in t and "cannot find -l" not in t:
        return ("gcc failed building Triton's launcher (cuda_utils.c): its own error follows the command (ld: cannot "
                "find -lcuda, or a missing Python.h): collect the lines after it")
    if cls == "model-files-unreadable":
        return ("no file of the format asked was found in the model's folder: compare --load-format (safetensors, "
                "pt, auto) with the files there" if "cannot find any model weights" in t else
                "a safetensors file is shorter than its header says: the download was cut or the file is corrupt; "
                "compare each shard's size (and sha256) with the hub's and download it again")
    if cls == "kernel-exceeds-gpu" and (m := _SHARED_MEMORY.search(text)) is not None:
        need, have = int(m.group(1)), int(m.group(2))
        return (f"a Triton kernel needs {need:,} bytes of shared memory per block and the GPU has {have:,}: the "
                "model's head size or the kernel's block sizes do not fit this GPU; another attention backend "
                "(--attention-backend) or a GPU with more shared memory per block runs it")
    return None


def _driver_note(t: str) -> str:
    if "error 803:" in t or "unsupported display driver" in t:
        return ("Error 803: the libcuda.so the process loaded is not the host driver's (a container's cuda-compat "
                "copy found first through ld.so.conf or LD_LIBRARY_PATH); `ldconfig -p | grep libcuda` in the "
                "container shows which one wins")
    if "error 804:" in t or "forward compatibility" in t:
        return ("Error 804: CUDA's forward-compatibility libraries were used on a GPU or driver that does not "
                "support them; upgrade the host driver or drop the compat libraries from the library path")
    if "ptx" in t:
        return ("the kernels' PTX was built by a newer CUDA toolkit than the driver can compile (there was no "
                "native binary for this GPU): upgrade the driver, or install the build for the driver's CUDA")
    return ("the driver is older than the CUDA runtime this build of torch/vLLM was made with: upgrade the driver, "
            "or install the build for the driver's CUDA version (nvidia-smi shows the driver's)")


def _hub_note(t: str) -> str:
    if "offlinemodeisenabled" in t or "localentrynotfound" in t:
        return ("offline mode (HF_HUB_OFFLINE=1) and the files are not in the local cache, or a call still asked the "
                "hub: pass the model's local folder (the snapshot path) instead of its repo id")
    if "gatedrepoerror" in t or "cannot access gated repo" in t or "you must have access to it" in t:
        return "the repo is gated: accept its licence on the hub and give the server a token (HF_TOKEN) that has access"
    if "cache directory not found" in t:
        return "HF_HOME / HF_HUB_CACHE names a folder that does not exist where the server runs (a volume not mounted)"
    return ("the hub answered that the repo (or the revision) does not exist for this request: a misspelt repo "
            "id, or a private or gated repo asked without a token (HF_TOKEN)")


#: a compiled extension that does not fit the torch or CUDA installed (lower case, each with what it means):
#: the dynamic loader's words under an ImportError, or vLLM's own warning that its ops did not load
_PACKAGE_WORDS = (
    ("undefined symbol: _z", "a compiled extension (its .so in the message) was built against another torch (or "
                             "CUDA) than the one installed: its C++ symbols are not there; install the build of that "
                             "package made for this torch, or rebuild it against it (pip show torch, and the "
                             "package's own version)"),
    ("libcudart.so.", "a compiled extension needs a CUDA runtime major version that is not installed: the vLLM (or "
                      "torch) wheel was built for another CUDA; install the wheels built for one CUDA version"),
    ("could not run '_c::", "vLLM's compiled extension (vllm._C) has no kernel for this operator on this device: "
                            "the build lacks it (a wheel or plug-in built for another platform, or without that "
                            "kernel family); install a vLLM build for this device"),
    ("no module named 'vllm._c'", "vLLM's compiled ops (vllm._C) are not there: Python imported vLLM from a source "
                                  "checkout that was never built (run from outside the repository), or the install "
                                  "is for another platform (native Windows: use WSL2 or the container image)"),
)


def package_note(text: str) -> str | None:
    """What a compiled extension's import failure means, from the loader's words, or None."""
    t = text.lower()
    return next((said for word, said in _PACKAGE_WORDS if word in t), None)
