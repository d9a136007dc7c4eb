"""The user's own question answered where they look: the suspected setting's verdict line in the verdict
block (``-q`` too), the leading cause called undetermined below the threshold, whole next steps."""

from __future__ import annotations

from pathlib import Path

from logbuilder import write
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.report.verdict import UNDETERMINED_BELOW

ROOT = Path(__file__).resolve().parent.parent
USER_LINES = [
    "(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Request chatcmpl-5c2eThe number of retrieved "
    "tokens is less than the expected number of tokens! This should not happen! "
    "(vllm_v1_adapter.py:878:lmcache.integration.vllm.vllm_v1_adapter)",
    "(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected "
    "tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)",
]


def _run(*args: str) -> tuple[int, list[str]]:
    res = CliRunner().invoke(app, ["analyze", *args, "--fail-on", "never"], env={"NO_COLOR": "1", "COLUMNS": "80"})
    return res.exit_code, res.output.splitlines()


def _suspect_block(lines: list[str], name: str) -> str:
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {name}:"))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if line.startswith("  ") and not line.startswith("   "):
            break
        block.append(line)
    return " ".join(block)


def test_the_users_two_lines_answer_save_decode_cache_in_the_first_ten_lines_of_q(tmp_path) -> None:
    code, lines = _run(write(tmp_path / "paste.log", USER_LINES), "-q")
    assert code == 0
    head = lines[:10]
    assert any(line.startswith("  save_decode_cache: rejected") for line in head), head
    block = _suspect_block(lines, "save_decode_cache")
    assert "only changes what is stored" in block and "specdiag repro --preset save-decode-cache" in block
    assert "*" not in block  # no markdown emphasis printed raw


def test_the_tp8_example_answers_save_decode_cache_in_the_first_ten_lines() -> None:
    _, lines = _run(str(ROOT / "examples/tp8-shortfall/serve.log"))
    assert any(line.startswith("  save_decode_cache: rejected") for line in lines[:10]), lines[:10]


def test_a_weak_leading_cause_is_called_undetermined_with_its_candidates(tmp_path) -> None:
    _, lines = _run(write(tmp_path / "paste.log", USER_LINES), "-q")
    text = " ".join(lines)
    assert "cause undetermined (leading: lookup-retrieve-eviction" in text and "most likely" not in text
    assert "0.10" in text.split("cause undetermined", 1)[1][:80]  # its confidence is below UNDETERMINED_BELOW
    assert 0.10 < UNDETERMINED_BELOW


def test_a_confident_cause_is_still_most_likely() -> None:
    _, lines = _run(str(ROOT / "examples/tp8-shortfall/serve.log"), "-q")
    assert "most likely pin-accounting-bug" in " ".join(lines)


def test_next_steps_are_never_cut_mid_sentence(tmp_path) -> None:
    _, lines = _run(write(tmp_path / "paste.log", USER_LINES), "-q")
    text = " ".join(line.strip() for line in lines)
    nxt = text.split("; next: ", 1)[1]
    assert "metric lmcache:local_cpu_evict_count" in nxt and not nxt.rstrip().endswith("…")


def test_an_asked_suspect_gets_a_line_weighed_or_not(tmp_path) -> None:
    path = write(tmp_path / "paste.log", USER_LINES)
    _, lines = _run(path, "-q", "--suspect", "enable_async_loading", "--suspect", "stale-draft-kv")
    assert _suspect_block(lines, "enable_async_loading").startswith("  enable_async_loading: rejected")
    assert "not weighed" in _suspect_block(lines, "stale-draft-kv")


def test_an_unknown_suspect_is_a_usage_error(tmp_path) -> None:
    res = CliRunner().invoke(app, ["analyze", write(tmp_path / "p.log", USER_LINES), "--suspect", "moon-phase"])
    assert res.exit_code == 2 and "unknown --suspect moon-phase" in res.output


def test_a_configuration_confounder_in_use_gets_its_line() -> None:
    _, lines = _run(str(ROOT / "examples/dynamic-k-stale-draft/serve.log"), "-q")
    assert _suspect_block(lines, "dynamic-k").startswith("  dynamic-k: supported")


def test_the_html_summary_answers_the_suspect_too() -> None:
    from specdiag.engine import analyze
    from specdiag.report.html import render_html

    page = render_html(analyze([str(ROOT / "examples/tp8-shortfall/serve.log")]))
    summary = page.split('<section id="verdict"', 1)[1].split("</section>", 1)[0]
    assert "<b>save_decode_cache</b>: <b>rejected</b>" in summary and "--preset save-decode-cache" in summary
