"""Paste shapes beyond vLLM's and LMCache's own formatters: a line pasted without its time, Python logging's
common formats with a ``vllm.*`` / ``lmcache.*`` logger name, and records after a progress bar's CR in
those shapes. Each is read as the project's record (time unknown where the line printed none), reaches
its template and its finding; the same shapes with another program's logger, and pip's ``WARNING: x``,
stay unrecognised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logbuilder import write

from specdiag.engine import analyze
from specdiag.events import default_matcher
from specdiag.ingest import expand_inputs, iter_records
from specdiag.ingest.envelope import module_path
from specdiag.ingest.shapes import read_head, starts_head

PIN = ("Pin count of MemoryObj 0x7f3a10is negative: -1.Double unpin occurred somewhere.Setting pin count back "
       "to 0 as a hack but please find the bug.")
PIN_SUFFIX = " (memory_management.py:846:lmcache.v1.memory_management)"
SHORT = "Num retrieved tokens: 49664, num expected tokens: 55808"
DIED = "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
ASCTIME = "2026-05-06 15:56:03,745"
BAR = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]"


def records(path: str) -> list:
    return [r for r in iter_records(expand_inputs([path])[0]) if hasattr(r, "kind")]


def events(path: str) -> list[str | None]:
    m = default_matcher()
    return [(lambda e: e.id if e else None)(m.match(r)) for r in records(path)]


def rules(rep: dict) -> list[str]:
    return [f["rule"] for f in rep["findings"]]


# ---- one line, as pasted: kind, level, template, finding, no time invented -------------------------------
SHAPES = {
    "lmcache-bare": (f"LMCache WARNING: {PIN}{PIN_SUFFIX}", "lmcache", "WARNING", "M5", "KV011"),
    "lmcache-bare-no-suffix": (f"LMCache WARNING: {PIN}", "lmcache", "WARNING", "M5", "KV011"),
    "lmcache-bare-error": (f"LMCache ERROR: {SHORT}", "lmcache", "ERROR", "R2", "KV001"),
    "lmcache-bare-prefixed": (f"(Worker_TP2 pid=767) LMCache ERROR: {SHORT}", "lmcache", "ERROR", "R2", "KV001"),
    "level-message": (f"WARNING {PIN}", "lmcache", "WARNING", "M5", "KV011"),
    "level-message-suffix": (f"WARNING {PIN}{PIN_SUFFIX}", "lmcache", "WARNING", "M5", "KV011"),
    "vllm-no-time": ("ERROR [core.py:123] EngineCore failed to start.", "vllm", "ERROR", "V_CORE_FAILED", "SRV001"),
    "vllm-level-message": (f"ERROR {DIED}", "vllm", "ERROR", "V_PROC_DIED", "SRV001"),
    "basic-vllm": (f"ERROR:vllm.v1.engine.core_client:{DIED}", "vllm", "ERROR", "V_PROC_DIED", "SRV001"),
    "basic-lmcache": (f"ERROR:lmcache.integration.vllm.vllm_v1_adapter:{SHORT}", "lmcache", "ERROR", "R2", "KV001"),
    "asctime-vllm": (f"{ASCTIME} - vllm.v1.engine.core_client - ERROR - {DIED}", "vllm", "ERROR", "V_PROC_DIED",
                     "SRV001"),
    "asctime-lmcache": (f"{ASCTIME} - lmcache.v1.memory_management - WARNING - {PIN}", "lmcache", "WARNING", "M5",
                        "KV011"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_pasted_shape_is_read_as_its_projects_record(tmp_path: Path, shape: str) -> None:
    line, kind, level, tid, _ = SHAPES[shape]
    path = write(tmp_path / "p.log", [line])
    (rec,) = records(path)
    assert (rec.kind, rec.level) == (kind, level)
    assert events(path) == [tid]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_pasted_shape_reaches_its_finding_from_the_cli(tmp_path: Path, shape: str, run_cli) -> None:
    line, _, _, _, rule = SHAPES[shape]
    code, out, err = run_cli("analyze", write(tmp_path / "p.log", [line]), "--format", "json")
    assert code != 3, err
    rep = json.loads(out)
    assert rule in rules(rep)
    assert rep["inputs"][0]["recognized"] == 1


@pytest.mark.parametrize("shape", [s for s in SHAPES if not s.startswith("asctime")])
def test_a_line_without_time_gets_none_invented(tmp_path: Path, shape: str) -> None:
    path = write(tmp_path / "p.log", [SHAPES[shape][0]])
    (rec,) = records(path)
    assert rec.ts is None and rec.year is None
    rep = analyze([path]).to_dict()
    assert rep["context"]["log_year"] is None


def test_a_bare_line_keeps_its_process_prefix_and_suffix(tmp_path: Path) -> None:
    line = f"(Worker_TP2 pid=767) LMCache WARNING: {PIN}{PIN_SUFFIX}"
    (rec,) = records(write(tmp_path / "p.log", [line]))
    assert (rec.origin.pid, rec.file, rec.src_line, rec.logger) == (767, "memory_management.py", 846,
                                                                    "lmcache.v1.memory_management")
    assert rec.display() == line


def test_asctime_lines_keep_their_year_and_time(tmp_path: Path) -> None:
    path = write(tmp_path / "p.log", [f"{ASCTIME} - vllm.v1.engine.core_client - ERROR - {DIED}",
                                      f"{ASCTIME} - lmcache.v1.memory_management - WARNING - {PIN}"])
    v, lm = records(path)
    assert (v.ts, v.year) == ("05-06 15:56:03", 2026)
    assert lm.ts == ASCTIME
    assert analyze([path]).to_dict()["context"]["log_year"] == 2026


def test_the_logger_name_says_the_project_and_its_module(tmp_path: Path) -> None:
    path = write(tmp_path / "p.log", ["INFO:lmcache.v1.cache_engine:Retrieved 4096 tokens",
                                      f"{ASCTIME} - vllm.v1.engine.core_client - ERROR - {DIED}"])
    lm, v = records(path)
    assert (lm.kind, lm.logger, lm.module) == ("lmcache", "lmcache.v1.cache_engine", "v1/cache_engine.py")
    assert (v.kind, v.module) == ("vllm", "v1/engine/core_client.py")
    assert module_path("myapp.db") is None and module_path("vllm") is None


def test_vllms_vendored_lmcache_adapter_logger_is_lmcache_output() -> None:
    name = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter"
    head = read_head(f"ERROR:{name}:{SHORT}".encode())
    assert head is not None and head.kind == "lmcache"


# ---- a progress bar's CR in front -----------------------------------------------------------------------------
CR_RECORDS = {
    "vllm": ("(VllmWorker rank=0 pid=42) INFO 05-06 15:56:03 [default_loader.py:262] Loading weights took 1.2 seconds",
             "vllm", "LOG"),  # no hand-written template: the message catalog knows it
    "lmcache": (f"[{ASCTIME}] LMCache WARNING: {PIN}{PIN_SUFFIX}", "lmcache", "M5"),
    "lmcache-bare": (f"LMCache ERROR: {SHORT}", "lmcache", "R2"),
    "asctime": (f"{ASCTIME} - vllm.v1.engine.core_client - ERROR - {DIED}", "vllm", "V_PROC_DIED"),
    "basic": (f"ERROR:lmcache.integration.vllm.vllm_v1_adapter:{SHORT}", "lmcache", "R2"),
}


@pytest.mark.parametrize("shape", CR_RECORDS)
def test_a_record_after_a_progress_bars_cr_is_read(tmp_path: Path, shape: str) -> None:
    line, kind, tid = CR_RECORDS[shape]
    path = tmp_path / "cr.log"
    path.write_bytes(f"{BAR}\r{line}\n".encode())
    recs = records(str(path))
    assert [r.kind for r in recs] == [kind]
    assert events(str(path)) == [tid]
    assert analyze([str(path)]).to_dict()["inputs"][0]["recognized"] == 1


# ---- pasted the usual ways ----------------------------------------------------------------------------------
@pytest.mark.parametrize("wrap", ["    {}", "> {}", "120:{}", "serve.log:120:{}", "[pod/vllm-0/vllm] {}"])
@pytest.mark.parametrize("shape", ["lmcache-bare", "vllm-no-time", "basic-vllm", "asctime-lmcache", "level-message"])
def test_a_shape_behind_a_paste_or_collector_prefix_is_still_read(tmp_path: Path, shape: str, wrap: str) -> None:
    line, kind, level, tid, _ = SHAPES[shape]
    path = write(tmp_path / "p.log", [wrap.format(line)])
    assert [(r.kind, r.level) for r in records(path)] == [(kind, level)]
    assert events(path) == [tid]


def test_a_bare_pair_gives_the_shortfall_arithmetic(tmp_path: Path) -> None:
    lines = ["(Worker_TP2 pid=767) LMCache ERROR: Request cmpl-1The number of retrieved tokens is less than the "
             "expected number of tokens! This should not happen!",
             f"(Worker_TP2 pid=767) LMCache ERROR: {SHORT}"]
    (f,) = [f for f in analyze([write(tmp_path / "p.log", lines)]).to_dict()["findings"] if f["rule"] == "KV001"]
    assert (f["measurements"]["expected_tokens"], f["measurements"]["retrieved_tokens"]) == (55808, 49664)
    assert f["measurements"]["ranks"] == ["TP2"]


def test_the_same_report_with_or_without_the_scanner(tmp_path: Path, monkeypatch) -> None:
    from specdiag import engine
    from specdiag.ingest import scan

    lines = [s[0] for s in SHAPES.values()] + [
        "INFO:lmcache.v1.cache_engine:[req_id=cmpl-1] Stored 4096 out of total 4096 tokens. size: 0.5000 GB, "
        "cost 12.0000 ms, throughput: 41.6667 GB/s; offload_time: 10.0000 ms, put_time: 2.0000 ms"]
    path = write(tmp_path / "p.log", lines)

    def report() -> dict:
        rep = analyze([path]).to_dict()
        rep.pop("timing", None)
        return {k: rep[k] for k in ("findings", "inputs", "context")}

    real = engine.iter_records
    first = report()
    with monkeypatch.context() as m:
        m.setattr(scan, "_compiled", None)
        assert report() == first
    with monkeypatch.context() as m:
        m.setattr(engine, "iter_records", lambda src, hot=None, window=None, **_scan: real(src, None, window))
        assert report() == first


# ---- what stays unrecognised ---------------------------------------------------------------------------------
FOREIGN = [
    "ERROR - myapp - x",
    "WARNING: something",
    "WARNING: You are using pip version 21.0; however, version 24.0 is available.",
    "ERROR: Could not find a version that satisfies the requirement vllm==9.9",
    f"{ASCTIME} - myapp.db - ERROR - connection lost",
    f"{ASCTIME} - vllm_ascend.worker - ERROR - {DIED}",
    "ERROR:myapp.db:connection lost",
    "ERROR:root:something failed",
    "INFO job 3 finished",
    "INFO [main.py:12] starting",
    "ERROR something failed for key 3",
    "LMCache is great",
]


@pytest.mark.parametrize("line", FOREIGN)
def test_another_programs_line_in_these_shapes_stays_unrecognised(tmp_path: Path, line: str, run_cli) -> None:
    path = write(tmp_path / "f.log", [line])
    assert not [r for r in records(path) if r.kind in ("vllm", "lmcache", "uvicorn")]
    code, _, _ = run_cli("analyze", path, "--format", "json")
    assert code == 3


def test_uvicorns_own_lines_are_still_recognised(tmp_path: Path) -> None:
    lines = ["INFO:     Started server process [1]", "WARNING:  Invalid HTTP request received.",
             "ERROR:    Exception in ASGI application", 'INFO:   1.2.3.4:5 - "GET / HTTP/1.1" 200 OK']
    rep = analyze([write(tmp_path / "u.log", lines)]).to_dict()
    assert rep["inputs"][0]["recognized"] == 4 and "uvicorn" in rep["inputs"][0]["formats"]


def test_every_specific_templates_sample_pasted_without_time_is_read_as_its_project() -> None:
    """The one pattern in front (``shapes.SHAPE_HEAD``) assumes a message starts with a letter or ``[``: a
    template added later that breaks that fails here, not silently in a user's paste."""
    from specdiag.ingest.shapes import _tables

    tab = _tables()
    rows = [r for rs in tab.by_word.values() for r in rs] + tab.anywhere
    missed = []
    for _, level, src, t in rows:
        line = f"{level or 'ERROR'} {t.sample.split(' ⏎ ')[0]}".encode()
        head = read_head(line) if starts_head(line) else None
        if head is None or head.kind != src:
            missed.append(t.id)
    assert not missed
