"""SRV011: chat requests refused while vLLM rendered their prompt. Real excerpts under ``tests/real_requests/``; each
was a LOG001 warning sending the user to read vLLM's source, one of them saying the traceback in the paste was
not there (vLLM #38560)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule, write_paste

HERE = Path(__file__).resolve().parent / "real_requests"


@pytest.mark.parametrize(("name", "cause"), [
    ("chat-template-resolution-error.log", "no-chat-template"),  # LLMFlux #85: ChatTemplateResolutionError, then 400
    ("tokenizer-mode-not-registered.log", "tokenizer-mode-unsupported"),  # vLLM #30933: deepseek_v32 on 0.12
    ("mistral-tokenizer-rejects-reasoning-effort.log", "tokenizer-rejects-argument"),  # vLLM #38560
    ("mistral-unexpected-role-order.log", "chat-request-invalid"),  # mistral-vibe #454: user after tool
    ("content-part-without-type.log", "chat-request-invalid"),  # Qwen3-VL #142: a content part without 'type'
])
def test_a_chat_request_refused_while_rendering_names_why_as_a_warning(name, cause):
    srv = findings_by_rule(HERE / name)["SRV011"]
    assert srv.severity == "warning" and srv.causes[0].id == cause
    assert "HTTP 400" in srv.summary and "No crash" in srv.summary


def test_one_request_whose_exception_the_paste_quotes_twice_is_counted_once():
    """vLLM #38560's paste: the ValueError above its traceback, and again as the traceback's last line."""
    srv = findings_by_rule(HERE / "mistral-tokenizer-rejects-reasoning-effort.log")["SRV011"]
    assert srv.measurements["refused"] == 1


def test_a_frame_naming_the_exception_class_is_not_another_refusal():
    """LLMFlux #85: ``raise ChatTemplateResolutionError(`` in the traceback, then its exception line."""
    srv = findings_by_rule(HERE / "chat-template-resolution-error.log")["SRV011"]
    assert srv.measurements["refused"] == 1


def test_the_start_up_warm_up_alone_is_an_info_that_refuses_nothing_yet():
    """vllm-omni #1650: 'Chat template warmup failed' for a TTS model with no chat template; serving goes on."""
    srv = findings_by_rule(HERE / "chat-template-warmup-failed.log")["SRV011"]
    assert srv.severity == "info" and srv.causes[0].id == "no-chat-template"
    assert srv.measurements == {"refused": 0, "warmup_failures": 1, "by_kind": {}}
    assert srv.causes[0].against


def test_other_value_errors_of_the_api_server_are_not_chat_refusals(tmp_path):
    log = write_paste(tmp_path, ["ERROR 03-05 16:30:27 [serving.py:323] ValueError: temperature must be non-negative"])
    assert "SRV011" not in findings_by_rule(log)
