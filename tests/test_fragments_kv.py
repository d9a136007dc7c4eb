"""KV001 on what users paste: a few lines, no startup, no config — the arithmetic, honest confidence, what to collect.

Every log here is built from the upstream message formats (tests/logbuilder.py, the shared reference's
templates), not copied from a corpus file.
"""

from __future__ import annotations

import pytest
from logbuilder import ACCESS_LINE, config_dump, lmc, lookup, retrieve, shortfall_pair, write

from specdiag.engine import analyze

REQ = "chatcmpl-91d4e6aa0b9d2c71"
USER_R1 = ("(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Request chatcmpl-5c2eThe number of retrieved "
           "tokens is less than the expected number of tokens! This should not happen! "
           "(vllm_v1_adapter.py:878:lmcache.integration.vllm.vllm_v1_adapter)")
USER_R2 = ("(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected "
           "tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)")
PREFIX = "(Worker_TP2 pid=767) "


def findings(tmp_path, lines: list[str], name: str = "paste.log", **kw) -> list[dict]:
    return analyze([write(tmp_path / name, lines)], **kw).to_dict()["findings"]


def kv001(tmp_path, lines: list[str], name: str = "paste.log", **kw) -> dict:
    found = [f for f in findings(tmp_path, lines, name, **kw) if f["rule"] == "KV001"]
    assert found, "no KV001 finding"
    return found[0]


def r7(proc: str | None, ts: str = "2026-05-06 15:56:03,700") -> str:
    return lmc("The cache block is in the storage, but it can't be retrieved", level="WARNING", loc="cache_engine.py:1793",
               logger="lmcache.v1.cache_engine", proc=proc, ts=ts)


def old_retrieve(retrieved: int, required: int, total: int, proc: str | None) -> str:
    """The 0.3.3-0.3.5 f-string form (no request id)."""
    return lmc(f"Retrieved {retrieved} out of {required} out of total {total} tokens", loc="cache_engine.py:499",
               logger="lmcache.v1.cache_engine", proc=proc, ts="2026-05-06 15:56:03,744")


# ---- class 8 of the brief: the user's two-line paste ------------------------------------------------------
@pytest.mark.parametrize("prefixed", [True, False], ids=["with-prefix", "without-prefix"])
def test_two_line_paste_leads_with_the_arithmetic_and_caps_confidence(tmp_path, prefixed) -> None:
    lines = [USER_R1, USER_R2] if prefixed else [USER_R1[len(PREFIX):], USER_R2[len(PREFIX):]]
    f = kv001(tmp_path, lines)
    m = f["measurements"]
    assert (m["expected_tokens"], m["retrieved_tokens"], m["missing_tokens"], m["missing_chunks"]) == (55808, 49664, 6144, 24)
    assert f["summary"].startswith("Expected 55808 − retrieved 49664 = 6144 missing tokens = 24 chunks of 256")
    assert "assuming the default chunk_size 256" in f["summary"]
    assert m["input_coverage"] == "fragment"
    assert f["causes"][0]["confidence"] <= 0.7
    assert all(c["confidence"] <= 0.7 for c in f["causes"])
    assert "tensor_parallel_size" not in m  # never invented from the rank name
    assert "TP=3" not in f["summary"] and "of 3 ranks" not in " ".join(f["next_steps"] + [f["summary"]])
    steps = " ".join(f["next_steps"])
    assert "Retrieved X out of Y required tokens" in steps and "Reqid:" in steps and "Creating LMCacheEngine" in steps
    if prefixed:
        assert m["ranks"] == ["TP2"] and "rank TP2" in f["summary"]
        assert m["tensor_parallel_size_at_least"] == 3 and "TP ≥ 3" in f["summary"]
    else:
        assert m["ranks"] == ["unknown (paste.log)"] and "TP0" not in f["summary"]


def test_indented_two_line_paste_gives_the_same_arithmetic(tmp_path) -> None:
    f = kv001(tmp_path, ["    " + USER_R1, "    " + USER_R2])
    assert f["measurements"]["missing_chunks"] == 24 and f["measurements"]["ranks"] == ["TP2"]
    assert f["causes"][0]["confidence"] <= 0.7


def test_fragment_does_not_count_missing_lines_against_causes(tmp_path) -> None:
    f = kv001(tmp_path, [USER_R1, USER_R2])
    against = " ".join(a for c in f["causes"] for a in c["against"])
    assert "no 'Pin timeout detected' warning" not in against
    assert "no 'Pin count of MemoryObj" not in against
    assert "no 'can't be retrieved'" not in against


def test_full_log_still_counts_absent_warnings(tmp_path) -> None:
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(2)]
    lines += [lmc("LMCache initialized for role KVConnectorRole.WORKER with version 0.5.6-g3e11e108, vllm version 0.25.0, "
                  "lmcache cache_engine metadata: LMCacheMetadata(model_name='m', world_size=2, worker_id=0)",
                  loc="vllm_v1_adapter.py:485", proc="Worker_TP0 pid=100")]
    lines += [lookup(REQ, 9000, 8192)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101")
    lines[3:3] = [ACCESS_LINE] * 60  # a server's log, longer than a paste: its startup lines make it full
    f = kv001(tmp_path, lines)
    assert f["measurements"]["input_coverage"] == "full"
    against = " ".join(a for c in f["causes"] for a in c["against"])
    assert "no 'Pin count of MemoryObj" in against


def test_startup_lines_on_top_of_a_short_paste_keep_it_a_paste(tmp_path) -> None:
    """A config dump pasted above the error pair says how LMCache runs, not that the lines in between are all
    there: what the paste does not show is not counted against a cause, and the confidence stays capped."""
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(2)]
    lines += [lookup(REQ, 9000, 8192)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101")
    f = kv001(tmp_path, lines)
    assert f["measurements"]["input_coverage"] == "fragment"
    assert f["causes"][0]["confidence"] <= 0.6
    against = " ".join(a for c in f["causes"] for a in c["against"])
    assert "no 'Pin count of MemoryObj" not in against


# ---- class 1: LMCache's own arithmetic ---------------------------------------------------------------------
def test_retrieve_zero_of_one_chunk_is_a_whole_chunk_not_an_unaligned_16(tmp_path) -> None:
    proc = "EngineCore_DP0 pid=4410"
    lines = [r7(proc), lmc("Retrieved 0 out of 256 required tokens (from 5888 total tokens). size: 0.0000 gb, cost "
                           "0.2407 ms, throughput: 0.0000 GB/s;", loc="cache_engine.py:985", logger="lmcache.v1.cache_engine",
                           proc=proc)]
    lines += shortfall_pair(REQ, 0, 16, proc=proc)
    f = kv001(tmp_path, lines)
    m = f["measurements"]
    assert (m["expected_tokens"], m["retrieved_tokens"], m["missing_tokens"]) == (16, 0, 16)
    assert m["chunk_aligned"] is True and m["missing_chunks"] == 1 and m["not_loaded_tokens"] == 256
    assert (m["vllm_cached_tokens"], m["lmcache_cached_tokens"], m["retrieve_start_token"]) == (5872, 5888, 5632)
    assert f["causes"][0]["id"] != "unfull-chunk-mismatch"
    assert "1 whole 256-token chunk lost" in f["summary"] and "vLLM already held 240 tokens" in f["summary"]


def test_sub_chunk_loss_in_the_retrieve_view_still_points_to_an_unfull_chunk(tmp_path) -> None:
    # the hit (4000) ends mid-chunk; the reader retrieved only the 15 whole chunks: no read failure at all
    lines = [config_dump("Worker_TP0 pid=100", save_unfull_chunk=False), lookup(REQ, 4100, 4000)]
    lines.append(retrieve(REQ, 3840, 4000, 4000, proc="Worker_TP0 pid=100"))
    lines += shortfall_pair(REQ, 3840, 4000, proc="Worker_TP0 pid=100")
    f = kv001(tmp_path, lines)
    assert f["measurements"]["chunk_aligned"] is False
    assert f["causes"][0]["id"] == "unfull-chunk-mismatch"


def test_retrieved_zero_without_retrieve_line_says_alignment_is_undecided(tmp_path) -> None:
    f = kv001(tmp_path, shortfall_pair(REQ, 0, 16, proc="Worker_TP0 pid=100"))
    assert f["measurements"]["chunk_alignment_basis"].startswith("undecidable")
    assert f["causes"][0]["id"] != "unfull-chunk-mismatch"
    assert "says nothing about alignment" in f["summary"]


def test_failed_block_report_is_stated_next_to_the_pair(tmp_path) -> None:
    proc = "Worker_TP0 pid=100"
    lines = shortfall_pair(REQ, 7168, 8192, proc=proc)
    lines.append(lmc(f"Request {REQ} failed to load 1024 tokens across 64 blocks", level="WARNING",
                     loc="vllm_v1_adapter.py:964", proc=proc))
    m = kv001(tmp_path, lines)["measurements"]
    assert (m["failed_load_tokens"], m["failed_load_blocks"], m["missing_tokens"]) == (1024, 64, 1024)


# ---- class 2: a shortfall without the error pair --------------------------------------------------------------
def test_short_retrieve_line_alone_is_a_kv001_warning(tmp_path) -> None:
    proc = "RayWorkerWrapper pid=999"
    lines = [lookup(REQ, 4096, 4096, proc=None), r7(proc), old_retrieve(0, 4096, 4096, proc)]
    f = kv001(tmp_path, lines)
    assert f["severity"] in ("warning", "error")
    m = f["measurements"]
    assert m["retrieved_tokens"] == 0 and m["evidence_source"] == "retrieve" and m["not_loaded_tokens"] == 4096
    assert m["missing_chunks"] == 16 and m["request_ids"] == [REQ]
    assert f["causes"][0]["id"] == "backend-read-failure"


def test_failed_block_report_alone_is_a_kv001_finding(tmp_path) -> None:
    line = lmc(f"Request {REQ} failed to load 2048 tokens across 128 blocks", level="WARNING",
               loc="vllm_v1_adapter.py:964", proc="Worker_TP1 pid=101")
    f = kv001(tmp_path, [line])
    assert f["measurements"]["missing_tokens"] == 2048 and f["measurements"]["ranks"] == ["TP1"]
    assert f["measurements"]["evidence_source"] == "failed-blocks"


def test_complete_retrieve_lines_are_no_finding(tmp_path) -> None:
    lines = [retrieve(f"r{i}", 4096, 4096, 4096, proc="Worker_TP0 pid=100") for i in range(5)]
    lines += [old_retrieve(512, 512, 1024, "Worker_TP0 pid=100")]
    assert not [f for f in findings(tmp_path, lines) if f["rule"] == "KV001"]


def test_retrieve_line_and_its_pair_are_one_occurrence(tmp_path) -> None:
    proc = "Worker_TP0 pid=100"
    lines = [lookup(REQ, 9000, 8192), retrieve(REQ, 7168, 8192, 8192, proc=proc)] + shortfall_pair(REQ, 7168, 8192, proc=proc)
    f = kv001(tmp_path, lines)
    assert f["count"] == 1 and f["measurements"]["error_lines"] == 1 and f["measurements"]["evidence_source"] == "pair"


# ---- class 3: no request id (LMCache ≤ 0.3.9) ------------------------------------------------------------------
def _no_id_pairs(ranks: range, retrieved: int = 0, expected: int = 253, ts: str = "2026-05-06 15:56:03,745") -> list[str]:
    out = []
    for r in ranks:
        out += shortfall_pair(None, retrieved, expected, proc=f"Worker_TP{r} pid={100 + r}", ts=ts, r1=676, r2=682)
    return out


def test_identical_no_id_errors_on_every_rank_are_one_systematic_occurrence(tmp_path) -> None:
    from logbuilder import vllm

    lines = [vllm("non-default args: {'model': 'acme/llm', 'tensor_parallel_size': 4}", loc="api_utils.py:273",
                  proc="APIServer pid=1")]
    lines += _no_id_pairs(range(4))
    found = [f for f in findings(tmp_path, lines) if f["rule"] == "KV001"]
    assert len(found) == 1
    f = found[0]
    assert f["count"] == 1 and f["measurements"]["ranks"] == ["TP0", "TP1", "TP2", "TP3"]
    assert f["measurements"]["error_lines"] == 4
    assert f["causes"][0]["id"] == "adapter-token-accounting-bug"
    ev = next(c for c in f["causes"] if c["id"] == "lookup-retrieve-eviction")
    assert any("same tokens at once" in a for a in ev["against"])


def test_no_id_errors_at_different_moments_stay_separate_requests(tmp_path) -> None:
    lines = _no_id_pairs(range(1), ts="2026-05-06 15:56:03,745") + _no_id_pairs(range(1), ts="2026-05-06 15:56:09,100")
    f = kv001(tmp_path, lines)
    assert f["count"] == 2


def test_one_rank_short_without_id_is_not_called_systematic(tmp_path) -> None:
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(4)]
    lines += _no_id_pairs(range(2, 3), retrieved=7168, expected=8192)
    f = kv001(tmp_path, lines)
    assert f["measurements"]["ranks"] == ["TP2"]
    acct = next(c for c in f["causes"] if c["id"] == "adapter-token-accounting-bug")
    assert not any("systematic" in a for a in acct["for"])


# ---- class 4: specific beats circumstantial ------------------------------------------------------------------
W1 = "Worker_TP1 pid=101"


def _pressure(n: int = 4) -> list[str]:
    return [lmc("Failed to allocate memory block of size 1048576 because no memory is available", level="WARNING",
                loc="memory_management.py:1452", logger="lmcache.v1.memory_management", proc=W1,
                ts=f"2026-05-06 15:56:0{i},100") for i in range(n)]


SPECIFIC = {
    "cpu-staging-exhausted": (
        {"local_disk": "file:///tmp/lmc/", "max_local_disk_size": 50.0},
        lmc("Memory allocation failed during async disk load for key k1. CPU staging pool may be exhausted (unpin() "
            "not called after a previous retrieve). Returning partial results.", level="ERROR",
            loc="local_disk_backend.py:629", logger="lmcache.v1.storage_backend.local_disk_backend", proc=W1,
            ts="2026-05-06 15:56:03,600")),
    "remote-backend-loss": (
        {"remote_url": "redis://10.0.0.5:6379"},
        lmc("Key exists but KV cache does not exist.Might happen when the cache is evicted by redis.", level="WARNING",
            loc="redis_connector.py:308", logger="lmcache.v1.storage_backend.connector.redis_connector", proc=W1,
            ts="2026-05-06 15:56:03,600")),
    "pin-timeout": (
        {},
        lmc("Force unpinned 3 timeout objects in 12 pinned_objects within 300 seconds", level="WARNING",
            loc="pin_monitor.py:151", logger="lmcache.v1.pin_monitor", proc=W1, ts="2026-05-06 15:56:03,600")),
    "async-loading-partial": (
        {"enable_async_loading": True},
        lmc(f"Responding to scheduler for lookup id {REQ} with retrieved length 4096", loc="storage_manager.py:648",
            logger="lmcache.v1.storage_backend.storage_manager", proc=W1, ts="2026-05-06 15:56:03,600")),
}


@pytest.mark.parametrize("expected", sorted(SPECIFIC))
def test_a_line_naming_the_mechanism_outranks_generic_pressure(tmp_path, expected) -> None:
    cfg, line = SPECIFIC[expected]
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}", **cfg) for r in range(2)]
    lines += [lookup(REQ, 9000, 8192, ts="2026-05-06 15:55:59,000")] + _pressure() + [line]
    lines += shortfall_pair(REQ, 7168, 8192, proc=W1)
    f = kv001(tmp_path, lines)
    assert f["causes"][0]["id"] == expected, [(c["id"], c["confidence"]) for c in f["causes"][:3]]


def test_pressure_alone_still_points_to_eviction(tmp_path) -> None:
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(2)]
    lines += [lookup(REQ, 9000, 8192, ts="2026-05-06 15:55:59,000")] + _pressure() + shortfall_pair(REQ, 7168, 8192, proc=W1)
    assert kv001(tmp_path, lines)["causes"][0]["id"] == "lookup-retrieve-eviction"


def test_the_requests_own_shorter_async_answer_beats_pressure_in_an_excerpt(tmp_path) -> None:
    lines = [lookup(REQ, 9000, 8192, ts="2026-05-06 15:55:59,000")] + _pressure(8)
    lines += [SPECIFIC["async-loading-partial"][1]] + shortfall_pair(REQ, 7168, 8192, proc=W1)
    f = kv001(tmp_path, lines)
    assert f["causes"][0]["id"] == "async-loading-partial"
    assert f["causes"][0]["confidence"] <= 0.7


# ---- class 8 (issue): pressure on one rank of many -----------------------------------------------------------
def _alloc_fail(proc: str, i: int) -> str:
    return lmc("Failed to allocate memory block of size 1048576 because no memory is available", level="WARNING",
               loc="memory_management.py:1452", logger="lmcache.v1.memory_management", proc=proc,
               ts=f"2026-05-06 15:56:{10 + i:02d},100")


def _store(proc: str, i: int) -> str:
    return lmc(f"[req_id=r{i}] Stored 4096 out of total 4096 tokens. size: 0.5000 GB, cost 12.0000 ms, throughput: "
               "41.6667 GB/s; offload_time: 11.0000 ms, put_time: 1.0000 ms", loc="cache_engine.py:588",
               logger="lmcache.v1.cache_engine", proc=proc, ts=f"2026-05-06 15:56:{10 + i:02d},000")


def kv007(tmp_path, lines) -> dict:
    found = [f for f in findings(tmp_path, lines) if f["rule"] == "KV007"]
    assert found
    return found[0]


def test_pressure_on_one_rank_of_four_points_to_a_leak_on_that_rank(tmp_path) -> None:
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(4)]
    lines += [_store(f"Worker_TP{r} pid={100 + r}", i) for i in range(5) for r in range(4)]
    lines += [_alloc_fail("Worker_TP3 pid=103", i) for i in range(6)]
    f = kv007(tmp_path, lines)
    assert f["causes"][0]["id"] == "rank-local-leak"
    small = next(c for c in f["causes"] if c["id"] == "cache-too-small")
    assert any("every rank" in a for a in small["against"])


def test_pressure_on_every_rank_is_a_cache_too_small(tmp_path) -> None:
    lines = [_alloc_fail(f"Worker_TP{r} pid={100 + r}", i) for i in range(3) for r in range(4)]
    f = kv007(tmp_path, lines)
    assert f["causes"][0]["id"] == "cache-too-small"


def test_one_rank_alone_in_the_input_is_not_called_a_leak(tmp_path) -> None:
    # only TP3's lines were given: nothing says the other ranks were fine
    f = kv007(tmp_path, [_alloc_fail("Worker_TP3 pid=103", i) for i in range(6)])
    assert f["causes"][0]["id"] != "rank-local-leak"


def test_short_retrieve_under_cacheblend_is_only_info(tmp_path) -> None:
    proc = "Worker_TP0 pid=100"
    lines = [config_dump(proc, enable_blending=True, save_unfull_chunk=True), retrieve(REQ, 512, 1024, 1024, proc=proc)]
    f = kv001(tmp_path, lines)
    assert f["severity"] == "info"


def test_a_config_file_given_by_the_user_does_not_make_a_paste_a_full_log(tmp_path) -> None:
    cfg = tmp_path / "lmcache.yaml"
    cfg.write_text("chunk_size: 256\nlocal_cpu: true\nmax_local_cpu_size: 5\n")
    f = kv001(tmp_path, [USER_R1, USER_R2], lmcache_config=str(cfg))
    assert f["measurements"]["input_coverage"] == "fragment"
    assert "assuming the default chunk_size" not in f["summary"]  # the user's file states it
    assert all(c["confidence"] <= 0.7 for c in f["causes"])


# ---- class 6 (rank/TP wording) and class 5 (excerpts) -------------------------------------------------------
def test_stated_tp_with_one_ranks_log_does_not_claim_the_others_loaded(tmp_path) -> None:
    from logbuilder import vllm

    lines = [vllm("non-default args: {'model': 'acme/llm', 'tensor_parallel_size': 4}", loc="api_utils.py:273",
                  proc="APIServer pid=1"), lookup(REQ, 9000, 8192)]
    lines += shortfall_pair(REQ, 7168, 8192, proc="Worker_TP2 pid=102")
    f = kv001(tmp_path, lines)
    text = " ".join([f["summary"], *f["next_steps"], *(a for c in f["causes"] for a in c["for"])])
    assert "of TP=4" in f["summary"]
    assert "ranks reported it" not in text
    assert "Only 1 of 4 ranks' logs were given" in text


def test_all_ranks_given_and_one_short_is_a_per_rank_loss(tmp_path) -> None:
    lines = [config_dump(f"Worker_TP{r} pid={100 + r}") for r in range(4)]
    lines += [lmc("LMCache initialized for role KVConnectorRole.WORKER with version 0.5.6-g3e11e108, vllm version 0.25.0, "
                  "lmcache cache_engine metadata: LMCacheMetadata(model_name='m', world_size=4, worker_id=0)",
                  loc="vllm_v1_adapter.py:485", proc="Worker_TP0 pid=100")]
    lines += [lookup(REQ, 9000, 8192)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP2 pid=102")
    f = kv001(tmp_path, lines)
    ev = next(c for c in f["causes"] if c["id"] == "lookup-retrieve-eviction")
    assert any("only TP2 of 4 ranks reported it" in x for x in ev["for"])


def test_excerpt_without_startup_is_partial_and_capped(tmp_path) -> None:
    from logbuilder import vllm

    noise = [vllm(f"Engine 000: Avg prompt throughput: 100.0 tokens/s, Running: {i} reqs", loc="loggers.py:236",
                  proc="APIServer pid=1") for i in range(80)]
    pressure = [lmc("Failed to allocate memory block of size 1048576 because no memory is available", level="WARNING",
                    loc="memory_management.py:1452", logger="lmcache.v1.memory_management", proc="Worker_TP1 pid=101",
                    ts="2026-05-06 15:56:02,000") for _ in range(5)]
    f = kv001(tmp_path, noise + pressure + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP1 pid=101"))
    assert f["measurements"]["input_coverage"] == "partial" and "an excerpt" in f["summary"]
    assert f["causes"][0]["id"] == "lookup-retrieve-eviction" and f["causes"][0]["confidence"] <= 0.7


def test_sub_chunk_remainder_without_retrieve_line_still_favours_an_unfull_chunk(tmp_path) -> None:
    f = kv001(tmp_path, shortfall_pair(REQ, 3840, 4000, proc="Worker_TP0 pid=100"))
    assert f["causes"][0]["id"] == "unfull-chunk-mismatch"
    assert "or whole chunks of which vLLM already held part" in f["summary"]  # the other reading is stated


def test_unprefixed_failed_block_reports_of_two_ranks_add_no_extra_occurrence(tmp_path) -> None:
    # vLLM >= 0.31: LMCache lines carry no worker prefix, so both ranks look like one process
    lines = shortfall_pair(REQ, 7168, 8192, proc=None) + shortfall_pair(REQ, 6144, 8192, proc=None)
    lines += [lmc(f"Request {REQ} failed to load {n} tokens across {n // 16} blocks", level="WARNING",
                  loc="vllm_v1_adapter.py:964") for n in (1024, 2048)]
    f = kv001(tmp_path, lines)
    assert f["count"] == 1 and f["measurements"]["error_lines"] == 2


# ---- KV002 on a paste: a few zero-hit lookups of one prompt ------------------------------------------------
HASH_WARNING = ("Using builtin hash without PYTHONHASHSEED set. For production environments (non-testing scenarios), "
                "you MUST set PYTHONHASHSEED to ensure consistent hashing across processes. Example: export PYTHONHASHSEED=0")


def _zero_hit_paste(stores: bool, warning: bool, proc: str | None = "EngineCore_DP0 pid=203") -> list[str]:
    lines = []
    if warning:
        lines.append(lmc(HASH_WARNING, level="WARNING", loc="token_database.py:170", logger="lmcache.v1.token_database",
                         proc=proc, ts="2026-05-06 15:50:00,100"))
    for i in range(3):
        lines.append(lookup(f"cmpl-{i}f{i}-0", 4113, 0, proc=proc, ts=f"2026-05-06 15:56:0{i},500"))
        if stores:
            lines.append(lmc(f"[req_id=cmpl-{i}f{i}-0] Stored 4096 out of total 4113 tokens. size: 0.5000 GB, cost 12.0000 ms, "
                             "throughput: 41.6667 GB/s; offload_time: 11.0000 ms, put_time: 1.0000 ms", loc="cache_engine.py:588",
                             logger="lmcache.v1.cache_engine", proc=None if proc is None else "Worker pid=301",
                             ts=f"2026-05-06 15:56:0{i},900"))
    return lines


@pytest.mark.parametrize("stores,warning", [(True, True), (True, False), (False, True)],
                         ids=["stores-and-warning", "stores-only", "warning-only"])
def test_zero_hit_paste_of_a_repeated_prompt_is_a_capped_kv002(tmp_path, stores, warning) -> None:
    found = [f for f in findings(tmp_path, _zero_hit_paste(stores, warning)) if f["rule"] == "KV002"]
    assert found, "a paste of repeated zero-hit lookups gave no KV002"
    f = found[0]
    assert f["measurements"]["input_coverage"] == "fragment"
    assert f["causes"][0]["id"] == "hash-inconsistency"
    assert all(c["confidence"] <= 0.6 for c in f["causes"])
    assert "not that LMCache never hits" in f["summary"]
    against = " ".join(a for c in f["causes"] for a in c["against"])
    assert "no lookup timeout" not in against and "no memory-pressure line" not in against  # a paste cannot show them
    steps = " ".join(f["next_steps"])
    assert "NONE_HASH" in steps and "Stored N out of total M tokens" in steps


def test_zero_hit_paste_without_stores_or_hash_warning_is_no_kv002(tmp_path) -> None:
    assert not [f for f in findings(tmp_path, _zero_hit_paste(False, False)) if f["rule"] == "KV002"]


def test_one_hit_in_the_paste_is_no_kv002(tmp_path) -> None:
    lines = _zero_hit_paste(True, True) + [lookup("cmpl-9f9-0", 4113, 4096, ts="2026-05-06 15:56:09,500")]
    assert not [f for f in findings(tmp_path, lines) if f["rule"] == "KV002"]


# ---- an error pair without a request id joins its lookup through the numbers -------------------------------
def _old_l6_paste(logger: str, r1: int, r2: int, l1_loc: str, proc_core: str | None, proc_worker: str | None) -> list[str]:
    l6 = lmc("Lookup results (number of hit tokens) differ across tensor parallel ranks: [4096, 2048].", level="WARNING",
             loc="lmcache_lookup_client.py:177", logger="lmcache.v1.lookup_client.lmcache_lookup_client", proc=proc_core,
             ts="2026-05-06 15:56:03,400")
    l1 = lmc(f"Reqid: {REQ}, Total tokens 4200, LMCache hit tokens: 2048, need to load: 2048", loc=l1_loc, logger=logger,
             proc=proc_core, ts="2026-05-06 15:56:03,401")
    return [l6, l1] + shortfall_pair(None, 1024, 2048, proc=proc_worker, r1=r1, r2=r2, logger=logger)


@pytest.mark.parametrize("logger,r1,r2,l1_loc,core,worker", [
    ("lmcache.integration.vllm.vllm_v1_adapter", 891, 895, "vllm_v1_adapter.py:1206", None, None),
    ("vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter", 897, 901,
     "vllm_v1_adapter.py:1211", "EngineCore_DP0 pid=203", "Worker_TP1 pid=101"),
], ids=["lmcache-0.3.9-unprefixed", "vllm-vendored-adapter-prefixed"])
def test_no_id_pair_after_a_rank_disagreement_is_tied_by_need_to_load(tmp_path, logger, r1, r2, l1_loc, core, worker) -> None:
    f = kv001(tmp_path, _old_l6_paste(logger, r1, r2, l1_loc, core, worker))
    top = f["causes"][0]
    assert top["id"] == "rank-disagreement" and top["confidence"] <= 0.6
    assert any("only by its numbers (need to load 2048 = expected 2048)" in x for x in top["for"])
    assert f["measurements"]["request_ids"] == [REQ]


def test_no_id_pair_with_two_fitting_lookups_stays_untied(tmp_path) -> None:
    lines = _old_l6_paste("lmcache.integration.vllm.vllm_v1_adapter", 891, 895, "vllm_v1_adapter.py:1206", None, None)
    other = lmc("Reqid: cmpl-other-0, Total tokens 4300, LMCache hit tokens: 2048, need to load: 2048",
                loc="vllm_v1_adapter.py:1206", ts="2026-05-06 15:56:03,402")
    f = kv001(tmp_path, lines[:2] + [other] + lines[2:])
    assert REQ not in f["measurements"].get("request_ids", [])
    assert not any("only by its numbers" in x for c in f["causes"] for x in c["for"])


# ---- a lookup → load wait past the default pin_timeout_sec, without the config -----------------------------
def test_wait_past_the_default_pin_timeout_points_to_the_pin_monitor_without_config(tmp_path) -> None:
    lines = [lookup(REQ, 4200, 4096, ts="2026-05-06 15:50:00,100")]
    lines += shortfall_pair(REQ, 3072, 4096, proc="Worker_TP0 pid=100", r1=876, r2=882, ts="2026-05-06 15:56:01,004")
    f = kv001(tmp_path, lines)
    top = f["causes"][0]
    assert top["id"] == "pin-timeout" and top["confidence"] <= 0.6
    assert any("exceeds the default pin_timeout_sec of 300" in x and "would confirm" in x for x in top["for"])


def test_short_wait_without_config_still_argues_against_a_pin_timeout(tmp_path) -> None:
    lines = [lookup(REQ, 4200, 4096, ts="2026-05-06 15:56:00,100")]
    lines += shortfall_pair(REQ, 3072, 4096, proc="Worker_TP0 pid=100", r1=876, r2=882, ts="2026-05-06 15:56:01,004")
    f = kv001(tmp_path, lines)
    pt = next(c for c in f["causes"] if c["id"] == "pin-timeout")
    assert f["causes"][0]["id"] != "pin-timeout" and any("default pin_timeout_sec is 300" in x for x in pt["against"])


def test_long_wait_before_the_pin_monitor_existed_is_not_a_pin_timeout(tmp_path) -> None:
    # LMCache 0.3.9 (R1 891 / R2 895 without request id, L1 1206 without computed tokens): no PinMonitor yet
    l1 = lmc(f"Reqid: {REQ}, Total tokens 4200, LMCache hit tokens: 4096, need to load: 4096", loc="vllm_v1_adapter.py:1206",
             ts="2026-05-06 15:50:00,100")
    lines = [l1] + shortfall_pair(None, 3072, 4096, proc=None, r1=891, r2=895, ts="2026-05-06 15:56:01,004")
    f = kv001(tmp_path, lines)
    pt = next(c for c in f["causes"] if c["id"] == "pin-timeout")
    assert f["causes"][0]["id"] != "pin-timeout"
    assert any("predates the pin monitor" in x for x in pt["against"])
