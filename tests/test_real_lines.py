"""LOG001's reading of real pasted lines no specific rule explains (excerpts under ``tests/real_lines/``)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule

HERE = Path(__file__).resolve().parent / "real_lines"


def test_a_glog_format_line_is_told_by_its_file_not_always_a_library_in_vllms_process():
    """production-stack #800: kubectl's own klog line (``portforward.go:424``) was 'a native library loaded into the
    process … Mooncake's transfer engine or store client, NIXL'; marin #2387: the TPU runtime's
    ``tpu_pjrt_client.cc`` line the same."""
    kubectl = findings_by_rule(HERE / "kubectl-portforward-klog-crashloop.log")["LOG001"].next_steps[0]
    assert "Go program" in kubectl and "kubectl describe pod" in kubectl and "Mooncake" not in kubectl
    tpu = findings_by_rule(HERE / "tpu-pjrt-resource-exhausted.log")["LOG001"].next_steps[0]
    assert tpu.startswith("the TPU runtime") and "Mooncake" not in tpu
