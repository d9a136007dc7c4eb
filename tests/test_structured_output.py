"""SRV005: the structured-output grammar refused the model's tokens, or could not be compiled (real excerpts under
``tests/real_so/``, and logs that show the server's options)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

HERE = Path(__file__).resolve().parent / "real_so"

ARGS = ("INFO 08-20 13:00:00 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-8B', %s}")
FSM = ("(EngineCore pid=375) ERROR 08-20 13:11:35 [backend_xgrammar.py:168] Failed to advance FSM for request "
       "chatcmpl-%d-97b50f1f for tokens 271. Please file an issue.")


def test_fsm_failure_scheduler_termination_and_the_500_are_one_finding_about_one_request():
    """vLLM #46118 (MTP + structured output): the FSM failure, the scheduler's 'Terminating request' and the API
    server's internal error for the same request were three unrelated LOG001 warnings, exit 0."""
    found = findings_by_rule(HERE / "mtp-grammar-rejected-terminated.log")
    so = found["SRV005"]
    assert so.severity == "error" and "LOG001" not in found
    assert so.measurements["requests"] == 1 and so.measurements["terminated"] == 1
    assert so.measurements["internal_errors"] == 1
    assert "start-up lines" in so.next_steps[0]  # the excerpt does not show which option is on


def test_grammar_refusals_without_termination_are_a_warning_per_request_count():
    """vLLM #29379: six FSM failures about two requests (async scheduling + structured output)."""
    so = findings_by_rule(HERE / "async-scheduling-fsm.log")["SRV005"]
    assert so.severity == "warning"
    assert so.measurements["lines"] == {"fsm": 6} and so.measurements["requests"] == 2


def test_speculative_decoding_in_the_args_leads_and_the_absent_options_count_against_the_others(tmp_path):
    lines = [ARGS % "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}"]
    lines += [FSM % i for i in range(3)]
    so = findings_by_rule(write_paste(tmp_path, lines))["SRV005"]
    assert so.causes[0].id == "so-spec-decode-drafts"
    assert not so.next_steps[0].startswith("Collect the server's start-up lines")
    against = {c.id: c.against for c in so.causes}
    assert any("async_scheduling" in w for w in against["so-async-scheduling"])


def test_async_scheduling_and_a_reasoning_parser_in_the_args_are_weighed(tmp_path):
    lines = [ARGS % "'async_scheduling': True"] + [FSM % i for i in range(3)]
    assert findings_by_rule(write_paste(tmp_path, lines))["SRV005"].causes[0].id == "so-async-scheduling"
    lines = [ARGS % "'reasoning_parser': 'qwen3'"] + [FSM % i for i in range(3)]
    so = findings_by_rule(write_paste(tmp_path, lines))["SRV005"]
    assert so.causes[0].id == "so-reasoning-boundary"
    assert any("token 271 refused 3" in w for w in so.causes[0].for_)


def test_a_grammar_that_failed_to_compile_fails_its_request(tmp_path):
    line = ("(EngineCore pid=9) ERROR 08-20 13:11:35 [__init__.py:197] Failed to compile grammar for request "
            "chatcmpl-1-2")
    so = findings_by_rule(write_paste(tmp_path, [line]))["SRV005"]
    assert so.severity == "error" and so.causes[0].id == "so-grammar-compile"


def test_other_structured_output_warnings_are_not_this_rule(tmp_path):
    line = ("WARNING 08-20 13:11:35 [utils.py:50] Enabling outlines cache. This is an unbounded on-disk cache. It may "
            "consume a lot of disk space and should not be used with untrusted clients.")
    assert "SRV005" not in findings_by_rule(write_paste(tmp_path, [line]))
