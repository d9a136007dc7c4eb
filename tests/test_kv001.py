"""KV001: arithmetic, joins across ranks and the cause ranking on logs written for each cause."""

from __future__ import annotations

from logbuilder import config_dump, lmc, lookup, retrieve, shortfall_pair, vllm, write

from specdiag.engine import analyze

REQ = "chatcmpl-3fb0a91c6d2e47b8"


def kv001(paths, **kw) -> dict:
    rep = analyze(paths if isinstance(paths, list) else [paths], **kw).to_dict()
    found = [f for f in rep["findings"] if f["rule"] == "KV001"]
    assert found, rep["findings"]
    return found[0]


def base(tp: int = 8, **cfg) -> list[str]:
    lines = [vllm(f"non-default args: {{'model': 'acme/llm', 'tensor_parallel_size': {tp}, 'speculative_config': "
                  "{'method': 'eagle3', 'model': 'acme/eagle3', 'num_speculative_tokens': 3}}",
                  loc="api_utils.py:273", proc="APIServer pid=1")]
    for r in range(tp):
        lines.append(config_dump(f"Worker_TP{r} pid={100 + r}", **cfg))
    return lines


def test_user_case_arithmetic_and_decode_cache_is_rejected(tmp_path) -> None:
    lines = base()
    lines.append(lookup(REQ, 56131, 55808))
    for r in range(8):
        got = 49664 if r == 2 else 55808
        lines.append(retrieve(REQ, got, 55808, 55808, proc=f"Worker_TP{r} pid={100 + r}"))
    lines += shortfall_pair(REQ, 49664, 55808, proc="Worker_TP2 pid=102")
    f = kv001(write(tmp_path / "a.log", lines))
    m = f["measurements"]
    assert (m["expected_tokens"], m["retrieved_tokens"], m["missing_tokens"]) == (55808, 49664, 6144)
    assert m["missing_chunks"] == 24 and m["chunk_aligned"] is True and m["ranks"] == ["TP2"]
    assert m["lookup_hit_tokens"] == 55808 and m["vllm_cached_tokens"] == 0
    ids = [c["id"] for c in f["causes"]]
    assert ids[0] != "decode-cache-not-saved"
    dc = f["causes"][ids.index("decode-cache-not-saved")]
    assert dc["confidence"] <= 0.05
    assert any("only changes what is *stored*" in a for a in dc["against"])
    assert set(ids) >= {"lookup-retrieve-eviction", "pin-timeout", "remote-backend-loss", "unfull-chunk-mismatch"}
    assert "6144 missing tokens = 24 chunks of 256" in f["summary"]


def test_double_unpin_before_the_error_makes_pin_accounting_the_top_cause(tmp_path) -> None:
    lines = base(tp=2)
    lines.append(lmc("Pin count of MemoryObj 0x7f3a10is negative: -1.Double unpin occurred somewhere.Setting pin count "
                     "back to 0 as a hack but please find the bug.", level="WARNING", loc="memory_management.py:846",
                     logger="lmcache.v1.memory_management", proc="Worker_TP1 pid=101", ts="2026-05-06 15:55:41,000"))
    lines.append(lookup(REQ, 9000, 8192))
    lines += shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["causes"][0]["id"] == "pin-accounting-bug"


def test_pin_timeout_warning_and_long_wait_point_to_pin_timeout(tmp_path) -> None:
    lines = base(tp=1, pin_timeout_sec=1, save_decode_cache=True)
    lines.append(lookup(REQ, 1100, 1024, ts="2026-05-06 15:55:00,000", proc=None))
    lines.append(lmc("Pin timeout detected for MemoryObj 0x7f. Pin count: 1, Elapsed time: 1.20s. Forcing unpin to 0.",
                     level="WARNING", loc="pin_monitor.py:179", logger="lmcache.v1.pin_monitor",
                     proc="Worker_TP0 pid=100", ts="2026-05-06 15:55:02,000"))
    lines += shortfall_pair(REQ, 768, 1024, proc="Worker_TP0 pid=100", ts="2026-05-06 15:55:03,000")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["causes"][0]["id"] == "pin-timeout"
    assert "decode-cache-not-saved" in [c["id"] for c in f["causes"]]
    top = f["causes"][0]
    assert any("save_decode_cache: true" in s for s in top["for"])


def test_redis_key_exists_warning_points_to_remote_backend_loss(tmp_path) -> None:
    lines = base(tp=1, remote_url="redis://127.0.0.1:6390", local_cpu=False)
    lines.append(lookup(REQ, 1168, 1024, proc=None))
    lines.append(lmc("Key exists but KV cache does not exist.Might happen when the cache is evicted by redis.",
                     level="WARNING", loc="redis_connector.py:308", proc="Worker_TP0 pid=100",
                     logger="lmcache.v1.storage_backend.connector.redis_connector"))
    lines.append(lmc("The cache block is in the storage, but it can't be retrieved", level="WARNING",
                     loc="cache_engine.py:1793", logger="lmcache.v1.cache_engine", proc="Worker_TP0 pid=100"))
    lines += shortfall_pair(REQ, 0, 1024, proc="Worker_TP0 pid=100")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["causes"][0]["id"] == "remote-backend-loss"
    assert f["measurements"]["missing_chunks"] == 4


def test_no_remote_backend_rules_out_remote_loss(tmp_path) -> None:
    lines = base(tp=2) + [lookup(REQ, 9000, 8192)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101")
    f = kv001(write(tmp_path / "a.log", lines))
    remote = next(c for c in f["causes"] if c["id"] == "remote-backend-loss")
    assert remote["confidence"] <= 0.02 and any("no remote_url" in a for a in remote["against"])


def test_missing_not_multiple_of_chunk_points_to_unfull_chunk(tmp_path) -> None:
    lines = base(tp=1) + [lookup(REQ, 1100, 1000, proc=None)] + shortfall_pair(REQ, 768, 1000, proc="Worker_TP0 pid=100")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["measurements"]["chunk_aligned"] is False
    assert f["causes"][0]["id"] in ("unfull-chunk-mismatch", "adapter-token-accounting-bug")


def test_rank_disagreement_warning_at_lookup(tmp_path) -> None:
    lines = base(tp=2)
    lines.append(lmc("Lookup results (number of hit tokens) differ across (TP and PP) ranks: [5120, 4608].",
                     level="WARNING", loc="lmcache_lookup_client.py:150", proc="EngineCore_DP0 pid=203",
                     logger="lmcache.v1.lookup_client.lmcache_lookup_client"))
    lines.append(lookup(REQ, 6004, 4608))
    lines += shortfall_pair(REQ, 3840, 4608, proc="Worker_TP1 pid=101")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["causes"][0]["id"] == "rank-disagreement"


def test_pre_0312_pair_without_request_id_is_joined_by_retrieve_and_lookup(tmp_path) -> None:
    # 0.3.9's own texts at its lines (the lookup has no computed-tokens field before 0.3.15)
    lines = [lmc(f"Reqid: {REQ}, Total tokens 9000, LMCache hit tokens: 8192, need to load: 8192",
                 loc="vllm_v1_adapter.py:1206", proc="EngineCore_DP0 pid=203", ts="2026-05-06 15:56:03,500"),
             lmc("Retrieved 7168 out of 8192 required tokens (from 8192 total tokens). size: 0.7813 gb, cost 41.2210 ms, "
                 "throughput: 18.9531 GB/s;", loc="cache_engine.py:513", logger="lmcache.v1.cache_engine",
                 proc="Worker_TP0 pid=100")]
    lines += shortfall_pair(None, 7168, 8192, proc="Worker_TP0 pid=100", r1=891, r2=895)
    rep = analyze([write(tmp_path / "a.log", lines)]).to_dict()
    f = [x for x in rep["findings"] if x["rule"] == "KV001"][0]
    assert f["measurements"]["request_ids"] == [REQ]
    assert rep["context"]["lmcache_version"] == "0.3.9"


def test_one_file_per_rank_is_one_deployment(tmp_path) -> None:
    a = write(tmp_path / "engine.log", base(tp=2) + [lookup(REQ, 9000, 8192)])
    b = write(tmp_path / "tp1.log", shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101"))
    f = kv001([a, b])
    assert f["measurements"]["lookup_hit_tokens"] == 8192
    assert {e["path"] for e in f["evidence"]} == {a, b}


def test_same_request_on_two_ranks_is_one_incident_and_repeats_fold(tmp_path) -> None:
    lines = base(tp=4)
    for i in range(3):
        req = f"{REQ}-{i}"
        lines.append(lookup(req, 9000, 8192))
        for r in (1, 3):
            lines += shortfall_pair(req, 7168, 8192, proc=f"Worker_TP{r} pid={100 + r}")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["count"] == 3 and f["measurements"]["ranks"] == ["TP1", "TP3"]
    assert f["measurements"]["error_lines"] == 6


def test_recompute_outcome_downgrades_to_warning_and_fail_outcome_is_error(tmp_path) -> None:
    lines = base(tp=1) + [lookup(REQ, 9000, 8192, proc=None)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP0 pid=100")
    rec = lines + [vllm("Recovered from KV load failure: 1 request(s) rescheduled (1024 tokens affected).",
                        level="WARNING", proc="EngineCore pid=5")]
    assert kv001(write(tmp_path / "a.log", rec))["severity"] == "warning"
    fail = lines + [vllm(f"Failing 1 request(s) due to KV load failure (failure_policy=fail, 1024 tokens affected). "
                         f"Request IDs: {{'{REQ}'}}", level="ERROR", proc="EngineCore pid=5")]
    f = kv001(write(tmp_path / "b.log", fail))
    assert f["severity"] == "error" and "client received an error" in f["summary"]


def test_excerpt_without_context_keeps_confidence_low_and_asks_for_more(tmp_path) -> None:
    f = kv001(write(tmp_path / "a.log", shortfall_pair(REQ, 30720, 34816, proc="Worker_TP5 pid=619", r1=1083, r2=1089)))
    assert f["causes"][0]["confidence"] <= 0.5
    assert any("LMCache config" in s for s in f["next_steps"])
    assert f["measurements"]["chunk_size_source"].startswith("assumed")


def test_user_supplied_lmcache_yaml_fills_the_config(tmp_path) -> None:
    cfg = tmp_path / "lmcache.yaml"
    cfg.write_text("chunk_size: 512\nremote_url: redis://h:6379\nlocal_cpu: false\n")
    f = kv001(write(tmp_path / "a.log", shortfall_pair(REQ, 0, 1024, proc="Worker_TP0 pid=1")), lmcache_config=str(cfg))
    assert f["measurements"]["chunk_size"] == 512 and f["measurements"]["missing_chunks"] == 2
    assert f["causes"][0]["id"] in ("remote-backend-loss", "backend-read-failure")


def test_full_retrieve_is_not_a_shortfall(tmp_path) -> None:
    lines = base(tp=1) + [lmc("Num retrieved tokens: 8192, num expected tokens: 8192", level="ERROR",
                              proc="Worker_TP0 pid=100")]
    rep = analyze([write(tmp_path / "a.log", lines)]).to_dict()
    assert not [f for f in rep["findings"] if f["rule"] == "KV001"]


def test_kubectl_wrapped_log_joins_lookup_retrieve_and_error(tmp_path) -> None:
    lines = base(tp=2) + [lookup(REQ, 9000, 8192)]
    lines += [retrieve(REQ, 7168, 8192, 8192, proc="Worker_TP1 pid=101")]
    lines += shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101")
    wrapped = [f"[pod/vllm-0/vllm] 2026-05-06T15:56:03.{i:06d}Z {ln}" for i, ln in enumerate(lines)]
    f = kv001(write(tmp_path / "k.log", wrapped))
    m = f["measurements"]
    assert m["ranks"] == ["TP1"] and m["lookup_hit_tokens"] == 8192 and m["lmcache_cached_tokens"] == 8192
    assert m["vllm_cached_tokens"] == 0


def test_negative_pin_count_after_a_forced_unpin_points_to_pin_timeout(tmp_path) -> None:
    """Seen in the real CPU repro: the request's own unpin after the monitor forced the count to 0 goes negative."""
    lines = base(tp=1, pin_timeout_sec=1, save_decode_cache=True)
    lines.append(lookup(REQ, 1100, 1024, ts="2026-05-06 15:55:00,000", proc=None))
    w = {"level": "WARNING", "proc": "Worker_TP0 pid=100"}
    lines.append(lmc("Pin timeout detected for MemoryObj 0x7f. Pin count: 1, Elapsed time: 1.20s. Forcing unpin to 0.",
                     loc="pin_monitor.py:179", logger="lmcache.v1.pin_monitor", ts="2026-05-06 15:55:02,000", **w))
    lines.append(lmc("Pin count of MemoryObj 0is negative: -1.Double unpin occurred somewhere.Setting pin count back "
                     "to 0 as a hack but please find the bug.", loc="memory_management.py:846",
                     logger="lmcache.v1.memory_management", ts="2026-05-06 15:55:02,900", **w))
    lines += shortfall_pair(REQ, 512, 1024, proc="Worker_TP0 pid=100", ts="2026-05-06 15:55:03,000")
    f = kv001(write(tmp_path / "a.log", lines))
    assert f["causes"][0]["id"] == "pin-timeout"


def test_rank_from_file_name_when_lines_carry_no_prefix(tmp_path) -> None:
    eng = write(tmp_path / "engine.log", base(tp=2) + [lookup(REQ, 9000, 8192, proc=None)])
    tp1 = write(tmp_path / "worker-tp1.log", shortfall_pair(REQ, 7168, 8192, proc=None))
    assert kv001([eng, tp1])["measurements"]["ranks"] == ["TP1"]
    other = write(tmp_path / "worker-b.log", shortfall_pair(REQ, 7168, 8192, proc=None))
    assert kv001([eng, other])["measurements"]["ranks"] == ["unknown (worker-b.log)"]


def test_a_paste_with_the_error_before_its_retrieve_line_is_one_request(tmp_path):
    """LMCache prints the short retrieve line, then the adapter's error; a paste may put them the other way
    round. The same numbers on the same rank a line apart are one request, not two."""
    log = tmp_path / "paste.log"
    log.write_text(
        "(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected "
        "tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)\n"
        "(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache INFO: Retrieved 49664 out of 55808 required tokens "
        "(from 55808 total tokens). size: 1.2 gb, cost 1.0 ms, throughput: 1.0 GB/s; "
        "(cache_engine.py:985:lmcache.v1.cache_engine)\n")
    rep = analyze([str(log)]).to_dict()
    kv001 = [f for f in rep["findings"] if f["rule"] == "KV001"]
    assert len(kv001) == 1 and kv001[0]["count"] == 1
    assert "2 requests" not in kv001[0]["summary"]


def _flood(n: int, *, retrieve_lines: bool = True) -> list[str]:
    """``n`` requests, each short on two ranks: lookup, then per rank the retrieve line and the error pair."""
    lines = base(tp=2)
    for i in range(n):
        req = f"chatcmpl-{i:016x}"
        lines.append(lookup(req, 56000, 55808))
        for r in range(2):
            proc = f"Worker_TP{r} pid={100 + r}"
            if retrieve_lines:
                lines.append(retrieve(req, 49664, 55808, 55808, proc=proc))
            lines += shortfall_pair(req, 49664, 55808, proc=proc)
    return lines


def test_short_loads_past_the_cap_are_counted_once_each_and_said(tmp_path, monkeypatch) -> None:
    """A log where every request falls short: past the cap each rank's short load is counted once (its retrieve
    line and its error pair are one shortfall), not kept, and the text says the figures are the first ones'."""
    from specdiag.analyzers.kv_shortfall import detect, finding

    monkeypatch.setattr(detect, "MAX_OCCURRENCES", 6)
    monkeypatch.setattr(finding, "MAX_OCCURRENCES", 6, raising=False)
    for retrieve_lines in (True, False):
        f = kv001(write(tmp_path / f"flood{retrieve_lines}.log", _flood(10, retrieve_lines=retrieve_lines)))
        m = f["measurements"]
        assert (m["occurrences"], m["error_lines"], m["occurrences_not_tracked"]) == (3, 6, 14)
        assert "14 more short loads past the first 6 rank-level reports were counted but not kept" in f["summary"]


def test_a_flood_of_short_loads_keeps_at_most_the_cap(tmp_path, monkeypatch) -> None:
    """What bounds KV001's memory on an error flood: only ``MAX_OCCURRENCES`` shortfalls are kept."""
    from specdiag.analyzers.kv_shortfall import detect

    monkeypatch.setattr(detect, "MAX_OCCURRENCES", 4)
    kept = []
    real = detect.ShortfallTracker.settle

    def settle(self, run):
        kept.append(len(self.occurrences))
        return real(self, run)

    monkeypatch.setattr(detect.ShortfallTracker, "settle", settle)
    kv001(write(tmp_path / "flood.log", _flood(12)))
    assert kept == [4]


def test_the_verdict_counts_the_tokens_the_summary_computes_and_names_the_retrieves_own_count(tmp_path):
    """vLLM already held 224 of the 239 tokens the retrieve asked for: the adapter expected 15 and got 0. The
    verdict says 15 (the finding's missing_tokens, the summary's arithmetic) and the retrieve's 0 of 239."""
    from specdiag.report.verdict import headline

    proc = "Worker_TP0 pid=7"
    lines = [retrieve("chatcmpl-9", 0, 239, 1519, proc=proc), *shortfall_pair("chatcmpl-9", 0, 15, proc=proc)]
    [f] = [x for x in analyze([write(tmp_path / "p.log", lines)]).findings if x.rule == "KV001"]
    assert f.measurements["missing_tokens"] == 15 and f.measurements["not_loaded_tokens"] == 239
    assert headline(f).startswith("15 tokens missing (the retrieve loaded 0 of 239)")
    assert f.summary.startswith("Expected 15 − retrieved 0 = 15 missing tokens")


def test_a_step_does_not_ask_for_the_retrieve_line_the_input_holds(tmp_path):
    """A 130-token load of which nothing came (LMCache issue #1094): the retrieve line is there, so what
    would settle an unfull last chunk is the writers' save_unfull_chunk, not that line again."""
    proc = "Worker_TP0 pid=7"
    lines = [retrieve("chatcmpl-9", 0, 130, 130, proc=proc), *shortfall_pair("chatcmpl-9", 0, 130, proc=proc)]
    [f] = [x for x in analyze([write(tmp_path / "p.log", lines)]).findings if x.rule == "KV001"]
    unfull = [s for s in f.next_steps if s.startswith("For unfull-chunk-mismatch")]
    assert unfull and "Retrieved X out of Y" not in unfull[0] and "save_unfull_chunk" in unfull[0]
