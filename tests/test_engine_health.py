"""SRV001 (engine death: first root error, not the cascade; shutdown noise ignored) and SRV002 (KV saturation)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "sd"))

import sdgen  # noqa: E402

from specdiag.engine import analyze  # noqa: E402

API = "(APIServer pid=10)"
CORE = "(EngineCore pid=20)"
WORKER = "(Worker_TP1 pid=31)"


def v(proc: str, level: str, ts: str, loc: str, msg: str) -> str:
    return f"{proc} {level} 03-14 {ts} [{loc}] {msg}"


def stats(ts: str, running: int = 2, waiting: int = 0, kv: float = 30.0, pre: int = 0) -> str:
    p = f", Preemptions: {pre}" if pre else ""
    return v(API, "INFO", ts, "loggers.py:335", f"Engine 000: Avg prompt throughput: 500.0 tokens/s, Avg generation "
             f"throughput: 80.0 tokens/s, Running: {running} reqs, Waiting: {waiting} reqs{p}, GPU KV cache usage: {kv:.1f}%, "
             "Prefix cache hit rate: 10.0%")


def dead(ts: str, loc: str = "serving.py:350") -> list[str]:
    return [v(API, "ERROR", ts, loc, "Traceback (most recent call last):"),
            v(API, "ERROR", ts, loc, '  File "/vllm/v1/engine/async_llm.py", line 849, in generate'),
            v(API, "ERROR", ts, loc, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
              "trace (above) for the root cause.")]


def analyze_lines(tmp_path: Path, lines: list[str], name: str = "serve.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return analyze([str(p)])


def srv(report, code: str = "SRV001"):
    return [f for f in report.findings if f.rule == code]


def test_cuda_oom_is_the_root_not_the_engine_dead_cascade(tmp_path: Path) -> None:
    lines = [stats("10:00:00"), stats("10:00:10"),
             # an unrelated early startup error that the engine survived must not be taken as the root
             v(WORKER, "ERROR", "10:00:12", "multiproc_executor.py:1063", "WorkerProc hit an exception."),
             v(WORKER, "ERROR", "10:00:12", "multiproc_executor.py:1063", "Traceback (most recent call last):"),
             v(WORKER, "ERROR", "10:00:12", "multiproc_executor.py:1063", '  File "/vllm/v1/worker/gpu_worker.py", line 500, in execute_model'),
             v(WORKER, "ERROR", "10:00:12", "multiproc_executor.py:1063", "torch.OutOfMemoryError: CUDA out of memory. Tried to "
               "allocate 2.00 GiB. GPU 1 has a total capacity of 79.19 GiB of which 1.02 GiB is free."),
             v(CORE, "ERROR", "10:00:12", "core.py:1512", "EngineCore encountered a fatal error."),
             v(CORE, "ERROR", "10:00:12", "core.py:1512", "RuntimeError: Worker failed with error 'CUDA out of memory. Tried "
               "to allocate 2.00 GiB.', please check the stack trace above for the root cause"),
             v(API, "ERROR", "10:00:12", "async_llm.py:906", "AsyncLLM output_handler failed."),
             *dead("10:00:12"), *dead("10:00:13"), *dead("10:00:14"),
             v(API, "INFO", "10:00:20", "launcher.py:254", "[shutdown] API server: shutdown triggered")]
    (f,) = srv(analyze_lines(tmp_path, lines))
    assert f.severity == "error"
    assert f.causes[0].id == "cuda-oom"
    assert "CUDA out of memory" in f.measurements["root_error"]
    assert "OutOfMemoryError" in f.evidence[0].text
    assert f.measurements["cascade_lines"] >= 4
    assert "gpu-memory-utilization" in f.causes[0].fix or "max-num-seqs" in f.causes[0].fix


def test_raw_unprefixed_traceback_root(tmp_path: Path) -> None:
    """0.31+: tracebacks printed by Python itself carry no vLLM header."""
    lines = [stats("10:00:00"),
             "Traceback (most recent call last):",
             '  File "/vllm/v1/core/kv_cache_utils.py", line 700, in check_enough_kv_cache_memory',
             "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
             "initializing the engine.",
             v(CORE, "ERROR", "10:00:05", "core.py:1510", "EngineCore failed to start."),
             "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"]
    (f,) = srv(analyze_lines(tmp_path, lines))
    assert f.causes[0].id == "kv-cache-memory"


def test_startup_failure_without_stats(tmp_path: Path) -> None:
    lines = [v(CORE, "INFO", "09:59:00", "core.py:133", "Initializing a V1 LLM engine (v0.32.0) with config: model='m', "
               "speculative_config=None, tensor_parallel_size=1"),
             v(CORE, "ERROR", "10:00:05", "core.py:1510", "EngineCore failed to start."),
             v(CORE, "ERROR", "10:00:05", "core.py:1510", "Traceback (most recent call last):"),
             v(CORE, "ERROR", "10:00:05", "core.py:1510", "ValueError: To serve at least one request with the model's max seq "
               "len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (9.1 GiB).")]
    (f,) = srv(analyze_lines(tmp_path, lines))
    assert f.causes[0].id == "kv-cache-memory"


def test_normal_sigterm_shutdown_is_not_a_failure(tmp_path: Path) -> None:
    lines = [stats("10:00:00"), stats("10:00:10"),
             v(API, "INFO", "10:00:14", "launcher.py:254", "[shutdown] API server: shutdown triggered"),
             v(CORE, "INFO", "10:00:14", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM"),
             v(API, "ERROR", "10:00:14", "async_llm.py:906", "AsyncLLM output_handler failed."),
             *dead("10:00:14", "async_llm.py:906")]
    r = analyze_lines(tmp_path, lines)
    assert not srv(r)
    assert not [f for f in r.findings if f.severity == "error"]


def test_engine_dead_without_root_in_the_log(tmp_path: Path) -> None:
    (f,) = srv(analyze_lines(tmp_path, [stats("10:00:00"), *dead("10:00:05"), *dead("10:00:06")]))
    assert f.measurements["root_error"] == "not in the excerpt"
    # no filler: one honest "not in the excerpt" entry, whose fix says what to collect
    assert [c.id for c in f.causes] == ["cause-not-in-excerpt"]
    assert f.causes[0].confidence < 0.5
    assert "VLLM_LOGGING_LEVEL" in f.next_steps[0] and "before" in f.next_steps[0]


def test_worker_killed_without_exception(tmp_path: Path) -> None:
    lines = [stats("10:00:00"),
             v(CORE, "ERROR", "10:00:03", "multiproc_executor.py:315", "Worker proc VllmWorker-1 died unexpectedly (exit code: "
               "-9), shutting down executor."),
             *dead("10:00:04")]
    (f,) = srv(analyze_lines(tmp_path, lines))
    assert f.causes[0].id == "process-killed"


def test_old_error_before_healthy_stats_is_not_the_root(tmp_path: Path) -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in f',
             "RuntimeError: No supported cpu connector found.",
             stats("10:00:00"), stats("10:00:10"), stats("10:00:20"), stats("10:00:30"),
             v(WORKER, "ERROR", "10:00:33", "multiproc_executor.py:1063", "torch.OutOfMemoryError: CUDA out of memory. Tried "
               "to allocate 1.00 GiB."),
             v(CORE, "ERROR", "10:00:33", "core.py:1512", "EngineCore encountered a fatal error."), *dead("10:00:34")]
    (f,) = srv(analyze_lines(tmp_path, lines))
    assert f.causes[0].id == "cuda-oom"


def test_healthy_log_has_no_engine_death(tmp_path: Path) -> None:
    assert not srv(analyze_lines(tmp_path, [stats(f"10:00:{i:02d}") for i in range(0, 60, 10)]))


# --------------------------------------------------------------------------------------------- SRV002
def test_kv_saturation_with_growing_queue_and_preemptions(tmp_path: Path) -> None:
    lines = [stats("10:00:00", kv=50.0)]
    for i, (w, pre) in enumerate([(2, 0), (6, 1), (11, 3), (17, 6), (25, 9)]):
        lines.append(stats(f"10:00:{10 + i * 10:02d}", running=48, waiting=w, kv=99.1, pre=pre))
    r = analyze_lines(tmp_path, lines)
    (f,) = srv(r, "SRV002")
    assert f.severity == "warning" and f.causes[0].id == "kv-cache-undersized"
    assert f.measurements["peak_waiting"] == 25 and f.measurements["preemptions"] == 9
    assert any(m["kind"] == "preemption" for m in r.timeline["markers"])


def test_busy_but_not_saturated(tmp_path: Path) -> None:
    lines = [stats(f"10:00:{i * 10:02d}", running=40, waiting=8, kv=80.0) for i in range(6)]
    assert not srv(analyze_lines(tmp_path, lines), "SRV002")


def test_full_cache_without_queue_or_preemption_is_fine(tmp_path: Path) -> None:
    lines = [stats(f"10:00:{i * 10:02d}", running=40, waiting=0, kv=97.0) for i in range(6)]
    assert not srv(analyze_lines(tmp_path, lines), "SRV002")


def test_corpus_shutdown_noise_cases_have_no_error() -> None:
    root = Path(__file__).resolve().parent / "corpus"
    for case in ("real-cpu-pinned-cache-store-failures", "real-cpu-redis-with-local-tier-clean",
                 "real-cpu-lmcache-degraded-mode"):
        if (root / case).exists():
            r = analyze([str(root / case)])
            assert not srv(r), case


def test_sdgen_logs_have_no_engine_findings(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_text(sdgen.make_log(sdgen.dynamic_k(True)))
    r = analyze([str(p)])
    assert not [f for f in r.findings if f.rule.startswith("SRV")]


def test_v0s_own_preemption_warning_is_kv_saturation_without_three_full_intervals() -> None:
    """vLLM #5578 (~0.5): 'Sequence group 165 is preempted by PreemptionMode.SWAP mode because there is not enough KV
    cache space … total_num_cumulative_preemption=151' between two V0 stats lines was 'no problem found': SRV002
    read only three saturated intervals or V1's Preemptions counter."""
    log = Path(__file__).resolve().parent / "real_kv" / "v0-swap-preemption-warning.log"
    (f,) = srv(analyze([str(log)]), "SRV002")
    assert f.measurements["preemptions"] == 151 and f.measurements["mode"] == "SWAP"
    assert f.causes[0].id == "kv-cache-undersized"


def test_a_standing_queue_at_a_nearly_full_cache_is_saturation() -> None:
    """vLLM #43295: 95.9 %, 94.7 %, 95.3 % with 33, 30, 28 requests waiting and 9 running: 'no problem found', the
    middle interval 0.3 points under the cut. The free rest of a 95 % cache cannot admit a 16k-token prompt."""
    log = Path(__file__).resolve().parent / "real_sd" / "kv-near-full-standing-queue-mtp.log"
    (f,) = srv(analyze([str(log)]), "SRV002")
    assert f.measurements["saturated_intervals"] == 3 and "lowest 94.7%" in f.summary


def test_a_cache_near_full_without_any_interval_at_the_cut_is_not_saturation(tmp_path: Path) -> None:
    lines = [stats(f"10:00:{i * 10:02d}", running=40, waiting=8, kv=92.0) for i in range(6)]
    assert not srv(analyze_lines(tmp_path, lines), "SRV002")
