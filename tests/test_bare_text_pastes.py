"""Message texts pasted without their headers ('I get this warning: Sequence group 3 is preempted …'): a small
input of which nothing was recognised is read a second time, each line looked up by its text alone (templates
by their first word, specific error texts, the catalog's formats with enough literal text). Before, each of
these was 'nothing recognised', exit 3."""

from __future__ import annotations

from pathlib import Path

from pasted import write_paste

from specdiag.engine import BARE_PASTE_MAX, analyze
from specdiag.report.verdict import BARE_HINT

HERE = Path(__file__).resolve().parent / "real_deaths"
PREEMPTED = ("Sequence group 221 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
             "space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
             "tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=101")


def _formats(report) -> set[str]:
    return {f for i in report.inputs for f in i.get("formats") or ()}


def test_a_bare_vllm_warning_is_read_as_that_message(tmp_path):
    """GAIR-NLP/LIMO issue #29: V0's preemption warning quoted alone."""
    report = analyze([str(write_paste(tmp_path, [PREEMPTED]))])
    assert report.inputs[0]["recognized"] == 1
    (srv002,) = [f for f in report.findings if f.rule == "SRV002"]  # the scheduler's own warning: the KV cache was full
    assert srv002.measurements["preemptions"] == 101 and srv002.evidence[0].text.endswith("preemption=101")
    assert {"bare-text", "vllm"} <= _formats(report)


def test_a_bare_lmcache_lookup_line_is_read_by_its_template(tmp_path):
    """LMCache issue #2703's title: the adapter's lookup line alone (its negative 'need to load' is normal)."""
    log = write_paste(tmp_path, ["Reqid: chatcmpl-8c24fecc6f854a3e-873d5034, Total tokens 836, LMCache hit tokens: "
                                 "768, need to load: -64"])
    report = analyze([str(log)])
    assert report.inputs[0]["recognized"] == 1 and {"bare-text", "lmcache"} <= _formats(report)
    assert not report.findings


def test_a_v0_start_failure_quoted_without_headers_is_the_engines_death():
    """vLLM issue #10517: V0's start-up lines and its ValueError, all without a header."""
    srv = next(f for f in analyze([str(HERE / "v0-bare-max-seq-len.log")]).findings if f.rule == "SRV001")
    assert srv.causes[0].id == "kv-cache-memory" and srv.measurements["failed_at_start"] is True
    assert "max seq len (29000)" in srv.measurements["root_error"]


def test_other_programs_lines_stay_unrecognised_and_the_hint_is_only_for_bare_reads(tmp_path):
    log = write_paste(tmp_path, ["hello world", "this is not a log line at all", "Loading checkpoint shards"])
    report = analyze([str(log)])
    assert report.inputs[0]["recognized"] == 0 and "bare-text" not in _formats(report)
    from specdiag.report.verdict import status

    assert BARE_HINT not in status(report, []).hints


def test_a_large_input_is_never_read_again(tmp_path):
    """Above BARE_PASTE_MAX an input is a log, not a paste: nothing in it is looked up line by line."""
    log = tmp_path / "big.log"
    filler = b"some other program says hello\n" * (BARE_PASTE_MAX // 30 + 10)
    log.write_bytes(filler + PREEMPTED.encode() + b"\n")
    report = analyze([str(log)])
    assert report.inputs[0]["recognized"] == 0 and "bare-text" not in _formats(report)


def test_a_bare_paste_on_standard_input_is_read_again_from_what_it_gave():
    """A pipe cannot be read a second time: what it gave is kept while it is small (``BARE_PASTE_MAX``)."""
    from typer.testing import CliRunner

    from specdiag.cli import app

    res = CliRunner().invoke(app, ["analyze", "-", "-f", "json"], input=PREEMPTED + "\n")
    assert res.exit_code == 0 and '"bare-text"' in res.output
    big = "some other program says hello\n" * (BARE_PASTE_MAX // 30 + 10) + PREEMPTED + "\n"
    res = CliRunner().invoke(app, ["analyze", "-", "-q"], input=big)
    assert res.exit_code == 3  # a larger stream is a log: not kept, not read again


def test_a_bare_lmcache_message_with_its_suffix_is_read_at_that_place(tmp_path):
    """LMCache issue #1961: the S3 remote backend's set-up failed (its chunk size never set), pasted without the
    header but with LMCache's ``(file.py:N:logger)`` suffix. It was 'no problem found' (a catalogued WARNING
    pointed at line 160): the template tried on every record was never tried on a bare line."""
    log = write_paste(tmp_path, ["Failed to initialize/re-establish remote connection: 'NoneType' object cannot be "
                                 "interpreted as an integer (remote_backend.py:129:lmcache.v1.storage_backend."
                                 "remote_backend)"])
    report = analyze([str(log)])
    (kv,) = [f for f in report.findings if f.rule == "KV013"]
    assert kv.causes[0].id == "backend-not-connected"
    assert kv.summary.startswith("LMCache's remote backend did not connect")
    assert kv.evidence[0].text.startswith("LMCache WARN")  # read as LMCache's record, its suffix as its place


def test_markdown_around_a_bare_message_is_not_part_of_it(tmp_path):
    """vLLM #8620 pasted its V0 metrics line in bold (``**Speculative metrics: …**``); a list bullet is as common."""
    report = analyze([str(write_paste(tmp_path, [f"- **{PREEMPTED}**"]))])
    assert report.inputs[0]["recognized"] == 1
    assert any(f.measurements.get("preemptions") == 101 for f in report.findings if f.rule == "SRV002")
