"""Excerpts as users paste them into public issue threads (vLLM, LMCache, Ray, Mooncake): engine deaths, KV
transfer and storage errors. Each gave exit 0, a wrong root or a made-up line before, and each test names what
the lines themselves show."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_deaths"


def test_a_v0_dead_engine_line_that_quotes_its_oom_has_that_root(tmp_path):
    log = _write(tmp_path, ["ERROR 03-19 10:55:18 [serving_chat.py:677] vllm.engine.multiprocessing.MQEngineDeadError: "
                            "Engine loop is not running. Inspect the stacktrace to find the original error: "
                            "OutOfMemoryError('CUDA out of memory. Tried to allocate 128.00 MiB. GPU 0 has a total "
                            "capacity of 79.33 GiB of which 16.00 MiB is free.')"])
    srv = _by_rule(log)["SRV001"]
    assert srv.causes[0].id == "cuda-oom"
    assert not any("SIGTERM shutdown" in a for a in srv.causes[0].against)


def test_an_exception_line_where_the_release_prints_the_fatal_header_is_a_death(tmp_path):
    log = _write(tmp_path, [
        "ERROR 05-29 15:17:48 [core.py:502]     assert logits.shape[1] == self.config.vocab_size, \\",
        "ERROR 05-29 15:17:48 [core.py:502] AssertionError: Expected logits to have shape (*, 128256), but got "
        "torch.Size([1, 32000])"])
    found = _by_rule(log)
    srv = found["SRV001"]
    assert srv.measurements["root_error"].startswith("Expected logits to have shape")
    assert srv.measurements["death_inferred"] is True
    assert "LOG001" not in found or "EngineCore encountered a fatal error.' ×" not in found["LOG001"].summary


def test_v0s_engine_process_failed_to_start_is_a_start_failure_with_its_cause_elsewhere(tmp_path):
    log = _write(tmp_path, [
        '  File "/usr/local/lib/python3.11/dist-packages/vllm/entrypoints/openai/api_server.py", line 223, in '
        "build_async_engine_client_from_engine_args",
        "    raise RuntimeError(",
        "RuntimeError: Engine process failed to start. See stack trace for the root cause."])
    srv = _by_rule(log)["SRV001"]
    assert srv.causes[0].id == "cause-not-in-excerpt"
    assert srv.measurements["failed_at_start"] is True
    assert not any("SIGTERM" in a for a in srv.causes[0].against)
    assert "clients saw errors" not in " ".join(srv.next_steps)


def test_v1s_max_seq_len_that_does_not_fit_the_kv_cache_is_a_start_failure():
    srv = _by_rule(HERE / "v1-max-seq-len-kv.log")["SRV001"]
    assert srv.causes[0].id == "kv-cache-memory"
    assert srv.measurements["failed_at_start"] is True
    assert "no request was served" in srv.next_steps[-1]


def test_frames_through_the_kv_cache_check_without_the_exception_line_point_at_kv_memory():
    srv = _by_rule(HERE / "v1-kv-check-frames-cut.log")["SRV001"]
    top = srv.causes[0]
    assert top.id == "kv-cache-memory" and top.confidence == 0.6
    assert "its exception line is not in the excerpt" in top.against


def test_code_rows_of_a_death_traceback_are_the_deaths_lines_not_unexplained_errors():
    """The same excerpt: logger.exception prints each code and caret row of the traceback as an ERROR record
    of its own ('                                 available_memory_one_worker)'). Those rows are the traceback
    SRV001 read, not six ERROR lines LOG001 lists as unexplained."""
    found = _by_rule(HERE / "v1-kv-check-frames-cut.log")
    assert "SRV001" in found and "LOG001" not in found


def test_fatal_python_error_is_a_native_crash_not_nothing_analysed():
    srv = _by_rule(HERE / "fatal-python-segfault.log")["SRV001"]
    assert srv.causes[0].id == "native-crash"
    assert srv.measurements["root_error"] == "Segmentation fault"
    assert "Fatal Python error" in srv.summary


def test_a_ray_actor_death_quoted_by_the_engine_core_is_a_kill_or_crash_at_start():
    srv = _by_rule(HERE / "ray-actor-dead-at-start.log")["SRV001"]
    assert srv.causes[0].id == "process-killed" and srv.causes[0].confidence <= 0.6
    assert srv.measurements["failed_at_start"] is True


def test_a_ray_workers_sigsegv_names_the_faulting_function_and_claims_its_stack_lines():
    found = _by_rule(HERE / "ray-sigsegv-nccl-proxy.log")
    srv = found["SRV001"]
    assert srv.causes[0].id == "native-crash"
    assert srv.measurements["fault_function"] == "addProxyOpIfNeeded()"
    assert "LOG001" not in found


def test_a_fatal_signal_outside_ray_is_not_called_rays_report(tmp_path):
    log = _write(tmp_path, ["*** SIGSEGV received at time=1709021359 on cpu 44 ***"])
    srv = _by_rule(log)["SRV001"]
    assert "Ray's report" not in srv.summary and "(a fatal signal, " in srv.summary


def test_a_logger_line_under_a_death_header_is_not_counted_as_that_header(tmp_path):
    worker = "(Worker_TP2 pid=253) ERROR 05-13 10:46:43 [multiproc_executor.py:962] "
    log = _write(tmp_path, [worker + "CUDA kernel errors might be asynchronously reported at some other API call, "
                            "so the stacktrace below might be incorrect.",
                            worker + "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"])
    found = _by_rule(log)
    # lines of that header's traceback text: the death it announces (SRV001, inferred), not the header line counted
    # twice, nor lines no rule explains
    srv = found["SRV001"]
    assert srv.measurements["death_inferred"] is True and "LOG001" not in found


def test_a_short_retrieve_with_the_adapters_error_line_but_not_its_numbers_is_an_error(tmp_path):
    """The pair's first line ('… less than the expected number of tokens! This should not happen!') is the
    adapter's own verdict: with the retrieve line before it the shortfall is an error, cited, even when the
    paste stops before 'Num retrieved tokens: …'."""
    log = _write(tmp_path, [
        "[2025-07-18 05:59:19,796] LMCache INFO: Retrieved 0 out of 130 out of total 130 tokens "
        "(cache_engine.py:508:lmcache.v1.cache_engine)",
        "[2025-07-18 05:59:19,796] LMCache ERROR: The number of retrieved tokens is less than the expected number of "
        "tokens! This should not happen! (vllm_v1_adapter.py:524:lmcache.integration.vllm.vllm_v1_adapter)"])
    kv = _by_rule(log)["KV001"]
    assert kv.severity == "error"
    assert kv.measurements["evidence_source"] == "error-line"
    assert [e.line for e in kv.evidence] == [1, 2]
    assert "error pair is not in the input" not in kv.summary
    assert "vLLM ≥ 0.31 prefixes" not in " ".join(kv.next_steps)


def test_a_journald_paste_cut_after_the_error_line_is_an_error_citing_it():
    kv = _by_rule(Path(__file__).resolve().parent / "real_kv" / "journald-error-line-without-numbers.log")["KV001"]
    assert kv.severity == "error" and 3 in [e.line for e in kv.evidence]


def test_a_native_librarys_glog_errors_beside_lmcache_are_named_not_dropped(tmp_path):
    """Mooncake's store client logs in glog's format inside the vLLM worker (LMCache issue #1518): its failed
    puts are KV016's, another of its errors LOG001's, never lines 'not vLLM/LMCache output'."""
    log = _write(tmp_path, [
        "(VllmWorker TP3 pid=15157) [2025-09-05 14:46:37,864] LMCache INFO: Stored 100 out of total 100 tokens. "
        "size: 0.0015 gb, cost 3.5321 ms, throughput: 0.4327 GB/s; offload_time: 3.5115 ms, put_time: 0.0206 ms "
        "(cache_engine.py:279:lmcache.v1.cache_engine)",
        "E0905 14:46:37.882738 15817 master_client.cpp:297] Failed to end put operation: invalid rpc arg",
        "E0905 14:46:37.882854 17930 store_py.cpp:1036] Put operation failed with error: RPC_FAIL",
        "E0905 14:46:37.882901 17930 transfer_engine.cpp:120] Failed to open device mlx5_0",
        "I0905 14:46:37.882900 17930 store_py.cpp:1040] a glog INFO line is no problem"])
    found = _by_rule(log)
    kv = found["KV016"]
    assert kv.measurements["by_kind"] == {"G_MOONCAKE_PUT": 2}
    assert "does not show that the remote write succeeded" in kv.summary
    log001 = found["LOG001"]
    assert "1 native library (glog) ERROR line" in log001.summary
    (msg,) = log001.measurements["messages"]
    assert msg["message"] == "Failed to open device mlx5_0" and msg["location"] == "glog transfer_engine.cpp:120"


def test_a_line_printed_where_no_catalogued_release_prints_it_is_pointed_at_as_printed(tmp_path):
    """LMCache 0.2's ``experimental`` package printed this warning at nixl_backend.py:55; the catalog holds it
    at v1/…:47. The step names the printed place first, and the catalogued one as such."""
    log = _write(tmp_path, ["[2025-05-08 07:54:57,961] LMCache WARNING: GC for receiver is disabled, may lead to memory "
                            "leak in non-testing environment (nixl_backend.py:55:lmcache.experimental.storage_backend."
                            "nixl_backend)"])
    step = _by_rule(log)["LOG002"].next_steps[0]
    assert step.startswith("read lmcache nixl_backend.py:55 as printed (not a catalogued release's line; catalogued at ")


_W = "(VllmWorker rank=0 pid=1285) [2025-06-30 11:26:07,604] LMCache WARNING: "
_REMOTE = "(remote_backend.py:159:lmcache.v1.storage_backend.remote_backend)"


@pytest.mark.parametrize(("line", "lead"), [
    # LMCache issue #839's kind: the Mooncake client lacks the API this LMCache build calls; nothing was stored
    (_W + "Failed to initialize/re-establish remote connection: 'mooncake.store.MooncakeDistributedStore' object "
     "has no attribute 'setup_lmcache' " + _REMOTE, "backend-not-connected"),
    # #929's kind: the endpoint resets every connection (it speaks TLS only)
    (_W + "Remote connection failed in contains: Error while reading from redis.example:6379 : (104, 'Connection "
     "reset by peer') " + _REMOTE, "backend-not-connected"),
    # an address that ends in .104 is no errno: a timeout is a read failure
    (_W + "Remote connection failed in contains: Timeout connecting to server 10.0.0.104:6379 " + _REMOTE,
     "backend-read-failure"),
])
def test_a_remote_backend_that_never_came_up_is_no_read_failure(tmp_path, line, lead):
    kv = _by_rule(_write(tmp_path, [line]))["KV013"]
    assert kv.causes[0].id == lead
    assert kv.summary.startswith("LMCache's remote backend did not connect") == (lead == "backend-not-connected")


def test_nccls_last_cuda_error_under_its_exception_is_read_as_the_root():
    """vLLM issue #18446's kind: 'NCCL error … unhandled cuda error' goes on with 'Last error:' and 'Cuda failure
    'out of memory'' on lines of their own: they belong to the exception, and say what failed."""
    srv = _by_rule(HERE / "nccl-teardown-cuda-oom.log")["SRV001"]
    assert srv.causes[0].id == "cuda-oom"


def test_091s_scheduler_output_line_is_the_crash_dump_not_an_unexplained_error(tmp_path):
    """vLLM 0.9.1 printed the failing step's SchedulerOutput on a line of its own before the fatal header."""
    log = _write(tmp_path, [
        "ERROR 08-08 14:05:34 [dump_input.py:80] SchedulerOutput(scheduled_new_reqs=[], scheduled_cached_reqs="
        "[CachedRequestData(req_id='0', resumed_from_preemption=false, new_token_ids=[], new_block_ids=[[]], "
        "num_computed_tokens=40)], num_scheduled_tokens={0: 6}, total_num_scheduled_tokens=6, "
        "scheduled_spec_decode_tokens={0: [315, 8991, 13, 576, 11341]}, scheduled_encoder_inputs={})",
        "ERROR 08-08 14:05:34 [core.py:517] EngineCore encountered a fatal error."])
    found = _by_rule(log)
    step = found["SRV001"].measurements["crash_dump"]["failing_step"]
    assert step == {"request_ids": ["0"], "scheduled_tokens": 6, "speculative_tokens_scheduled": True}
    assert "LOG001" not in found


def test_a_traceback_that_raised_in_the_standard_library_points_at_the_innermost_lmcache_frame(tmp_path):
    """LMCache issue #4811's kind: a cut traceback whose last frame is concurrent/futures; the step names the MP
    server's own frame first, and where it raised after it."""
    log = _write(tmp_path, [
        "[2026-08-29 12:45:30,873] LMCache ERROR: Error in blocking handler (mq.py:579:lmcache.v1.multiprocess.mq)",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/lmcache/v1/multiprocess/mq.py", line 566, in _notify_response',
        "    response = fut.result()",
        '  File "/usr/lib/python3.12/concurrent/futures/_base.py", line 449, in result'])
    steps = " ".join(s for f in analyze([str(log)]).findings if f.rule == "LOG001" for s in f.next_steps)
    assert ("lmcache/v1/multiprocess/mq.py:566 in _notify_response (the innermost vLLM/LMCache frame; it raised in "
            "/usr/lib/python3.12/concurrent/futures/_base.py:449 in result)") in steps


def test_almost_no_accepted_drafts_are_not_called_none(tmp_path):
    line = ("(APIServer pid=1) INFO 05-06 06:11:{s} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
            "1.03, Accepted throughput: 2.50 tokens/s, Drafted throughput: 365.20 tokens/s, Accepted: {a} tokens, "
            "Drafted: {d} tokens, Per-position acceptance rate: 0.027, 0.000, 0.000, 0.000, Avg Draft acceptance "
            "rate: 0.7%")
    log = _write(tmp_path, [line.format(s="23", a=25, d=3652), line.format(s="33", a=15, d=1724)])
    sd = _by_rule(log)["SD002"]
    assert sd.title.endswith("(almost) none is accepted")
    assert "accepted 40" in sd.summary and "(not none: an interval counts here at or under 1% accepted)" in sd.summary


def test_death_lines_of_two_engine_cores_are_said_to_be_two():
    """trl PR #3310's kind: the tracebacks of EngineCore_7 and EngineCore_0 interleave; the finding names both
    processes, not one engine."""
    srv = _by_rule(HERE / "dp-two-engine-cores.log")["SRV001"]
    assert srv.measurements["dead_engine_cores"] == ["EngineCore_7 pid=2095681", "EngineCore_0 pid=2095608"]
    assert "come from 2 engine-core processes" in srv.summary
    assert {e.line for e in srv.evidence} >= {1, 7}  # EngineCore_7's first traceback row (a code row), EngineCore_0's header


def test_a_connectors_batched_put_error_is_a_failed_write_not_no_problem(tmp_path):
    """LMCache issue #2166's kind: every batched put to Mooncake failed; the report said 'no problem found'."""
    log = _write(tmp_path, [
        "[2025-12-01 10:00:00,000] LMCache WARN : batched put error: unsupported format string passed to "
        "bytes.__format__ (instrumented_connector.py:118:lmcache.v1.storage_backend.connector.instrumented_connector)"])
    kv = _by_rule(log)["KV016"]
    assert kv.causes[0].id == "backend-write-failure"
    assert kv.measurements["errors"] == {"unsupported format string passed to bytes.__format__": 1}


def test_an_unknown_lmcache_config_key_is_a_warning_naming_it(tmp_path):
    """LMCache issue #2854's kind: 'pd_backends' was ignored; the report said 'no problem found'."""
    w = "(Worker_TP3 pid=1237459) [2026-03-23 13:46:57,783] LMCache WARNING: "
    log = _write(tmp_path, [w + "Unknown configuration key: pd_backends (source: file: ../configs/decoder.yaml) "
                                "(config_base.py:187:lmcache.v1.config_base)",
                            w + "Unknown config key: max_cpu_size, ignoring (config_base.py:602:lmcache.v1.config_base)"])
    kv = _by_rule(log)["KV017"]
    assert kv.measurements["unknown_keys"] == ["pd_backends", "max_cpu_size"]
    assert kv.summary.startswith("LMCache ignored pd_backends, max_cpu_size, 2 configuration key(s)")


def test_torchs_cuda_error_text_names_the_fault_when_the_exception_line_is_cut():
    """vLLM issue #40756's kind: only the tail of torch's CUDA error text is left under 'WorkerProc hit an
    exception'; it names cudaErrorIllegalAddress, which is more than 'not in the excerpt'."""
    srv = _by_rule(HERE / "mtp-illegal-address-cut.log")["SRV001"]
    top = srv.causes[0]
    assert top.id == "worker-exception" and top.confidence == 0.5
    assert "cudaErrorIllegalAddress" in top.for_[0] and "CUDA_LAUNCH_BLOCKING=1" in top.fix


def test_a_ci_log_behind_buildkite_times_and_its_gutter_is_read(tmp_path):
    """vLLM issue #14574: a CI log copied from Buildkite's web view, each line behind the runner's
    ``[2025-03-10T15:07:20Z] `` and the view's ``  | `` gutter. Nothing was recognised (exit 3)."""
    report = analyze([str(HERE / "buildkite-ci-core-exception.log")])
    stats = report.inputs[0]
    assert stats["recognized"] == 8 and "bracketed-timestamp" in stats["formats"]  # all but grep's '--' (the first
    # line, without the gutter, was not read before the reader peeled a bracketed time off a line of its own)
    srv = next(f for f in report.findings if f.rule == "SRV001")
    assert srv.measurements["died_at"].startswith("2025-03-10 08:07:20")  # the year from the runner's time
    assert srv.measurements["fatal_frame"] == "run_engine_core"
    # its code row 'engine_core = EngineCoreProc(*args, **kwargs)', an ERROR record of its own: a start failure
    assert srv.measurements["failed_at_start"] is True


def test_buildkite_times_without_the_gutter_before_a_process_prefix_are_read():
    """pytorch #170570 (vLLM's CI on torch 2.10): the runner's ``[2025-12-15T20:35:11Z] `` before vLLM's process
    prefix, pasted from the raw log (no ``  | `` gutter), with grep's ``--`` between groups. The reader took a
    line starting with ``[`` for an LMCache header and read nothing: 'no finding' behind 1 recognised line."""
    report = analyze([str(HERE / "buildkite-bracket-time-no-gutter.log")])
    assert report.inputs[0]["recognized"] == 8  # all but grep's '--'
    srv = next(f for f in report.findings if f.rule == "SRV001")
    assert srv.measurements["failed_at_start"] is True
    assert srv.measurements["died_at"].startswith("2025-12-15 12:35:11")


def test_a_threads_uncaught_exception_after_an_lmcache_line_is_a_traceback_not_that_lines_text():
    """LMCache-Ascend issue #89: the cache server's client thread died ('Exception in thread Thread-1
    (handle_client):' and its traceback) right after an INFO line without LMCache's suffix. The traceback was
    joined to that INFO record as its text: 'no finding'."""
    found = _by_rule(HERE.parent / "real_kv" / "lmcache-server-thread-exception.log")
    log001 = found["LOG001"]
    assert "Exception in thread Thread-1 (handle_client)" in log001.summary
    assert "lmcache/v1/protocol.py:173 in deserialize" in log001.summary


def test_a_v0_engine_that_ran_out_of_npu_memory_while_built_failed_at_start():
    """vllm-ascend issue #19: the traceback runs through MQLLMEngine.from_engine_args (the engine built from the
    CLI's arguments), so no request was in flight; the device out of memory is an NPU, and the cause says so."""
    srv = _by_rule(HERE / "v0-npu-oom-from-engine-args.log")["SRV001"]
    assert srv.measurements["failed_at_start"] is True
    assert srv.causes[0].id == "cuda-oom" and any("Ascend NPU" in f for f in srv.causes[0].for_)
    assert "no request was served" in srv.next_steps[-1]


def test_kv_blocks_a_prefill_instance_released_unread_are_a_warning_not_no_problem():
    """vLLM issue #25562: five 'Releasing expired KV blocks for request … which were retrieved by 0 decode
    worker(s) within 120 seconds' on the prefill side said 'no problem found'."""
    kv = _by_rule(HERE.parent / "real_kv" / "nixl-expired-kv-blocks.log")["KV018"]
    assert kv.severity == "warning" and kv.causes[0].id == "pd-kv-not-read"
    assert (kv.measurements["unread_requests"], kv.measurements["timeout_s"]) == (5, 120)
    assert kv.measurements["request_ids"][0] == "cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c-0"


def test_kv_blocks_read_by_some_decode_workers_are_counted_not_reported(tmp_path):
    log = _write(tmp_path, ["(EngineCore_DP0 pid=1) WARNING 09-24 16:35:21 [nixl_connector.py:1048] Releasing expired "
                            "KV blocks for request r1 which were retrieved by 1 decode worker(s) within 120 seconds."])
    assert "KV018" not in _by_rule(log)


@pytest.mark.parametrize("name,retries", [("nixl-v3-alloc-retrying.log", 7), ("pd-backend-alloc-retrying.log", 1)])
def test_a_pd_receivers_allocation_retries_are_its_transfer_buffer_not_the_cpu_tier(name, retries):
    """LMCache issues #1337 (nixl_connector_v3, 0.3.x) and #1990 (pd_backend, 0.3.9): 'Failed to allocate memory
    object, retrying...' is the P/D receiver's transfer buffer, retried without a limit while the request waits.
    It was KV007 'CPU tier under memory pressure: stores cut short or dropped' with max_local_cpu_size as the fix.
    #1337's first line opens an inline code span the paste closes lines later: it counts too (7, not 6)."""
    found = _by_rule(HERE.parent / "real_kv" / name)
    assert "KV007" not in found
    kv = found["KV019"]
    assert kv.causes[0].id == "pd-buffer-full" and kv.measurements["retries"] == retries
    assert "pd_buffer_size" in kv.causes[0].fix and "max_local_cpu_size" not in kv.causes[0].fix
    assert "Nothing was dropped" in kv.summary


def test_allocation_failures_of_sync_disk_loads_are_short_loads_not_dropped_stores():
    """LMCache issue #969: GDS's 'Memory allocation failed during sync disk load.' (older releases' wording of
    the staging failure), each with the allocator's 'Failed to allocate memory for tensor …'. They were KV007
    'stores cut short or dropped', and the four GDS lines were cited nowhere."""
    found = _by_rule(HERE.parent / "real_kv" / "gds-sync-disk-load-alloc.log")
    assert "KV007" not in found
    kv = found["KV001"]
    assert kv.causes[0].id == "cpu-staging-exhausted"
    assert "Memory allocation failed during sync disk load" in kv.summary


def test_a_file_connectors_failed_write_is_a_write_failure_naming_its_error():
    """LMCache issue #1862 (layerwise with the fs connector): 'Failed to write file <long path>: Shape dimension
    should be 4'. LOG001 cut the line inside the path, so the reason was in no line of the text report."""
    kv = _by_rule(HERE.parent / "real_kv" / "fs-connector-write-failed.log")["KV016"]
    assert kv.measurements["by_kind"] == {"X10": 1}
    assert "'Shape dimension should be 4' ×1" in kv.summary


def test_a_traceback_under_vllms_header_points_at_its_innermost_frame_not_the_printing_call():
    """LMCache issue #1791: an AssertionError raised in LMCache's local_cpu_backend.py:520, printed by vLLM's
    engine-core logger at core.py:708. LOG001 said 'read vllm core.py:708' and listed the AssertionError as a
    second message."""
    found = _by_rule(HERE.parent / "real_kv" / "lmcache-assert-under-vllm-header.log")
    # core.py:708 is where a release prints the fatal header: the rows under it are the engine's death (SRV001),
    # whose root is the AssertionError and where it was raised, not lines no rule explains
    srv = found["SRV001"]
    assert srv.measurements["root_error"] == "AssertionError"
    assert srv.measurements["raised_in"] == "lmcache/v1/storage_backend/local_cpu_backend.py:520 in calculate_chunk_budget"
    assert srv.measurements["failed_at_start"] is False  # the header is known by its place alone: not which one
    assert "LOG001" not in found


def test_a_ray_actors_death_seen_from_its_caller_is_named_as_such_not_as_engine_dead_errors():
    """verl issue #4921: only the caller's ray.exceptions.ActorDiedError. The summary said '1 cascade line(s)
    (EngineDeadError/output handler)', a line the excerpt does not hold."""
    srv = _by_rule(HERE / "verl-ray-actor-died.log")["SRV001"]
    assert "1 cascade line(s) follow from it (ActorDiedError ×1)" in srv.summary
    assert "EngineDeadError" not in srv.summary


def test_an_api_servers_traceback_through_the_engine_clients_construction_failed_at_start():
    """A journald paste cut inside AsyncLLM.__init__ → EngineCoreClient.make_async_mp_client (the API server
    starting its engine core): a start failure, not a warning about an unexplained traceback."""
    srv = _by_rule(HERE / "journald-asyncllm-start-cut.log")["SRV001"]
    assert srv.measurements["failed_at_start"] is True
    assert srv.measurements["root_error"] == "not in the excerpt"


def test_a_2024_lmcache_log_names_no_release_published_after_it():
    """LMCache issue #242 (lmcache_vllm, 2024-11-24): the version was '~0.3.3, nearest shown', a release first
    uploaded on 2025-08-03. With 0.3.0–0.3.3's upload dates known, no catalogued release can have printed it."""
    report = analyze([str(HERE.parent / "real_kv" / "lmcache-vllm-2024-11-blend.log")])
    ctx = report.context
    assert ctx["lmcache_version"] is None
    assert "published after the log's date (2024-11-24)" in ctx["lmcache_version_note"]


def test_an_engine_cores_own_traceback_is_its_death_not_a_raylet_report_of_another_process():
    """verl PR #1138: the engine core printed its exception under 'EngineCore hit an exception' (core.py:390:
    'The actor is dead because all references to the actor were removed'), and the raylet reported a worker of
    another pid. The death was pinned on the raylet's line, with the OOM killer as its most likely cause."""
    srv = _by_rule(HERE / "verl-engine-core-actor-gc.log")["SRV001"]
    assert srv.causes[0].id != "process-killed"
    assert "where vLLM prints 'EngineCore hit an exception: %s'" in srv.summary


def test_two_servers_engine_cores_under_their_own_host_actors_are_told_apart():
    """verl's rollout runs one vLLM server per Ray actor (``(vLLMHttpServer pid=N)``), each with an engine core
    ``EngineCore_DP0``: two died. One left its code row and multiprocessing's ``Process EngineCore_DP0:`` banner,
    the other the frames under its banner. Before, one death was told with the first core's time and the second
    core's line; the banner was dropped."""
    srv = _by_rule(HERE / "verl-two-servers-engine-cores.log")["SRV001"]
    assert srv.measurements["dead_engine_cores"] == ["EngineCore_DP0 pid=28193 in vLLMHttpServer pid=27084",
                                                     "EngineCore_DP0 pid=28194 in vLLMHttpServer pid=27099"]
    assert "under 2 different host processes: as many servers" in srv.summary
    assert "banner 'Process EngineCore_DP0:'" in srv.summary
    assert srv.evidence[0].line == 1  # the first core's own row, printed where a release prints a death header
    assert srv.measurements["failed_at_start"] is False
    assert srv.measurements["died_at"] == "12-12 10:42:30"


def test_a_process_banner_alone_is_an_engine_cores_death_but_not_another_process(tmp_path):
    """CPython prints ``Process <name>:`` before the traceback of a process whose target raised; alone, an engine
    core's banner is its death; another process's is not the engine's."""
    srv = _by_rule(_write(tmp_path, ["(EngineCore_DP0 pid=7) INFO 05-01 10:00:00 [core.py:70] Initializing",
                                     "(EngineCore_DP0 pid=7) Process EngineCore_DP0:"]))["SRV001"]
    assert srv.measurements["death_inferred"] is True
    (tmp_path / "other").mkdir()
    other = _by_rule(_write(tmp_path / "other", ["INFO 05-01 10:00:00 [api_server.py:1] Starting",
                                                 "Process SpawnProcess-1:"]))
    assert "SRV001" not in other


def test_a_bare_stopiteration_is_the_root_and_says_where_it_was_raised():
    """LMCache #2453 (layerwise storing): a worker's traceback under vLLM's header ends in a bare ``StopIteration``
    from ``next(layerwise_storer)``, re-raised as a RuntimeError. The root was 'not in the excerpt': only names
    ending in Error or Exception were exception lines."""
    srv = _by_rule(HERE.parent / "real_kv" / "layerwise-stopiteration.log")["SRV001"]
    assert srv.measurements["root_error"] == "StopIteration"
    assert srv.measurements["raised_in"] == "lmcache/integration/vllm/vllm_v1_adapter.py:1324 in wait_for_save"
    assert srv.causes[0].id == "worker-exception"


def test_a_raw_tracebacks_root_names_its_innermost_frame(tmp_path):
    srv = _by_rule(_write(tmp_path, [
        "ERROR 05-01 10:00:00 [core.py:708] EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
        "    engine_core.run_busy_loop()",
        '  File "/usr/lib/python3/dist-packages/lmcache/v1/cache_engine.py", line 263, in store',
        "    assert memory_obj is not None",
        "AssertionError: no memory object"]))["SRV001"]
    assert srv.measurements["raised_in"] == "lmcache/v1/cache_engine.py:263 in store"
    assert "It was raised in lmcache/v1/cache_engine.py:263 in store." in srv.summary


def test_an_api_server_traceback_entering_its_engine_client_is_a_start_failure():
    """vLLM #25125 (EAGLE3, a source checkout): the API server's traceback through ``async with
    build_async_engine_client(`` cut in contextlib. It was a LOG001 warning pointing at contextlib.py:204."""
    found = _by_rule(HERE / "api-server-build-client-cut.log")
    srv = found["SRV001"]
    assert srv.measurements["failed_at_start"] is True
    assert srv.measurements["fatal_frame"] == "build_async_engine_client"
    assert srv.causes[0].id == "cause-not-in-excerpt"


def test_frames_of_a_source_checkout_are_named_from_the_package():
    from specdiag.events import frame_path

    assert frame_path("/home/u/vllm/vllm/entrypoints/openai/api_server.py") == "vllm/entrypoints/openai/api_server.py"
    assert frame_path("/x/site-packages/lmcache/v1/cache_engine.py") == "lmcache/v1/cache_engine.py"
    assert frame_path("/usr/lib/python3.12/contextlib.py") == "/usr/lib/python3.12/contextlib.py"


def test_an_excerpt_starting_on_a_caret_row_cites_the_next_row(tmp_path):
    """vLLM #30905's paste begins on a 600-character caret row, which was the finding's only evidence line."""
    head = "(Worker_TP7 pid=26373) ERROR 12-17 13:32:44 [multiproc_executor.py:815] "
    srv = _by_rule(_write(tmp_path, [
        head + "               " + "^" * 300,
        head + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 810, '
               "in worker_busy_loop",
        head + "    output = func(*args, **kwargs)"]))["SRV001"]
    assert srv.evidence[0].line == 2


def test_traceback_rows_where_releases_print_other_messages_too_are_the_fatal_headers():
    """vLLM #48707 (0.25.0): rows at core.py:1233, the fatal header's place in 0.24.0-0.25.1 and another message's in
    0.15. Matched to that other message, the rows were a LOG001 warning (exit 0); a frame row is printed only by a
    call that logs a traceback."""
    srv = _by_rule(HERE / "v025-fatal-header-place-shared.log")["SRV001"]
    assert srv.measurements["death_inferred"] is True


def test_vllm_output_relogged_by_the_program_that_runs_it_is_read():
    """allenai/olmocr #260 and vLLM PR #43410: vLLM's lines behind another program's Python logger ('… - __main__
    - INFO - ', '… - INFO - [container] '). Nothing was recognised (exit 3); the client's traceback waiting for the
    engine's start-up handshake is a start failure."""
    for name in ("relogged-by-python-logger-olmocr.log", "relogged-with-container-tag.log"):
        report = analyze([str(HERE / name)])
        assert report.inputs[0]["recognized"] == 10 and "relogged" in report.inputs[0]["formats"]
        srv = next(f for f in report.findings if f.rule == "SRV001")
        assert srv.measurements["failed_at_start"] is True


def test_another_programs_own_lines_are_not_unwrapped(tmp_path):
    report = analyze([str(_write(tmp_path, ["2025-06-27 12:57:51,690 - __main__ - INFO - processed 12 pages",
                                            "2025-06-27 12:57:52,001 - __main__ - INFO - INFO 06-27 12:57:52 "
                                            "[core.py:1] not re-logged without a process prefix"]))])
    assert report.inputs[0]["recognized"] == 0


def test_ray_serve_stopping_an_llm_replica_at_start_is_the_servers_start_failure(tmp_path):
    """ray-project/ray #51242: Ray Serve's controller stopped the vLLM replica whose start raised ('No CUDA GPUs are
    available' in the thread). It was a LOG001 warning pointing into Ray's client_mode_hook.py (exit 0)."""
    srv = _by_rule(HERE / "ray-serve-replica-stopped.log")["SRV001"]
    assert srv.measurements["failed_at_start"] is True and srv.measurements["death_inferred"] is True
    assert "Ray Serve's report that it stopped the replica" in srv.summary
    (tmp_path / "other").mkdir()
    other = _by_rule(_write(tmp_path / "other", [
        "(ServeController pid=2922) ERROR 2025-04-02 17:25:34,553 controller 2922 -- Exception in Replica(id='x1', "
        "deployment='Thumbnailer', app='default'), the replica will be stopped."]))
    assert "SRV001" not in other  # another deployment of the application


def test_pins_held_twice_and_most_objects_forced_at_once_are_a_leak_not_a_wait():
    """LMCache PR #2785: 'Pin count: 2' at the timeout and 311 of 429 pinned objects force-unpinned at once (contains
    (pin=True) pins that touch_cache() never released). KV012 said pin-timeout with 'raise pin_timeout_sec', which
    only keeps leaked pins longer."""
    kv = _by_rule(HERE.parent / "real_kv" / "pin-leak-forced-unpins.log")["KV012"]
    assert kv.causes[0].id == "pin-leak" and "only keeps leaked pins longer" in kv.causes[0].fix
    assert kv.causes[1].id == "pin-timeout"


def test_a_death_headers_traceback_text_without_frames_is_that_death():
    """vLLM (MTP on MRV2, CUDA graph capture): nine rows under 'WorkerProc hit an exception.' at
    multiproc_executor.py:962 — torch's CUDA hint and a chained exception's head, no frame. It was a LOG001 warning
    (exit 0) while the same header with frames was SRV001."""
    found = _by_rule(HERE / "cuda-hint-under-worker-header.log")
    srv = found["SRV001"]
    assert srv.measurements["death_inferred"] is True
    assert srv.causes[0].id == "worker-exception" and "cudaErrorStreamCaptureUnsupported" in srv.causes[0].for_[0]
    assert "LOG001" not in found


def test_vllms_cudacheck_exit_is_the_root_not_the_worker_death_it_causes():
    """vLLM #56180: csrc/custom_all_reduce.cuh's CUDACHECK printed 'Failed: Cuda error …:164 'invalid argument'' and
    exited; the line was not read, and the engine's 'Worker proc … died unexpectedly' was the root, classed
    process-killed with 'look for the kernel OOM killer'."""
    srv = _by_rule(HERE / "custom-all-reduce-cudacheck.log")["SRV001"]
    assert srv.measurements["root_error"] == "Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'"
    assert srv.causes[0].id == "native-crash"


def test_the_root_a_dead_v0_engine_quotes_is_its_root_whatever_its_class():
    """ai-dynamo/dynamo #1471: 'MQEngineDeadError: … to find the original error: RuntimeError('Aborted due to the
    lack of CPU swap space …')' inside a raw traceback. Only out-of-memory roots were taken from such a line; the
    root was 'not in the excerpt'."""
    srv = _by_rule(HERE / "v0-dead-engine-quotes-swap-space.log")["SRV001"]
    assert srv.measurements["root_error"].startswith("Aborted due to the lack of CPU swap space")


def test_a_worker_failure_with_an_empty_error_names_no_root():
    """vLLM #27962: 'RuntimeError: Worker failed with error '', please check the stack trace above' — the worker's
    error is elsewhere; its traceback's first frame line was reported as the root error."""
    srv = _by_rule(HERE / "worker-failed-with-empty-error.log")["SRV001"]
    assert srv.measurements["root_error"] == "not in the excerpt" and srv.causes[0].id == "cause-not-in-excerpt"


def test_a_traceback_capturing_a_cuda_graph_is_a_start_failure():
    """vLLM (a worker's dummy run inside 'with torch.cuda.graph(' in compilation/cuda_graph.py, cut before its
    exception): V1 captures its graphs while it starts. It was a LOG001 warning (exit 0)."""
    srv = _by_rule(HERE / "cuda-graph-capture-cut.log")["SRV001"]
    assert srv.measurements["failed_at_start"] is True and srv.measurements["fatal_frame"] == "CUDA graph capture"


@pytest.mark.parametrize("func", ["compile_or_warm_up_model", "_dummy_sampler_run", "init_worker"])
def test_frames_run_only_while_starting_make_a_start_failure(tmp_path, func):
    """vLLM #42999-like pastes (probe of this stop): tracebacks through the model's warm-up, the sampler's profiling
    run or a worker's init were 'failed_at_start: no'."""
    head = "(EngineCore_DP0 pid=5) ERROR 05-01 10:00:00 [core.py:866] "
    srv = _by_rule(_write(tmp_path, [
        head + "EngineCore encountered a fatal error.",  # says nothing of start: the frame does
        head + '  File "/usr/lib/python3/dist-packages/vllm/v1/worker/gpu_worker.py", line 300, in ' + func,
        head + "RuntimeError: boom"]))["SRV001"]
    assert srv.measurements["failed_at_start"] is True


def test_v0s_worker_exception_header_is_a_death():
    """LMCache #488 (vLLM V0 with LMCache): 'Exception in worker VllmWorkerProcess while processing method
    start_worker_execution_loop.' (multiproc_worker_utils.py, 0.6.3-0.10.2) and its traceback were a LOG001 warning
    (exit 0); the driver re-raises the worker's exception in the engine loop."""
    srv = _by_rule(HERE / "v0-worker-exception-header.log")["SRV001"]
    assert srv.measurements["death_inferred"] is False


@pytest.mark.parametrize(("name", "where", "cascade"), [
    ("tvm-ffi-segfault-swap-blocks.log", "native code: cudaMemcpyAsync <- swap_blocks <- c10::impl::make_boxed_from_unboxed_functor", 0),
    ("tvm-ffi-segfault-after-another-stack.log", "native code: cuMemcpyBatchAsync <- swap_blocks_batch", 0),
    ("tvm-ffi-segfault-then-engine-dead.log", "native code: cudaMemcpyAsync <- swap_blocks", 1)])
def test_apache_tvm_ffis_segfault_banner_is_a_native_crash_where_its_first_frames_say(name, where, cascade):
    """vLLM #42348, #44780, PR #50443 (KV offloading's copy kernels): apache-tvm-ffi's SIGSEGV handler prints
    ``!!!!!!! Segfault encountered !!!!!!!`` and the native stack innermost first. Its frames were LOG001 warnings
    (exit 0), the innermost taken from the last row of another stack (``0xffffffffffffffff``); a death after it
    said 'root not in the excerpt'. Now the root, raised where the stack's first rows say."""
    found = _by_rule(HERE / name)
    srv = found["SRV001"]
    assert srv.severity == "error" and srv.measurements["root_cause_class"] == "native-crash"
    assert srv.measurements["root_error"] == "Segfault encountered"
    assert srv.measurements["raised_in"] == where and srv.measurements["cascade_lines"] == cascade
    assert "LOG001" not in found


def test_a_traceback_through_the_batch_queue_step_is_a_death_with_its_root():
    """vLLM PR #41834 (a dev build: its header place core.py:1188 is no catalogued release's): a KeyError raised in
    ``update_from_output`` under ``step_with_batch_queue``, behind a compose prefix, was a LOG001 warning, exit 0.
    That step runs only from the engine core's busy loop, which no exception survives."""
    found = _by_rule(HERE / "batch-queue-step-keyerror-compose.log")
    srv = found["SRV001"]
    assert srv.severity == "error" and srv.measurements["root_error"] == "'chatcmpl-b0d24c1c50541bec-804c6b13'"
    assert srv.measurements["failed_at_start"] is False and srv.measurements["root_cause_class"] == "worker-exception"
    assert "LOG001" not in found


def test_worker_failed_quoted_without_its_please_check_tail_is_the_root():
    """LMCache #2947: ``RuntimeError: Worker failed with error 'shape '[1, 78, 256, 132]' is invalid …'`` pasted
    without vLLM's ``, please check the stack trace above`` was a LOG001 warning; the quoted error is the root."""
    srv = _by_rule(HERE / "worker-failed-quote-without-tail.log")["SRV001"]
    assert srv.measurements["root_error"] == "shape '[1, 78, 256, 132]' is invalid for input of size 25638912"


def test_a_colour_reset_pasted_as_the_word_esc_is_colour_not_text():
    """vLLM #25043: ``(EngineCore_DP0 pid=35109)ESC[0;0m ERROR … EngineCore failed to start.`` behind markdown quotes
    ('ESC' for the control byte) was 'nothing analysed', exit 0: the residue's ``[0;0m`` was taken off and the word
    ``ESC`` left glued to the process prefix."""
    srv = _by_rule(HERE / "esc-word-residue-quoted.log")["SRV001"]
    assert srv.severity == "error" and srv.measurements["failed_at_start"] is True


def test_torchruns_rank_prefix_on_every_line_is_a_wrapper():
    """vLLM #18998: an in-process engine under torchrun, every line behind ``[rank2]: ``, was 'nothing recognised'
    (exit 3). torch's own ``[rank0]:[W…]`` (no space) stays torch's header, not this wrapper."""
    from specdiag.ingest.wrappers import LineUnwrapper

    found = _by_rule(HERE / "torchrun-rank-prefix-traceback.log")
    assert found["SRV001"].severity == "error" and found["SRV001"].measurements["failed_at_start"] is True
    u = LineUnwrapper()
    assert u.strip(b"[rank2]:     return cls(vllm_config=vllm_config,") == b"    return cls(vllm_config=vllm_config,"
    assert "rank-prefix" in u.seen
    torch_own = b"[rank0]:[W506 15:56:03.031500 ProcessGroupNCCL.cpp:4561] Warning: x"
    assert LineUnwrapper().strip(torch_own) == torch_own


@pytest.mark.parametrize("name", ["eagle3-draft-attn-metadatas-ascend.log", "eagle-proposer-positions-regression.log"])
def test_a_death_raised_in_the_drafter_points_at_the_speculative_config(name):
    """vllm-ascend #6509 (``'ForwardContext' object has no attribute 'draft_attn_metadatas'`` quoted by 'Worker failed
    with error') and vLLM #34607 (``'EagleProposer' object has no attribute 'positions'``, 0.15.1): both were the
    generic ``worker-exception`` ('fix the exception'); the drafter is named, and the experiment is to start
    without --speculative-config."""
    srv = _by_rule(Path(__file__).resolve().parent / "real_sd" / name)["SRV001"]
    assert srv.measurements["root_cause_class"] == "drafter-error" and srv.causes[0].id == "drafter-error"
    assert "--speculative-config" in srv.causes[0].confirm_with


def test_an_error_elsewhere_is_not_the_drafters(tmp_path):
    lines = ["Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 728, in run_busy_loop',
             "    self._process_engine_step()",
             "KeyError: 'chatcmpl-1'"]
    assert _by_rule(_write(tmp_path, lines))["SRV001"].measurements["root_cause_class"] == "worker-exception"


def test_an_exception_logged_as_the_message_above_its_traceback_is_the_root():
    """production-stack #574: V0's ``run_mp_engine`` logs the caught exception itself (``logger.exception(e)``:
    ``No module named 'lmcache.experimental'``) and then its traceback, cut before the exception line. The death was
    'root not in the excerpt' beside a LOG001 warning for that very line."""
    found = _by_rule(HERE / "v0-logged-exception-lmcache-experimental.log")
    srv = found["SRV001"]
    assert srv.measurements["root_error"] == "No module named 'lmcache.experimental'"
    assert srv.measurements["root_cause_class"] == "import-error" and srv.measurements["failed_at_start"] is True
    assert "LOG001" not in found


def test_frame_rows_pasted_without_their_indentation_are_a_traceback(tmp_path):
    """LMCache #4463: ``File "lmcache/v1/cache_engine.py", line 558, in store`` flush left, the exception last: it
    was 'this exception's traceback is not in the log given'. Text that only starts with ``File "`` is not a frame."""
    log = Path(__file__).resolve().parent / "real_kv" / "flush-frames-gpu-connector-size.log"
    log001 = _by_rule(log)["LOG001"]
    assert "lmcache/v1/gpu_connector/gpu_connectors.py:619 in from_gpu" in log001.next_steps[0]
    from specdiag.ingest.records import flush_frame

    assert not flush_frame(b'File "notes.txt" was not found') and flush_frame(b'File "a.py", line 3, in f')


def test_the_rest_of_an_exceptions_message_under_the_header_is_the_deaths_not_unexplained():
    """vLLM #37159 (GLM-OCR on a V100): torch's ``CUDA error: device-side assert triggered`` and the four lines of its message
    after it (``CUDA kernel errors might be asynchronously reported …``), printed by the same call at a place no
    release has: the four were listed as LOG001 lines 'in no catalogued release' beside the death that explains them.
    A line of another place or second is not claimed so."""
    found = _by_rule(HERE / "cuda-assert-message-rows-under-header.log")
    assert found["SRV001"].measurements["root_error"] == "CUDA error: device-side assert triggered"
    assert "LOG001" not in found


def test_an_unknown_error_of_another_place_after_an_exception_stays_unexplained(tmp_path):
    lines = ["(EngineCore pid=1) ERROR 03-16 08:31:22 [core.py:1090] RuntimeError: CUDA error: device-side assert triggered",
             "(EngineCore pid=1) ERROR 03-16 08:31:22 [other_plugin.py:7] Plugin wobbled beyond repair"]
    found = _by_rule(_write(tmp_path, lines))
    assert "LOG001" in found and "Plugin wobbled" in found["LOG001"].summary


def test_kv_caches_a_whole_multiple_of_lmcaches_layers_are_a_kv_layout_not_a_drafter(tmp_path):
    """LMCache #3339 (GLM-5-FP8, no speculative decoding): ``could not broadcast input array from shape (158,) into
    shape (79,)`` in LMCache's pointer setup was blamed on a drafter's layers. 158 = 2 x 79: two KV caches per layer
    (MLA's and the sparse indexer's), which a drafter adds only as a draft model as deep as the target; with that
    draft model configured, the drafter stays the cause."""
    death = _by_rule(HERE / "lmcache-pointers-mla-indexer-2x.log")["SRV001"]
    assert death.causes[0].id == "lmcache-kv-layout"
    assert any("draft model with as many layers" in a for a in death.causes[0].against)
    assert "lmcache-draft-layers" not in {c.id for c in death.causes[:1]}
    core = "(EngineCore_DP0 pid=7) "
    lines = [f"{core}INFO 05-20 03:40:00 [utils.py:253] non-default args: {{'model': 'm', 'speculative_config': "
             "{'method': 'draft_model', 'model': 'm', 'num_speculative_tokens': 3}}",
             f"{core}ERROR 05-20 03:47:17 [core.py:1512] EngineCore encountered a fatal error.",
             f"{core}ERROR 05-20 03:47:17 [core.py:1512] ValueError: could not broadcast input array from shape "
             "(158,) into shape (79,)"]
    drafted = _by_rule(_write(tmp_path, lines))["SRV001"]
    assert drafted.causes[0].id == "lmcache-draft-layers"


@pytest.mark.parametrize("name, root_class", [
    # vLLM #6790 (0.5.3, CPU backend): 'Engine iteration timed out. This should never happen!' after four stats lines
    ("v0-iteration-timeout-cpu.log", "engine-iteration-timeout"),
    # vLLM #4293 (0.4.1): 'AsyncEngineDeadError: Task finished unexpectedly' chained under the loop's TimeoutError
    ("v0-loop-timeout-chained-dead.log", "engine-iteration-timeout"),
    # vLLM #13957: a bare 'TimeoutError' through run_engine_loop, under a custom logging format: no death at all
    ("v0-loop-timeout-bare-custom-wrapper.log", "engine-iteration-timeout"),
    # vLLM #10812: V0's 'Engine process (pid 76) died.' and 'MQLLMEngine is already dead, terminating server process'
    ("v0-mq-engine-process-died.log", "cause-not-in-excerpt"),
    # vLLM #14452: 'MulitprocExecutor got fatal signal from worker processes' (0.8), every worker's traceback cut
    ("v1-mp-executor-fatal-signal-8-workers.log", "cause-not-in-excerpt"),
    # vLLM #45604: csrc's CUDACHECK 'Failed: Cuda error …custom_all_reduce.cuh:455' printed and exited, alone
    ("cudacheck-custom-allreduce-alone.log", "native-crash"),
    # pytorch #175666 and gpustack #2236: the GPU worker's start-up check of free memory, alone and under a worker
    ("free-memory-check-alone.log", "gpu-memory-in-use"),
    ("free-memory-check-worker.log", "gpu-memory-in-use"),
    # vLLM #10596: V0's MQLLMEngine logs repr(OutOfMemoryError('Error in model execution …: CUDA out of memory …'))
    ("v0-mq-oom-repr-while-serving.log", "cuda-oom"),
    # vLLM #11126 (V0) and #31883 (0.13, a paste flattened onto one line): speculative configs the build rejects
    ("v0-eagle-tp-unsupported.log", "spec-unsupported"),
    ("draft-model-unsupported-flattened.log", "spec-unsupported"),
    # vLLM #28143: linear.py logs 'Failed to create unquantized linear weights: CUDA out of memory …' (no exception
    # line) just before 'EngineCore failed to start.': the root was 'not in the excerpt'
    ("oom-logged-before-start-failure.log", "cuda-oom"),
    # vLLM #35169 (ROCm): 'Memory access fault by GPU node-5 …' during FULL graph capture, after a DEBUG row exactly
    # 200 bytes wide that it was joined to as a cut rest: 'no problem found'
    ("rocm-memory-access-fault-graph-capture.log", "native-crash"),
    # ROCm/aiter #1143 (MI300X): 'Queue … aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION': nothing
    # recognised
    ("rocm-hsa-queue-abort-aiter.log", "native-crash"),
    # vLLM #2281 (0.2 under FastChat): every line behind 'DATE | ERROR | stderr | ', the background loop's traceback
    # cut before its exception: 'nothing recognised'
    ("fastchat-wrapped-v0-loop.log", "cause-not-in-excerpt"),
    # vLLM #23231 (Qwen2.5-VL on an RTX 5090): flash-attention's CHECK_CUDA 'CUDA error (…flash_fwd_launch_template.h:188):
    # invalid argument' with no prefix, between the encoder's profiling and the API server's traceback: exit 0
    ("flash-check-cuda-vision-encoder-5090.log", "native-crash"),
    # LMCache #2262: an Inductor kernel's device-side assert 'index out of bounds: 0 <= … < 32768' (a rope table of
    # 32,768 positions) right after a store at token 32,768: 'no finding', exit 0
    ("device-assert-rope-index-32768.log", "native-crash"),
    # Ray compiled graphs: 'RayChannelTimeoutError: … Timed out waiting for object available to read' (vLLM on Ray,
    # two threads) was the generic worker-exception; the engine core gave up waiting for its workers
    ("ray-cgraph-channel-timeout.log", "worker-hang"),
    ("ray-cgraph-timeout-wrapped-hint.log", "worker-hang"),
    # 'ValueError: Cannot provide a placement group requiring 4.0 GPUs … within 1800 seconds': Ray had no room
    ("ray-placement-group-4-gpus.log", "ray-placement"),
    # ray #59249: the API server's output_handler frames under vLLM's header, their indentation lost: 10 LOG001 lines
    ("output-handler-flush-frames-under-header.log", "cause-not-in-excerpt"),
    # vLLM #1214 (0.1/0.2): 'RuntimeError: CUDA error: an illegal memory access was encountered' in the sampler, a
    # bare traceback: a LOG001 warning, exit 0; the context is unusable after it
    ("v0-sampler-illegal-memory-access.log", "worker-exception"),
])
def test_older_and_self_explaining_deaths_are_deaths_with_their_root(name, root_class):
    """Real pastes whose death went unseen (exit 0 with LOG001 warnings, or 'no problem found') or whose root,
    in the excerpt, was 'not in the excerpt': V0's iteration timeout and dead-engine lines, V1 0.8's executor
    signal, CUDACHECK's exit, the free-memory check, V0's logged exception repr, rejected speculative configs."""
    found = _by_rule(HERE / name)
    assert "SRV001" in found, sorted(found)
    assert found["SRV001"].measurements["root_cause_class"] == root_class


def test_the_free_memory_check_says_which_utilization_would_have_fit():
    death = _by_rule(HERE / "free-memory-check-worker.log")["SRV001"]
    assert death.measurements["failed_at_start"] is True
    assert any("0.82 or lower would fit" in w for w in death.causes[0].for_)


def test_a_cudacheck_in_the_custom_all_reduce_names_the_switch_that_confirms_it():
    death = _by_rule(HERE / "cudacheck-custom-allreduce-alone.log")["SRV001"]
    assert any("--disable-custom-all-reduce" in w for w in death.causes[0].for_)


def test_an_out_of_memory_line_logged_before_the_death_is_its_root_not_unexplained():
    found = _by_rule(HERE / "oom-logged-before-start-failure.log")
    assert found["SRV001"].measurements["root_error"].startswith("Failed to create unquantized linear weights")
    assert "LOG001" not in found


def test_a_flush_left_tracebacks_code_rows_keep_it_one_traceback():
    """vLLM #1380 (0.2): frames and their code rows pasted flush left, 'AssertionError' last: each frame row opened a
    traceback of its own, the exception was alone, and the innermost frame named was the outermost (line 28)."""
    death = _by_rule(HERE / "v0-flush-left-traceback-assert.log")["SRV001"]
    assert death.measurements["raised_in"] == "vllm/engine/async_llm_engine.py:228 in _run_workers_async"
    assert death.measurements["fatal_frame"] == "run_engine_loop"


def test_a_v0_workers_exception_in_a_start_up_method_is_a_failure_to_start():
    """vLLM #9878 (V0, ngram): 'Exception in worker … while processing method determine_num_available_blocks' is the
    KV-cache profiling at start; it said 'clients saw errors for every request in flight'."""
    death = _by_rule(HERE / "v0-worker-exc-kv-profiling-ngram.log")["SRV001"]
    assert death.measurements["failed_at_start"] is True


@pytest.mark.parametrize("name", ["blackwell-block-fp8-not-implemented.log", "no-kernel-image-rtx5090.log",
                                  "cutlass-moe-no-sm120.log"])
def test_a_build_without_kernels_for_the_gpu_is_a_death_of_that_class(name):
    """vLLM #16515, #18995, PR #33417 (RTX 5090, sm_120): 'block scaled fp8 gemm is not implemented for Blackwell',
    'CUDA error: no kernel image is available for execution on the device', 'FlashInfer-CUTLASS MoE kernel does not
    support current device sm_120' were LOG001 warnings, exit 0: each kills the engine wherever it is raised."""
    death = _by_rule(HERE / name)["SRV001"]
    assert death.measurements["root_cause_class"] == "gpu-arch-unsupported"


def test_an_asynchronous_cuda_fault_surfaced_where_it_is_named_not_raised():
    """vLLM #13673: 'CUDA error: an illegal memory access was encountered' at a .tolist(): 'It was raised in
    gpu_model_runner.py:997', the first sync point after the kernel that faulted."""
    death = _by_rule(HERE / "v1-spec-illegal-memory-access-surfaced.log")["SRV001"]
    assert " surfaced in " in death.summary and "CUDA_LAUNCH_BLOCKING=1" in death.summary
    assert " was raised in " not in death.summary


def test_a_capture_invalidated_by_an_earlier_error_is_not_the_root():
    """vLLM #51279: 'operation failed due to a previous error during capture' (cudaErrorStreamCaptureInvalidated)
    was the 'first root error'; the error says an earlier one invalidated the capture."""
    death = _by_rule(HERE / "capture-invalidated-by-previous-error.log")["SRV001"]
    assert death.measurements["root_cause_class"] == "cause-not-in-excerpt"


def test_a_bare_date_before_each_row_of_a_traceback_is_a_wrapper():
    """bentoml/OpenLLM #746: Docker Desktop's log view copied with '2023-12-03 14:56:00 ' before every row of a
    start-up traceback, frames flush left: 'nothing recognised', exit 3. Taken off only before a traceback's row,
    an exception line or a process prefix, as the other re-logging shapes are."""
    report = analyze([str(HERE / "docker-desktop-time-prefix-flush-frames.log")])
    (death,) = [f for f in report.findings if f.rule == "SRV001"]
    assert death.measurements["failed_at_start"] is True and "relogged" in report.inputs[0]["formats"]


@pytest.mark.parametrize("name", ["hybrid-kv-disabled-connector-core.log", "hybrid-kv-disabled-bare-traceback.log",
                                  "hybrid-kv-disabled-worker-copy.log"])
def test_a_hybrid_model_whose_kv_manager_was_turned_off_fails_to_start_for_that_reason(name):
    """2026 threads (a KV connector or offloading on a hybrid model): 'ValueError: Hybrid KV cache manager is disabled
    but failed to convert the KV cache specs to one unified type' was the generic worker-exception, once 'a runtime
    crash', and under Dynamo with no log level a warning at exit 0. It is raised only while the KV cache is set up."""
    death = _by_rule(HERE / name)["SRV001"]
    assert death.measurements["root_cause_class"] == "hybrid-kv-disabled"
    assert death.measurements["failed_at_start"] is True


def test_a_worker_failed_line_cut_inside_its_quoted_error_is_still_the_death():
    """vllm-ascend #8393: ' RuntimeError: Worker failed with error 'NPUModelRunner init failed … AclmdlRICaptureBegin …
    error code is 207005' with the NPU runtime's lines of the quoted error after it (and one space pasted before it)
    was 'no problem found': the exception line's level was lost to the space and the template needs the closing quote."""
    death = _by_rule(HERE / "ascend-worker-failed-acl-capture-cut-quote.log")["SRV001"]
    assert death.measurements["root_error"].startswith("NPUModelRunner init failed")
    assert death.measurements["failed_at_start"] is True


@pytest.mark.parametrize("name", ["ascend-fftsplus-aicore-ddr-out-of-range.log", "ascend-fftsplus-aicore-only.log",
                                  # vllm-ascend: torch_npu's raw 'EZ9999: … there is an exception of aivec error'
                                  # after one access line was 'no finding', exit 0
                                  "ascend-aivec-error-raw-after-access-line.log"])
def test_an_npu_kernel_fault_inside_the_workers_traceback_is_the_root(name):
    """vllm-ascend #8818, #16654: torch_npu's '… there is an exception of fftsplus aicore error, core id is 4 …' inside
    the worker's traceback was quoted as evidence while the root was 'not in the excerpt'."""
    death = _by_rule(HERE / name)["SRV001"]
    assert death.measurements["root_cause_class"] == "native-crash"
    assert "exception of" in death.measurements["root_error"] and " error" in death.measurements["root_error"]
    assert any("ASCEND_LAUNCH_BLOCKING=1" in w for w in death.causes[0].for_)


@pytest.mark.parametrize("name, fits", [("v1-max-len-over-kv-estimate.log", "--max-model-len 15984"),
                                        ("v0-max-len-over-kv-tokens.log", "--max-model-len 2400")])
def test_a_kv_cache_too_small_for_one_request_says_which_context_fits(name, fits):
    """syv-ai #39 (V1: 'the estimated maximum model length is 15984') and gpustack #1800 (V0: '… stored in KV cache
    (2400)'): the fix said only 'lower --max-model-len'; the message gives the number."""
    death = _by_rule(HERE / name)["SRV001"]
    assert death.causes[0].id == "kv-cache-memory"
    assert any(fits in w for w in death.causes[0].for_)


def test_torch_npus_hccl_watchdog_is_read_as_the_collective_timeout():
    """vllm-ascend #382: '[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught collective
    operation timeout: WorkHCCL(SeqNum=196, …)' was 'nothing recognised', exit 3: torch_npu's header prints the month
    without its zero and its file is compiler_depend.ts, and the work item is HCCL's."""
    death = _by_rule(HERE / "ascend-hccl-watchdog-compiler-depend.log")["SRV001"]
    assert death.measurements["root_cause_class"] == "nccl-timeout"
    assert any("HCCL" in w for w in death.causes[0].for_)


def test_a_callers_rpc_that_raised_in_a_worker_is_no_engine_death():
    """verl PR #6393: 'WorkerProc hit an exception.' and its traceback through worker_busy_loop into verl's
    update_weights_from_ipc (a collective_rpc from the trainer): the worker sends the failure back to that caller and
    runs on; no step failed. It was 'The vLLM engine died … Restart the engine'. The lines stay LOG001's."""
    found = _by_rule(HERE / "verl-rpc-worker-exception-not-death.log")
    assert "SRV001" not in found and "LOG001" in found


def test_a_callers_rpc_in_a_raw_traceback_is_no_death_but_the_engine_cores_report_of_it_is(tmp_path):
    """The same shape as verl's, as a raw traceback (one record): no death. The engine core's 'Worker failed with
    error' about it is a step that failed: the death stands."""
    rows = ["Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/vllm/v1/executor/multiproc_executor.py", line 957, in worker_busy_loop',
            "    output = func(*args, **kwargs)",
            '  File "/opt/trainer/rollout/utils.py", line 201, in update_weights_from_ipc',
            "    raise RuntimeError('bad weights')",
            "RuntimeError: bad weights"]
    assert "SRV001" not in _by_rule(_write(tmp_path, rows))
    core = "RuntimeError: Worker failed with error 'bad weights', please check the stack trace above for the root cause"
    assert "SRV001" in _by_rule(_write(tmp_path, [*rows, core]))


@pytest.mark.parametrize("name, root", [
    # intel/ai-containers #914: the raw tail of EngineCore_DP0's traceback, then the API server's own exit
    ("xpu-ur-error-raw-core-then-api-exit.log", "UR error"),
    # tpu-inference #3350: Qwen3-VL on JAX, the same shape
    ("tpu-qwen3vl-raw-core-then-api-exit.log", "unsupported operand type(s) for +: 'Tensor' and 'Tensor'"),
    # vLLM PR #30346: a raw traceback through compile_grammar, nanobind's leak report interleaved
    ("xgrammar-compile-raw-core-traceback.log", "items must be a boolean or an object"),
])
def test_an_exception_the_engine_core_printed_raw_is_its_death(name, root):
    """Python prints an exception that escaped a process's target, unlogged, as the process exits; vLLM prefixes it
    with the process's name. These excerpts begin below the logged copy: they were one LOG001 warning, exit 0."""
    srv = _by_rule(HERE / name)["SRV001"]
    assert srv.severity == "error" and root in srv.measurements["root_error"]


def test_a_grammar_the_engine_core_could_not_compile_is_that_cause():
    """vLLM PR #30346: xgrammar's `json_schema_converter.cc … items must be a boolean or an object` raised through
    `compile_grammar` killed the engine core; the cause is the request's schema, not 'fix the exception'."""
    srv = _by_rule(HERE / "xgrammar-compile-raw-core-traceback.log")["SRV001"]
    assert srv.causes[0].id == "so-grammar-compile"


def test_v0s_engine_process_raising_out_of_run_mp_engine_is_a_death():
    """vLLM #12443 (AWS Neuron): `nrt_tensor_allocate status=4 message="Allocation Failure"` logged by V0's
    engine process, then its traceback through `run_mp_engine`'s `raise e`: two LOG001 warnings, exit 0."""
    srv = _by_rule(HERE / "neuron-v0-run-mp-engine-allocation.log")["SRV001"]
    assert "nrt_tensor_allocate" in srv.measurements["root_error"]


def test_v0s_worker_header_quotes_its_exception_before_the_traceback():
    """llm-compressor #54: 'Exception in worker VllmWorkerProcess while processing method load_model: Weight
    input_size_per_partition = 7392 is not divisible by min_thread_k = 128., Traceback …' was 'root not in the
    excerpt'."""
    srv = _by_rule(HERE / "v0-worker-exc-inline-marlin-tile.log")["SRV001"]
    assert srv.measurements["root_error"].startswith("Weight input_size_per_partition = 7392")


@pytest.mark.parametrize("name, need", [
    # vLLM PR #30602: 'Failed to find a kernel … Reasons: ' and one row per kernel refused, on a 7.5 GPU
    ("wna16-no-kernel-turing-reasons.log", "compute capability is 7.5 and the kernels named need 8.0"),
    # vLLM #4327: 'Minimum capability: 90. Current capability: 86.'
    ("fp8-minimum-capability-ray.log", "compute capability is 8.6 and the kernels named need 9.0"),
])
def test_a_kernel_that_needs_a_newer_gpu_is_no_kernel_for_this_gpu(name, need):
    srv = _by_rule(HERE / name)["SRV001"]
    assert srv.causes[0].id == "gpu-arch-unsupported" and any(need in w for w in srv.causes[0].for_)


def test_the_rows_of_a_message_below_its_exception_line_are_read_with_it():
    srv = _by_rule(HERE / "wna16-no-kernel-turing-reasons.log")["SRV001"]
    assert "MacheteLinearKernel requires capability 90" in srv.measurements["root_error"]


def test_an_intel_gpu_out_of_resources_is_device_memory_and_device_lost_no_python_error():
    """intel/llm-scaler #348 and #152: Level Zero's UR_RESULT_ERROR_OUT_OF_RESOURCES and UR_RESULT_ERROR_DEVICE_LOST
    were 'worker-exception: fix the exception'."""
    oor = _by_rule(HERE / "xpu-level-zero-out-of-resources.log")["SRV001"].causes[0]
    assert oor.id == "cuda-oom" and any("Intel GPU" in w for w in oor.for_)
    lost = _by_rule(HERE / "xpu-device-lost-at-start.log")["SRV001"].causes[0]
    assert lost.id == "native-crash" and any("hang or reset" in w for w in lost.for_)


def test_a_death_through_the_executors_wait_for_its_workers_is_a_worker_that_did_not_answer():
    """LMCache #4123: 'EngineCore encountered a fatal error.' and frames get_response → mq.dequeue → acquire_read, cut
    before the exception line: 'cause-not-in-excerpt' though the frames name the wait that timed out."""
    srv = _by_rule(HERE / "rpc-get-response-dequeue-cut.log")["SRV001"]
    assert srv.causes[0].id == "worker-hang" and srv.causes[0].against


def test_a_death_through_compile_grammar_cut_before_its_exception_is_the_grammar():
    """vLLM PR #47312: the fatal header and frames through `compile_grammar` → xgrammar's `compile_json_schema`, the
    exception below the cut: 'the lines show the death, not why'."""
    srv = _by_rule(HERE / "grammar-compile-frames-cut.log")["SRV001"]
    assert srv.causes[0].id == "so-grammar-compile"


def test_an_out_of_memory_that_lists_two_big_processes_says_the_gpu_is_shared():
    """vLLM #8402 (KubeRay): 'Process 4057874 has 20.04 GiB memory in use. Process 4060801 has 26.40 GiB …' on a
    47.5 GiB GPU: two replicas on one GPU, which no KV-cache setting of one of them fixes."""
    srv = _by_rule(HERE / "kuberay-oom-shared-gpu.log")["SRV001"]
    assert srv.causes[0].id == "cuda-oom"
    assert any("2 processes each hold more than a GiB" in w and "pid 4057874 20.04 GiB" in w for w in srv.causes[0].for_)


def test_a_bare_assertion_above_the_cascade_in_one_pasted_traceback_is_the_root():
    """1Cat-vLLM #567: the OffloadingConnector scheduler's frame, its bare `AssertionError`, then `EngineDeadError`:
    'root not in the excerpt', with the SIGTERM-shutdown caveat of a cascade alone."""
    srv = _by_rule(HERE / "offloading-scheduler-bare-assert-then-dead.log")["SRV001"]
    assert srv.measurements["root_error"] == "AssertionError"
    assert srv.measurements["raised_in"].endswith("offloading/scheduler.py:646 in update_state_after_alloc")


def test_zero_gpu_blocks_is_no_memory_for_the_kv_cache():
    """QAnything #302 (V0 under FastChat): '# GPU blocks: 0, # CPU blocks: 256' then a traceback cut before its
    exception: 'no finding', with a hint about a newer release."""
    srv = _by_rule(HERE / "v0-zero-gpu-blocks-fastchat.log")["SRV001"]
    assert srv.causes[0].id == "kv-cache-memory" and srv.measurements["root_error"].startswith("# GPU blocks: 0")


def test_gpu_blocks_above_zero_are_no_death(tmp_path):
    assert "SRV001" not in _by_rule(_write(tmp_path, ["INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 2048, "
                                                      "# CPU blocks: 256"]))


def test_a_death_cut_inside_pythons_import_machinery_is_an_import_failure():
    """LMCache #1455: a worker's frames through `_find_and_load` / `exec_module` into LMCache's vLLM adapter (0.3.4
    against the installed vLLM), cut before the exception: 'cause-not-in-excerpt', the import never mentioned."""
    srv = _by_rule(HERE / "lmcache-adapter-import-frames-cut.log")["SRV001"]
    assert srv.causes[0].id == "import-error" and srv.causes[0].against


@pytest.mark.parametrize("name", [
    # vLLM #30214: rows under core.py:867 (a build no catalogued release is), DeepseekV2DecoderLayer building its MLA
    # wrapper; the exception line was cut. It was two LOG001 warnings, exit 0.
    "mla-wrapper-constructor-frames-indented.log",
    # vLLM #47292: GPUModelRunnerV2.__init__ → RequestState.__init__ → UvaBuffer.__init__ on WSL2: 'UVA is not
    # available' was a death 'in serving', 'clients saw errors for every request in flight'.
    "wsl2-uva-model-runner-constructors.log",
])
def test_a_traceback_through_vllms_constructors_is_a_failure_to_start(name):
    srv = _by_rule(HERE / name)["SRV001"]
    assert srv.measurements["failed_at_start"] is True
    assert "no request was served" in srv.next_steps[-1]
    assert all("rerun the failing request" not in c.confirm_with for c in srv.causes)


def test_a_root_error_that_ends_its_sentence_gets_no_second_period():
    """vLLM #23934: 'root error: CPU backend only supports V1..'."""
    srv = _by_rule(HERE / "cpu-backend-only-v1.log")["SRV001"]
    assert "V1.." not in srv.summary and "only supports V1." in srv.summary


def test_v0s_engine_loop_cancelled_in_its_wait_is_its_iteration_timeout():
    """vLLM #6790 (0.5.3 CPU build, 'Engine iteration timed out'): CancelledError raised at run_engine_loop's
    ``await asyncio.wait(`` is the loop's asyncio_timeout cancelling the step; it was 'cause not in the excerpt'."""
    srv = _by_rule(HERE / "v0-cpu-run-engine-loop-cancelled-wait.log")["SRV001"]
    assert srv.causes[0].id == "engine-iteration-timeout"
    assert any("run_engine_loop into asyncio.wait" in w for w in srv.causes[0].for_)


def test_a_child_process_traceback_through_run_server_is_that_process_not_the_api_servers_main():
    """llm-d-modelservice #7: 'Process VLLM_DP_Coordinator:' then a traceback through ``uvloop.run(run_server(`` (the
    API server's stack, copied by fork): it was told as the API server leaving its main."""
    srv = _by_rule(HERE / "dp-coordinator-process-traceback.log")["SRV001"]
    assert srv.measurements["process"] == "VLLM_DP_Coordinator"
    assert "data-parallel coordinator" in srv.summary and "not the API server's main" in srv.summary


def test_the_shells_killed_after_vllms_lines_is_the_process_killed():
    """MU-GOT #17: '# GPU blocks: 12453, # CPU blocks: 2730' then the shell's bare 'Killed' (host RAM: the CPU swap
    space): 'no problem found', exit 0."""
    srv = _by_rule(HERE / "bare-killed-after-cpu-blocks.log")["SRV001"]
    assert srv.causes[0].id == "process-killed" and "OOM killer" in srv.summary


def test_killed_inside_a_line_is_no_death(tmp_path):
    log = _write(tmp_path, ["INFO 11-20 10:45:57 [gpu_executor.py:102] # GPU blocks: 12453, # CPU blocks: 2730",
                            "worker 3 Killed by the user, restarting it"])
    assert "SRV001" not in _by_rule(log)


@pytest.mark.parametrize("name", [
    # tenstorrent/vllm #36: MQEngineDeadError … TimeoutError('No heartbeat received from MQLLMEngine')
    "v0-no-heartbeat-mqllmengine.log",
    # vLLM #10024: RuntimeError('Engine loop has died') from run_heartbeat_loop
    "v0-engine-loop-has-died.log",
])
def test_v0s_lost_heartbeat_is_a_step_that_outlasted_it_not_an_exception_to_fix(name):
    srv = _by_rule(HERE / name)["SRV001"]
    assert srv.causes[0].id == "engine-heartbeat-lost" and "VLLM_RPC_TIMEOUT" in srv.causes[0].fix


def test_the_api_servers_engine_client_constructors_are_no_model_construction():
    """vLLM #32116: the API server's DPLBAsyncMPClient.__init__ frames (core_client.py) timing out for the engines
    were read as 'model construction' and a death: the engine core was still warming DeepGEMM up."""
    found = _by_rule(HERE / "api-server-engine-ready-timeout-deepgemm.log")
    assert "SRV001" not in found and "SRV003" in found


def test_a_death_with_no_sign_of_serving_does_not_say_clients_saw_errors(tmp_path):
    """vLLM #17386: killed during start-up (a startup probe), the traceback cut: 'clients saw errors for every request
    in flight' was said of a server that had served none."""
    srv = _by_rule(HERE / "sigterm-during-startup-compile.log")["SRV001"]
    assert "clients saw errors" not in srv.next_steps[-1] and "does not show" in srv.next_steps[-1]
    serving = _write(tmp_path, [
        "INFO 05-08 00:41:40 [loggers.py:111] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
        "throughput: 5.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%",
        "ERROR 05-08 00:41:45 [core.py:588] EngineCore encountered a fatal error.",
        "ERROR 05-08 00:41:45 [core.py:588] RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert "clients saw errors" in _by_rule(serving)["SRV001"].next_steps[-1]


def test_the_cpu_backends_kv_cache_short_of_host_memory_is_a_start_failure_with_its_numbers():
    """LMCache #3614 / vLLM #45086: 'Available memory on node 0 (149.11/692.65 GiB) on kv cache allocation is less than
    requested memory for kv (206.54/207.8 GiB)' was a worker exception 'in serving'."""
    srv = _by_rule(HERE / "cpu-backend-kv-host-memory.log")["SRV001"]
    assert srv.causes[0].id == "kv-cache-memory" and srv.measurements["failed_at_start"] is True
    assert any("206.54 GiB asked, 149.11 GiB available" in w and "VLLM_CPU_KVCACHE_SPACE" in w
               for w in srv.causes[0].for_)


def test_a_dtype_the_gpu_is_too_old_for_is_no_kernel_for_this_gpu_with_the_numbers(tmp_path):
    """bring-llms-to-nim #7 (the line as vLLM's own header prints it): 'Bfloat16 is only supported on GPUs with compute
    capability of at least 8.0. Your Quadro RTX 6000 GPU has compute capability 7.5.'"""
    log = _write(tmp_path, [
        "ERROR 07-21 14:34:24 [worker.py:62] ValueError: Bfloat16 is only supported on GPUs with compute capability of "
        "at least 8.0. Your Quadro RTX 6000 GPU has compute capability 7.5. You can use float16 instead by explicitly "
        "setting the `dtype` flag in CLI, for example: --dtype=half.",
        "ERROR 07-21 14:34:24 [core.py:866] EngineCore failed to start."])
    srv = _by_rule(log)["SRV001"]
    assert srv.causes[0].id == "gpu-arch-unsupported"
    assert any("Bfloat16 needs compute capability 8.0 and the Quadro RTX 6000 has 7.5:" in w for w in srv.causes[0].for_)


def test_the_output_handler_failing_in_the_detokenizer_is_the_api_servers_not_the_engine_cores():
    """vLLM #24211: 'AsyncLLM output_handler failed.' through process_outputs → detokenizer.update: it sent the user
    to grep for 'EngineCore encountered a fatal error', which the engine core never printed."""
    srv = _by_rule(HERE / "output-handler-detokenizer-update.log")["SRV001"]
    assert srv.causes[0].id == "detokenizer-error" and "none is to be looked for" in srv.summary


def test_an_eagle_drafters_architecture_the_registry_lacks_is_the_drafter():
    """vLLM #24967: an EAGLE-1 head declaring ``EagleQwen2ForCausalLM``, which vLLM's registry does not know: the
    server failed to start, and SRV001 said 'worker-exception' without naming the drafter."""
    srv = _by_rule(Path(__file__).resolve().parent / "real_sd" / "eagle-drafter-architecture-not-registered.log")["SRV001"]
    assert srv.causes[0].id == "drafter-error"
