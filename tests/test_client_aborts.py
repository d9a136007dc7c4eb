"""SRV010: a burst of aborted requests. vLLM #2484 and tt-inference-server #350 (nine aborts in one second, a client's
timeout) were 'no problem found'."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

from specdiag.analyzers.client_aborts import one_request

HERE = Path(__file__).resolve().parent / "real_requests"


def test_nine_aborts_in_one_second_are_a_client_timeout_burst():
    srv = findings_by_rule(HERE / "v0-nine-aborted-same-second.log")["SRV010"]
    assert srv.measurements["burst"] == 9 and srv.severity == "warning"
    assert srv.causes[0].id == "client-timeout"


def test_the_completions_of_one_request_are_named_as_one_request():
    srv = findings_by_rule(HERE / "tt-n9-completion-aborted-after-stats.log")["SRV010"]
    assert srv.measurements["one_request"] == "cmpl-1dac86b037d24bbe97d7ce0f776e9250" and "n=9" in srv.summary


def test_aborts_spread_over_minutes_are_users_not_a_burst(tmp_path):
    lines = [f"INFO 01-17 03:{m:02d}:25 async_llm_engine.py:134] Aborted request r{m}." for m in range(10, 20)]
    assert "SRV010" not in findings_by_rule(write_paste(tmp_path, lines))


def test_v1s_list_of_aborted_requests_counts_each(tmp_path):
    line = "(APIServer pid=1) INFO 01-17 03:11:25 [async_llm.py:540] Aborted request(s) a1, a2, a3, a4, a5, a6."
    srv = findings_by_rule(write_paste(tmp_path, [line]))["SRV010"]
    assert srv.measurements["burst"] == 6


def test_ids_of_different_requests_are_no_one_request():
    assert one_request(["cmpl-a-0", "cmpl-b-0"]) is None and one_request(["cmpl-a-0", "cmpl-a-1"]) == "cmpl-a"
