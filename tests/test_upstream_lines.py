"""Every vLLM/LMCache warning and error lands in a finding: the specific rules first, LOG001/LOG002 for the rest.

The lines are built from upstream formats (tests/logbuilder.py) or rendered from the shipped message
catalog, never copied from a corpus file.
"""

from __future__ import annotations

from logbuilder import lmc, vllm, write
from typer.testing import CliRunner

from specdiag.catalog import catalog
from specdiag.cli import app
from specdiag.engine import analyze
from specdiag.report.verdict import status

UNKNOWN_ERROR = lmc("Frobnicator exploded while flushing 42 widgets", level="ERROR", loc="frob_backend.py:77",
                    logger="lmcache.v1.frob_backend", proc="Worker_TP1 pid=9")
USER_R2 = ("(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected "
           "tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)")


def _report(tmp_path, lines, **kw):
    return analyze([write(tmp_path / "paste.log", lines)], **kw)


def _rule(report, code):
    return [f for f in report.findings if f.rule == code]


def _entry_line(pred, level: str) -> tuple[object, str]:
    """A catalog entry of LMCache at ``level`` satisfying ``pred``, rendered in LMCache's envelope."""
    cat = catalog()
    for e in cat.entries:
        if e.project == "lmcache" and e.level == level and e.fmt and pred(e):
            release = sorted(e.lines)[-1]
            file = e.module.rsplit("/", 1)[-1]
            return e, lmc(cat.sample(e), level=level, loc=f"{file}:{e.lines[release]}",
                          logger="lmcache." + e.module[:-3].replace("/", "."), proc="Worker_TP0 pid=5")
    raise AssertionError("no such catalog entry")


def test_an_unknown_lmcache_error_is_named_not_called_clean(tmp_path):
    report = _report(tmp_path, [UNKNOWN_ERROR])
    found = _rule(report, "LOG001")
    assert len(found) == 1
    f = found[0]
    assert f.measurements["family"] == "unrecognised" and f.count == 1
    assert "Frobnicator exploded" in f.measurements["messages"][0]["message"]
    assert f.measurements["ranks"] == ["TP1"]
    assert "no problem found" not in status(report, []).text


def test_a_catalogued_backend_error_is_grouped_by_its_family_with_its_upstream_location(tmp_path):
    entry, line = _entry_line(lambda e: "s3" in e.module.lower() and e.family, "ERROR")
    report = _report(tmp_path, [line, line.replace("Worker_TP0", "Worker_TP3")])
    [f] = _rule(report, "LOG001")
    assert f.measurements["family"] == entry.family and f.count == 2
    msg = f.measurements["messages"][0]
    at = entry.lines[sorted(entry.lines)[-1]]  # the line _entry_line printed
    # the line the log names, and the releases that print the message from it
    assert msg["location"] == f"lmcache {entry.module}:{at}" and msg["releases"] == entry.releases_at(at)
    assert msg["ranks"] == ["TP0", "TP3"] and len(f.evidence) == 2  # first and last line


def test_lines_a_reporting_rule_read_are_left_to_that_rule(tmp_path):
    report = _report(tmp_path, [USER_R2])
    assert _rule(report, "KV001")
    assert not _rule(report, "LOG001")  # the error pair is KV001's diagnosis, not an unexplained error


def test_warnings_no_rule_reads_become_one_info_finding_per_family(tmp_path):
    _, line = _entry_line(lambda e: "nixl" in e.module.lower() and e.family, "WARNING")
    report = _report(tmp_path, [line] * 3)
    [f] = _rule(report, "LOG002")
    assert f.severity == "info" and f.count == 3 and len(f.evidence) == 2


def test_unknown_error_fails_the_gate_at_warning(tmp_path):
    path = write(tmp_path / "paste.log", [UNKNOWN_ERROR])
    res = CliRunner().invoke(app, ["analyze", path, "--fail-on", "warning", "-q"])
    assert res.exit_code == 1
    assert "LOG001" in res.output and "no problem found" not in res.output


def test_info_records_no_catalogued_release_prints_keep_the_report_from_being_clean(tmp_path):
    line = lmc("Widget cache primed with 12 widgets", level="INFO", loc="frob.py:3", logger="lmcache.frob")
    _, known = _entry_line(lambda e: "cache_engine" in e.module, "INFO")
    report = _report(tmp_path, [known, line])
    assert report.analysed >= 1
    st = status(report, [])
    assert st.kind == "unknown-records" and "no problem found" not in st.text


def test_a_reporting_rule_takes_the_consequence_lines_it_claims(tmp_path):
    """KV003 reports the requests vLLM failed under the fail policy; the API server's own 'failed with an
    internal error during generation' line for each is its consequence, not an unexplained error."""
    from pathlib import Path

    case = Path(__file__).resolve().parent / "corpus" / "real-cpu-redis-flushall-shortfall"
    report = analyze([str(case)])
    assert {f.rule for f in report.findings} >= {"KV001", "KV003"}
    assert not [f for f in _rule(report, "LOG001") if f.measurements["family"] in ("api-server", "engine-core")]
    report = analyze([str(case)], ignore=("KV003",))
    assert any("internal error during generation" in m["message"] for f in _rule(report, "LOG001")
               for m in f.measurements["messages"])


def _engine_death(root: str | None) -> list[str]:
    """An engine core's fatal error as vLLM prints it: logger.exception's traceback, every line under the
    same header (NewLineFormatter), the exception line last when the excerpt holds it."""
    def line(msg: str) -> str:
        return vllm(msg, level="ERROR", ts="08-21 21:56:03", loc="core.py:634", proc="EngineCore_DP0 pid=7")
    frame = '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line {}, in {}'
    body = ["EngineCore encountered a fatal error.", "Traceback (most recent call last):",
            frame.format(625, "run_engine_core"), "    engine_core.run_busy_loop()",
            frame.format(677, "_process_engine_step"), "    outputs, model_executed = self.step_fn()",
            "                              ^^^^^^^^^^^^^^"]
    return [line(m) for m in body + ([root] if root else [])]


def test_the_traceback_under_a_death_line_the_death_rule_read_is_not_listed_as_unexplained(tmp_path):
    """vLLM prints a traceback's header, code and caret lines under the fatal error's own header; the
    catalog knows them as lines of that message. SRV001 read the message: they are its lines too."""
    for root in ("RuntimeError: CUDA error: an illegal memory access was encountered", None):
        report = _report(tmp_path, _engine_death(root))
        [death] = _rule(report, "SRV001")
        assert not _rule(report, "LOG001"), [f.measurements for f in _rule(report, "LOG001")]
        assert death.measurements["root_error"] == (root.split(": ", 1)[1] if root else "not in the excerpt")
        if root is None:  # logger.exception prints the traceback after the header: what is missing comes after
            assert "stops inside the traceback printed under it, before its exception line" in death.summary
            assert "-A200" in death.next_steps[1]


def test_a_traceback_under_a_message_no_rule_read_is_listed_with_that_message(tmp_path):
    cat = catalog()
    entry = next(e for e in cat.entries if e.project == "vllm" and e.level == "ERROR" and e.fmt and e.family
                 and "%" not in e.fmt and e.fmt.endswith(".") and "engine/core.py" not in e.module)
    release = sorted(entry.lines)[-1]
    loc = f"{entry.module.rsplit('/', 1)[-1]}:{entry.lines[release]}"
    lines = [vllm(m, level="ERROR", loc=loc, proc="APIServer pid=1") for m in
             (entry.fmt, "Traceback (most recent call last):", "    await self.handle()", "    ^^^^^^^^^^^^^^^^^^^")]
    report = _report(tmp_path, lines)
    [f] = _rule(report, "LOG001")
    [msg] = f.measurements["messages"]
    assert msg["message"] == entry.fmt and msg["count"] == 1 and msg["traceback_lines"] == 3  # its line, then its traceback's
    assert f.count == 4


def test_an_engine_death_verdict_names_its_root_error_or_says_it_is_missing(tmp_path):
    from specdiag.report.verdict import headline

    [death] = _rule(_report(tmp_path, _engine_death("RuntimeError: CUDA error: an illegal memory access")), "SRV001")
    assert headline(death).endswith(": RuntimeError: CUDA error: an illegal memory access")
    [cut] = _rule(_report(tmp_path, _engine_death(None)), "SRV001")
    assert headline(cut).endswith("its first root error is not in the excerpt")
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    [long] = _rule(_report(tmp_path, _engine_death(oom)), "SRV001")
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in headline(long)


def _raw_traceback(exc_line: str, frame: str) -> list[str]:
    return ["(EngineCore_0 pid=42) Exception in thread Thread-4 (process_request):",
            "(EngineCore_0 pid=42) Traceback (most recent call last):",
            f'(EngineCore_0 pid=42)   File "/srv/env/lib/python3.10/site-packages/{frame}", line 389, in connect',
            "(EngineCore_0 pid=42)     sock = self.retry.call_with_retry(",
            f"(EngineCore_0 pid=42) {exc_line}"]


def test_a_raw_traceback_is_named_by_its_exception_and_innermost_frame(tmp_path):
    lines = (_raw_traceback("redis.exceptions.ConnectionError: Error 111 connecting to 10.0.0.5:6379.",
                            "redis/connection.py")
             + _raw_traceback("ValueError: bad chunk size 0", "lmcache/v1/config.py"))
    found = _rule(_report(tmp_path, lines), "LOG001")
    msgs = {m["message"]: m for f in found for m in f.measurements["messages"]}
    assert set(msgs) == {"redis.exceptions.ConnectionError: Error 111 connecting to 10.0.0.5:6379.",
                         "ValueError: bad chunk size 0"}  # one message per exception, not one 'Traceback' for both
    assert msgs["ValueError: bad chunk size 0"]["location"] == "lmcache/v1/config.py:389 in connect"
    assert all("Traceback (most recent call last)" not in f.headline for f in found)
    # each in the family of the module it raised in: LMCache's config module, a client library's (no family)
    assert {f.measurements["family"] for f in found} == {"configuration", "other"}


def test_a_traceback_cut_above_its_header_is_one_message_named_by_where_it_was_printed(tmp_path):
    """A paste that starts inside a traceback vLLM printed under a header: its code and caret lines are not
    messages. They are one traceback, named by the call the catalog says prints at that place, at the line
    the log names (not the newest release's), with the releases that print it there."""
    cat = catalog()
    entry = next(e for e in cat.entries if e.project == "vllm" and e.fmt == "Error in chat completion stream generator.")
    base = entry.module.rsplit("/", 1)[-1]
    line_no = next(n for n in sorted(entry.printed_lines())
                   if cat.match("    await self.handle()", project="vllm", file=base, line=n) == entry)
    lines = [vllm(m, level="ERROR", loc=f"{base}:{line_no}", proc="APIServer pid=9") for m in
             ('  File "/srv/vllm/entrypoints/openai/serving_chat.py", line 571, in chat_completion_stream_generator',
              "    await self.handle()", "          ^^^^^^^^^^^^^^^^^^^^^^^",
              '  File "/srv/vllm/entrypoints/openai/tool_parsers.py", line 90, in parse', "    raise ValueError(x)")]
    report = _report(tmp_path, lines)
    assert [f.rule for f in report.findings] == ["LOG001"]
    [msg] = report.findings[0].measurements["messages"]
    assert msg["message"] == "a traceback printed where vllm prints 'Error in chat completion stream generator.'"
    assert msg["count"] == 1 and msg["traceback_lines"] == 4
    assert msg["location"] == f"vllm {entry.module}:{line_no}" and msg["releases"] == entry.releases_at(line_no)


def test_old_releases_death_lines_are_deaths(tmp_path):
    """'EngineCore hit an exception: %s' (V1 before 0.8.5), 'Engine background task failed' (V0's AsyncLLMEngine)
    and 'WorkerProc failed to start.' each announce the engine's end, as 'EngineCore encountered a fatal error.'
    does; the traceback after them is theirs."""
    for msg, loc in (("EngineCore hit an exception: Traceback (most recent call last):", "core.py:387"),
                     ("Engine background task failed", "async_llm_engine.py:64"),
                     ("WorkerProc failed to start.", "multiproc_executor.py:1091")):
        lines = [vllm(m, level="ERROR", loc=loc, proc="EngineCore pid=3") for m in
                 (msg, '  File "/srv/vllm/worker/model_runner.py", line 90, in load_model', "    self.model = get_model()",
                  "RuntimeError: CUDA error: out of memory")]
        report = _report(tmp_path, lines)
        assert [f.rule for f in report.findings] == ["SRV001"], (msg, [f.rule for f in report.findings])
        assert report.findings[0].measurements["death_inferred"] is False


def test_a_remote_client_that_cannot_be_set_up_is_no_outage(tmp_path):
    """'… object has no attribute …' while (re)connecting: a client library the connector's API does not fit
    (LMCache issue #839), not a store that went down and lost chunks."""
    err = "'mooncake.store.MooncakeDistributedStore' object has no attribute 'setup_lmcache'"
    line = lmc(f"Failed to initialize/re-establish remote connection: {err}", level="WARNING",
               loc="remote_backend.py:160", logger="lmcache.v1.storage_backend.remote_backend")
    [f] = _rule(_report(tmp_path, [line]), "KV013")
    causes = {c.id: c for c in f.causes}
    assert "remote-backend-loss" not in causes  # nothing was stored there to lose
    assert any("could not be set up" in s and "not an outage" in s for s in causes["backend-read-failure"].for_)
    outage = lmc("Failed to initialize/re-establish remote connection: [Errno 111] Connection refused",
                 level="WARNING", loc="remote_backend.py:160", logger="lmcache.v1.storage_backend.remote_backend")
    [g] = _rule(_report(tmp_path, [outage]), "KV013")
    assert "remote-backend-loss" in {c.id for c in g.causes}

