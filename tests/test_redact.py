"""``--redact``: prompt and completion text never reaches any output format."""

from __future__ import annotations

import copy
import importlib
import io
import json
from pathlib import Path

import pytest

from specdiag.findings import Cause, Evidence, Finding
from specdiag.redact import redact_report, redact_text
from specdiag.report.model import Report
from specdiag.ruledocs import rule_table

CORPUS = Path(__file__).resolve().parent / "corpus"
SECRET = "TOPSECRET"


@pytest.mark.parametrize("line, expected", [
    # vLLM ≥ 0.10 request logger
    ("Received request chatcmpl-1: prompt: '<|user|>\\nTOPSECRET plan<|end|>', params: SamplingParams(n=1, "
     "temperature=0.7), prompt_token_ids: [151644, 872, 198], prompt_embeds shape: None, lora_request: None.",
     "Received request chatcmpl-1: prompt: [redacted: 30 chars], params: SamplingParams(n=1, temperature=0.7), "
     "prompt_token_ids: [redacted: 3 token ids], prompt_embeds shape: None, lora_request: None."),
    # repr picks double quotes when the text holds a single quote
    ("Received request cmpl-2: prompt: \"it's TOPSECRET\", params: SamplingParams(n=1), prompt_token_ids: [1]",
     "Received request cmpl-2: prompt: [redacted: 14 chars], params: SamplingParams(n=1), "
     "prompt_token_ids: [redacted: 1 token ids]"),
    ("prompt: 'a \\' TOPSECRET, params: x', params: SamplingParams()",
     "prompt: [redacted: 24 chars], params: SamplingParams()"),
    # a line cut short (max line length, truncated evidence): redact to the end
    ("Received request cmpl-3: prompt: 'TOPSECRET goes on and on", "Received request cmpl-3: prompt: [redacted: 24 chars]"),
    ("prompt_token_ids: [1, 2, 3, 4", "prompt_token_ids: [redacted: 4 token ids]"),
    # --enable-log-outputs
    ("Generated response chatcmpl-1: output: 'The TOPSECRET answer', output_token_ids: [5, 6], finish_reason: stop",
     "Generated response chatcmpl-1: output: [redacted: 20 chars], output_token_ids: [redacted: 2 token ids], "
     "finish_reason: stop"),
    ("Generated response chatcmpl-1 (streaming delta): output: 'TOPSECRET', output_token_ids: [7], finish_reason: None",
     "Generated response chatcmpl-1 (streaming delta): output: [redacted: 9 chars], "
     "output_token_ids: [redacted: 1 token ids], finish_reason: None"),
    # RequestOutput / CompletionOutput reprs
    ("RequestOutput(request_id=1, prompt='TOPSECRET', prompt_token_ids=[1, 2], outputs=[CompletionOutput(index=0, "
     "text=' more TOPSECRET', token_ids=[3], cumulative_logprob=None)], finished=True)",
     "RequestOutput(request_id=1, prompt=[redacted: 9 chars], prompt_token_ids=[redacted: 2 token ids], "
     "outputs=[CompletionOutput(index=0, text=[redacted: 15 chars], token_ids=[redacted: 1 token ids], "
     "cumulative_logprob=None)], finished=True)"),
    # JSON bodies and chat messages
    ('{"prompt": "TOPSECRET", "max_tokens": 5}', '{"prompt": [redacted: 9 chars], "max_tokens": 5}'),
    ("'messages': [{'role': 'user', 'content': 'TOPSECRET'}]",
     "'messages': [{'role': 'user', 'content': [redacted: 9 chars]}]"),
    ("prompt: ['TOPSECRET one', 'two'], params: x", "prompt: [redacted: 16 chars], params: x"),
    ("prompt: ['one', 'TOPSECRET cut sh", "prompt: [redacted: 25 chars]"),
])
def test_redact_text(line, expected):
    out = redact_text(line)
    assert out == expected
    assert SECRET not in out
    assert redact_text(out) == out  # idempotent


@pytest.mark.parametrize("line", [
    "Engine 000: Avg prompt throughput: 1147.9 tokens/s, Avg generation throughput: 92.7 tokens/s, Running: 1 reqs",
    "SpecDecoding metrics: Mean acceptance length: 2.76, Accepted: 590 tokens, Drafted: 1010 tokens",
    "LMCache INFO: Retrieved 17152 out of 20480 required tokens (from 20480 total tokens).",
    "the output: 3 tokens; prompt: None; context: 'kept' and pretext='kept'",
    "max_model_len=8192, prompt_logprobs=None, output_kind=RequestOutputKind.DELTA",
    "",
])
def test_ordinary_lines_are_untouched(line):
    assert redact_text(line) == line


def _secret_report() -> Report:
    line = (f"(APIServer pid=1) INFO 10-21 09:19:00 [logger.py:49] Received request chatcmpl-9: prompt: "
            f"'{SECRET} user text', params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3], lora_request: None.")
    f = Finding(
        rule="KV001", severity="error", title="shortfall", summary=f"the request said prompt: '{SECRET}'",
        evidence=[Evidence("/l.log", 7, line)],
        measurements={"prompt": f"{SECRET}", "prompt_token_ids": [1, 2, 3], "request": line, "nested": {"x": [line]},
                      "expected_tokens": 20480},
        causes=[Cause("c", 0.5, [f"e.g. line 7: {line}"], [], "fix", "")],
        next_steps=[f"look at output: '{SECRET}'"], first_seen=1761038310.0)
    return Report(
        inputs=[{"path": "/l.log", "lines": 10, "recognized": 10, "skipped": 0, "formats": ["vllm"], "errors": []}],
        context={"model": "m", "last_prompt": f"prompt: '{SECRET}'"},
        findings=[f],
        timeline={"series": {}, "markers": [{"t": 1761038310.0, "kind": "error", "label": line, "rank": None,
                                             "rule": None}]},
        unrecognized={"vllm": 1, "top_warnings": {f"WARNING Received request x: prompt: '{SECRET} …": 1}},
        rules=rule_table(),
    )


def test_report_is_redacted_for_every_renderer(tmp_path):
    original = _secret_report()
    r = redact_report(original)
    assert r is not original and r.redacted is True
    assert SECRET in original.findings[0].evidence[0].text  # redaction returns a new report
    f = r.findings[0]
    assert isinstance(f.evidence[0], Evidence)
    assert "prompt: [redacted: 19 chars]" in f.evidence[0].text
    assert "prompt_token_ids: [redacted: 3 token ids]" in f.evidence[0].text
    assert "lora_request: None." in f.evidence[0].text  # the rest of the line is kept
    assert f.measurements["prompt"] == "[redacted: 9 chars]"
    assert f.measurements["prompt_token_ids"] == "[redacted: 3 token ids]"
    assert f.measurements["expected_tokens"] == 20480
    # the rule table is the registry's documentation, not log text: carried over as it is, not copied or walked
    assert r.rules.keys() == original.rules.keys() and r.rules["KV001"] is original.rules["KV001"]

    from specdiag.report.html import render_html
    from specdiag.report.json_report import render_json
    from specdiag.report.terminal import render_terminal

    outs = {"json": render_json(r), "html": render_html(r)}
    buf = io.StringIO()
    render_terminal(r, verbose=True, color=False, file=buf)
    outs["text"] = buf.getvalue()
    try:
        md = importlib.import_module("specdiag.report.markdown")
        outs["markdown"] = md.render_markdown(r)
    except ImportError:
        pass
    for name, text in outs.items():
        assert SECRET not in text, name
    assert json.loads(outs["json"])["findings"][0]["measurements"]["expected_tokens"] == 20480
    assert "prompts and completions redacted" in outs["html"]

    before = copy.deepcopy(r.to_dict())
    assert redact_report(r).to_dict() == before  # idempotent


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.glob("*/") if p.is_dir()) if CORPUS.exists() else [])
def test_corpus_reports_without_prompts_are_unchanged(case):
    """Redaction touches request text only: the diagnosis of a log without prompts is identical."""
    from specdiag.engine import analyze

    logs = [str(p) for p in (CORPUS / case).iterdir() if p.name.endswith(".log")]
    if not logs:
        pytest.skip("no log")
    r = analyze(logs)
    before = copy.deepcopy(r.to_dict())
    tl = copy.deepcopy(r.timeline)
    red = redact_report(r)
    assert red.to_dict() == before
    assert red.timeline == tl


def test_cli_redacts_text_output(tmp_path):
    from typer.testing import CliRunner

    from specdiag.cli import app

    log = CORPUS / "tp4-cpu-eviction-vllm011" / "vllm.log"
    if not log.exists():
        pytest.skip("corpus missing")
    text = log.read_text(encoding="utf-8", errors="replace")
    # make the shortfall's own evidence line carry request text
    text = text.replace("need to load: 20480", f"need to load: 20480, prompt: '{SECRET}'", 1)
    p = tmp_path / "v.log"
    p.write_text(text, encoding="utf-8")
    runner = CliRunner()
    plain = runner.invoke(app, ["analyze", str(p), "-v", "--fail-on", "never"])
    assert SECRET in plain.output  # the test would prove nothing otherwise
    for fmt in ("text", "json"):
        res = runner.invoke(app, ["analyze", str(p), "-v", "--redact", "-f", fmt, "--fail-on", "never"])
        assert SECRET not in res.output, fmt
        assert "[redacted: 9 chars]" in res.output, fmt
