"""Fragments users paste: crashes whose traceback header is cut off, year and version facts, spec-decode snippets.

Every case is written from the upstream message formats (vLLM ``logging_utils/dump_input.py``,
``v1/engine/core.py``, ``v1/spec_decode/metrics.py``; LMCache's formatter), not copied from a corpus file.
"""

from __future__ import annotations

from pathlib import Path

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
