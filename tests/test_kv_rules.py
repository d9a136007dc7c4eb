"""KV002–KV011: positive and negative cases on logs written for each rule."""

from __future__ import annotations

from logbuilder import ACCESS_LINE, config_dump, lmc, lookup, vllm, write

from specdiag.engine import analyze


def rules(path, **kw) -> dict[str, dict]:
    rep = analyze([path], **kw).to_dict()
    return {f["rule"]: f for f in rep["findings"]}


def w(level="WARNING", **kw):
    return {"level": level, "proc": "Worker_TP0 pid=100", **kw}


def test_mp_connector_retrieve_failures_and_unhealthy_server(tmp_path) -> None:
    lines = [lmc("Something went wrong when processing the retrieve request for request_id=cmpl-1, result=None",
                 loc="vllm_multi_process_adapter.py:2139", **w("ERROR")),
             lmc("LMCache server is unhealthy — entering degraded mode", loc="vllm_multi_process_adapter.py:614", **w())]
    f = rules(write(tmp_path / "a.log", lines))["KV009"]
    assert f["measurements"]["retrieve"] == 1 and f["causes"][0]["id"] == "mp-server-unhealthy"


def test_lookup_timeouts_without_degraded_mode(tmp_path) -> None:
    z = "Timeout occurred for rank 1, recreating all sockets. Error: Resource temporarily unavailable"
    lines = [lmc(z, loc="zmq_transport.py:121", level="ERROR", proc="EngineCore pid=5") for _ in range(3)]
    f = rules(write(tmp_path / "a.log", lines))["KV010"]
    assert f["measurements"]["rpc_timeouts"] == 3 and f["causes"][0]["id"] == "worker-lookup-server-slow"


def test_lookup_timeouts_in_degraded_mode_are_left_to_kv004(tmp_path, corpus_dir) -> None:
    found = rules(str(corpus_dir / "real-cpu-lmcache-degraded-mode" / "vllm.log"))
    assert "KV004" in found and "KV010" not in found


def test_async_invalidated_object_then_assert_is_a_crash(tmp_path) -> None:
    lines = [config_dump("Worker_TP0 pid=100", enable_async_loading=True),
             lmc("Trying to access an invalidated MemoryObj", loc="memory_management.py:865", **w()),
             "(Worker pid=100) ERROR 03-14 10:31:07 [multiproc_executor.py:1063]     assert memory_obj.tensor is not None",
             "(Worker pid=100) ERROR 03-14 10:31:07 [multiproc_executor.py:1063] AssertionError"]
    f = rules(write(tmp_path / "a.log", lines))["KV005"]
    assert f["severity"] == "error" and f["measurements"]["crashed"] is True
    assert f["causes"][0]["id"] == "async-loading-invalidated-object"


def test_draft_model_with_zero_draft_layers(tmp_path) -> None:
    lines = [vllm("non-default args: {'model': '/m', 'speculative_config': {'method': 'draft_model', 'model': '/m', "
                  "'num_speculative_tokens': 3}}", loc="api_utils.py:286", proc="APIServer pid=1"),
             lmc("num_layer: 2, chunk_size: 256, num_kv_head (per gpu): 2, head_size: 64, hidden_dim (D) for KV (per gpu): "
                 "128, use mla: False, kv shape: (2, 2, 256, 2, 64), num_draft_layers: 0", loc="vllm_service_factory.py:111",
                 logger="lmcache.integration.vllm.vllm_service_factory", proc="Worker pid=100")]
    f = rules(write(tmp_path / "a.log", lines))["KV006"]
    assert f["measurements"]["crashed"] is False
    lines.append("(Worker pid=100) ERROR 03-14 10:40:38 [multiproc_executor.py:1063] IndexError: index 2 is out of "
                 "bounds for dimension 1 with size 2")
    assert rules(write(tmp_path / "b.log", lines))["KV006"]["measurements"]["crashed"] is True


def test_draft_layers_zero_with_ngram_is_fine(tmp_path) -> None:
    lines = [vllm("non-default args: {'model': '/m', 'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3}}",
                  loc="api_utils.py:286", proc="APIServer pid=1"),
             lmc("use mla: False, kv shape: (2, 2, 256, 2, 64), num_draft_layers: 0", loc="vllm_service_factory.py:111",
                 proc="Worker pid=100")]
    assert "KV006" not in rules(write(tmp_path / "a.log", lines))


def test_cpu_tier_pressure_needs_a_few_lines_in_a_log(tmp_path) -> None:
    """In a log (its startup lines are there) one allocation failure is a passing moment; a paste: tests/test_precursors.py."""
    m3 = "Failed to allocate memory block of size 262144 because no memory is available"
    one = [config_dump("Worker_TP0 pid=100"), *[ACCESS_LINE] * 60, lmc(m3, loc="memory_management.py:1452", **w())]
    assert "KV007" not in rules(write(tmp_path / "a.log", one))
    f = rules(write(tmp_path / "b.log", one[:-1] + one[-1:] * 5))["KV007"]
    assert f["count"] == 5 and f["causes"][0]["id"] == "cache-too-small"


def test_zero_hits_on_repeated_prompts_with_hash_warning(tmp_path) -> None:
    lines = [lmc("Using builtin hash without PYTHONHASHSEED set. For production environments (non-testing scenarios), "
                 "you MUST set PYTHONHASHSEED to ensure consistent hashing across processes. Example: export "
                 "PYTHONHASHSEED=0", loc="token_database.py:170", **w())]
    for i in range(12):
        lines.append(lookup(f"r{i}", 4000 + i % 3, 0))
        lines.append(lmc(f"[req_id=r{i}] Stored 3840 out of total 3840 tokens. size: 0.1 GB, cost 1.0 ms, "
                         "throughput: 1.0 GB/s; offload_time: 1.0 ms, put_time: 0.1 ms", loc="cache_engine.py:588",
                         logger="lmcache.v1.cache_engine", proc="Worker_TP0 pid=100"))
    f = rules(write(tmp_path / "a.log", lines))["KV002"]
    assert f["causes"][0]["id"] == "hash-inconsistency" and f["measurements"]["stores"] == 12


def test_lookups_that_hit_give_no_zero_hit_finding(tmp_path) -> None:
    lines = []
    for i in range(12):
        lines.append(lookup(f"r{i}", 4000 + i % 3, 3840 if i >= 3 else 0))
        lines.append(lmc(f"[req_id=r{i}] Stored 3840 out of total 3840 tokens.", loc="cache_engine.py:588",
                         proc="Worker_TP0 pid=100"))
    assert "KV002" not in rules(write(tmp_path / "a.log", lines))


def test_load_failure_outcomes(tmp_path) -> None:
    rec = vllm("Recovered from KV load failure: 2 request(s) rescheduled (768 tokens affected).", level="WARNING",
               proc="EngineCore pid=5")
    fail = vllm("Failing 1 request(s) due to KV load failure (failure_policy=fail, 256 tokens affected). "
                "Request IDs: {'c1'}", level="ERROR", proc="EngineCore pid=5")
    found = analyze([write(tmp_path / "a.log", [rec, fail])]).to_dict()["findings"]
    kinds = sorted((f["rule"], f["severity"]) for f in found)
    assert kinds == [("KV003", "error"), ("KV003", "info")]


def test_rank_disagreement_info(tmp_path) -> None:
    l6 = lmc("Lookup results (number of hit tokens) differ across (TP and PP) ranks: [9472, 7168].", level="WARNING",
             loc="lmcache_lookup_client.py:150", proc="EngineCore_DP0 pid=2")
    f = rules(write(tmp_path / "a.log", [l6]))["KV008"]
    assert f["severity"] == "info" and f["measurements"]["hit_tokens_forgone"] == 2304


# ---- the cause catalog: one cause id, one fix text, in every rule ---------------------------------------------
def test_every_kv_cause_id_is_catalogued_with_all_fields() -> None:
    from specdiag.analyzers.base import all_rules
    from specdiag.analyzers.causes import CATALOG

    for code, cls in all_rules().items():
        if not code.startswith("KV"):
            continue
        for cid in cls.cause_ids:
            info = CATALOG[cid]
            assert info.mechanism and info.fix and info.confirm and info.versions and info.references, (code, cid)


def test_a_cause_id_carries_the_catalog_fix_in_every_finding(corpus_dir) -> None:
    from specdiag.analyzers.causes import CATALOG

    seen = 0
    for case in sorted(p for p in corpus_dir.iterdir() if p.is_dir()):
        logs = [str(p) for p in case.iterdir() if p.suffix == ".log"]
        for f in analyze(logs).to_dict()["findings"]:
            if not f["rule"].startswith("KV"):
                continue
            for c in f["causes"]:
                assert c["fix"] == CATALOG[c["id"]].fix and c["confirm_with"] == CATALOG[c["id"]].confirm
                seen += 1
    assert seen > 20


def test_explain_accepts_a_cause_id(run_cli) -> None:
    code, out, err = run_cli("explain", "remote-backend-loss")
    assert code == 0, err
    assert "Mechanism:" in out and "cannot pin" in out and "KV001" in out and "KV008" in out
    code, out, _ = run_cli("explain", "remote-backend-loss", "--format", "markdown")
    assert code == 0 and out.startswith("# remote-backend-loss")
    code, _, err = run_cli("explain", "no-such-cause")
    assert code == 2 and "unknown rule or cause id" in err and "Traceback" not in err


def test_explain_of_a_cause_only_its_rule_describes_shows_that_rule(run_cli) -> None:
    """SRV001's and the SD rules' causes live in their rules' text, not the cause catalog: they were 'unknown'."""
    code, out, err = run_cli("explain", "lmcache-kv-layout")
    assert code == 0, err
    assert out.startswith("lmcache-kv-layout: a cause weighed by SRV001") and "The vLLM engine died" in out
    code, out, _ = run_cli("explain", "workload-shift")
    assert code == 0 and "SD001" in out.splitlines()[0]


PIN_NEG = ("Pin count of MemoryObj 19885326336is negative: -1.Double unpin occurred somewhere.Setting pin count back "
           "to 0 as a hack but please find the bug.")
REF_NEG = ("Ref count of MemoryObj 19885326336is negative: -1.Double free occurred somewhere.Setting ref count back "
           "to 0 as a hack but please find the bug.")
MM = {"loc": "memory_management.py:1010", "logger": "lmcache.v1.memory_management"}


def _retrieve(got: int, required: int) -> str:
    return lmc(f"Retrieved {got} out of {required} required tokens (from {required + 40} total tokens). size: 1.0 gb, "
               "cost 10.0 ms, throughput: 10.0 GB/s", loc="vllm_v1_adapter.py:1480", proc="Worker_TP2 pid=767")


def test_a_negative_pin_or_ref_count_alone_is_a_warning_naming_the_double_unpin(tmp_path) -> None:
    for msg, key in ((PIN_NEG, "negative_pin_counts"), (REF_NEG, "negative_ref_counts")):
        found = rules(write(tmp_path / "a.log", [lmc(msg, level="WARNING", proc="Worker_TP2 pid=767", **MM)]))
        f = found["KV011"]
        assert f["severity"] == "warning" and f["measurements"][key] == 1 and f["measurements"]["by_rank"] == {"TP2": 1}
        assert f["causes"][0]["id"] == "pin-accounting-bug" and f["causes"][0]["confidence"] <= 0.6
        assert "KV001" not in found


def test_a_negative_pin_count_with_complete_loads_is_still_reported(tmp_path) -> None:
    lines = [_retrieve(256, 256), lmc(PIN_NEG, level="WARNING", proc="Worker_TP2 pid=767", **MM), _retrieve(512, 512)]
    assert "KV011" in rules(write(tmp_path / "a.log", lines))


def test_a_negative_pin_count_beside_a_short_load_is_left_to_kv001(tmp_path) -> None:
    lines = [lmc(PIN_NEG, level="WARNING", proc="Worker_TP2 pid=767", **MM), _retrieve(49664, 55808),
             lmc("Num retrieved tokens: 49664, num expected tokens: 55808", level="ERROR", proc="Worker_TP2 pid=767",
                 loc="vllm_v1_adapter.py:884")]
    found = rules(write(tmp_path / "a.log", lines))
    assert "KV011" not in found and "KV001" in found


def _zero_hit_log(hits_at: set[int], extra: list[str] = ()) -> list[str]:
    """60 lookups of three recurring prompt lengths, each stored by the worker; ``hits_at`` lookups hit."""
    lines = list(extra)
    for i in range(60):
        lines.append(lookup(f"r{i}", 4000 + i % 3, 3840 if i in hits_at else 0))
        lines.append(lmc(f"[req_id=r{i}] Stored 3840 out of total 3840 tokens.", loc="cache_engine.py:588",
                         proc="Worker_TP0 pid=100"))
    return lines


def test_a_hit_elsewhere_in_the_input_ranks_eviction_above_hash_inconsistency(tmp_path) -> None:
    f = rules(write(tmp_path / "a.log", _zero_hit_log({41})))["KV002"]
    ids = [c["id"] for c in f["causes"]]
    assert f["measurements"]["lookups_with_hits"] == 1
    assert ids.index("capacity-eviction") < ids.index("hash-inconsistency")
    without = rules(write(tmp_path / "b.log", _zero_hit_log(set())))["KV002"]
    assert without["causes"][0]["id"] == "hash-inconsistency"


def test_remote_store_evictions_rank_eviction_above_hash_inconsistency(tmp_path) -> None:
    x8 = lmc("Key exists but KV cache does not exist.Might happen when the cache is evicted by redis.",
             loc="redis_connector.py:308", **w())
    f = rules(write(tmp_path / "a.log", _zero_hit_log(set(), [x8, x8])))["KV002"]
    ids = [c["id"] for c in f["causes"]]
    assert ids.index("capacity-eviction") < ids.index("hash-inconsistency")


def test_a_lookup_that_failed_in_the_worker_is_no_timeout_too_low_and_no_degraded_mode():
    """LMCache #1732 (decode context parallelism): the worker's ``Error processing request from scheduler`` (its
    ``(`` lost by the paste), then the scheduler's async lookup giving up 3 s later with 0 hits. It was KV010
    'raise lookup_timeout_ms' first and a KV004 'LMCache initialisation failed' with no failure in the lines."""
    from pathlib import Path

    from pasted import findings_by_rule

    found = findings_by_rule(Path(__file__).resolve().parent / "real_kv" / "async-lookup-worker-error-lost-paren.log")
    kv = found["KV010"]
    assert kv.causes[0].id == "worker-lookup-server-slow"
    assert any("a longer timeout waits" in a for c in kv.causes for a in c.against)
    assert "KV004" not in found and "LOG001" not in found
