"""KV015: a NIXL handshake that failed (P/D disaggregation) is an error finding with the reason its exception
gives, not only an account of unexplained ERROR lines (vLLM issue #27083's lines and their kind)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

W = "(Worker_DP0_EP0 pid=2823482) ERROR 10-16 17:22:56 "


def _findings(tmp_path: Path, lines: list[str]) -> dict:
    return findings_by_rule(write_paste(tmp_path, lines))


def test_an_engine_id_mismatch_points_at_the_side_channel(tmp_path):
    found = _findings(tmp_path, [
        W + "[nixl_connector.py:815] RuntimeError: Remote NIXL agent engine ID mismatch. Expected "
            "46126a31-6b81-435d-a116-e3e34a76ded3_dp0,received 96b1c4ff-9edf-4d21-b7cf-975a5f441d03_dp0.",
        W + "[nixl_connector.py:827] Handshake failed for request chatcmpl-1f2e, marking blocks as invalid"])
    kv = found["KV015"]
    assert kv.severity == "error" and kv.causes[0].id == "nixl-side-channel-mismatch"
    assert kv.measurements["requests"] == 1 and kv.measurements["engine_id_mismatch"] is True
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST" in kv.next_steps[0]
    assert "LOG001" not in found


def test_a_handshake_failure_without_its_reason_says_what_to_collect(tmp_path):
    kv = _findings(tmp_path, ["ERROR 11-22 06:57:51 [nixl_connector.py:548] Handshake with "
                              "c00824be-282f-4719-9aeb-120dcb516863 failed"])["KV015"]
    assert kv.causes[0].id == "nixl-unreachable" and kv.causes[0].confidence <= 0.4
    assert any("collect the exception" in a for a in kv.causes[0].against)


def test_020s_transfer_failure_counts_only_when_it_is_a_handshake(tmp_path):
    line = ("(Worker_TP1_EP1 pid=2749) ERROR 08-02 19:43:44 [worker.py:767] NIXL transfer failure: {kind} | "
            "Context: {{'failure_type': '{kind}', 'request_id': 'cmpl-1'}}")
    assert "KV015" in _findings(tmp_path, [line.format(kind="handshake_failed")])
    assert "KV015" not in _findings(tmp_path, [line.format(kind="transfer_failed")])
