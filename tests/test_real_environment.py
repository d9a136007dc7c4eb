"""Engine deaths whose message names the environment (the CUDA driver, a run-time build, the model's files, the hub,
a GPU below a kernel's needs), as users pasted them into public threads. Before, each was SRV001's generic
'worker-exception', a LOG001 warning (exit 0), or 'nothing recognised' (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

HERE = Path(__file__).resolve().parent / "real_env"


def _root(name: str):
    srv = _by_rule(HERE / name)["SRV001"]
    return srv, srv.causes[0]


@pytest.mark.parametrize(("name", "said"), [
    # vLLM #33447: the v0.15.0 image's cuda-compat libcuda found before the host driver's (a traceback)
    ("cuda-803-compat-libcuda.log", "Error 803: the libcuda.so the process loaded is not the host driver's"),
    # gpustack #4678: the same error as one line, no traceback
    ("cuda-803-bare-line.log", "Error 803: the libcuda.so the process loaded is not the host driver's"),
    # gpustack #1254: driver 535 and forward compatibility
    ("cuda-804-forward-compat.log", "Error 804: CUDA's forward-compatibility libraries"),
    # vLLM #31700: FA2 kernels' PTX newer than the driver
    ("ptx-unsupported-toolchain-fa2.log", "PTX was built by a newer CUDA toolkit than the driver"),
])
def test_a_cuda_driver_that_does_not_fit_the_build_is_named_with_what_its_error_number_means(name, said):
    srv, cause = _root(name)
    assert cause.id == "cuda-driver-mismatch" and srv.severity == "error"
    assert any(said in f for f in cause.for_), cause.for_


@pytest.mark.parametrize("name", ["triton-launcher-libcuda-gke.log",  # llm-d #1063: gcc's command, then ld's line
                                  "ld-cannot-find-lcuda.log"])  # vLLM #12505: ld's line alone (was exit 3)
def test_tritons_launcher_that_cannot_link_libcuda_is_the_run_time_toolchain(name):
    _srv, cause = _root(name)
    assert cause.id == "jit-toolchain"
    assert "LIBRARY_PATH" in cause.fix


@pytest.mark.parametrize(("name", "said"), [
    # QwenLM/Qwen3-VL #264: 'Error while deserializing header: MetadataIncompleteBuffer' under the weight loader
    ("safetensors-header-incomplete.log", "download was cut or the file is corrupt"),
    # vLLM #3329: --load-format safetensors on a folder of .bin files: the load format, not a download
    ("no-model-weights-for-load-format.log", "--load-format"),
])
def test_unreadable_model_files_say_whether_to_download_again_or_change_the_load_format(name, said):
    _srv, cause = _root(name)
    assert cause.id == "model-files-unreadable"
    assert any(said in f for f in cause.for_)


@pytest.mark.parametrize(("name", "said"), [
    ("hf-offline-mode-hub-call.log", "pass the model's local folder"),  # vLLM #3719 (was exit 3)
    ("hf-repo-not-found-flattened.log", "misspelt repo id"),  # vast-ai base-image #128, lines run together
])
def test_the_hub_refusing_or_unreachable_is_model_hub_access(name, said):
    srv, cause = _root(name)
    assert cause.id == "model-hub-access" and srv.measurements["failed_at_start"] is True
    assert any(said in f for f in cause.for_)


def test_a_triton_kernel_above_the_gpus_shared_memory_gives_both_numbers():
    """FlashML-org/FreeToken #246 (an RTX 2080 Ti): the line behind another program's wrapper (was exit 3)."""
    _srv, cause = _root("triton-shared-memory-wrapped.log")
    assert cause.id == "kernel-exceeds-gpu"
    assert any("98,304 bytes of shared memory per block and the GPU has 65,536" in f for f in cause.for_)


def test_the_exception_line_of_tritons_limit_alone_is_the_same_class():
    """vLLM #57712: Gemma-4's head size 512 on Turing, the line wrapped by the paste before its numbers."""
    _srv, cause = _root("triton-shared-memory-bare.log")
    assert cause.id == "kernel-exceeds-gpu"


def test_flash_attention_refusing_a_pre_ampere_gpu_is_an_unsupported_architecture():
    """vLLM #8189: 'FlashAttention only supports Ampere GPUs or newer' inside V0's 'Error in model execution'."""
    _srv, cause = _root("flash-attention-ampere-only.log")
    assert cause.id == "gpu-arch-unsupported"


def test_vllms_fa2_availability_check_alone_is_no_death():
    """1Cat-vLLM #71: fa_utils logs 'Cannot use FA version 2 …' at ERROR and chooses another backend."""
    assert "SRV001" not in _by_rule(HERE / "fa2-unavailable-fallback-line.log")


@pytest.mark.parametrize("line", ["/usr/bin/ld: cannot find -lfoo: No such file or directory",
                                  "RuntimeError: Error 8030 in the application's own table",
                                  "ValueError: cache directory not found in the user's settings"])
def test_other_linker_and_error_lines_are_not_the_environment(tmp_path, line):
    found = _by_rule(_write(tmp_path, [line]))
    srv = found.get("SRV001")
    assert srv is None or srv.causes[0].id not in ("jit-toolchain", "cuda-driver-mismatch", "model-hub-access")


def test_huggingface_hubs_missing_cache_folder_is_read_by_its_advice_not_its_first_words(tmp_path):
    """HabanaAI/vllm-fork #1474's message, and the same first words in another program's error."""
    hub = _write(tmp_path, ["RuntimeError: Cache directory not found: /data/.cache/huggingface. Please use `cache_dir` "
                            "argument or set `HF_HUB_CACHE` environment variable."])
    assert _by_rule(hub)["SRV001"].causes[0].id == "model-hub-access"
    other = _write(tmp_path, ["RuntimeError: Cache directory not found: /var/cache/app (the app's own cache)"])
    assert "SRV001" not in _by_rule(other)


def test_flashinfer_finding_no_architecture_of_the_gpus_major_is_an_unsupported_architecture():
    """vLLM #31740: a DGX Spark (GB10, sm_121) against a FlashInfer JIT module built for major 10 only."""
    _srv, cause = _root("flashinfer-no-arch-of-major.log")
    assert cause.id == "gpu-arch-unsupported"


def test_ptxas_that_does_not_know_the_gpu_is_the_run_time_toolchain_with_tritons_variable():
    """vLLM #30163: Triton's bundled ptxas (CUDA 12.8) and sm_121a, one bare line (was exit 3)."""
    _srv, cause = _root("ptxas-unknown-gpu-name.log")
    assert cause.id == "jit-toolchain" and any("TRITON_PTXAS_PATH" in f for f in cause.for_)


@pytest.mark.parametrize(("name", "rule", "said"), [
    # vLLM #3912: flash-attn's extension built for another torch
    ("flash-attn-undefined-symbol.log", "LOG001", "built against another torch"),
    # vLLM #1716: a wheel for CUDA 12 where no CUDA 12 runtime is installed
    ("libcudart-12-missing.log", "LOG001", "CUDA runtime major version that is not installed"),
    # flagos-ai/vllm-plugin-FL #520: a build without the Mamba selective-scan kernel
    ("vllm-c-op-missing-for-backend.log", "LOG001", "has no kernel for this operator"),
    # vLLM #5501: vLLM's own warning that vllm._C did not load (another torch)
    ("vllm-c-undefined-symbol-warning.log", "LOG002", "built against another torch"),
])
def test_a_compiled_extension_that_does_not_fit_the_install_says_so_first(name, rule, said):
    step = _by_rule(HERE / name)[rule].next_steps[0]
    assert said in step, step


@pytest.mark.parametrize(("name", "cause"), [
    ("deepep-cpu-recv-timeout-dbo.log", "ep-dispatch-timeout"),  # vLLM #27666: DeepEP HT with --enable-dbo
    ("deepep-internode-dispatch-timeout.log", "ep-dispatch-timeout"),  # NVIDIA-NeMo/RL #4027: across nodes
    ("deepgemm-unknown-recipe-sm120.log", "deepgemm-unsupported"),  # deepseek-ai/DeepGEMM #324: no sm_120 recipe
    ("deepgemm-smxx-layout-assert.log", "deepgemm-unsupported"),  # vLLM #22606: fixed by a DeepGEMM bump
])
def test_expert_parallel_kernel_libraries_failures_are_named_by_their_own_messages(name, cause):
    """Each was SRV001's generic worker-exception or a LOG001 warning sending the user to vLLM's wrapper."""
    _srv, c = _root(name)
    assert c.id == cause
    assert ("VLLM_USE_DEEP_GEMM=0" if cause == "deepgemm-unsupported" else "every rank's last lines") in c.fix
