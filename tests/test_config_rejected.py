"""SRV004: vLLM rejecting its configuration at start is an error that quotes what to change. The excerpts under
``real_config/`` are pasted from public threads (ArcticInference #29, vLLM #19448, #20375); each was 'nothing
recognised' (exit 3) or a LOG001 warning pointing into pydantic's source (exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

HERE = Path(__file__).resolve().parent / "real_config"


def test_argparse_rejecting_a_json_option_names_it_and_says_what_json_needs():
    srv = _by_rule(HERE / "argparse-speculative-config-not-json.log")["SRV004"]
    assert srv.severity == "error" and srv.measurements["option"] == "--speculative-config"
    assert srv.measurements["message"].startswith("invalid loads value:")
    assert "double quotes" in srv.summary


def test_argparse_rejecting_the_kv_transfer_config_is_read_too():
    srv = _by_rule(HERE / "argparse-kv-transfer-config.log")["SRV004"]
    assert srv.measurements["option"] == "--kv-transfer-config"


def test_pydantics_validation_of_a_config_class_quotes_its_value_error_not_pydantic():
    found = _by_rule(HERE / "pydantic-speculative-config.log")
    srv = found["SRV004"]
    assert srv.measurements["option"] == "SpeculativeConfig"
    assert srv.measurements["message"].startswith("num_speculative_tokens must be provided with speculative model")
    assert "LOG001" not in found  # no 'read pydantic/_internal/_dataclasses.py:123'


def test_a_value_error_through_vllms_config_code_is_a_rejection_and_elsewhere_is_not(tmp_path):
    frames = ["Traceback (most recent call last):",
              '  File "/usr/lib/python3/dist-packages/vllm/engine/arg_utils.py", line 1300, in create_engine_config',
              "    config = VllmConfig(",
              "ValueError: max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled"]
    srv = _by_rule(_write(tmp_path, frames))["SRV004"]
    assert srv.measurements["message"].startswith("max_num_scheduled_tokens is set to -1792")
    (tmp_path / "other").mkdir()
    elsewhere = [frames[0], '  File "/srv/app/handler.py", line 10, in handle', "    parse()", frames[-1]]
    assert "SRV004" not in _by_rule(_write(tmp_path / "other", elsewhere))


def test_pydantics_header_pasted_without_its_indent_takes_the_reason_on_the_next_line():
    """intel-xpu-backend-for-triton #7166: the header and its ``Value error, …`` line pasted flush left were one
    record and one line nobody read: the finding quoted '1 validation error for VllmConfig' only."""
    srv = _by_rule(HERE / "pydantic-header-and-reason-mrv2-ngram.log")["SRV004"]
    assert srv.measurements["option"] == "VllmConfig"
    assert srv.measurements["message"] == "Model Runner V2 does not yet support: ngram/ngram_gpu speculative decoding"


def test_a_config_dataclass_reason_pasted_alone_is_a_rejection():
    """vLLM #22152: pydantic's line alone (its input ``ArgsKwargs``: a dataclass's constructor) was 'nothing
    recognised'; a ``Value error, …`` line without that input is no proof of vLLM's configuration."""
    srv = _by_rule(HERE / "pydantic-reason-alone-eagle3.log")["SRV004"]
    assert srv.severity == "error" and srv.measurements["option"] is None
    assert srv.measurements["message"].startswith("Eagle3 is only supported for Llama models. Got ")
    assert "[type=" not in srv.measurements["message"]


def test_a_value_error_line_without_a_dataclass_input_is_no_rejection(tmp_path):
    found = _by_rule(_write(tmp_path, ["Value error, field required"]))
    assert "SRV004" not in found


def test_the_batch_budget_under_the_context_length_says_what_to_change():
    """verl #7632 (the message wrapped under its header) and verl #259 (a Ray task's line, its colour's ESC lost):
    SchedulerConfig's check when chunked prefill is off, quoted with the three ways out."""
    wrapped = _by_rule(HERE / "pydantic-scheduler-batch-wrapped.log")["SRV004"]
    assert wrapped.measurements["option"] == "SchedulerConfig"
    assert wrapped.measurements["message"].startswith("max_num_batched_tokens (8192) is smaller than max_model_len (128000)")
    ray = _by_rule(HERE / "ray-batch-smaller-than-len.log")["SRV004"]
    assert ray.measurements["option"] == "--max-num-batched-tokens"
    for srv, max_len in ((wrapped, "128000"), (ray, "9216")):
        assert f"at least {max_len} (it is 8192)" in srv.summary and "--enable-chunked-prefill" in srv.summary


def test_the_docker_images_argparse_exit_and_vllms_refusals_at_start_are_rejections():
    """Real pastes that were 'no finding' or a LOG001 warning, exit 0: homl #3 (the image's entry point
    ``api_server.py: error: unrecognized arguments: -u main.py``), gpt-oss on FlashInfer (``Selected backend … is not
    valid for this configuration. Reason: ['attention sinks not supported']`` through platforms/cuda.py),
    vllm-ascend #4197 (``Unknown attention backend: 'ASCEND'``, no traceback above it), vLLM #19461
    (``NotImplementedError: VLLM_USE_V1=1 is not supported with device type=cpu.``)."""
    for name, said in [("argparse-api-server-unrecognized.log", "unrecognized arguments: -u main.py"),
                       ("backend-not-valid-attention-sinks.log", "attention sinks not supported"),
                       ("unknown-attention-backend-ascend.log", "Unknown attention backend: 'ASCEND'"),
                       ("v1-not-supported-on-cpu.log", "VLLM_USE_V1=1 is not supported with device type=cpu")]:
        found = _by_rule(HERE / name)
        assert said in found["SRV004"].measurements["message"], name


def test_a_value_error_elsewhere_that_names_no_refused_setting_is_no_rejection(tmp_path):
    lines = ["Traceback (most recent call last):",
             '  File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_model_runner.py", line 5, in execute_model',
             "ValueError: some tensor was the wrong shape"]
    assert "SRV004" not in _by_rule(_write(tmp_path, lines))


def test_a_second_refusal_with_other_words_is_quoted_not_counted_as_the_first():
    """vLLM #28857: 'torch.bfloat16 is not supported for quantization method awq', then, with --dtype half, 'The
    model type 'gemma3' does not support float16': reported as the first message ×2, its advice leading into the
    second."""
    srv = _by_rule(HERE / "awq-dtype-gemma3-two-refusals.log")["SRV004"]
    assert srv.measurements["other_messages"][0].startswith("The model type 'gemma3' does not support float16")
    assert "does not support float16" in srv.summary


@pytest.mark.parametrize("name, said", [
    ("gemma-lora-not-supported-bare.log", "does not support LoRA, but LoRA is enabled"),  # vLLM #3044
    ("marlin-tile-not-divisible-bare.log", "Consider reducing tensor_parallel_size"),  # vLLM #13640
    ("gguf-tp-ray-repeated.log", "GGUF quantization hasn't supported tensor parallelism"),  # vLLM #7662, under Ray
    ("lora-batched-tokens-limit-bare.log", "must be <= 65528 when LoRA is enabled"),  # ms-swift #1723
])
def test_an_exception_that_names_a_setting_and_refuses_it_is_a_rejected_configuration(name, said):
    """Each was a LOG001 warning (exit 0): an exception line alone, no configuration frame above it."""
    srv = _by_rule(HERE / name)["SRV004"]
    assert said in srv.measurements["message"]
    assert srv.causes[0].confidence < 0.9 and srv.causes[0].against  # its words alone, said so


def test_a_prompt_too_long_for_the_context_is_no_rejected_configuration(tmp_path):
    line = ("ValueError: The decoder prompt (length 16476) is longer than the maximum model length of 16384. Make sure "
            "that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.")
    assert "SRV004" not in _by_rule(_write(tmp_path, [line]))


def test_no_platform_found_is_a_rejected_configuration_with_what_to_check():
    """vLLM #17249: the CUDA wheel on a CPU-only host, ``RuntimeError: Failed to infer device type`` raised in
    ``vllm/config.py``: a LOG001 warning in the configuration family, exit 0."""
    srv = _by_rule(HERE / "failed-to-infer-device-type-cpu-host.log")["SRV004"]
    assert srv.severity == "error" and "no platform was detected" in srv.next_steps[0].lower()
    assert not any("known by its words alone" in a for a in srv.causes[0].against)


def test_another_runtime_error_through_the_config_is_no_rejected_configuration(tmp_path):
    lines = ['  File "/venv/lib/python3.11/site-packages/vllm/config.py", line 1091, in __init__',
             "RuntimeError: CUDA driver initialization failed"]
    assert "SRV004" not in _by_rule(_write(tmp_path, lines))


def test_transformers_refusing_the_models_config_is_a_rejected_configuration_naming_its_version():
    """runpod worker-vllm #88: '`rope_scaling` must be a dictionary with two fields, `type` and `factor`' raised in
    transformers' configuration_llama.py (Llama 3.1 before transformers 4.43): a LOG001 warning, exit 0."""
    srv = _by_rule(HERE / "llama31-rope-scaling-old-transformers.log")["SRV004"]
    assert srv.severity == "error" and "transformers 4.43+" in srv.next_steps[0]


def test_a_value_error_of_transformers_elsewhere_is_no_rejected_configuration(tmp_path):
    lines = ['  File "/venv/lib/python3.10/site-packages/transformers/tokenization_utils_base.py", line 12, in encode',
             "ValueError: text input must be of type `str`"]
    assert "SRV004" not in _by_rule(_write(tmp_path, lines))


def test_a_model_repo_whose_config_code_must_run_asks_for_trust_remote_code_not_a_transformers_upgrade():
    """vLLM #5244: Phi-3-small without --trust-remote-code; transformers' resolve_trust_remote_code raised it through
    configuration_auto.py, and the finding told the user to upgrade transformers."""
    srv = _by_rule(HERE / "trust-remote-code-not-set.log")["SRV004"]
    assert srv.next_steps[0].startswith("The model's repo ships its own configuration code")
    assert "--trust-remote-code" in srv.next_steps[0]
    assert "upgrade transformers (and" not in " ".join(srv.next_steps) + srv.summary


def test_fp8_blocks_split_below_their_size_by_tensor_parallelism_ask_for_expert_parallelism():
    """vllm-project/vime #186 (and many threads with the same words): 768 / TP 8 = 96 is not a multiple of block_n
    128 because experts were split by TP without --enable-expert-parallel; pasted wrapped, a LOG001 warning before."""
    srv = _by_rule(HERE / "fp8-block-n-split-by-tp-wrapped.log")["SRV004"]
    assert "--enable-expert-parallel" in srv.next_steps[0] and "--tensor-parallel-size" in srv.next_steps[0]


def test_every_attention_backend_refused_with_the_needed_one_only_for_the_gpu_is_a_hardware_limit():
    """vLLM #31480: DeepSeek-V3.2 on an RTX PRO 6000 (sm_120): FLASHMLA_SPARSE refused only for compute capability,
    every other backend for 'sparse not supported'. SRV004 said to correct an option the message never names."""
    srv = _by_rule(HERE / "no-sparse-mla-backend-for-gpu.log")["SRV004"]
    assert srv.next_steps[0].startswith("FLASHMLA_SPARSE was refused only for this GPU's compute capability")
    assert "which no option changes" in srv.next_steps[0]


def test_backends_refused_without_one_refused_only_for_the_gpu_keep_the_general_advice(tmp_path):
    line = ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=64). Reasons: "
            "{FLASH_ATTN: [kv_cache_dtype not supported], TRITON_ATTN: [compute capability not supported], "
            "FLASHINFER: [compute capability not supported, not supported on this device]}.")
    srv = _by_rule(_write(tmp_path, [line]))["SRV004"]
    assert not srv.next_steps[0].startswith("TRITON_ATTN was refused only")
