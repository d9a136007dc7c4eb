"""torch's NCCL watchdog in real pastes (vLLM issues #6042, #9839, #2734): a collective that timed out on a TP
rank takes the worker down, and vLLM prints nothing of its own about why. Before, these excerpts gave a warning
and exit 0, 'nothing recognised' (exit 3), and 'no problem found'."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule, write_paste

from specdiag.ingest import prefilter

HERE = Path(__file__).resolve().parent / "real_deaths"


def test_a_worker_aborted_by_the_watchdog_is_a_death_whose_root_is_the_timed_out_collective():
    """#6042: V0's worker monitor says the worker died with -6 (SIGABRT), torch's lines say why."""
    srv = findings_by_rule(HERE / "nccl-watchdog-worker-abort.log")["SRV001"]
    top = srv.causes[0]
    assert top.id == "nccl-timeout"
    assert "Watchdog caught collective operation timeout" in srv.measurements["root_error"]
    assert any("rank 0 waited 600 s (timeout 600 s) for ALLREDUCE #2" in f and "start-up" in f for f in top.for_)


def test_the_watchdog_threads_report_with_cpp_frames_is_read_not_nothing_recognised():
    """#9839: only torch's lines and its C++ stack; the GATHER of rank 2 after 12 million collectives."""
    srv = findings_by_rule(HERE / "nccl-watchdog-gather-cpp-frames.log")["SRV001"]
    assert srv.causes[0].id == "nccl-timeout"
    assert any("rank 2 waited 600 s" in f and "hung while serving" in f for f in srv.causes[0].for_)


def test_a_ray_workers_timeout_after_a_stalled_engine_is_a_death_not_no_problem():
    """#2734: one request running at 0 tokens/s, then rank 4's ALLREDUCE times out under the Ray worker's prefix."""
    srv = findings_by_rule(HERE / "nccl-watchdog-ray-tp8.log")["SRV001"]
    assert srv.causes[0].id == "nccl-timeout"
    assert any("rank 4 waited 1,800 s" in f for f in srv.causes[0].for_)


@pytest.mark.parametrize("line,kept", [
    (b"[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout", True),
    (b"[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout", True),
    (b"[rank2]:[E1021 12:00:00.123456 1234 ProcessGroupNCCL.cpp:1414] [PG 2 Rank 2] Process group watchdog", True),
    (b"[rank0]:[W506 15:56:03.072715 ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is", False),
    (b"[rank12]:[F ProcessGroupNCCL.cpp:1] x", True),
])
def test_torch_errors_are_kept_and_its_warnings_stay_counted_in_both_copies(line, kept):
    from test_prefilter import _compiled_kinds

    ref = prefilter.inert_kind(line, 0)
    assert _compiled_kinds([line], 0) == bytes([ref])
    assert (ref == prefilter.KEEP) is kept


def test_a_torch_warning_is_no_record(tmp_path):
    log = write_paste(tmp_path, ["[rank0]:[W506 15:56:03.072715 ProcessGroupNCCL.cpp:4561] Warning: "
                                 "TORCH_NCCL_AVOID_RECORD_STREAMS is the default now (function operator())"])
    assert findings_by_rule(log) == {}


@pytest.mark.parametrize("code,cause,note", [
    ("-6", "native-crash", None),            # SIGABRT: the watchdog's abort, a C++ assertion
    ("-9", "process-killed", "SIGKILL"),
    ("-15", "process-killed", "SIGTERM"),    # vLLM issue #6145's line
    ("1", "worker-exception", None),
])
def test_v0s_worker_monitor_line_is_a_death_classified_by_its_exit_code(tmp_path, code, cause, note):
    log = write_paste(tmp_path, [f"ERROR 07-04 23:23:23 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid "
                                 f"3283517 died, exit code: {code}"])
    srv = findings_by_rule(log)["SRV001"]
    assert srv.causes[0].id == cause
    assert note is None or any(note in f for f in srv.causes[0].for_)
