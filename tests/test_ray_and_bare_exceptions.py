"""A worker that crashes under Ray, and an exception line pasted without its traceback, are errors the report
names (LOG001), never "no problem found"."""

from __future__ import annotations

import json
from pathlib import Path

from specdiag.engine import analyze
from specdiag.ingest import prefilter
from specdiag.report.json_report import render_json
from specdiag.report.verdict import status

_RAY = "(RayWorkerWrapper pid=5191, ip=10.0.0.12) "
_CPP = _RAY + ("[2025-03-06 10:00:00,123 E 5191 5191] core_worker.cc:1001: Unhandled exception: "
               "std::runtime_error. what(): CUDA error: an illegal memory access was encountered")
_SIGNAL = _RAY + "*** SIGABRT received at time=1741255200 on cpu 3 ***"


def _report(tmp_path: Path, lines: list[str]) -> tuple[dict, str]:
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n")
    rep = analyze([str(log)])
    return json.loads(render_json(rep)), status(rep, []).text


def test_a_ray_error_no_rule_reads_is_named_with_its_place(tmp_path):
    line = _RAY + "[2025-03-06 10:00:00,123 E 5191 5191] gcs_rpc_client.h:210: Failed to connect to GCS within 60 seconds"
    out, text = _report(tmp_path, [line])
    (log001,) = [f for f in out["findings"] if f["rule"] == "LOG001"]
    (msg,) = log001["measurements"]["messages"]
    assert msg["message"] == "Failed to connect to GCS within 60 seconds"
    assert msg["project"] == "ray" and msg["level"] == "ERROR" and msg["location"] == "ray gcs_rpc_client.h:210"
    assert "1 Ray ERROR line" in log001["summary"] and "None" not in log001["summary"]
    assert "grep -B40 -A30 -F 'Failed to connect to GCS within 60'" in log001["next_steps"][0]
    assert "no problem found" not in text


def test_ray_info_lines_stay_out_of_the_account(tmp_path):
    out, _ = _report(tmp_path, [_RAY + "[2025-03-06 10:00:00,123 I 5191 5191] core_worker.cc:300: Constructing "
                                "CoreWorkerProcess. pid: 5191"])
    assert not [f for f in out["findings"] if f["rule"] == "LOG001"]


def test_a_bare_exception_line_is_an_error_with_a_step_to_collect_its_traceback(tmp_path):
    line = "RuntimeError: CUDA error: misaligned address"
    for lines in ([line], [_RAY + line], ["(EngineCore_DP0 pid=1) " + line]):
        out, text = _report(tmp_path, lines)
        (log001,) = [f for f in out["findings"] if f["rule"] == "LOG001"]
        assert log001["measurements"]["messages"][0]["message"] == line
        assert "1 exception ERROR line" in log001["summary"]
        assert "grep -B50 -F 'RuntimeError: CUDA error: misaligned'" in log001["next_steps"][0]
        assert "no problem found" not in text


def test_a_traceback_through_vllm_the_engine_core_printed_raw_is_its_death(tmp_path):
    """Python prints what escaped a process's target, unlogged, as it exits; vLLM prefixes the engine core's output.
    A lone exception line is no such proof (a library's callback prints its own the same way)."""
    out, _ = _report(tmp_path, ["(EngineCore_DP0 pid=1) Traceback (most recent call last):",
                                '(EngineCore_DP0 pid=1)   File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", '
                                "line 3, in step", "(EngineCore_DP0 pid=1) RuntimeError: CUDA error: misaligned address"])
    (death,) = [f for f in out["findings"] if f["rule"] == "SRV001"]
    assert death["measurements"]["root_error"] == "CUDA error: misaligned address"


def test_a_threads_exception_the_engine_core_printed_is_no_death(tmp_path):
    """``Exception in thread …:`` (threading's hook) or ``Exception ignored in …`` above a raw traceback: the
    process went on."""
    for head in ("Exception in thread Thread-4 (process_request):", "Exception ignored in: <function Remote.__del__>"):
        out, _ = _report(tmp_path, [f"(EngineCore_DP0 pid=1) {head}", "(EngineCore_DP0 pid=1) Traceback (most recent "
                                    "call last):", '(EngineCore_DP0 pid=1)   File "/x/vllm/y.py", line 3, in f',
                                    "(EngineCore_DP0 pid=1) ValueError: bad chunk size 0"])
        assert not [f for f in out["findings"] if f["rule"] == "SRV001"], head


def test_a_bare_illegal_memory_access_is_the_death_of_its_process(tmp_path):
    """The one CUDA error that leaves a context unusable, whatever printed it: the death, its root the line."""
    line = "RuntimeError: CUDA error: an illegal memory access was encountered"
    out, _ = _report(tmp_path, ["(EngineCore_DP0 pid=1) " + line])
    (death,) = [f for f in out["findings"] if f["rule"] == "SRV001"]
    assert death["measurements"]["root_error"].endswith("an illegal memory access was encountered")


def test_a_warning_class_line_is_no_error(tmp_path):
    out, _ = _report(tmp_path, ["FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated."])
    assert not [f for f in out["findings"] if f["rule"] == "LOG001"]


def test_the_prefilter_keeps_what_starts_a_ray_record_and_counts_the_rest():
    keep = [_CPP.encode(), _SIGNAL.encode(), _CPP.replace(" E 5191", " W 5191").encode(),
            _CPP.replace(" E 5191", " F 5191").encode()]
    for raw in keep:
        assert prefilter.inert_kind(raw, prefilter.PLAIN_BLOCK) == prefilter.KEEP
    counted = [_CPP.replace(" E 5191", " I 5191").encode(), (_RAY + "PC: @     0x7f3b2c4a09fc  (unknown)").encode()]
    for raw in counted:
        assert prefilter.inert_kind(raw, prefilter.PLAIN_BLOCK) == prefilter.PREFIXED
