"""SRV003: vLLM's 'No available shared memory broadcast block found in 60 seconds' is a process of the engine that
waited on another; repeated a minute apart, it is one long wait. It was 'no problem found' before."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

HERE = Path(__file__).resolve().parent / "real_deaths"
WAIT = ("(EngineCore_DP0 pid=9) INFO 05-01 {t} [shm_broadcast.py:705] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work "
        "(e.g. compilation, weight/kv cache quantization).")
STATS = ("(APIServer pid=1) INFO 05-01 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 100.0 tokens/s, "
         "Avg generation throughput: 10.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
         "Prefix cache hit rate: 0.0%")


def test_five_waits_a_minute_apart_are_one_five_minute_wait():
    """eugr/spark-vllm-docker #348: the engine core's wait repeated for five minutes; no start-up or stats line."""
    srv = _by_rule(HERE / "shm-broadcast-wait-5min.log")["SRV003"]
    assert srv.severity == "warning"
    assert srv.measurements["longest_wait_s"] == 300 and srv.measurements["serving_before"] is False
    assert srv.causes[0].id == "worker-hang" and srv.causes[0].confidence == 0.4
    assert "whether the engine was serving or still starting is not in the input" in srv.summary


def test_a_wait_of_three_minutes_while_serving_is_an_error(tmp_path):
    srv = _by_rule(_write(tmp_path, [STATS] + [WAIT.format(t=f"10:0{m}:05") for m in (1, 2, 3)]))["SRV003"]
    assert srv.severity == "error"
    assert [c.id for c in srv.causes] == ["worker-hang"] and srv.causes[0].confidence == 0.75


def test_a_wait_right_after_start_up_leads_with_start_up_work(tmp_path):
    start = ("(EngineCore_DP0 pid=9) INFO 05-01 09:59:00 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
             "config: model='m', speculative_config=None, tensor_parallel_size=8")
    srv = _by_rule(_write(tmp_path, [start, WAIT.format(t="10:00:00"), WAIT.format(t="10:01:00")]))["SRV003"]
    assert srv.severity == "warning"
    assert [c.id for c in srv.causes] == ["long-startup-work", "worker-hang"]


def test_waits_far_apart_are_separate_and_0_6s_warning_is_read(tmp_path):
    lines = [WAIT.format(t="10:00:00"), WAIT.format(t="10:30:00"),
             "(EngineCore_DP0 pid=9) WARNING 05-01 11:00:00 [shm_broadcast.py:382] No available block found in 60 "
             "second. ",
             # 0.6.5-0.10.2 print it at DEBUG: not read (a DEBUG flood of that first word would all be read)
             "DEBUG 05-01 11:30:00 [shm_broadcast.py:399] No available shared memory broadcast block found in 60 second."]
    srv = _by_rule(_write(tmp_path, lines))["SRV003"]
    assert srv.measurements["wait_lines"] == 3 and srv.measurements["longest_wait_s"] == 60


def test_an_rpc_to_the_workers_that_timed_out_is_a_hang_not_an_exception_to_fix(tmp_path):
    """vLLM #37250, verl #6583: the engine core died on 'TimeoutError: RPC call to sample_tokens timed out.'
    (multiproc_executor.py): its workers did not answer; the fix is where they hung, not that TimeoutError."""
    head = "(EngineCore_DP0 pid=3) ERROR 03-08 17:31:28 [core.py:1102] "
    srv = _by_rule(_write(tmp_path, [head + "EngineCore encountered a fatal error.",
                                     head + "TimeoutError: RPC call to sample_tokens timed out."]))["SRV001"]
    assert srv.causes[0].id == "worker-hang" and "py-spy" in srv.causes[0].fix


def test_the_ray_executor_waiting_to_place_its_workers_is_a_start_that_waits_for_ray():
    """vllm-project/aibrix #927: 'Waiting for creating a placement group of specs for 10 / 30 seconds. specs=[…
    'GPU': 1.0 …]' was 'no finding', exit 0, while the engine could not start."""
    stall = _by_rule(HERE / "ray-placement-group-waits.log")["SRV003"]
    assert stall.causes[0].id == "ray-placement" and stall.measurements["placement_wait_s"] == 30
    assert stall.measurements["gpu_bundles"] == 2 and stall.count == 2
