"""SRV006: a request refused because its prompt, with the output it asks for, is longer than the context. Real
excerpts under ``tests/real_requests/``; each was a LOG001 warning telling the user to read vLLM's source."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule, write_paste

from specdiag.analyzers.request_context import read_refusal
from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_requests"
ARGS = ("INFO 07-01 10:00:00 [cli_args.py:309] non-default args: {'model': 'OpenGVLab/InternVL3-14B', "
        "'max_model_len': 32768}")
CFG = ("INFO 07-01 10:00:02 [core.py:69] Initializing a V1 LLM engine (v0.9.1) with config: model='OpenGVLab/InternVL3-14B', "
       "speculative_config=None, tokenizer='OpenGVLab/InternVL3-14B', dtype=torch.bfloat16, max_seq_len=12288, "
       "tensor_parallel_size=1, pipeline_parallel_size=1")
REFUSAL = ("ERROR 07-01 10:05:00 [serving_chat.py:198] ValueError: The decoder prompt (length 18425) is longer than the "
           "maximum model length of 12288. Make sure that `max_model_len` is no smaller than the number of text tokens.")


def test_a_refusal_with_its_messages_and_completion_says_the_output_budget_that_fits():
    """specreason #4: 7691 in the messages + 512 in the completion = 8203 > 8192."""
    found = findings_by_rule(HERE / "max-context-8192-requested-8203.log")
    srv = found["SRV006"]
    m = srv.measurements
    assert (m["context_tokens"], m["prompt_tokens"], m["output_tokens"], m["over_by"]) == (8192, 7691, 512, 11)
    assert "max_tokens ≤ 501 would have served it" in srv.summary
    assert "LOG001" not in found and srv.severity == "warning"


def test_a_prompt_counted_at_least_is_no_promise_that_fewer_output_tokens_fit():
    """vllm-ascend #10952: 'your prompt contains at least 35961 input tokens': the tokenizer stopped counting."""
    srv = findings_by_rule(HERE / "ascend-validation-error-at-least.log")["SRV006"]
    assert srv.measurements["total_tokens"] == 50961 and srv.measurements["over_by"] == 1
    assert "would have served it" not in srv.summary and "at least 35,961" in srv.summary


def test_a_decoder_prompt_longer_than_the_model_length_is_a_refusal_not_a_rejected_configuration():
    """vLLM #20241: 'The decoder prompt (length 18425) is longer than the maximum model length of 12288'."""
    report = analyze([str(HERE / "decoder-prompt-longer-internvl3.log")])
    rules = {f.rule for f in report.findings}
    assert rules == {"SRV006"} and report.exit_code("error") == 0
    srv = report.findings[0]
    assert srv.measurements["prompt_tokens"] == 18425 and "6,137 over the context" in srv.summary


def test_a_server_started_with_a_longer_context_than_it_refuses_at_leads_with_the_cap(tmp_path):
    """The thread of #20241: --max-model-len 32768 asked, the engine ran with max_seq_len=12288 (0.9.1 capped it)."""
    srv = findings_by_rule(write_paste(tmp_path, [ARGS, CFG, REFUSAL]))["SRV006"]
    assert srv.causes[0].id == "context-capped"
    assert any("max_model_len=32,768" in w and "max_seq_len=12,288" in w for w in srv.causes[0].for_)


def test_a_server_whose_context_is_what_it_refuses_at_leads_with_the_request(tmp_path):
    args = ARGS.replace("32768", "12288")
    srv = findings_by_rule(write_paste(tmp_path, [args, CFG, REFUSAL]))["SRV006"]
    assert srv.causes[0].id == "prompt-over-context"


def test_other_exception_lines_stay_unexplained_beside_a_refusal(tmp_path):
    """The rule reads every logged exception for its refusals: its finding must not account for the others."""
    other = "ERROR 07-01 10:05:01 [serving_chat.py:198] RuntimeError: something else entirely went wrong"
    found = findings_by_rule(write_paste(tmp_path, [REFUSAL, other]))
    assert "SRV006" in found and found["LOG001"].summary.startswith("1 vLLM ERROR line ")
    assert found["LOG001"].evidence[0].text.endswith("something else entirely went wrong")


@pytest.mark.parametrize("text, numbers", [
    ("Input prompt (9000 tokens) is too long and exceeds limit of 8192", (8192, 9000, None, 9000)),
    ("Prompt length of 5000 is longer than the maximum model length of 4096.", (4096, 5000, None, 5000)),
    ("The decoder prompt (length 4096) plus the number of requested output tokens (at least 1) is longer than the "
     "maximum model length of 4096.", (4096, 4096, 1, 4097)),
    ("This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens, which "
     "exceeds this limit even without any output tokens.", (4096, 5000, None, 5000)),
    ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the input for "
     "embedding generation.", (4096, None, None, 5000)),
])
def test_each_releases_wording_gives_its_numbers(text, numbers):
    r = read_refusal(text)
    assert r is not None and (r.limit, r.prompt, r.output, r.total) == numbers


def test_a_line_about_something_else_is_no_refusal():
    assert read_refusal("The model's max seq len (29000) is larger than the maximum number of tokens that can be "
                        "stored in KV cache (23648).") is None


def test_v0s_scheduler_ignoring_a_prompt_says_its_limit_may_be_the_batch_budget():
    """vLLM #13209: 'Input prompt (32889 tokens) is too long and exceeds limit of 2048' with a 32k+ max_model_len:
    the limit was max_num_batched_tokens (chunked prefill off), and the request ended with no output, no HTTP 400."""
    srv = findings_by_rule(HERE / "v0-scheduler-prompt-limit-2048.log")["SRV006"]
    assert "ignored 1 request(s)" in srv.summary and "HTTP 400" not in srv.summary
    assert {c.id for c in srv.causes[:2]} == {"prompt-over-context", "prompt-over-batch-budget"}


def test_a_v0_limit_below_the_engines_context_is_the_batch_budget(tmp_path):
    cfg = CFG.replace("max_seq_len=12288", "max_seq_len=40960")
    line = "WARNING 07-01 10:05:00 [scheduler.py:949] Input prompt (32889 tokens) is too long and exceeds limit of 2048"
    srv = findings_by_rule(write_paste(tmp_path, [cfg, line]))["SRV006"]
    assert srv.causes[0].id == "prompt-over-batch-budget"
