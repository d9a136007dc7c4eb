"""'No problem found' only when a recognised line reached the rules as a whole, usable record; recognised
lines that were all cut, or records no rule reads, say 'nothing analysed' with what to collect."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from logbuilder import lmc, lookup, vllm, write

from specdiag.analyzers.base import all_rules
from specdiag.engine import analyze
from specdiag.report.markdown import render_markdown
from specdiag.report.verdict import COLLECT_MORE, COLLECT_WHOLE, status

ROOT = Path(__file__).resolve().parent.parent


def _status(path: Path):
    report = analyze([str(path)])
    return report, status(report, list(all_rules()))


def test_a_recognised_record_cut_at_the_length_limit_alone_is_nothing_analysed(tmp_path: Path) -> None:
    """Before: 'no problem found: 1 of 1 lines recognised' (what the CR-only file gave as one 1 MiB line)."""
    log = tmp_path / "long.log"
    log.write_text(vllm("x" * (2 * 1024 * 1024), loc="api_utils.py:339", proc="APIServer pid=1") + "\n")
    report, st = _status(log)
    assert report.recognized_lines == 1 and report.inputs[0]["cut_lines"] == 1
    assert st.kind == "nothing-analysed" and "no problem found" not in st.text
    assert "cut at a length limit" in st.text and st.hints == (COLLECT_WHOLE,)


def test_a_cut_record_that_a_template_read_in_part_is_still_nothing_analysed(tmp_path: Path) -> None:
    log = tmp_path / "dump.log"
    log.write_text(vllm("non-default args: {" + "'x': 1, " * 200_000 + "}", loc="api_server.py:1") + "\n")
    report, st = _status(log)
    assert report.analysed == 1 and st.kind == "nothing-analysed"


def test_records_no_rule_reads_are_nothing_analysed_and_named(tmp_path: Path, run_cli) -> None:
    lines = [lmc(f"Something no template knows {i}", loc=f"foo.py:{i}", logger="lmcache.foo") for i in range(20)]
    log = write(tmp_path / "unknown.log", lines)
    report, st = _status(Path(log))
    assert report.analysed == 0 and report.recognized_lines == 20
    assert st.kind == "nothing-analysed" and "20 lmcache records no rule reads" in st.text
    assert st.hints == (COLLECT_MORE,)
    code, out, _ = run_cli("analyze", log)
    assert code == 0 and "nothing analysed" in out and "no problem found" not in out  # exit codes unchanged
    code, out, _ = run_cli("analyze", log, "--format", "json")
    assert code == 0 and json.loads(out)["inputs"][0]["recognized"] == 20


def test_the_markdown_summary_of_nothing_analysed_is_not_a_green_tick(tmp_path: Path) -> None:
    log = write(tmp_path / "unknown.log", [lmc("Something no template knows", loc="foo.py:1", logger="lmcache.foo")])
    md = render_markdown(analyze([log]))
    assert "✅" not in md and "No findings." not in md and "Nothing analysed" in md


def test_one_usable_record_among_unknown_ones_is_not_called_clean(tmp_path: Path) -> None:
    """The usable record was judged, but the LMCache record no catalogued release prints was not: no
    'no problem found' while upstream lines went unread."""
    lines = [lmc("Something no template knows", loc="foo.py:1", logger="lmcache.foo"), lookup("chatcmpl-a", 512, 0)]
    report, st = _status(Path(write(tmp_path / "one.log", lines)))
    assert report.analysed >= 1 and st.kind == "unknown-records" and "no problem found" not in st.text
    assert "1 vLLM/LMCache record carries a message no template" in st.text


def test_a_healthy_example_is_still_no_problem_found() -> None:
    report, st = _status(ROOT / "examples/healthy-ngram/serve.log")
    assert report.analysed > 1000 and st.kind == "clean"


def test_input_nothing_recognises_is_still_nothing_recognised(tmp_path: Path, run_cli) -> None:
    log = write(tmp_path / "other.log", ["hello world", "not a server log"])
    _, st = _status(Path(log))
    assert st.kind == "nothing-recognised"
    assert run_cli("analyze", log)[0] == 3


def test_a_report_the_engine_did_not_count_keeps_the_clean_status(tmp_path: Path) -> None:
    """``analysed`` None (a report built elsewhere, e.g. from a stored one): nothing is inferred."""
    report = replace(analyze([str(ROOT / "examples/healthy-ngram/serve.log")]), analysed=None)
    assert status(report, list(all_rules())).kind == "clean"


ACCESS = 'INFO:     10.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK'


def test_whether_anything_was_analysed_does_not_depend_on_the_scanner(tmp_path: Path, monkeypatch) -> None:
    """The compiled scanner, the Python one and none at all: the same status for the same lines."""
    from specdiag import engine
    from specdiag.ingest import scan

    logs = {"unknown": [lmc("Something no template knows", loc="foo.py:1", logger="lmcache.foo")] * 3,
            "access": [f"(APIServer pid=1) {ACCESS}"] * 3, "lookup": [lookup("chatcmpl-a", 512, 0)]}
    real = engine.iter_records
    for name, lines in logs.items():
        log = Path(write(tmp_path / f"{name}.log", lines))
        kinds = {_status(log)[1].kind}
        with monkeypatch.context() as m:
            m.setattr(scan, "_compiled", None)
            kinds.add(_status(log)[1].kind)
        with monkeypatch.context() as m:
            m.setattr(engine, "iter_records", lambda src, hot=None, window=None, **_scan: real(src, None, window))
            kinds.add(_status(log)[1].kind)
        assert kinds == {"nothing-analysed" if name == "unknown" else "clean"}, name


def test_a_clean_log_without_lmcache_lines_says_the_kv_rules_had_nothing_to_judge(tmp_path: Path) -> None:
    log = write(tmp_path / "vllm-only.log", [vllm("vLLM API server version 0.11.0", loc="api_server.py:1")])
    report, st = _status(Path(log))
    assert st.kind == "clean" and st.text.startswith("no problem found")  # the exit code contract is unchanged
    assert "no LMCache line and no speculative-decoding metrics" in st.text and "KV and SD rules" in st.text
    assert st.hints and "LMCACHE_LOG_LEVEL" in st.hints[0]


def test_a_clean_log_with_lmcache_lines_makes_no_such_note(tmp_path: Path) -> None:
    report, st = _status(Path(write(tmp_path / "one.log", [lookup("chatcmpl-a", 512, 0)])))
    assert st.kind == "clean" and "nothing to judge" not in st.text and not st.hints


def test_the_markdown_summary_of_a_log_without_lmcache_says_what_had_nothing_to_judge(tmp_path: Path) -> None:
    log = write(tmp_path / "vllm-only.log", [vllm("vLLM API server version 0.11.0", loc="api_server.py:1")])
    md = render_markdown(analyze([log]))
    assert "No findings; the log holds no LMCache line" in md and "LMCACHE\\_LOG\\_LEVEL" in md


def test_the_ci_text_of_a_log_without_lmcache_says_what_had_nothing_to_judge(tmp_path: Path) -> None:
    from specdiag.report.text import render_text

    log = write(tmp_path / "vllm-only.log", [vllm("vLLM API server version 0.11.0", loc="api_server.py:1")])
    assert "specdiag: no findings; the log holds no LMCache line" in render_text(analyze([log]))
    with_lmcache = write(tmp_path / "lmc.log", [lookup("chatcmpl-a", 512, 0)])
    assert "nothing to judge" not in render_text(analyze([with_lmcache]))


def test_lines_of_other_programs_keep_a_clean_log_from_being_called_problem_free(tmp_path: Path) -> None:
    """Eight error lines of Mooncake's C++ client (glog) around one vLLM line: specdiag judges the vLLM line
    only, so it says so instead of 'no problem found'."""
    glog = "E0905 01:00:51.157 2345 master_client.cpp:297] Failed to end put operation: RPC_FAIL"
    log = write(tmp_path / "mixed.log", [glog] * 4 + [vllm("vLLM API server version 0.11.0", loc="api_server.py:1")]
                + [glog] * 4)
    report, st = _status(Path(log))
    assert st.kind == "clean" and "no problem found" not in st.text
    assert st.text.startswith("no finding in the 1 recognised line (all ")
    assert st.text.endswith("; 8 of 9 lines are not vLLM/LMCache output and were not judged")
