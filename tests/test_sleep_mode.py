"""SRV008: vLLM's sleep-mode allocator could not map GPU memory. Real excerpts under ``tests/real_sleep/``: the raw
allocator lines were 'nothing recognised' (exit 3) or ignored beside a trainer's traceback (exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule, write_paste

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_sleep"


@pytest.mark.parametrize("name, lines, oom", [
    # vLLM PR #12981: the three lines the allocator prints when wake_up finds the GPU full
    ("cumem-oom-then-invalid-argument.log", 3, 1),
    # lmm-r1 #43: a Ray actor's allocator line among the trainer's progress bars, then the driver's traceback
    ("openrlhf-ray-actor-cumem-oom.log", 1, 1),
    # vLLM #13941: the RuntimeError Python raises from create_and_map, through wake_up
    ("wake-up-oom-traceback.log", 1, 1),
])
def test_the_sleep_mode_allocator_out_of_memory_is_a_wake_up_that_found_the_gpu_full(name, lines, oom):
    report = analyze([str(HERE / name)])
    srv = next(f for f in report.findings if f.rule == "SRV008")
    assert srv.severity == "error" and report.exit_code("error") == 1
    assert (srv.measurements["lines"], srv.measurements["out_of_memory"]) == (lines, oom)
    assert srv.causes[0].id == "sleep-wake-oom"


def test_the_invalid_argument_lines_after_it_are_said_to_be_its_echo():
    srv = findings_by_rule(HERE / "cumem-oom-then-invalid-argument.log")["SRV008"]
    assert "handle that was never made" in srv.summary


def test_another_driver_error_alone_is_a_warning(tmp_path):
    srv = findings_by_rule(write_paste(tmp_path, ["CUDA Error: operation not supported at /workspace/csrc/cumem_allocator.cpp:70"]))["SRV008"]
    assert srv.severity == "warning" and srv.causes[0].id == "sleep-map-failed"


def test_a_cuda_error_of_another_file_is_not_the_allocators(tmp_path):
    assert "SRV008" not in findings_by_rule(write_paste(tmp_path, ["CUDA Error: out of memory at /src/other.cpp:12"]))
