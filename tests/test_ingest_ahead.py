"""Scanning ahead on worker processes (the pure-Python scanner): the same scans in the same order as
inline, no pool for a small input, a broken pool leaves the rest to this process, closing shuts it down."""

from __future__ import annotations

from concurrent.futures import BrokenExecutor, Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from specdiag.ingest import ahead, scan, scan_workers, sources
from specdiag.ingest.sources import expand_inputs

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "examples" / "tp8-shortfall" / "serve.log"


@pytest.fixture
def python_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python scanner, small blocks (many of them from one example) and an early pool start."""
    monkeypatch.setattr(scan, "_compiled", None)
    monkeypatch.setattr(sources, "BLOCK_SIZE", 4096)
    monkeypatch.setattr(ahead, "PROCESS_AFTER", 2)
    monkeypatch.setattr(ahead, "SCAN_WHILE_STARTING", False)
    monkeypatch.setattr(scan_workers, "SCAN_HERE_BELOW", 0)  # the 4 KiB blocks go to the workers too


def _blocks():
    return expand_inputs([str(LOG)])[0].blocks()


def _scans(items) -> list[tuple[bytes, object]]:
    return [(data[start:end], res) for data, start, end, res, _copy in items]


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every pool ``scan_ahead`` starts, kept for the test to look at."""
    made: list = []
    real = scan_workers.process_pool

    def keep(processes: int, slots: int):
        made.append(real(processes, slots))
        return made[-1]

    monkeypatch.setattr(scan_workers, "process_pool", keep)
    return made


@pytest.mark.usefixtures("python_scanner")
def test_blocks_scanned_on_worker_processes_are_the_inline_scans_in_file_order(pools: list) -> None:
    inline = _scans(ahead.scanned(_blocks(), True))
    assert len(inline) > 10
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == inline
    assert len(pools) == 1


@pytest.mark.usefixtures("python_scanner")
def test_an_input_of_few_blocks_never_starts_worker_processes(pools: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "PROCESS_AFTER", 10_000)
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == _scans(ahead.scanned(_blocks(), True))
    assert pools == []


def test_the_compiled_scanner_never_uses_worker_processes(pools: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "compiled_in_use", lambda: True)
    monkeypatch.setattr(ahead, "PROCESS_AFTER", 0)
    list(ahead.scan_ahead(iter([(b"x\n", 0, 2)]), True, processes=2))
    assert pools == []


@pytest.mark.usefixtures("python_scanner")
@pytest.mark.parametrize("read", ["part", "all"])
def test_closing_the_stream_shuts_its_worker_processes_down(read: str, pools: list) -> None:
    items = ahead.scan_ahead(_blocks(), True, processes=2)
    if read == "part":  # scans still queued: the workers are stopped without them
        for _ in range(ahead.PROCESS_AFTER + 3):
            next(items)
        items.close()
    else:
        list(items)
    assert len(pools[0].procs) == 2
    assert [p.exitcode is None for p in pools[0].procs] == [False, False]


@pytest.mark.usefixtures("python_scanner")
def test_a_block_whose_worker_died_is_scanned_here() -> None:
    data, start, end = next(iter(_blocks()))
    broken: Future = Future()
    broken.set_exception(BrokenProcessPool("a worker was killed"))
    [(_d, _s, _e, res, _copy)] = list(ahead._hand_on((data, start, end, 0, broken), 5))  # noqa: SLF001
    assert res == scan.scan_range(data, start, end, 5)


@pytest.mark.usefixtures("python_scanner")
def test_a_scan_asked_at_another_line_is_renumbered_from_the_lines_before_it() -> None:
    data, start, end = next(iter(_blocks()))
    done: Future = Future()
    done.set_result((scan.scan_range(data, start, end, 0), None))
    [(_d, _s, _e, res, _copy)] = list(ahead._hand_on((data, start, end, 0, done), 7))  # noqa: SLF001
    assert res == scan.scan_range(data, start, end, 7)


def test_a_worker_exits_when_the_analysing_process_is_gone() -> None:
    """A worker blocks on a queue whose write end every worker holds: only this watch ends it after a SIGKILL."""
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    code = f"from specdiag.workers import watch_owner; watch_owner({gone.pid}, 0.01); raise SystemExit(3)"
    assert subprocess.run([sys.executable, "-c", code], timeout=20).returncode == 0


@pytest.mark.usefixtures("python_scanner")
def test_blocks_larger_than_a_slot_are_scanned_here_beside_the_workers(pools: list,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Never through the pipe: a large task could wait for a worker that waits for this process."""
    monkeypatch.setattr(scan_workers, "SLOT_SIZE", 3000)  # the 4 KiB reads do not fit, the joined lines do
    sent: list[int] = []
    real = scan_workers.ScanPool.submit

    def count(pool, data, start, end):
        ticket = real(pool, data, start, end)
        sent.append(ticket is not None)
        return ticket

    monkeypatch.setattr(scan_workers.ScanPool, "submit", count)
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == _scans(ahead.scanned(_blocks(), True))
    assert True in sent and False in sent


@pytest.mark.usefixtures("python_scanner")
@pytest.mark.parametrize("missing", ["shared memory", "processes"])
def test_without_shared_memory_or_processes_the_input_is_scanned_here(missing: str, pools: list,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if missing == "shared memory":
        monkeypatch.setattr(scan_workers, "_shared_memory", lambda size: None)
    else:
        def refuse(*_a, **_k):
            raise OSError(11, "Resource temporarily unavailable")

        monkeypatch.setattr(scan_workers, "ScanPool", refuse)
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == _scans(ahead.scanned(_blocks(), True))
    assert pools == [None]


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm to look at")
@pytest.mark.usefixtures("python_scanner")
def test_the_shared_ring_is_unlinked_when_the_input_ends_or_is_abandoned() -> None:
    before = set(Path("/dev/shm").iterdir())
    list(ahead.scan_ahead(_blocks(), True, processes=2))
    items = ahead.scan_ahead(_blocks(), True, processes=2)
    for _ in range(ahead.PROCESS_AFTER + 2):
        next(items)
    items.close()
    assert set(Path("/dev/shm").iterdir()) <= before


@pytest.mark.usefixtures("python_scanner")
def test_a_pool_whose_worker_was_killed_breaks_and_takes_no_new_block() -> None:
    pool = scan_workers.process_pool(2, 4)
    assert pool is not None, "no shared memory here"
    try:
        while not pool.started():
            pool.wait()
        data = b"x\n" * 100
        ticket = pool.submit(data, 0, len(data))
        assert ticket.result()[0] == scan.scan_range(data, 0, len(data), 0)
        pool.procs[0].kill()
        pool.procs[0].join()
        waiting = pool.submit(data, 0, len(data))  # taken by the live worker, or queued: broken either way
        with pytest.raises(BrokenExecutor):
            while True:  # the death is noticed when this process next waits for a result
                waiting.result()
                waiting = pool.submit(data, 0, len(data))
        assert pool.submit(data, 0, len(data)) is None
    finally:
        pool.close()
    assert [p.is_alive() for p in pool.procs] == [False, False]


@pytest.mark.usefixtures("python_scanner")
def test_the_rest_of_the_input_is_scanned_here_when_a_worker_dies(pools: list, monkeypatch: pytest.MonkeyPatch) -> None:
    real = scan_workers.submit
    sent: list = []

    def kill_after_two(pool, data, start, end):
        sent.append(start)
        if len(sent) == 3:
            pool.procs[1].kill()
            pool.procs[1].join()
        return real(pool, data, start, end)

    monkeypatch.setattr(scan_workers, "submit", kill_after_two)
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == _scans(ahead.scanned(_blocks(), True))
    assert pools[0].broken


@pytest.mark.parametrize("room", [1 << 16, 100], ids=["fits-its-slot", "larger-than-its-slot"])
def test_a_scan_goes_back_in_its_blocks_slot_when_it_fits_else_inside_the_message(room: int) -> None:
    from multiprocessing.shared_memory import SharedMemory

    data = LOG.read_bytes()[:8000]
    data = data[: data.rindex(b"\n") + 1]
    shm = SharedMemory(create=True, size=2 * (1 << 16))
    try:
        message = scan_workers.answer(shm, room, 3, 1 << 16, data)
        task, what, at, length = scan_workers._DONE.unpack_from(message)  # noqa: SLF001
        assert (task, what) == (3, scan_workers._RESULT)  # noqa: SLF001
        payload = message[scan_workers._DONE.size :]  # noqa: SLF001
        if room > 100:
            assert (at, payload) == (1 << 16, b"")
        else:
            assert at == -1 and len(payload) == length > 100
        assert length > 100
        assert scan_workers.unpacked(shm, what, at, length, payload) == scan_workers.scan_job(data)
    finally:
        shm.close()
        shm.unlink()


def test_an_exception_in_a_workers_scan_is_raised_here_for_that_block() -> None:
    message = scan_workers.answer(None, 0, 7, 0, None)  # what a worker sends for a scan that raised (no room)
    task, what, at, length = scan_workers._DONE.unpack_from(message)  # noqa: SLF001
    assert (task, what, at) == (7, scan_workers._ERROR, -1)  # noqa: SLF001
    with pytest.raises(AttributeError, match="endswith"):  # what scanning None raises, raised here
        scan_workers.unpacked(None, what, at, length, message[scan_workers._DONE.size :])  # noqa: SLF001


@pytest.mark.usefixtures("python_scanner")
def test_worker_processes_work_where_the_platform_can_only_spawn(pools: list, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows have no fork server: the workers are spawned (a fresh interpreter that imports
    the scanner), and the scans are still the inline ones."""
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == _scans(ahead.scanned(_blocks(), True))
    assert pools[0].method == "spawn"


@pytest.mark.parametrize("base", [0, 1, 7, 2**40, -3])
def test_a_shifted_column_is_the_same_by_the_compiled_loop_and_by_the_python_map(base: int,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from array import array

    column = array("q", [0, 1, 5, 2**50, -(2**20)])
    by_python = _shift_without_the_extension(column, base, monkeypatch)
    assert list(by_python) == [v + base for v in column]
    if scan._compiled is not None:  # noqa: SLF001 - the compiled loop, where it was built
        monkeypatch.undo()
        assert scan.shift_column(column, base) == by_python
    assert list(column) == [0, 1, 5, 2**50, -(2**20)], "the column itself is left as it was"


def _shift_without_the_extension(column, base: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(scan, "_compiled", None)
    return scan.shift_column(column, base)


@pytest.mark.skipif(scan._compiled is None, reason="the compiled scanner was not built")  # noqa: SLF001
@pytest.mark.parametrize("column", [b"12345678", "array-of-int32"])
def test_the_compiled_shift_refuses_what_is_not_a_writable_int64_column(column) -> None:
    from array import array

    target = array("i", [1, 2]) if column == "array-of-int32" else column
    with pytest.raises((ValueError, TypeError)):
        scan._compiled.shift(target, 1)  # noqa: SLF001


def test_a_block_smaller_than_a_round_trip_is_worth_is_scanned_here() -> None:
    """The line a read boundary cut is a block of its own after every read: it never goes to a worker."""

    class Refusing:
        def submit(self, *_a, **_k):
            raise AssertionError("a small block was sent to a worker")

    small = b"x\n" * (scan_workers.SCAN_HERE_BELOW // 2 - 1)
    assert scan_workers.submit(Refusing(), small, 0, len(small)) is None
    big = b"x\n" * (scan_workers.SCAN_HERE_BELOW // 2)
    with pytest.raises(AssertionError, match="sent to a worker"):
        scan_workers.submit(Refusing(), big, 0, len(big))


@pytest.mark.usefixtures("python_scanner")
@pytest.mark.parametrize("here_below", [1 << 30, 600], ids=["every-block-here", "some-blocks-here"])
def test_blocks_scanned_here_beside_the_workers_keep_their_line_numbers(here_below: int, pools: list,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A block too small to send is scanned in this process, numbered as it is scanned: never renumbered
    again on the way out (the scans and their line columns equal the inline ones)."""
    monkeypatch.setattr(scan_workers, "SCAN_HERE_BELOW", here_below)
    inline = _scans(ahead.scanned(_blocks(), True))
    assert _scans(ahead.scan_ahead(_blocks(), True, processes=2)) == inline
    assert len(pools) == 1


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_ends_an_analysis_and_its_scan_workers_at_once(tmp_path: Path) -> None:
    """Ctrl-C while the pure-Python scanner's workers are busy: exit code 130 at once, no process left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    log = tmp_path / "tp1.log"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_bench_log.py"), str(log), "--shape", "tp1",
                    "--size-mb", "8"], check=True, capture_output=True, timeout=120)
    env = {**os.environ, "SPECDIAG_SCANNER": "python"}
    proc = subprocess.Popen([sys.executable, "-m", "specdiag", "analyze", "-", "-j", "2", "--format", "json"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(log.read_bytes())  # the workers start after a few blocks; the pipe stays open
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not (workers := [w for k in _children(proc.pid) for w in _children(k)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers, "no scan worker started"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
        assert time.monotonic() - sent < 2
        time.sleep(0.5)
        assert [w for w in workers if Path(f"/proc/{w}").exists()] == []
        assert b"Traceback" not in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
