"""Hostile numbers in an otherwise good log: the line is skipped or read as "unknown", never the whole run.

Each probe is one line inserted in the middle of a real corpus log. The rest of the log must give the same
rule codes as the log alone, the JSON report must say which line was skipped where a line had to be
skipped, and the CLI must exit with a contract code (never a traceback).
"""

from __future__ import annotations

import json

import pytest
from corpus_paths import CORPUS
from hypothesis import given, settings
from hypothesis import strategies as st
from logbuilder import lmc, lookup, vllm

from specdiag.engine import analyze
from specdiag.numbers import to_int

HUGE = "9" * 5000
SPEC = "SpecDecoding metrics: Mean acceptance length: {mal}, Accepted throughput: 1.00 tokens/s, " \
       "Drafted throughput: 2.00 tokens/s, Accepted: {acc} tokens, Drafted: 20 tokens, " \
       "Per-position acceptance rate: 0.500, 0.400, Avg Draft acceptance rate: 50.0%"
STATS = "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, " \
        "Running: {run} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: {hit}%"


def _args(spec: str) -> str:
    return vllm(f"non-default args: {{'model': '/m', 'speculative_config': {spec}}}", loc="api_utils.py:286")


#: probe → (line, whether the report must name the line as skipped)
PROBES: dict[str, tuple[str, bool]] = {
    "spec-mean-length-inf": (vllm(SPEC.format(mal="inf", acc=10), loc="metrics.py:120"), False),
    "spec-mean-length-nan": (vllm(SPEC.format(mal="nan", acc=10), loc="metrics.py:120"), False),
    "spec-accepted-huge": (vllm(SPEC.format(mal="2.0", acc=HUGE), loc="metrics.py:120"), False),
    "stats-running-inf": (vllm(STATS.format(run="inf", hit="1.0"), loc="loggers.py:335"), False),
    "stats-hit-rate-huge": (vllm(STATS.format(run="1", hit=HUGE), loc="loggers.py:335"), False),
    "spec-config-k-inf": (_args("{'method': 'ngram', 'num_speculative_tokens': inf}"), False),
    "spec-config-k-nan": (_args("{'method': 'ngram', 'num_speculative_tokens': nan}"), False),
    "spec-config-k-huge": (_args(f"{{'method': 'ngram', 'num_speculative_tokens': {HUGE}}}"), False),
    "dynamic-k-flat-list": (_args("{'method': 'ngram', 'num_speculative_tokens': 3, "
                                  "'num_speculative_tokens_per_batch_size': [1, 2, 3]}"), False),
    "dynamic-k-inf": (_args("{'method': 'ngram', 'num_speculative_tokens': 3, "
                            "'num_speculative_tokens_per_batch_size': [[1, inf, 3]]}"), False),
    "dynamic-k-unclosed": (_args("{'method': 'ngram', 'num_speculative_tokens': 3, "
                                 "'num_speculative_tokens_per_batch_size': [[1, 2, 3"), False),
    "pid-5000-digits": (vllm("Resolved architecture: X", proc=f"EngineCore_DP0 pid={HUGE}"), False),
    "vllm-file-line-5000-digits": (vllm("Resolved architecture: X", loc=f"model.py:{HUGE}"), False),
    "lmcache-suffix-5000-digits": (lmc("Stored 1 out of total 2 tokens", loc=f"cache_engine.py:{HUGE}"), False),
    "template-int-5000-digits": (vllm(f"Recovered from KV load failure: {HUGE} request(s) rescheduled "
                                      "(768 tokens affected).", loc="scheduler.py:3426"), True),
    # read by a rule that slices the raw line: the count is unknown, the rest of the line still counts
    "lazy-template-int-5000-digits": (lookup("cmpl-x", 4096, 0).replace("Total tokens 4096", f"Total tokens {HUGE}"),
                                      False),
    "speculative-repr-k-huge": (vllm(f"Initializing a V1 LLM engine (v0.11.0) with config: model='m', "
                                     f"speculative_config=SpeculativeConfig(method='ngram', model=None, "
                                     f"num_spec_tokens={HUGE}), tensor_parallel_size={HUGE}",
                                     loc="core.py:133"), False),
}

GOOD_LOGS = ["spec-zero-acceptance-kv-consumer/decode.log", "tp4-cpu-eviction-vllm011"]


def _with_line(tmp_path, good: str, line: str) -> str:
    src = CORPUS / good
    files = sorted(src.glob("*.log")) if src.is_dir() else [src]
    text = files[0].read_text(encoding="utf-8")
    lines = text.splitlines()
    mid = len(lines) // 2
    out = tmp_path / "probe.log"
    out.write_text("\n".join([*lines[:mid], line, *lines[mid:]]) + "\n", encoding="utf-8")
    return str(out), str(files[0])


def _codes(report) -> list[str]:
    return sorted({f.rule for f in report.findings})


@pytest.mark.parametrize("good", GOOD_LOGS)
@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_hostile_number_costs_at_most_its_own_line(tmp_path, probe: str, good: str) -> None:
    line, named = PROBES[probe]
    path, original = _with_line(tmp_path, good, line)
    baseline = analyze([original])
    report = analyze([path])
    assert _codes(report) == _codes(baseline)
    assert report.rules_failed == []
    if named:
        errors = report.inputs[0]["errors"]
        assert any(e.startswith("line ") and "skipped" in e for e in errors), errors
    json.dumps(report.to_dict(), allow_nan=False, default=str)  # no inf/nan leaks into the JSON contract


def test_the_cli_exits_with_a_contract_code_and_names_the_skipped_line(tmp_path, run_cli) -> None:
    path, _ = _with_line(tmp_path, GOOD_LOGS[1], PROBES["template-int-5000-digits"][0])
    code, out, err = run_cli("analyze", "--format", "json", path)
    assert code in (0, 1), err
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["findings"], "the good part of the log still gives its findings"
    assert any("skipped" in e for e in doc["inputs"][0]["errors"])


def test_sparklines_treat_non_finite_values_as_gaps() -> None:
    from specdiag.metrics.sparkline import sparkline

    inf, nan = float("inf"), float("nan")
    line = sparkline([1.0, inf, 2.0, nan, 3.0, -inf], 6)
    assert len(line) == 6 and line[1] == " " and line[3] == " " and line[0] != line[4]
    assert sparkline([1.0, 2.0], 4, lo=-inf, hi=nan) == sparkline([1.0, 2.0], 4)


def test_the_number_helpers_never_raise() -> None:
    from specdiag.numbers import finite_or_none, to_float, to_int

    assert to_int("9" * 5000) is None and to_int("-12") == -12 and to_int("٣") is None and to_int("1_0") is None
    assert to_float("inf") is None and to_float("nan") is None and to_float("1e999") is None
    assert to_float("inf", finite=False) == float("inf") and to_float("48.1%") == 48.1
    assert finite_or_none(float("nan")) is None and finite_or_none(True) is None and finite_or_none("3") == 3
    assert to_int("5", lo=0, hi=4) is None and to_float(b"2.5") == 2.5


def _to_int_by_text(s: bytes) -> int | None:
    """``to_int``'s rule spelled out on the decoded text (what its bytes fast path must agree with)."""
    t = s.decode("ascii", "replace").strip()
    body = t[1:] if t[:1] in "+-" else t
    if not body or len(body) > 19 or not body.isascii() or not body.isdigit():
        return None
    return int(t)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=24) | st.text(alphabet="0123456789 +-_\u00b2\u0663x", max_size=24).map(str.encode))
def test_bytes_digits_read_by_the_fast_path_agree_with_the_text_rule(raw: bytes) -> None:
    assert to_int(raw) == _to_int_by_text(raw)
