"""Engine deaths as users paste them into public issue threads (vLLM, LMCache, Ray): each excerpt here gave
exit 0, a wrong root or a made-up line before, and each test names what the lines themselves show."""

from __future__ import annotations

from pathlib import Path

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_deaths"


def _by_rule(path: Path) -> dict:
    return {f.rule: f for f in analyze([str(path)]).findings}


def _write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n")
    return log


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
    log001 = found["LOG001"]
    assert "'WorkerProc hit an exception.' ×" not in log001.summary
    assert "a line printed under 'WorkerProc hit an exception.'" in log001.summary
