"""KV020: ERROR lines of vLLM's KV-transfer code (P/D connectors) are a diagnosis, not unexplained lines. The
excerpts under ``real_pd/`` are pasted from public threads (vLLM, vLLM-Ascend, Mooncake): each gave a LOG001
warning (exit 0) before."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

from specdiag.analyzers.kv_transfer import connector_of, transfer_module_named
from specdiag.catalog import catalog

HERE = Path(__file__).resolve().parent / "real_pd"


def test_mooncake_pull_timeouts_are_an_error_with_their_requests():
    """vLLM #50719: the decode side's pulls timed out waiting for the prefill side (0.25+ mooncake_connector.py)."""
    found = _by_rule(HERE / "mooncake-pull-timeout.log")
    kv = found["KV020"]
    assert kv.severity == "error"
    assert kv.measurements["by_connector"] == {"mooncake": 3}
    assert "'pulling kv_caches for %s failed: %s' ×3" in kv.summary
    assert kv.measurements["request_ids"][:2] == ["973ca62f1bc3666d", "a067ac70e68581a1"]
    assert "LOG001" not in found  # the connector's lines are KV020's, not unexplained


def test_an_uncatalogued_connector_file_and_the_transfer_engines_glog_lines_are_one_finding():
    """vLLM-Ascend #5635: its own mooncake_connector.py (no catalogued release prints these texts) and Mooncake's
    transfer engine, whose glog 0.7 lines carry the year (``E20260106``), which was not read at all."""
    found = _by_rule(HERE / "ascend-mooncake-transfer-glog-year.log")
    kv = found["KV020"]
    assert kv.measurements["by_connector"] == {"mooncake": 2}
    assert kv.measurements["native_transfer_errors"] == 2
    assert "'Mooncake transfer failed for request cmpl-118b93ed-a3b2-4d9f-a26d-1d5dce6d7bf2-0' ×1" in kv.summary
    assert "ascend_direct_transport.cpp:581] Failed to connect to segment: 172.17.0.16:16584" in kv.summary
    assert "LOG001" not in found


def test_nixl_failures_other_than_a_handshake_are_transfers_and_handshakes_stay_kv015():
    """vLLM PR #32031's formats: 'NIXL transfer failure: transfer_setup_failed' was dropped from every finding."""
    found = _by_rule(HERE / "nixl-failure-kinds.log")
    assert "'NIXL transfer failure: transfer_setup_failed' ×1" in found["KV020"].summary
    assert found["KV015"].measurements["handshake_failures"] == 2  # the old line and handshake_setup_failed


def test_a_line_at_a_file_no_release_has_is_not_taken_for_a_short_format_elsewhere():
    """Mooncake #3076 (vLLM-Ascend's kv_transfer.py): 'Failed to load blocks. failed_count=111, …' fit
    'Failed to load %s' of model_executor/models/adapters.py by its text alone; now it is the KV pool's."""
    assert catalog().match("Failed to load blocks. failed_count=111, failed_blocks={0, 7526}", project="vllm",
                           file="kv_transfer.py", line=753, level="ERROR") is None
    moved = catalog().match("EngineCore encountered a fatal error.", project="vllm", file="core_v2.py", line=9,
                            level="ERROR")
    assert moved is not None and moved.module == "v1/engine/core.py"  # a specific message moved to a new file
    kv = _by_rule(HERE / "ascend-kv-pool-load-failed.log")["KV020"]
    assert kv.measurements["by_connector"] == {"kv_transfer": 1}


def test_error_lines_of_files_other_code_shares_are_not_a_connectors(tmp_path):
    assert transfer_module_named("worker.py") is None  # v1/worker/… has one too
    assert transfer_module_named("mooncake_connector.py").endswith("mooncake_connector.py")
    assert connector_of("distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py") == "nixl"
    found = _by_rule(_write(tmp_path, ["ERROR 05-01 10:00:00 [worker.py:120] Failed to transfer the weights"]))
    assert "KV020" not in found and "LOG001" in found


def test_a_connector_whose_library_is_missing_says_so_not_a_transfer():
    """llm-d #139 (a ROCm image without NIXL): 'NIXL is not available', then the engine failed to start. It was
    called a failed transfer with advice on reachability and timeouts."""
    kv = _by_rule(HERE / "nixl-not-available-rocm.log")["KV020"]
    assert kv.causes[0].id == "connector-library-missing" and "never created" in kv.summary


def test_a_factory_line_naming_a_connector_whose_library_is_missing_is_that_connectors(tmp_path):
    """vLLM-Omni #3513: ``[factory.py:49] Failed to create connector MooncakeTransferEngineConnector: Mooncake not
    available``, at a file that is no connector's, was a LOG001 warning beside a KV020 'failed transfer' whose fix was
    reachability and timeouts. Another line of such a file, or one naming no connector, is not claimed."""
    found = _by_rule(HERE / "omni-factory-mooncake-not-available.log")
    kv = found["KV020"]
    assert kv.causes[0].id == "connector-library-missing" and "mooncake" in kv.measurements["by_connector"]
    assert "LOG001" not in found
    lines = ["ERROR 05-11 13:39:09 [factory.py:49] Failed to create widget: Mooncake not available",
             "ERROR 05-11 13:39:10 [factory.py:60] Failed to create connector MooncakeTransferEngineConnector: bad port"]
    assert "KV020" not in _by_rule(_write(tmp_path, lines))


def test_nixl_refusing_telemetry_it_does_not_keep_is_the_cause_of_its_transfer_exceptions():
    """ai-dynamo/dynamo #12952: NIXL 1.3.1's 'getXferTelemetry: cannot return values when telemetry is not enabled'
    beside vLLM's 'NIXL transfer failure: transfer_exception': the lead was 'make the peer reachable, raise the
    timeout', and the NIXL line a LOG001 warning. vLLM reads a completed transfer's telemetry before releasing it."""
    found = _by_rule(HERE / "nixl-telemetry-disabled-transfer-exception.log")
    assert found["KV020"].causes[0].id == "nixl-telemetry-disabled"
    assert "LOG001" not in found
