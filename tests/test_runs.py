"""Several runs of a server in one log: each run analysed on its own, counted lines split exactly, runs and
what changed between them in the report."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from specdiag import engine
from specdiag.engine import analyze
from specdiag.events import template
from specdiag.ingest import ahead, scan, scan_workers, sources
from specdiag.ingest.marks import START_MARKERS, cut_at_markers
from specdiag.observe import Observer
from specdiag.report.json_report import render_json
from specdiag.report.terminal import render_terminal
from specdiag.runs import RunStart, change_text, run_changes, starts_new_run

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("tp8-shortfall", "healthy-ngram", "dynamic-k-stale-draft")
#: measurements that identify a finding's incident (compared between a log alone and in a concatenation)
KEYS = ("missing_tokens", "expected_tokens", "retrieved_tokens", "chunk_size", "ranks")


def _log(name: str) -> bytes:
    return (ROOT / "examples" / name / "serve.log").read_bytes()


def _doc(paths: list[str], **kw) -> dict:
    return json.loads(render_json(analyze(paths, jobs=1, **kw)))


def _signature(findings: list[dict]) -> list[tuple]:
    return sorted((f["rule"], f["severity"], json.dumps({k: f["measurements"].get(k) for k in KEYS}, sort_keys=True))
                  for f in findings)


@pytest.fixture(scope="module")
def alone() -> dict[str, list[tuple]]:
    return {name: _signature(_doc([str(ROOT / "examples" / name / "serve.log")])["findings"]) for name in EXAMPLES}


@pytest.mark.parametrize("order", list(itertools.permutations(EXAMPLES)), ids="+".join)
def test_concatenated_examples_give_each_logs_own_findings(order: tuple[str, ...], alone: dict, tmp_path: Path) -> None:
    log = tmp_path / "all.log"
    log.write_bytes(b"".join(_log(name) for name in order))
    doc = _doc([str(log)])
    (dep,) = doc["deployments"]
    assert [r["index"] for r in dep["runs"]] == [1, 2, 3]
    assert all(r["marker"] in START_MARKERS for r in dep["runs"])
    for i, name in enumerate(order, 1):
        mine = [f for f in doc["findings"] if f["run"] == i]
        assert _signature(mine) == alone[name], f"run {i} ({name})"
    assert len(doc["findings"]) == sum(len(v) for v in alone.values())
    assert {"key": "model"}.items() <= dep["run_changes"][0].items() or any(c["key"] == "model" for c in dep["run_changes"])


def _two_runs(tmp_path: Path) -> Path:
    """healthy-ngram twice: the second start with max_local_cpu_size 32 (a restart of the same pod: pid 1 again)."""
    first = _log("healthy-ngram")
    second = first.replace(b"'max_local_cpu_size': 60.0", b"'max_local_cpu_size': 32.0")
    assert second != first
    log = tmp_path / "restarted.log"
    log.write_bytes(first + second)
    return log


def test_a_restart_with_a_changed_config_lists_the_change(tmp_path: Path) -> None:
    log = _two_runs(tmp_path)
    report = analyze([str(log)], jobs=1)
    dep = json.loads(render_json(report))["deployments"][0]
    assert len(dep["runs"]) == 2
    assert dep["runs"][1]["first_line"]["line"] > dep["runs"][0]["last_line"]["line"]
    assert dep["run_changes"] == [{"key": "lmcache_config.max_local_cpu_size", "from": 60.0, "to": 32.0, "runs": [1, 2]}]
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        render_terminal(report, color=False, file=fh, width=120)
    text = out.read_text()
    assert "max_local_cpu_size 60 → 32 between run 1 and run 2" in text
    assert text.index("max_local_cpu_size 60 → 32") < text.index("Read 1 input")  # near the top
    assert re.search(r"run 2: lines 31\d\d–\d+ of ", text)


COUNTS: list[dict] = []


class _Counts(Observer):
    """What each run's RunState holds of the counted lines, at its finish."""

    def finish(self, ctx, run):
        COUNTS.append({tid: (run.count(tid), getattr(run.first(tid), "rec", None) and run.first(tid).rec.line)
                       for tid in ("S1", "R4", "L1")})
        return []


def _run_counts(paths: list[str], **kw) -> list[dict]:
    COUNTS.clear()
    analyze(paths, observers=(_factory,), **{"jobs": 1, **kw})
    return list(COUNTS)


def _factory(dep_id: str) -> _Counts:
    return _Counts()


@pytest.mark.parametrize("block_size", [sources.BLOCK_SIZE, 2048], ids=["default-blocks", "2KiB-blocks"])
def test_each_run_gets_exactly_its_counted_lines(block_size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second run's counts are the log's own, its first rows its own lines; on every scan path."""
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    single = _run_counts([str(ROOT / "examples" / "healthy-ngram" / "serve.log")])[0]
    assert single["S1"][0] and single["R4"][0] and single["L1"][0]
    lines = _log("healthy-ngram").count(b"\n")
    shifted = {tid: (n, line + lines) for tid, (n, line) in single.items()}
    log = str(_two_runs(tmp_path))
    compiled = _run_counts([log])
    assert compiled == [single, shifted]
    if scan.IMPLEMENTATION == "c":
        assert _run_counts([log], scan_threads=2) == compiled
    with monkeypatch.context() as m:
        m.setattr(scan, "_compiled", None)
        assert _run_counts([log]) == compiled, "pure-Python scanner"
        m.setattr(ahead, "PROCESS_AFTER", 1)
        m.setattr(ahead, "SCAN_WHILE_STARTING", False)
        m.setattr(scan_workers, "SCAN_HERE_BELOW", 0)
        assert _run_counts([log], jobs=2) == compiled, "pure-Python scanner on worker processes"
    real = engine.iter_records
    monkeypatch.setattr(engine, "iter_records", lambda src, hot=None, window=None, marks=False, **_:
                        real(src, None, window, marks=marks))
    assert _run_counts([log]) == compiled, "no scanner"


def test_one_servers_rank_files_given_separately_stay_one_run(tmp_path: Path) -> None:
    """Each rank's file holds its own engine-init lines; the second file's start is no restart."""
    rank1 = [ln for ln in _log("healthy-ngram").splitlines(keepends=True) if b"Worker_TP1 " in ln]
    rest = [ln for ln in _log("healthy-ngram").splitlines(keepends=True) if b"Worker_TP1 " not in ln]
    assert any(b"Creating LMCacheEngine with config" in ln for ln in rank1)
    a, b = tmp_path / "rank0.log", tmp_path / "rank1.log"
    a.write_bytes(b"".join(rest))
    b.write_bytes(b"".join(rank1))
    doc = _doc([str(a), str(b)])
    (dep,) = doc["deployments"]
    assert len(dep["runs"]) == 1
    assert "run_changes" not in dep and all("run" not in f for f in doc["findings"])
    assert dep["context"]["ranks_seen"] == ["TP0", "TP1"] or len(dep["context"]["ranks_seen"]) == 2


def test_an_access_line_inside_a_starts_banner_splits_no_run(tmp_path: Path) -> None:
    """Another process's access line between the rows of the start banner: the scanner counts it, reading it
    counts it nowhere; neither is serving (stores, retrieves, lookups) that would make the next start marker a
    restart."""
    lines = _log("tp8-shortfall").splitlines(keepends=True)
    access = b'(APIServer pid=1) INFO:     10.0.0.7:5555 - "GET /health HTTP/1.1" 200 OK\n'
    assert any(b"version " in ln for ln in lines[:3])
    log = tmp_path / "banner.log"
    log.write_bytes(b"".join(lines[:3] + [access] + lines[3:]))
    (dep,) = _doc([str(log)])["deployments"]
    assert len(dep["runs"]) == 1, [(r["first_line"]["line"], r["last_line"]["line"]) for r in dep["runs"]]


def test_previous_and_current_log_as_two_files_are_two_runs(tmp_path: Path) -> None:
    a, b = tmp_path / "previous.log", tmp_path / "current.log"
    a.write_bytes(_log("healthy-ngram"))
    preamble = b"(APIServer pid=1) INFO 05-05 09:02:40 [__init__.py:216] Automatically detected platform cuda.\n"
    b.write_bytes(preamble + _log("healthy-ngram").replace(b" 05-04 ", b" 05-05 ").replace(b"2026-05-04 ", b"2026-05-05 "))
    dep = _doc([str(a), str(b)])["deployments"][0]
    assert [(r["first_line"]["path"], r["index"]) for r in dep["runs"]] == [(str(a), 1), (str(b), 2)]
    assert dep["runs"][1]["start"].startswith("2026-05-05") and "run_changes" in dep


def test_single_run_reports_list_one_run_and_tag_no_finding() -> None:
    doc = _doc([str(ROOT / "examples" / "tp8-shortfall" / "serve.log")])
    (run,) = doc["deployments"][0]["runs"]
    assert run["index"] == 1 and run["versions"]["vllm"] == "0.25.0" and run["marker"] == "V_LOGO"
    assert doc["findings"] and all("run" not in f for f in doc["findings"])


@pytest.mark.parametrize("tid", sorted(START_MARKERS))
def test_every_marker_templates_sample_holds_its_literal(tid: str) -> None:
    """Ingest cuts blocks at the literals: a marker line without one would get no exact count split."""
    sample = template(tid).sample.encode()
    assert any(lit in sample for lit in START_MARKERS[tid][1]) or tid == "V_LOGO"
    if tid == "V_LOGO":
        assert START_MARKERS[tid][1][0] in _log("healthy-ngram")


@pytest.mark.parametrize("stamped", [False, True], ids=["plain", "kubectl-timestamps"])
def test_blocks_are_cut_before_each_marker_line(stamped: bool) -> None:
    """Each part scanned again: its counts and line numbers are those of the lines it holds."""
    lines = [b"(Worker_TP0 pid=2) [2026-05-04 09:00:00,000] LMCache INFO: Stored 256 out of total 256 tokens. "
             b"size: 0.0 gb, cost 1.0 ms, throughput: 1.0 GB/s (cache_engine.py:1:lmcache.v1.cache_engine)",
             b"(APIServer pid=1) INFO 05-04 09:00:01 [api_utils.py:273] non-default args: {}",
             b"(APIServer pid=1) INFO 05-04 09:00:01 [model.py:619] Resolved architecture: X",
             b"(Worker_TP0 pid=2) [2026-05-04 09:00:02,000] LMCache INFO: Creating LMCacheEngine with config: {}"]
    if stamped:
        lines = [b"2026-05-04T09:00:00.000000000Z " + ln for ln in lines]
    data = b"\n".join(lines * 2) + b"\n"
    res, copy = ahead.scan_unwrapped(data, 0, len(data), 10)
    parts = cut_at_markers((data, 0, len(data), res, copy), 10)
    assert b"".join(data[s:e] for _, s, e, _, _ in parts) == data
    assert [data[s:e].count(b"\n") for _, s, e, _, _ in parts] == [1, 2, 2, 2, 1]
    assert all(b"non-default" in data[s:e].split(b"\n")[0] or b"Creating" in data[s:e].split(b"\n")[0]
               for _, s, e, _, _ in parts[1:])
    assert [p[3].lines for p in parts] == [1, 2, 2, 2, 1]
    assert parts[2][3].columns["stores"]["line"].tolist() == [15]  # the second store: line 10 + 5


def test_the_run_rule() -> None:
    st = RunStart(held=True, inputs={"a"})
    st.note_marker("C13", "Worker_TP0:213:", "a")
    t = (90.0, 99.0, 99.0)
    assert starts_new_run(st, "C13", "Worker_TP1:214:", 100.0, "a", t) is None  # another rank
    assert starts_new_run(st, "C13", "Worker_TP0:213:", 100.0, "a", t) == "restart"
    assert starts_new_run(st, "C13", None, 100.0, "a", t) is None  # unnamed process, no gap
    assert starts_new_run(st, "C13", None, 99.0 + 3600, "a", t) == "gap"
    assert starts_new_run(st, "C13", None, 10.0, "a", t) == "time went back"
    # the first start of another kind whose clock reads earlier (vLLM's banner, then LMCache's init) is the
    # same start: the two formatters' times need not agree
    assert starts_new_run(st, "V_ARGS", None, 10.0, "a", t) is None
    st.served_in.add("a")
    assert starts_new_run(st, "V_ARGS", None, 100.0, "a", t) == "after serving"
    # a further input: another rank's file overlaps the run's time; a restart after its end is a new run
    assert starts_new_run(st, "C13", "Worker_TP1:214:", 92.0, "b", (90.0, None, 500.0)) is None
    assert starts_new_run(st, "C13", "Worker_TP0:213:", 92.0, "b", (90.0, None, 500.0)) is None
    assert starts_new_run(st, "C13", "Worker_TP0:213:", 501.0, "b", (90.0, None, 500.0)) == "restart"
    assert starts_new_run(st, "V_ARGS", None, 2000.0, "b", (90.0, None, 500.0)) == "outside the run's time"
    # the further input fed the run a line before its start line: still its process's second start
    st.inputs.add("b")
    assert starts_new_run(st, "C13", "Worker_TP0:213:", 501.0, "b", (90.0, 501.0, 500.0)) == "restart"
    assert starts_new_run(RunStart(), "V_ARGS", None, 1.0, "a", (None, None, None)) is None  # nothing held yet


def test_run_changes_compare_facts_both_runs_show() -> None:
    a = {"vllm_version": "0.25.0", "model": "m", "lmcache_config": {"max_local_cpu_size": 16.0, "chunk_size": 256}}
    b = {"vllm_version": None, "model": "m", "lmcache_config": {"max_local_cpu_size": 32.0, "chunk_size": 256}}
    (ch,) = run_changes([a, b])
    assert change_text(ch) == "max_local_cpu_size 16 → 32 between run 1 and run 2"


def test_a_run_ends_at_its_own_last_line_not_at_the_next_banner(tmp_path: Path) -> None:
    """vLLM prints its logo as one call under one header, several lines before the version line that
    starts a run: those lines say nothing of the run, and the run before must not end at them."""
    text = (ROOT / "examples/tp8-shortfall/serve.log").read_text() + (ROOT / "examples/healthy-ngram/serve.log").read_text()
    n_first = (ROOT / "examples/tp8-shortfall/serve.log").read_text().count("\n")
    log = tmp_path / "both.log"
    log.write_text(text)
    runs = analyze([str(log)]).to_dict()["deployments"][0]["runs"]
    assert [r["index"] for r in runs] == [1, 2]
    assert runs[0]["last_line"]["line"] <= n_first < runs[1]["first_line"]["line"]
    assert runs[0]["end"] < "2026-05-06 16" and runs[1]["start"].startswith("2026-05-04")


def test_a_run_whose_lines_were_pasted_out_of_time_order_starts_before_it_ends() -> None:
    """vLLM #39680: one server's stats line (11:27:10) pasted above another's (11:17:53): the JSON run began at
    11:27:10 and ended at 11:17:53."""
    log = Path(__file__).resolve().parent / "real_sd" / "two-servers-pasted-out-of-time-order.log"
    runs = [r for d in analyze([str(log)]).deployments for r in d.runs]
    assert runs and all(r.start <= r.end for r in runs if r.start is not None and r.end is not None)
