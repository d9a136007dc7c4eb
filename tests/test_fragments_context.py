"""Fragments users paste: crashes whose traceback header is cut off, year and version facts, spec-decode snippets.

Every case is written from the upstream message formats (vLLM ``logging_utils/dump_input.py``,
``v1/engine/core.py``, ``v1/spec_decode/metrics.py``; LMCache's formatter), not copied from a corpus file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdiag.engine import analyze

CORE = "(EngineCore_DP0 pid=413)"
API = "(APIServer pid=12)"
CFG = ("model='/models/qwen', speculative_config=SpeculativeConfig(method='eagle3', model='/models/d', num_spec_tokens=3), "
       "tokenizer='/models/qwen', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=2, "
       "pipeline_parallel_size=1, data_parallel_size=1, enable_prefix_caching=True, ")


def run(tmp_path: Path, lines: list[str], name: str = "paste.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return analyze([str(p)])


def srv(report) -> list:
    return [f for f in report.findings if f.rule == "SRV001"]


# ---- class 7: crashes with the header cut off ------------------------------------------------------

def dump_lines(prefix: str = CORE, version: str = "0.11.2", loc: str = "dump_input.py:72") -> list[str]:
    return [f"{prefix} ERROR 11-23 17:06:27 [{loc}] Dumping input data for V1 LLM engine (v{version}) with config: {CFG}",
            f"{prefix} ERROR 11-23 17:06:27 [{loc[:-2]}77] Dumping scheduler output for model execution: "
            "SchedulerOutput(scheduled_new_reqs=[], scheduled_cached_reqs=CachedRequestData(req_ids=['chatcmpl-a1', "
            "'chatcmpl-b2'], resumed_from_preemption=[false, false], num_computed_tokens=[812, 96]), "
            "num_scheduled_tokens={chatcmpl-a1: 4, chatcmpl-b2: 4}, total_num_scheduled_tokens=8)",
            f"{prefix} ERROR 11-23 17:06:27 [{loc[:-2]}79] Dumping scheduler stats: SchedulerStats(num_running_reqs=2)"]


def test_crash_dump_alone_is_an_engine_death_with_the_version_from_the_dump(tmp_path: Path) -> None:
    r = run(tmp_path, dump_lines())
    (f,) = srv(r)
    assert f.severity == "error"
    assert r.ctx.vllm_version == "0.11.2"
    assert r.ctx.tensor_parallel_size == 2
    assert r.ctx.speculative["num_speculative_tokens"] == 3
    assert f.measurements["crash_dump"]["failing_step"] == {"request_ids": ["chatcmpl-a1", "chatcmpl-b2"],
                                                             "scheduled_tokens": 8}
    assert f.causes[0].id == "cause-not-in-excerpt"


def test_crash_dump_without_process_prefix_and_older_location(tmp_path: Path) -> None:
    lines = [ln.split(") ", 1)[1] for ln in dump_lines(version="0.9.2", loc="dump_input.py:69")]
    r = run(tmp_path, lines)
    assert srv(r) and r.ctx.vllm_version == "0.9.2"


def test_crash_dump_then_the_exception_gives_the_root(tmp_path: Path) -> None:
    lines = [*dump_lines(),
             f"{CORE} ERROR 11-23 17:06:27 [core.py:842] EngineCore encountered a fatal error.",
             f'{CORE} ERROR 11-23 17:06:27 [core.py:842]   File "/usr/lib/python3/vllm/v1/worker/gpu_model_runner.py", '
             "line 2100, in execute_model",
             f"{CORE} ERROR 11-23 17:06:27 [core.py:842] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."]
    (f,) = srv(run(tmp_path, lines))
    assert f.causes[0].id == "cuda-oom"
    assert "out of memory" in f.measurements["root_error"]


def test_headerless_raw_traceback_through_the_busy_loop_is_a_crash(tmp_path: Path) -> None:
    lines = ['  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
             "    engine_core.run_busy_loop()",
             '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 728, in run_busy_loop',
             "    self._process_engine_step()",
             "RuntimeError: CUDA error: an illegal memory access was encountered"]
    (f,) = srv(run(tmp_path, lines))
    assert f.severity == "error"
    assert "illegal memory access" in f.measurements["root_error"]
    assert f.measurements["fatal_frame"] == "run_engine_core"


def test_headered_frames_without_traceback_line_are_a_crash(tmp_path: Path) -> None:
    h = f"{CORE} ERROR 05-06 15:56:03 [core.py:710]"
    lines = [f'{h}   File "/opt/vllm/vllm/v1/engine/core.py", line 795, in run_busy_loop',
             f"{h}     self._process_engine_step()",
             f'{h}   File "/opt/vllm/vllm/v1/engine/core.py", line 830, in _process_engine_step',
             f"{h}     outputs, model_executed = self.step_fn()"]
    (f,) = srv(run(tmp_path, lines))
    assert f.causes[0].id == "cause-not-in-excerpt"


def test_headerless_traceback_outside_the_engine_loops_is_not_a_crash(tmp_path: Path) -> None:
    """A handled error (a request validation, a client-side retry) also prints frames: no engine loop, no death."""
    lines = ['  File "/usr/lib/python3/site-packages/vllm/entrypoints/openai/serving_chat.py", line 300, in create_chat_completion',
             "    request_prompts = await self._preprocess_chat(...)",
             "ValueError: This model's maximum context length is 4096 tokens."]
    assert not srv(run(tmp_path, lines))


def test_engine_death_lines_of_every_era_without_a_cause(tmp_path: Path) -> None:
    for i, death in enumerate([
        f"{API} ERROR 08-25 08:44:40 [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, shutting down client.",
        f"{CORE} ERROR 08-25 08:44:40 [core.py:710] EngineCore encountered a fatal error.",
        f"{API} ERROR 08-25 08:44:40 [async_llm.py:480] AsyncLLM output_handler failed.",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ]):
        (f,) = srv(run(tmp_path, [death], name=f"d{i}.log"))
        assert f.severity == "error"
        assert f.measurements["root_error"] == "not in the excerpt"
        assert [c.id for c in f.causes] == ["cause-not-in-excerpt"], death


# ---- class 9: spec decode on fragments ---------------------------------------------------------------

def spec_line(ts: str, acc: int, dr: int, pos: list[float], mal: float, prefix: str = API) -> str:
    rates = ", ".join(f"{p:.3f}" for p in pos)
    return (f"{prefix} INFO 05-04 {ts} [metrics.py:100] SpecDecoding metrics: Mean acceptance length: {mal:.2f}, "
            f"Accepted throughput: {acc / 10:.2f} tokens/s, Drafted throughput: {dr / 10:.2f} tokens/s, Accepted: {acc} "
            f"tokens, Drafted: {dr} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
            f"{100 * acc / dr:.1f}%")


def low_lines(n: int, k: int = 4) -> list[str]:
    """``n`` intervals of an EAGLE-style drafter accepting about 6 % of ``k``-token drafts."""
    return [spec_line(f"02:{i:02d}:00", 60, 1000, [0.2, 0.03, 0.01, 0.0][:k] + [0.0] * (k - 4), 1.24)
            for i in range(n)]


def test_k_is_read_from_the_number_of_per_position_rates(tmp_path: Path) -> None:
    lines = [spec_line("01:06:43", 540, 1500, [0.71, 0.50, 0.30, 0.17, 0.12, 0.05], 2.95),
             spec_line("01:06:53", 500, 1500, [0.70, 0.45, 0.28, 0.15, 0.09, 0.04], 2.71)]
    r = run(tmp_path, lines)
    assert r.ctx.speculative["num_speculative_tokens"] == 6
    assert "per-position" in r.ctx.speculative["num_speculative_tokens_source"]
    assert r.ctx.spec_intervals == 2 and r.ctx.startup_seen is False
    assert not [f for f in r.findings if f.severity in ("warning", "error")]  # healthy: nothing to report


def test_configured_k_wins_over_the_per_position_count(tmp_path: Path) -> None:
    args = (f"{API} INFO 05-04 01:00:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            "{'method': 'ngram', 'num_speculative_tokens': 3, 'prompt_lookup_max': 4}}")
    r = run(tmp_path, [args, spec_line("01:06:43", 300, 900, [0.5, 0.3, 0.2], 2.0)])
    assert r.ctx.speculative["num_speculative_tokens"] == 3
    assert r.ctx.speculative["num_speculative_tokens_source"] == "config"
    assert r.ctx.startup_seen is True


def test_v0_speculative_metrics_line_gives_k(tmp_path: Path) -> None:
    line = ("INFO 05-04 01:06:43 metrics.py:460] Speculative metrics: Draft acceptance rate: 0.612, System efficiency: "
            "0.501, Number of speculative tokens: 4, Number of accepted tokens: 2448, Number of draft tokens: 4000, "
            "Number of emitted tokens: 3000.")
    assert run(tmp_path, [line]).ctx.speculative["num_speculative_tokens"] == 4


def test_three_grepped_low_lines_do_not_establish_low_from_the_start(tmp_path: Path) -> None:
    r = run(tmp_path, low_lines(3))
    sd4 = [f for f in r.findings if f.rule == "SD004"]
    assert [f.severity for f in sd4] == ["info"]
    assert "too few" in sd4[0].title and sd4[0].measurements["intervals"] == 3
    assert all(c.confidence <= 0.3 for c in sd4[0].causes)
    assert not [f for f in r.findings if f.severity in ("warning", "error")]


def test_low_over_enough_intervals_without_the_start_is_low_throughout_the_excerpt(tmp_path: Path) -> None:
    (f,) = [f for f in run(tmp_path, low_lines(8)).findings if f.rule == "SD004"]
    assert f.severity == "warning"
    assert "excerpt" in f.title and f.measurements["start_in_excerpt"] is False
    assert f.causes[0].confidence <= 0.5


def test_low_from_the_start_needs_the_startup_lines(tmp_path: Path) -> None:
    args = (f"{API} INFO 05-04 01:59:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            "{'method': 'eagle3', 'model': '/d', 'num_speculative_tokens': 4}}")
    (f,) = [f for f in run(tmp_path, [args, *low_lines(8)]).findings if f.rule == "SD004"]
    assert f.title == "Speculative-decoding acceptance is low from the start"
    assert f.measurements["start_in_excerpt"] is True


def test_zero_acceptance_fragment_caps_confidence_and_does_not_claim_from_the_start(tmp_path: Path) -> None:
    lines = [spec_line(f"03:00:{i}0", 0, 900, [0.0, 0.0, 0.0], 1.0) for i in range(4)]
    (f,) = [f for f in run(tmp_path, lines).findings if f.rule == "SD002"]
    assert f.causes[0].confidence <= 0.6
    assert f.measurements["config_in_excerpt"] is False
    assert not any("from the first interval" in w for c in f.causes for w in c.for_)
    assert "startup lines" in f.summary


# ---- class 6: no invented facts (year, version) -----------------------------------------------------

def _lmc(ts: str, msg: str = "Storing KV cache for 256 out of 256 tokens", loc: str = "vllm_v1_adapter.py:1200") -> str:
    return f"[{ts}] LMCache INFO: {msg} ({loc}:lmcache.integration.vllm.vllm_v1_adapter)"


def _died(ts: str) -> str:
    return f"{CORE} ERROR {ts} [core.py:710] EngineCore encountered a fatal error."


def records_of(tmp_path: Path, lines: list[str]):
    from specdiag.ingest import expand_inputs, iter_records

    p = tmp_path / "y.log"
    p.write_text("\n".join(lines) + "\n")
    (src,) = expand_inputs([str(p)])
    return list(iter_records(src))


def test_vllm_lines_take_the_year_of_a_later_lmcache_line_of_the_same_input(tmp_path: Path) -> None:
    r = run(tmp_path, [_died("05-06 10:00:05"), _lmc("2024-05-06 10:00:09,001")])
    (f,) = srv(r)
    assert f.measurements["died_at"] == "2024-05-06 10:00:05"
    assert r.ctx.log_year == 2024 and "same input" in r.ctx.log_year_source


def test_no_year_in_the_input_means_no_year_in_the_output(tmp_path: Path) -> None:
    r = run(tmp_path, [_died("05-06 10:00:05")])
    (f,) = srv(r)
    assert f.measurements["died_at"] == "05-06 10:00:05"
    assert "log time (zone unknown)" in f.summary
    d = r.ctx.to_dict()
    assert d["log_year"] is None and d["log_year_source"].startswith("unknown")
    assert d["time_basis"] == "log time (zone unknown)"


def test_december_lines_before_a_january_lmcache_line_belong_to_the_year_before(tmp_path: Path) -> None:
    from specdiag.timeutil import fmt_time, rec_time

    recs = records_of(tmp_path, [_died("12-31 23:59:58"), _lmc("2025-01-01 00:00:01,000"), _died("01-01 00:00:05")])
    assert [fmt_time(rec_time(r)) for r in recs] == ["2024-12-31 23:59:58", "2025-01-01 00:00:01", "2025-01-01 00:00:05"]


def test_one_wrap_at_new_year_after_the_year_is_known(tmp_path: Path) -> None:
    from specdiag.timeutil import fmt_time, rec_time

    recs = records_of(tmp_path, [_lmc("2024-12-31 23:59:50,000"), _died("12-31 23:59:58"), _died("01-01 00:00:03"),
                                 _died("01-01 00:10:00")])
    assert [fmt_time(rec_time(r))[:10] for r in recs] == ["2024-12-31", "2024-12-31", "2025-01-01", "2025-01-01"]


def test_unknown_year_still_orders_across_new_year(tmp_path: Path) -> None:
    from specdiag.timeutil import fmt_time, rec_time

    recs = records_of(tmp_path, [_died("12-31 23:59:58"), _died("01-01 00:00:03")])
    t = [rec_time(r) for r in recs]
    assert t[1] - t[0] == 5.0
    assert [fmt_time(x) for x in t] == ["12-31 23:59:58", "01-01 00:00:03"]


def test_an_inferred_date_is_never_in_the_future() -> None:
    import time
    from datetime import datetime, timedelta, timezone

    from specdiag.timeutil import parse_ts

    soon = datetime.now(timezone.utc) + timedelta(days=20)
    t = parse_ts(soon.strftime("%m-%d %H:%M:%S"), soon.year)
    assert t is not None and t <= time.time() + 2 * 86400


def test_a_future_year_in_the_input_is_not_taken_as_the_log_year() -> None:
    from datetime import datetime, timezone

    from specdiag.timeutil import NOMINAL_YEAR, initial_year

    future = datetime.now(timezone.utc).year + 3
    assert initial_year(f"INFO 05-06 10:00:00 [x.py:1] a\n[{future}-05-06 10:00:01,000] LMCache INFO: b".encode()) == NOMINAL_YEAR
    assert initial_year(b"INFO 05-06 10:00:00 [x.py:1] a\n[2025-05-06 10:00:01,000] LMCache INFO: b") == 2025


#: the adapter's error pair as 0.3.12+ prints it
_PAIR_TEXT = {"R1": "Request cmpl-1The number of retrieved tokens is less than the expected number of tokens! "
                    "This should not happen!",
              "R2": "Num retrieved tokens: 0, num expected tokens: 256"}


def _fp(lines: dict[str, int], date: str | None):
    from specdiag.fingerprints import VersionFingerprint

    fp = VersionFingerprint()
    for tid, ln in lines.items():
        fp.observe(tid, "vllm_v1_adapter.py", ln, "lmcache.integration.vllm.vllm_v1_adapter",
                   f"{date} 10:00:00,000" if date else None, _PAIR_TEXT[tid])
    return fp.infer()


def test_fingerprint_drops_releases_published_after_the_log() -> None:
    pair = {"R1": 875, "R2": 881}  # 0.5.1..0.5.4 by line numbers
    assert _fp(pair, None)[0] == "0.5.1..0.5.4"
    assert _fp(pair, "2026-09-30")[0] == "0.5.1..0.5.4"
    version, _, note = _fp(pair, "2026-07-15")  # 0.5.3 and 0.5.4 came out in August 2026
    assert version == "0.5.1..0.5.2"
    assert "0.5.3..0.5.4 excluded" in note and "2026-07-15" in note


def test_fingerprint_older_than_every_matching_release_is_a_development_build() -> None:
    version, _, note = _fp({"R1": 875, "R2": 881}, "2026-05-01")
    assert version == "~0.5.1..0.5.4"
    assert "development build" in note


def test_fingerprint_date_comes_from_the_log_end_to_end(tmp_path: Path) -> None:
    head = "Request cmpl-1The number of retrieved tokens is less than the expected number of tokens! This should not happen!"
    lines = [f"[2026-07-15 10:00:00,000] LMCache ERROR: {head} (vllm_v1_adapter.py:875:lmcache.integration.vllm.vllm_v1_adapter)",
             "[2026-07-15 10:00:00,000] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: 256 "
             "(vllm_v1_adapter.py:881:lmcache.integration.vllm.vllm_v1_adapter)"]
    r = run(tmp_path, lines)
    assert r.ctx.lmcache_version == "0.5.1..0.5.2"
    assert "excluded" in r.ctx.lmcache_version_note


def test_vendored_adapter_line_numbers_give_the_vllm_version_when_no_line_prints_it(tmp_path: Path) -> None:
    lg = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter"
    lines = [f"[2026-08-01 10:00:00,000] LMCache ERROR: The number of retrieved tokens is less than the expected number "
             f"of tokens! This should not happen! (vllm_v1_adapter.py:897:{lg})",
             f"[2026-08-01 10:00:00,000] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: 256 "
             f"(vllm_v1_adapter.py:901:{lg})"]
    r = run(tmp_path, lines)
    # the catalog's vendored adapter prints these two at 897/901 in 0.19.0-0.28.0 (0.23.0 at 896/900)
    assert r.ctx.vllm_version == "0.19.0..0.28.0"
    assert "vendored" in r.ctx.vllm_version_source
    assert r.ctx.lmcache_version is None  # the vendored copy's numbers say nothing about LMCache's release
    # 0.19 defaults to recompute, 0.20+ to fail: a range across the change states no default
    assert r.ctx.kv_load_failure_policy is None
    # the same numbers in a log written before v0.25.0 came out can only be 0.19.0..0.24.0
    early = run(tmp_path, [ln.replace("2026-08-01", "2026-05-01") for ln in lines], name="early.log")
    assert early.ctx.vllm_version == "0.19.0..0.24.0" and "excluded" in early.ctx.vllm_version_source
    # the pair at 0.31.0+'s lines, after 0.25.0's publication: the newest releases, whose default is fail
    late = run(tmp_path, [ln.replace(":897:", ":912:").replace(":901:", ":916:") for ln in lines], name="late.log")
    assert late.ctx.vllm_version == "0.31.0..0.34.0" and late.ctx.kv_load_failure_policy == "fail"


def test_a_printed_vllm_version_wins_over_the_vendored_line_numbers(tmp_path: Path) -> None:
    lg = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter"
    lines = [f"{API} INFO 06-01 09:59:00 [api_server.py:1272] vLLM API server version 0.14.1",
             f"[2026-06-01 10:00:00,000] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: 256 "
             f"(vllm_v1_adapter.py:901:{lg})"]
    r = run(tmp_path, lines)
    assert r.ctx.vllm_version == "0.14.1" and r.ctx.vllm_version_source is None


def _drop_lines() -> list[str]:
    accs = [600, 610, 590, 605, 595, 600, 200, 210, 190, 205, 195, 200]
    return [spec_line(f"04:{i:02d}:00", a, 1000, [a / 1000 + 0.2, a / 1000 - 0.1, a / 1000 - 0.3][:3], 1 + a / 333)
            for i, a in enumerate(accs)]


def test_change_point_on_an_excerpt_without_config_is_capped(tmp_path: Path) -> None:
    (f,) = [f for f in run(tmp_path, _drop_lines()).findings if f.rule == "SD001"]
    assert f.measurements["config_in_excerpt"] is False
    assert f.causes[0].confidence <= 0.6
    # a dynamic-K schedule the excerpt could not show is not evidence against stale draft KV
    stale = next(c for c in f.causes if c.id == "stale-draft-kv")
    assert not any("no K=0 range in a dynamic-K schedule" == a for a in stale.against)


def test_change_point_with_the_config_keeps_its_evidence(tmp_path: Path) -> None:
    args = (f"{API} INFO 05-04 03:59:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            "{'method': 'eagle3', 'model': '/d', 'num_speculative_tokens': 3}}")
    (f,) = [f for f in run(tmp_path, [args, *_drop_lines()]).findings if f.rule == "SD001"]
    assert f.measurements["config_in_excerpt"] is True
    stale = next(c for c in f.causes if c.id == "stale-draft-kv")
    assert "no K=0 range in a dynamic-K schedule" in stale.against


def test_worker_death_in_an_excerpt_is_not_called_a_kill_with_certainty(tmp_path: Path) -> None:
    died = f"{CORE} ERROR 08-25 08:44:40 [multiproc_executor.py:283] Worker proc VllmWorker-1 died unexpectedly, shutting down executor."
    (f,) = srv(run(tmp_path, [died]))
    assert f.causes[0].id == "process-killed" and f.causes[0].confidence <= 0.6
    killed = died.replace("unexpectedly,", "unexpectedly (exit code: -9),")
    (g,) = srv(run(tmp_path, [killed], name="k.log"))
    assert g.causes[0].id == "process-killed" and g.causes[0].confidence > 0.6
    assert any("SIGKILL" in w for w in g.causes[0].for_)


def test_tp_size_from_rank_labels_is_marked_as_a_lower_bound(tmp_path: Path) -> None:
    line = ("(Worker_TP2 pid=31) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: 256 "
            "(vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)")
    r = run(tmp_path, [line])
    assert r.ctx.tensor_parallel_size == 3
    assert r.ctx.tensor_parallel_size_source.startswith("rank labels") and "TP ≥ 3" in r.ctx.tensor_parallel_size_source
    stated = run(tmp_path, [CFG_LINE, line], name="cfg.log")
    assert stated.ctx.tensor_parallel_size == 2 and stated.ctx.tensor_parallel_size_source == "config"


CFG_LINE = f"{CORE} INFO 05-06 15:50:00 [core.py:133] Initializing a V1 LLM engine (v0.11.0) with config: {CFG}"


def test_collector_wrapper_timestamps_give_the_year(tmp_path: Path) -> None:
    import json

    body = "ERROR 03-14 10:00:05 [core.py:710] EngineCore encountered a fatal error."
    for name, line in (("k.log", f"2025-03-14T10:00:05.123456789Z {body}"),
                       ("d.log", json.dumps({"log": body + "\n", "stream": "stderr", "time": "2025-03-14T10:00:05.1Z"}))):
        r = run(tmp_path, [line], name=name)
        (f,) = srv(r)
        assert f.measurements["died_at"] == "2025-03-14 10:00:05", name
        assert r.ctx.log_year == 2025


def test_a_bare_assertion_error_ends_the_traceback_and_is_the_root(tmp_path: Path) -> None:
    h = "(VllmWorker rank=0 pid=1574) ERROR 07-25 03:42:09 [multiproc_executor.py:546]"
    headered = [f"{h} WorkerProc hit an exception.",
                f'{h}   File "/opt/vllm/vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py", line 966, in _read_blocks',
                f"{h}     assert num_local_blocks <= num_remote_blocks",
                f"{h} AssertionError"]
    (f,) = srv(run(tmp_path, headered))
    assert f.measurements["root_error"] == "AssertionError"
    assert f.causes[0].id == "worker-exception"
    raw = ['  File "/opt/vllm/vllm/v1/executor/multiproc_executor.py", line 540, in worker_busy_loop',
           "    output = func(*args, **kwargs)",
           "AssertionError"]
    (g,) = srv(run(tmp_path, raw, name="raw.log"))
    assert g.measurements["root_error"] == "AssertionError"


# ---- DFlash/DSpark after KV-connector restores: the drafter never saw the restored context ------------------
def _restore_paste(method: str, intervals: int) -> list[str]:
    args = (f"{API} INFO 05-04 01:00:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            f"{{'method': '{method}', 'model': '/m-{method}', 'num_speculative_tokens': 4}}, 'kv_transfer_config': "
            "{'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}}")
    retrieve = ("(Worker pid=31) [2026-05-04 01:05:59,100] LMCache INFO: [req_id=chatcmpl-7a] Retrieved 8192 out of 8192 "
                "required tokens (from 8192 total tokens). size: 1.0000 gb, cost 41.2210 ms, throughput: 24.2600 GB/s; "
                "(cache_engine.py:985:lmcache.v1.cache_engine)")
    spec = [spec_line(f"01:06:{10 * i:02d}", 40, 2000, [0.02, 0.01, 0.005, 0.005], 1.08) for i in range(intervals)]
    return [args, retrieve, *spec]


def test_dflash_low_acceptance_after_lmcache_restores_points_to_unwritten_drafter_context(tmp_path: Path) -> None:
    for n, name in ((2, "few.log"), (6, "more.log")):
        r = run(tmp_path, _restore_paste("dflash", n), name=name)
        (f,) = [f for f in r.findings if f.rule == "SD004"]
        top = f.causes[0]
        assert top.id == "draft-state-not-restored", name
        assert any("#47930" in x and "1 LMCache retrieve line(s)" in x for x in top.for_)
        assert all(c.confidence <= 0.5 for c in f.causes)


def test_model_draft_without_restores_keeps_the_mismatch_first(tmp_path: Path) -> None:
    lines = [line for line in _restore_paste("dflash", 6) if "Retrieved" not in line]
    lines[0] = lines[0].replace(", 'kv_transfer_config': {'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}", "")
    (f,) = [f for f in run(tmp_path, lines).findings if f.rule == "SD004"]
    assert f.causes[0].id == "draft-target-mismatch"


# ---- a short paste with the config line on top is still a paste --------------------------------------------
def test_config_line_on_top_of_two_zero_acceptance_lines_is_a_capped_sd002(tmp_path: Path) -> None:
    args = (f"{API} INFO 05-04 01:00:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            "{'method': 'eagle3', 'model': '/m-eagle3', 'num_speculative_tokens': 3}, 'kv_transfer_config': "
            "{'kv_connector': 'NixlConnector', 'kv_role': 'kv_consumer'}}")
    zero = [spec_line(f"01:06:{10 * i:02d}", 0, 1200, [0.0, 0.0, 0.0], 1.0) for i in range(2)]
    (f,) = [f for f in run(tmp_path, [args, *zero]).findings if f.rule == "SD002"]
    assert f.causes[0].id == "draft-state-not-restored" and f.causes[0].confidence <= 0.7
    assert "short paste (3 lines)" in f.summary and "kv_role kv_consumer" in f.summary


# ---- the startup lines of a spec-decode paste place the LMCache build -----------------------------------------
def test_layout_and_speculative_echo_lines_give_the_lmcache_version(tmp_path: Path) -> None:
    spec = ("[2026-09-14 09:20:11,100] LMCache INFO: vllm_config.speculative_config: SpeculativeConfig(method='draft_model', "
            "model='/models/d', num_spec_tokens=3) (utils.py:577:lmcache.integration.vllm.utils)")
    layout = ("[2026-09-14 09:20:11,302] LMCache INFO: num_layer: 36, chunk_size: 256, num_kv_head (per gpu): 8, head_size: "
              "128, hidden_dim (D) for KV (per gpu): 1024, use mla: False, kv shape: (36, 2, 256, 8, 128), num_draft_layers: 0 "
              "(vllm_service_factory.py:111:lmcache.integration.vllm.vllm_service_factory)")
    # lmcache-cli 0.5.7.dev0 (LMCache's tree after 0.5.6) still prints both at 0.5.6's lines
    assert run(tmp_path, [spec, layout]).ctx.lmcache_version == "0.5.6..0.5.7.dev0"
    r = run(tmp_path, [layout], name="layout.log")
    assert r.ctx.lmcache_version == "0.4.3..0.5.7.dev0"  # 0.4.3 (not in the old tables) has it there too
    assert r.ctx.lmcache_version_evidence == ["vllm_service_factory.py:111"]


# ---- stale draft KV after K=0 in a paste: upstream is not affected, the platform line decides ----------------
def _k0_paste(metal: bool) -> list[str]:
    args = (f"{API} INFO 05-04 01:00:00 [api_utils.py:286] non-default args: {{'model': '/m', 'speculative_config': "
            "{'method': 'draft_model', 'model': '/d', 'num_speculative_tokens': 3, "
            "'num_speculative_tokens_per_batch_size': [[1, 1, 3], [2, 64, 0]]}}")
    lines = [args]
    if metal:
        lines.append(f"{CORE} INFO 05-04 01:00:05 [draft_model_proposer.py:230] Draft model loaded for speculative decoding: "
                     "/d (layers=2, kv_heads=2, head_dim=64, patched=0, committed_blocks=4, scratch_blocks=2)")
    for i, (running, acc) in enumerate([(1, 700), (1, 690), (1, 710), (2, None), (2, None), (1, 300), (1, 280), (1, 310)]):
        lines.append(f"{API} INFO 05-04 01:1{i}:02 [loggers.py:335] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg "
                     f"generation throughput: 96.0 tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                     "12.3%, Prefix cache hit rate: 41.8%")
        if acc is not None:
            r = acc / 500
            lines.append(spec_line(f"01:1{i}:02", acc, 1500, [0.55 * r, 0.28 * r, 0.17 * r], 1 + acc / 500))
    return lines


def test_drop_after_k0_in_a_paste_without_the_platform_caps_stale_draft_kv(tmp_path: Path) -> None:
    r = run(tmp_path, _k0_paste(metal=False))
    for rule in ("SD003", "SD001"):
        (f,) = [f for f in r.findings if f.rule == rule]
        stale = next(c for c in f.causes if c.id == "stale-draft-kv")
        assert stale.confidence <= 0.5, rule
        assert any("does not show which proposer runs" in x for x in stale.for_), rule
        assert any("Draft model loaded for speculative decoding" in s for s in f.next_steps), rule


def test_drop_after_k0_with_the_vllm_metal_proposer_line_is_not_capped(tmp_path: Path) -> None:
    (f,) = [f for f in run(tmp_path, _k0_paste(metal=True)).findings if f.rule == "SD003"]
    assert f.causes[0].id == "stale-draft-kv" and f.causes[0].confidence > 0.5
    assert not any("does not show which proposer runs" in x for x in f.causes[0].for_)


def _dump(rank: int, instance: str, cpu: float) -> str:
    return (f"(Worker_TP{rank} pid=76{rank}) [2026-05-06 15:31:29,512] LMCache INFO: Creating LMCacheEngine with "
            f"config: {{'chunk_size': 256, 'max_local_cpu_size': {cpu}, 'lmcache_instance_id': '{instance}'}} "
            "(cache_engine.py:87:lmcache.v1.cache_engine)")


@pytest.mark.parametrize(("cpus", "differ"), [((40.0, 40.0, 40.0), False), ((40.0, 40.0, 20.0), True),
                                              ((40.0, 20.0, 40.0), True)])
def test_the_first_lmcache_config_dump_is_the_config_and_any_later_one_that_differs_is_noted(tmp_path, cpus, differ):
    """Each rank prints its dump with its own instance id: that alone is no difference; another value in any
    later dump is. The config read is the first dump's (a deployment keeps that one, not every dump)."""
    r = run(tmp_path, [_dump(rank, f"inst-{rank}", cpu) for rank, cpu in enumerate(cpus)])
    assert r.ctx.lmcache_configs_differ is differ
    assert r.ctx.lmcache_config["max_local_cpu_size"] == cpus[0] and r.ctx.lmcache_config["lmcache_instance_id"] == "inst-0"


def test_another_programs_version_at_the_end_of_a_message_is_not_vllms(tmp_path: Path) -> None:
    """NCCL closes its error text with 'NCCL version 2.21.5'; only vLLM's logo row names vLLM's version."""
    line = ("ERROR 03-19 10:48:40 worker_base.py:467] torch.distributed.DistBackendError: NCCL error in: "
            "NCCLUtils.hpp:317, unhandled system error, NCCL version 2.21.5")
    assert run(tmp_path, [line]).to_dict()["context"]["vllm_version"] is None
    logo = f"{API} INFO 05-04 09:02:41 [api_utils.py:339]  \u2584\u2584 \u2584\u2588 \u2588     \u2588  version 0.25.0"
    assert run(tmp_path, [logo, line]).to_dict()["context"]["vllm_version"] == "0.25.0"


def test_a_bare_exception_line_is_the_root_error(tmp_path: Path) -> None:
    """``raise Exception("…")`` prints 'Exception: …': an exception line though its name ends in nothing."""
    lines = [f"{CORE} ERROR 11-14 08:06:26 [core.py:708] EngineCore failed to start.",
             f'{CORE} ERROR 11-14 08:06:26 [core.py:708]   File "/srv/vllm/v1/executor/multiproc_executor.py", line 97, '
             "in _init_executor",
             f"{CORE} ERROR 11-14 08:06:26 [core.py:708] Exception: Unsupported remote backend: mooncakestore"]
    [death] = srv(run(tmp_path, lines))
    assert death.measurements["root_error"] == "Unsupported remote backend: mooncakestore"


def test_a_worker_start_wrapper_is_no_root_error(tmp_path: Path) -> None:
    """vLLM's ``wait_for_ready`` raises 'WorkerProc initialization failed due to an exception in a background
    process' when a worker failed to start: the worker's own traceback holds the cause, not this line."""
    lines = [f"{CORE} ERROR 11-14 08:06:26 [core.py:708] EngineCore failed to start.",
             f"{CORE} ERROR 11-14 08:06:26 [core.py:708] Exception: WorkerProc initialization failed due to an exception "
             "in a background process. See stack trace for root cause."]
    [death] = srv(run(tmp_path, lines))
    assert death.measurements["root_error"] == "not in the excerpt"
    assert death.measurements["failed_at_start"] is True
    assert "no request was served" in death.next_steps[-1]


@pytest.mark.parametrize("engine", ["an LLM engine (v0.6.6)", "a V0 LLM engine (v0.8.3)"])
def test_a_v0_engines_config_line_gives_its_version_and_parallelism(tmp_path: Path, engine: str) -> None:
    line = (f"INFO 01-14 03:08:50 llm_engine.py:234] Initializing {engine} with config: model='/models/q', "
            "speculative_config=None, tokenizer='/models/q', tensor_parallel_size=4, pipeline_parallel_size=1, "
            "enable_prefix_caching=False, ")
    ctx = run(tmp_path, [line]).to_dict()["context"]
    assert (ctx["vllm_version"], ctx["tensor_parallel_size"]) == (engine.split("(v")[1][:-1], 4)


def test_v0_speculative_metrics_are_totals_since_start_not_per_interval(tmp_path: Path) -> None:
    """V0's collector prints running totals: 1 of 5, then 1 of 15 is one token accepted of 15 drafted."""
    line = ("INFO 02-06 03:{m} metrics.py:475] Speculative metrics: Draft acceptance rate: {rate}, System efficiency: "
            "0.167, Number of speculative tokens: 5, Number of accepted tokens: 1, Number of draft tokens: {dr}, "
            "Number of emitted tokens: {em}.")
    lines = [line.format(m="05:53", rate="0.200", dr=5, em=1), line.format(m="18:09", rate="0.067", dr=15, em=3)]
    report = run(tmp_path, lines)
    [f] = [x for x in report.findings if x.rule.startswith("SD")]
    assert (f.measurements["accepted_tokens"], f.measurements["drafted_tokens"]) == (1, 15)
    restarted = lines + [line.format(m="30:00", rate="0.500", dr=2, em=2)]  # a counter below the last: a new engine
    [g] = [x for x in run(tmp_path, restarted).findings if x.rule.startswith("SD")]
    assert (g.measurements["accepted_tokens"], g.measurements["drafted_tokens"]) == (2, 17)


def test_kv_caches_outnumbering_lmcaches_layers_point_at_the_drafters_layers(tmp_path: Path) -> None:
    """numpy's 'could not broadcast input array from shape (81,) into shape (80,)' in LMCache's pointer setup:
    one KV cache more than the layers LMCache sized for, as an EAGLE layer on a build that counted none."""
    lines = [f"{CORE} ERROR 05-06 15:56:03 [core.py:1512] EngineCore encountered a fatal error.",
             f"{CORE} ERROR 05-06 15:56:03 [core.py:1512] ValueError: could not broadcast input array from shape (81,) "
             "into shape (80,)"]
    [death] = srv(run(tmp_path, lines))
    assert death.causes[0].id == "lmcache-draft-layers"
    assert any("does not show speculative_config" in a for a in death.causes[0].against)
    same = lines[:1] + [lines[1].replace("(81,)", "(79,)")]  # fewer caches than pointers: no drafter in it
    assert srv(run(tmp_path, same))[0].causes[0].id == "worker-exception"
