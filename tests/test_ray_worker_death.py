"""A vLLM worker that runs as a Ray actor and dies prints no vLLM death line of its own: Ray's terminate handler,
its failure-signal handler and the raylet say so. SRV001 reads them as the engine's death (vLLM's Ray executor
never replaces a worker) with the root the worker's own lines give."""

from __future__ import annotations

from pathlib import Path

from pasted import json_findings_by_rule, write_paste

_RAY = "(RayWorkerWrapper pid=5191, ip=10.0.0.12) "
_UNHANDLED = _RAY + ("[2025-03-06 10:00:00,123 E 5191 5191] logging.cc:108: Unhandled exception: N3c1010ErrorE. "
                     "what(): CUDA error: an illegal memory access was encountered")
_SIGNAL = _RAY + "*** SIGSEGV received at time=1741255200 on cpu 3 ***"
_RAYLET = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
           "troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 8c2d Node ID: "
           "1f3e Worker IP address: 10.0.0.12 Worker port: 10123 Worker PID: 5191 Worker exit type: SYSTEM_ERROR "
           "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.")


def _findings(tmp_path: Path, lines: list[str]) -> dict[str, dict]:
    return json_findings_by_rule(write_paste(tmp_path, lines))


def test_an_unhandled_cpp_exception_in_a_ray_worker_is_the_engines_death_with_that_root(tmp_path):
    found = _findings(tmp_path, [_UNHANDLED, _SIGNAL, _RAY + "PC: @     0x7f3b2c4a09fc  (unknown)  pthread_kill", _RAYLET])
    srv = found["SRV001"]
    assert srv["severity"] == "error"
    assert srv["measurements"]["root_error"] == "CUDA error: an illegal memory access was encountered"
    assert srv["causes"][0]["id"] == "native-crash"
    assert srv["measurements"]["death_inferred"] is True
    assert "a C++ exception nothing caught, " in srv["summary"] and "Ray executor replaces a dead worker" in srv["summary"]
    assert [e["line"] for e in srv["evidence"]] == [1, 2, 4]
    assert "LOG001" not in found  # every ERROR line is read by the finding


def test_a_fatal_signal_alone_is_a_native_crash(tmp_path):
    srv = _findings(tmp_path, [_SIGNAL])["SRV001"]
    assert srv["causes"][0]["id"] == "native-crash"
    assert "SIGSEGV" in srv["measurements"]["root_error"]


def test_the_raylets_report_alone_is_a_death_whose_reason_ray_does_not_know(tmp_path):
    srv = _findings(tmp_path, [_RAYLET])["SRV001"]
    top = srv["causes"][0]
    assert top["id"] == "process-killed" and top["confidence"] <= 0.6
    assert any("possibilities, not findings" in a for a in top["against"])


def test_a_raylet_on_another_node_is_read_too(tmp_path):
    srv = _findings(tmp_path, [_RAYLET.replace("(raylet)", "(raylet, ip=10.0.0.13)")])["SRV001"]
    assert srv["causes"][0]["id"] == "process-killed"


def test_a_sigterm_is_a_stop_not_a_crash(tmp_path):
    found = _findings(tmp_path, [_RAY + "*** SIGTERM received at time=1741255200 on cpu 3 ***"])
    assert "SRV001" not in found and "LOG001" not in found
    assert found["LOG002"]["measurements"]["messages"][0]["level"] == "WARNING"


def test_the_engine_cores_actor_died_error_is_a_consequence_of_the_workers_signal(tmp_path):
    core = "(EngineCore_DP0 pid=900) "
    found = _findings(tmp_path, [
        _SIGNAL,
        core + "ERROR 03-06 10:00:02 [core.py:1512] EngineCore encountered a fatal error.",
        core + "ERROR 03-06 10:00:02 [core.py:1512] Traceback (most recent call last):",
        core + 'ERROR 03-06 10:00:02 [core.py:1512]   File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", '
               "line 701, in run_engine_core",
        core + "ERROR 03-06 10:00:02 [core.py:1512] ray.exceptions.ActorDiedError: The actor died unexpectedly "
               "before finishing this task.",
    ])
    srv = found["SRV001"]
    assert srv["causes"][0]["id"] == "native-crash"
    assert "SIGSEGV" in srv["measurements"]["root_error"]
    assert srv["measurements"]["death_inferred"] is False
