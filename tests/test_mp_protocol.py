"""KV021: LMCache's multiprocess server refusing its client's requests is a protocol mismatch, not an unexplained
line. The excerpt under ``real_kv/`` is the server's side of LMCache #4267 (CacheBlend in multiprocess mode)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

from specdiag.analyzers.kv_mp_protocol import MQ_MODULES, rejection
from specdiag.catalog import catalog

HERE = Path(__file__).resolve().parent / "real_kv"


def test_a_request_type_the_server_has_no_handler_for_names_the_version_it_serves():
    """It was a LOG001 warning ('read lmcache v1/multiprocess/mq.py:482'), exit 0, while every CacheBlend lookup
    failed: the server lists CB_LOOKUP_PRE_COMPUTED_V2 among its handlers, the client asked for the old type."""
    found = _by_rule(HERE / "mp-server-no-handler-cb-lookup.log")
    kv = found["KV021"]
    assert kv.severity == "error" and kv.causes[0].id == "lmcache-mp-protocol-mismatch"
    assert kv.measurements["refused"] == {"CB_LOOKUP_PRE_COMPUTED": 1}
    assert kv.measurements["served_instead"] == ["CB_LOOKUP_PRE_COMPUTED_V2"]
    assert kv.measurements["handlers_listed"] == 18
    assert "LOG001" not in found  # both lines, the refusal and the list of handlers, are the finding's


def test_the_handler_list_alone_or_a_handlers_own_exception_is_no_mismatch(tmp_path):
    lines = ["[2026-07-28 09:55:19,380] LMCache ERROR: Available handlers: [<RequestType.STORE: 3>] "
             "(mq.py:485:lmcache.v1.multiprocess.mq)",
             "[2026-07-28 09:55:20,380] LMCache ERROR: Error in blocking handler: boom "
             "(mq.py:444:lmcache.v1.multiprocess.mq)"]
    assert "KV021" not in _by_rule(_write(tmp_path, lines))


def test_every_catalogued_refusal_of_both_message_queues_is_read():
    found = [e for e in catalog().entries if rejection(e)]
    assert {e.module for e in found} == set(MQ_MODULES)
    assert {e.fmt.split(" %s")[0] for e in found} >= {"No handler registered for request type",
                                                      "No handler registered for operation", "Available handlers:"}


def test_a_server_holding_no_registration_for_the_worker_is_named_by_kv009():
    """LMCache #2884 and #4038: 'No GPU context found for model … during lookup!' (logged, after a colour code the
    paste cut), 'AssertionError: KV cache not registered for GPU ID 2514', 'ValueError: No GPU context registered
    for instance ID …': LOG001 warnings 'of the other family'."""
    real_lines = Path(__file__).resolve().parent / "real_lines"
    for log in (real_lines / "lost-csi-lmcache-mp-no-gpu-context.log", HERE / "mp-no-gpu-context-registered.log"):
        kv = _by_rule(log)["KV009"]
        assert kv.causes[0].id == "mp-kv-unregistered" and kv.measurements["unregistered"] >= 1, log.name
    both = _by_rule(real_lines / "lost-csi-lmcache-mp-no-gpu-context.log")["KV009"]
    assert both.measurements["unregistered"] == 2  # the lookup's line and the store's assertion


def test_the_remote_monitors_failed_ping_is_a_blackholed_remote_tier():
    """LMCache PR #764: 'Ping failed with error code: 1000' (remote_monitor.py) was a LOG002 info line; the monitor
    then switches the remote backend to its blackhole connector."""
    kv = _by_rule(HERE / "remote-monitor-ping-failed.log")["KV022"]
    assert kv.measurements["monitor_lines"] == {"ping failed": 1} and kv.measurements["error_codes"] == {"1000": 1}
    assert "blackhole" in kv.summary and kv.causes[0].id == "remote-backend-unhealthy"


def test_other_remote_backend_warnings_are_not_the_monitors(tmp_path):
    line = "[2025-06-13 09:16:14,763] LMCache WARNING: Ping failed for a reason of my own (mine.py:1:my.module)"
    assert "KV022" not in _by_rule(_write(tmp_path, [line]))


def test_a_failed_kv_offload_transfer_is_kv023_counted_once_with_its_direction():
    """vLLM #28950: ``Exception in ('CPU', 'GPU') transfer 235: AssertionError()`` and its traceback rows under the same
    WARNING header: 'no problem found' and seven LOG002 lines. Through 0.33 the worker asserts every job's success."""
    kv = _by_rule(HERE / "offload-cpu-gpu-transfer-assert.log")["KV023"]
    assert kv.measurements["failures"] == 1 and kv.measurements["by_direction"] == {"load": 1}
    assert kv.severity == "warning" and kv.causes[0].id == "kv-offload-transfer-failure"


def test_kv_offload_warnings_about_cleanup_or_speed_are_no_failed_transfer(tmp_path):
    line = ("(Worker pid=1) WARNING 11-18 07:48:24 [cpu_gpu.py:60] cudaHostRegister failed for rank=0 (code=1) — "
            "transfers will still work but may be slower (unpinned DMA)")
    assert "KV023" not in _by_rule(_write(tmp_path, [line]))


def test_a_remote_url_no_connector_serves_is_told_to_check_its_scheme():
    """LMCache #1938: 'No adapter found for URL: lm://…' beside a broken pipe: the fix named only the Mooncake and
    Redis client versions."""
    kv = _by_rule(HERE / "lm-url-no-adapter-broken-pipe.log")["KV013"]
    assert kv.causes[0].id == "backend-not-connected" and "remote_url's scheme" in kv.causes[0].fix
