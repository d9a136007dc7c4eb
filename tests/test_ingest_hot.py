"""The scanner in front of the per-line stages changes nothing a report says, only how fast it is said.

Three ways to read the same input must give the same report: the compiled scanner, the pure-Python
scanner (what a machine without a compiler runs) and no scanner at all (every line through the per-line
stages, as the records tests read them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdiag import engine
from specdiag.analyzers.kv_shortfall import LookupHistory
from specdiag.engine import analyze
from specdiag.events.rows import lookup_event
from specdiag.ingest import ahead, scan, scan_workers, sources
from specdiag.ingest.blocks import NamedBlock
from specdiag.ingest.hot import HotWindow, LookupRows
from specdiag.ingest.origin import OriginCache
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import expand_inputs
from specdiag.report.json_report import render_json

ROOT = Path(__file__).resolve().parent.parent
INPUTS = sorted(
    [p for p in (ROOT / "tests" / "corpus").glob("*/") if p.is_dir()]
    + [p for p in (ROOT / "examples").glob("*/") if p.is_dir()]
    + [p for p in (ROOT / "tests" / "fragments").glob("*/") if p.is_dir()]
)
VOLATILE = ("elapsed_s", "generated_at", "tool")
#: scan threads are used only with the compiled scanner (the Python one holds the GIL)
COMPILED_ONLY = pytest.mark.skipif(scan.IMPLEMENTATION != "c", reason="scan threads run only with the compiled scanner")


def _logs(path: Path) -> list[str]:
    return sorted(str(p) for p in path.iterdir() if p.is_file() and p.name != "expected.json" and p.suffix != ".md")


def _report(path: Path, scan_threads: int = 0, jobs: int = 1) -> dict:
    logs = _logs(path)
    doc = json.loads(render_json(analyze(logs, jobs=jobs, scan_threads=scan_threads)))
    for key in VOLATILE:
        doc.pop(key, None)
    return doc


def _without_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine.iter_records

    def every_line(src, hot=None, window=None, marks=False, **_scan):  # noqa: ARG001 - the engine's call, minus the scanner
        return real(src, None, window, marks=marks)

    monkeypatch.setattr(engine, "iter_records", every_line)


@pytest.mark.parametrize("block_size", [sources.BLOCK_SIZE, 2048], ids=["default-blocks", "2KiB-blocks"])
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_report_is_the_same_with_compiled_python_and_no_scanner(path: Path, block_size: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks put lookups, look-backs and joined records across block boundaries."""
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    compiled = _report(path)
    if scan.IMPLEMENTATION == "c":
        assert _report(path, scan_threads=2) == compiled, "scanned on two threads"
    _assert_same_without_the_compiled_scanner(path, compiled, monkeypatch)


def _assert_same_without_the_compiled_scanner(path: Path, compiled: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python scanner and no scanner at all give the compiled scanner's report."""
    with monkeypatch.context() as m:
        m.setattr(scan, "_compiled", None)
        assert _report(path) == compiled, "pure-Python scanner"
        m.setattr(ahead, "PROCESS_AFTER", 1)
        m.setattr(ahead, "SCAN_WHILE_STARTING", False)
        m.setattr(scan_workers, "SCAN_HERE_BELOW", 0)  # small test blocks go to the workers too
        # one group's blocks after its first scanned by two worker processes (several groups: one per process)
        assert _report(path, jobs=2) == compiled, "pure-Python scanner on worker processes"
    with monkeypatch.context() as m:
        _without_scanner(m)
        assert _report(path) == compiled, "no scanner"


LOOKUP = (b"(EngineCore pid=7) [2026-05-06 10:00:%02d,000] LMCache INFO: Reqid: req-%d, Total tokens 600, "
          b"LMCache hit tokens: 512, need to load: 512 (vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter)\n")
RETRIEVE = (b"(Worker pid=9) [2026-05-06 10:00:%02d,000] LMCache INFO: [req_id=req-%d] Retrieved 512 out of 512 required "
            b"tokens (from 600 total tokens) (cache_engine.py:985:lmcache.v1.cache_engine)\n")


def _items(tmp_path: Path, data: bytes, hot: bool = True) -> tuple[list, HotWindow]:
    log = tmp_path / "x.log"
    log.write_bytes(data)
    src = expand_inputs([str(log)])[0]
    window = HotWindow(src.display)
    return list(iter_records(src, hot or None, window)), window


def test_lookups_come_out_as_rows_between_the_records_in_line_order(tmp_path: Path) -> None:
    text = b"INFO 05-06 10:00:00 [api_server.py:1] start\n" + LOOKUP % (1, 1) + LOOKUP % (2, 2)
    text += b"INFO 05-06 10:00:03 [api_server.py:1] between\n" + LOOKUP % (4, 3)
    items, _ = _items(tmp_path, text)
    kinds = [(type(i).__name__, i.line if hasattr(i, "kind") else list(i.line[i.lo:i.hi])) for i in items]
    assert kinds == [("Record", 1), ("LookupRows", [2, 3]), ("Record", 4), ("LookupRows", [5])]
    rows = items[1]
    assert list(rows.hit[rows.lo:rows.hi]) == [512, 512] and lookup_event(rows, rows.lo).f["req_id"] == "req-1"
    assert rows.rid_hash[rows.lo] == scan.rid_hash(b"req-1")


def test_look_back_finds_the_retrieve_row_of_the_same_process_in_the_previous_block(tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "BLOCK_SIZE", 1024)
    other = RETRIEVE.replace(b"Worker pid=9", b"Worker pid=8")
    text = RETRIEVE % (1, 1) + other % (2, 2) + b"".join(b"INFO 05-06 10:00:03 [x.py:1] filler %d\n" % i for i in range(25))
    _, window = _items(tmp_path, text)
    assert not window.views[-1].res.columns["retrieves"]["line"]  # the retrieves are in an earlier block
    before = text.count(b"\n") + 1
    key_9 = OriginCache().peel(b"(Worker pid=9) x")[0].key
    hit = window.find_back(before, b"Retrieved ", key_9)
    assert hit is not None and hit.line == 1 and b"req-1" in hit.raw and hit.origin.key == key_9
    assert window.find_back(before, b"Stored ", key_9) is None
    assert window.find_back(before, b"Retrieved ", key_9, limit=before - 1) is None  # out of reach


@pytest.mark.parametrize("wrapper, counted_by", [
    (b"2026-05-06T10:00:01.000000000Z ", "scanner"),  # kubectl --timestamps: the scanner reads a copy without it
    (b"[pod/p1/c] ", "scanner, for its pod"),  # kubectl --prefix: a copy without it, counted for the pod it names
])
def test_a_wrapped_complete_retrieve_is_counted_and_kept_for_the_look_back(tmp_path: Path, wrapper: bytes,
                                                                           counted_by: str) -> None:
    """Only the short retrieve becomes a record; the complete one is counted and found by ``event_before``."""
    full = wrapper + RETRIEVE % (1, 1)
    log = tmp_path / "x.log"
    log.write_bytes(full + full.replace(b"Retrieved 512 out of 512", b"Retrieved 256 out of 512"))
    src = expand_inputs([str(log)])[0]
    window = HotWindow(src.display)
    items = list(iter_records(src, True, window))
    named = [x.deployment for x in items if isinstance(x, NamedBlock)]
    items = [x for x in items if not isinstance(x, NamedBlock)]
    assert [(r.line, r.kind) for r in items] == [(2, "lmcache")]
    assert named == ([] if counted_by == "scanner" else ["k8s:pod/p1/c"])  # told before the block's rows
    hot = src.stats.hot
    if counted_by == "scanner":
        assert hot.counts.get("R4") == 1 and not hot.named
    else:
        assert hot.named == {"k8s:pod/p1/c": {"R4": 1}} and not hot.counts.get("R4")
    key = items[0].origin.key
    assert window.find_back(2, b"Retrieved ", key).line == 1
    assert window.find_back(1, b"Retrieved ", key) is None


def test_a_lookup_read_by_the_python_path_is_one_row_with_the_same_values(tmp_path: Path) -> None:
    items, _ = _items(tmp_path, LOOKUP % (1, 1), hot=False)
    from specdiag.events import default_matcher

    rows = LookupRows.from_event(default_matcher().match(items[0]))
    assert (len(rows), rows.total[0], rows.hit[0], rows.need[0], rows.computed[0]) == (1, 600, 512, 512, scan.NA)
    assert rows.rid_hash[0] == scan.rid_hash(b"req-1") and rows.record(0) is items[0]


@COMPILED_ONLY
def test_scan_threads_stop_and_the_input_closes_when_the_reader_stops_early(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(sources, "BLOCK_SIZE", 512)
    log = tmp_path / "x.log"
    log.write_bytes(b"".join(LOOKUP % (i % 60, i) for i in range(400)))
    src = expand_inputs([str(log)])[0]
    items = iter_records(src, True, HotWindow(src.display), scan_threads=2)
    assert isinstance(next(items), LookupRows)
    assert any(t.name.startswith("specdiag-scan") for t in threading.enumerate())
    items.close()
    assert not any(t.name.startswith("specdiag-scan") for t in threading.enumerate())
    assert src._raw is not None and src._raw.closed  # noqa: SLF001 - the file the reader opened is closed


@COMPILED_ONLY
def test_scanned_on_threads_the_rows_carry_their_absolute_line_numbers(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "BLOCK_SIZE", 700)
    log = tmp_path / "x.log"
    log.write_bytes(b"".join(LOOKUP % (i % 60, i) + b"\n" * (i % 3) for i in range(300)))

    def lines(threads: int) -> list[int]:
        src = expand_inputs([str(log)])[0]
        return [n for r in iter_records(src, True, None, scan_threads=threads) for n in r.line[r.lo:r.hi]]

    assert lines(3) == lines(0) and len(lines(0)) == 300


@pytest.mark.parametrize("seed", range(40))
def test_metric_fields_are_what_the_template_match_gives(seed: int) -> None:
    """Sliced instead of matched: equal, on every metric row of the adversarial blocks and the corpus."""
    from scan_cases import adversarial_block

    from specdiag.events import template
    from specdiag.ingest.hot import BlockView, metric_fields

    blocks = [adversarial_block(seed)]
    if seed == 0:
        blocks += [p.read_bytes() for d in INPUTS for p in d.iterdir() if p.name != "expected.json" and p.suffix != ".md"]
    seen = 0
    for block in blocks:
        view = BlockView("x", block, 0, scan.scan_block(block, 0), OriginCache(), None)
        for table, tid in (("stats", "V_STATS"), ("spec", "V_SPEC")):
            for i in range(len(view.res.columns[table]["line"])):
                rec = view.record(table, i)
                assert metric_fields(table, rec.raw) == template(tid).match(rec.raw)
                seen += 1
    assert seed != 0 or seen > 100
def test_lookup_history_keeps_the_newest_batches_and_finds_the_newest_row_of_an_id() -> None:
    from specdiag.ingest.hot import BlockView

    hist = LookupHistory(10)
    base = 0
    for start in range(0, 100, 7):
        ids = range(start, min(start + 7, 100))
        block = b"".join(LOOKUP % (i % 60, i % 50) for i in ids)  # ids repeat: req-0 .. req-49
        res = scan.scan_block(block, base)
        hist.add(LookupRows.from_view(BlockView("x.log", block, 0, res, OriginCache(), None), 0, len(ids)))
        base += res.lines
    lines = [row[1] for _h, row in hist.newest_first()]
    assert lines[0] == 100 and 10 <= len(lines) <= 10 + 7 and lines == sorted(lines, reverse=True)
    path, line, kept, hit = hist.get(scan.rid_hash(b"req-49"))
    assert (path, line, hit) == ("x.log", 100, 512) and b"Reqid: req-49," in kept  # the newest of req-49
    assert hist.get(scan.rid_hash(b"req-1")) is None  # lines 2 and 52: both older than the window




def test_lookups_read_one_by_one_join_a_batch_and_are_found_as_when_kept_apart(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Deployments interleaved line by line hand every lookup on alone (``LookupRows.from_event``): the
    look-back joins them into batches of up to ``MERGED_ROWS`` rows, and finds the same newest row of every
    id, in the same order, as batches of one row each; a window still drops the oldest (a joined batch
    whole, so up to ``MERGED_ROWS`` rows more are kept)."""
    from specdiag.analyzers.kv_shortfall import shortfall
    from specdiag.events import default_matcher

    log = tmp_path / "lookups.log"
    log.write_bytes(b"".join(LOOKUP % (i % 60, i % 50) for i in range(700)))
    events = [default_matcher().match(r) for r in iter_records(expand_inputs([str(log)])[0])]
    assert len(events) == 700 and all(ev is not None and ev.id == "L1" for ev in events)

    def history(merged_rows: int) -> LookupHistory:
        monkeypatch.setattr(shortfall, "MERGED_ROWS", merged_rows)
        hist = LookupHistory(300)
        for ev in events:
            hist.add(LookupRows.from_event(ev))
        return hist

    merged = shortfall.MERGED_ROWS
    joined, apart = history(merged), history(1)
    assert len(joined.batches) < 5 < len(apart.batches)
    newest = list(apart.newest_first())  # the window's rows; the joined history may keep one batch more
    assert len(newest) == 300 and list(joined.newest_first())[: len(newest)] == newest
    for i in range(50):
        h = scan.rid_hash(b"req-%d" % i)
        assert joined.get(h) == apart.get(h) is not None
    assert 300 <= joined.rows < 300 + merged and joined.rows < 700


def test_block_prechecks_look_only_at_the_lines_of_the_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read holds a line cut at its end; colour in that cut piece must not change how the block's own
    lines are cleaned (residue is stripped only in blocks without ESC), with the scanner or without."""
    residue_line = b"[0;0mINFO 05-06 10:00:01 [api_server.py:1] ready [0m with residue, version 1\n"
    coloured = b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 05-06 10:00:02 [api_server.py:2] Error later\n"
    monkeypatch.setattr(sources, "BLOCK_SIZE", len(residue_line) + 20)  # the read ends inside the coloured line
    log = tmp_path / "x.log"
    log.write_bytes(residue_line + coloured)

    def texts(hot: bool) -> list[tuple[int, str]]:
        src = expand_inputs([str(log)])[0]
        return [(r.line, r.msg) for r in iter_records(src, hot or None, None) if hasattr(r, "msg")]

    assert texts(True) == texts(False)
    assert texts(False)[0] == (1, "ready  with residue, version 1")


@pytest.mark.parametrize("shape, kubectl_from", [("tp1", 0.3), ("tp1", 0.0), ("tp8", None)])
def test_generated_logs_give_the_same_report_with_and_without_the_scanner(tmp_path: Path, shape: str,
                                                                          kubectl_from: float | None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Busy-server logs (lookups with unique ids, metric lines, incidents), plain and kubectl-timestamped
    from a point on, in small blocks so the timestamped copy meets block edges and a wrapper change."""
    import subprocess
    import sys

    log = tmp_path / "gen.log"
    argv = [sys.executable, str(ROOT / "scripts" / "gen_bench_log.py"), str(log), "--size-mb", "1.5", "--shape", shape]
    if kubectl_from is not None:
        argv += ["--kubectl-from", str(kubectl_from)]
    subprocess.run(argv, check=True, capture_output=True)
    monkeypatch.setattr(sources, "BLOCK_SIZE", 64 * 1024)
    compiled = _report(tmp_path)
    assert any(f["rule"] == "KV001" for f in compiled["findings"])
    _assert_same_without_the_compiled_scanner(tmp_path, compiled, monkeypatch)


@pytest.mark.parametrize(("jobs", "asked", "expected"), [(2, None, 1), (8, None, 1), (1, None, 0), (2, 0, 0),
                                                         (1, 3, 3)])
def test_scan_threads_default_to_one_when_the_jobs_leave_a_core_to_spare(jobs: int, asked: int | None,
                                                                         expected: int) -> None:
    """``-j 2`` on one input scans it beside the reading thread; ``-j 1`` (a pool worker's jobs too) never
    does; ``--scan-threads`` is taken as given."""
    opts = engine.AnalyzeOptions(paths=("x.log",), jobs=jobs, scan_threads=asked)
    assert engine.scan_threads(opts) == expected


def test_all_cores_by_default_means_a_scan_thread_where_there_are_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.os, "cpu_count", lambda: 2)
    assert engine.scan_threads(engine.AnalyzeOptions(paths=("x.log",), jobs=0)) == 1
    monkeypatch.setattr(engine.os, "cpu_count", lambda: 1)
    assert engine.scan_threads(engine.AnalyzeOptions(paths=("x.log",), jobs=0)) == 0


@pytest.mark.parametrize("threads", [-1, 65])
def test_scan_threads_out_of_bounds_are_a_config_error(threads: int) -> None:
    from specdiag.engine import ConfigError

    with pytest.raises(ConfigError, match="scan_threads must be 0 to 64"):
        analyze([str(ROOT / "examples" / "tp8-shortfall" / "serve.log")], scan_threads=threads)


def test_a_cut_header_row_before_scanned_lines_changes_nothing_the_scanner_took(tmp_path: Path) -> None:
    """A row held as a cut header (tests/test_paste_formats.py) is let go when the scanner took the next
    line: the lookup or metric rows and the records after it are what they are without that row."""
    head = b"(Worker_TP2 pid=767) [2026-05-06 10:00:00,000] LMCache ERR\n"
    stats = (b"(APIServer pid=1) INFO 05-06 10:00:04 [loggers.py:236] Engine 000: Avg prompt throughput: 1.0 "
             b"tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
             b"usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    tail = b"INFO 05-06 10:00:09 [api_server.py:1] after\n"
    for after in (LOOKUP % (1, 1), stats):
        with_head, _ = _items(tmp_path, head + after + tail)
        without, _ = _items(tmp_path, after + tail)
        assert [type(i).__name__ for i in with_head] == [type(i).__name__ for i in without] == \
            ["LookupRows" if after.startswith(b"(EngineCore") else "MetricRows", "Record"]
        assert with_head[-1].msg == without[-1].msg == "after" and with_head[-1].line == without[-1].line + 1
