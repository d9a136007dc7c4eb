"""Key/value parsing of the stats and SpecDecoding lines of every era, and their attribution per engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "sd"))

import sdgen  # noqa: E402

from specdiag.events import default_matcher  # noqa: E402
from specdiag.metrics.collect import collect  # noqa: E402
from specdiag.metrics.parse import parse_spec_body, parse_stats_body  # noqa: E402

MATCHER = default_matcher()


def test_stats_032_cpu_kv_fetch_preemptions() -> None:
    d = parse_stats_body("Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 96.0 tokens/s, Running: 3 reqs, "
                         "Waiting: 5 reqs, KV fetch: 1 waiting to start, 2 in progress, 3 completed waiting, Preemptions: 2, "
                         "CPU KV cache usage: 97.3%, Prefix cache hit rate: 41.8%, External prefix cache hit rate: 22.5%")
    assert d["prompt_throughput"] == 812.4 and d["generation_throughput"] == 96.0
    assert d["running_reqs"] == 3 and d["waiting_reqs"] == 5 and d["preemptions"] == 2
    assert d["kv_cache_usage"] == 0.973 and d["kv_device"] == "CPU"
    assert d["prefix_cache_hit_rate"] == 0.418 and d["external_prefix_cache_hit_rate"] == 0.225
    assert (d["kv_fetch_waiting"], d["kv_fetch_in_progress"], d["kv_fetch_completed_waiting"]) == (1, 2, 3)


def test_stats_v0_swap_is_not_the_kv_cache() -> None:
    d = parse_stats_body("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.1 tokens/s, Running: 1 reqs, "
                         "Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 7.0%.")
    assert d["kv_cache_usage"] == 0.004 and d["cpu_swap_usage"] == 0.07 and d["waiting_reqs"] == 4


def test_stats_optional_fields_and_deferred() -> None:
    d = parse_stats_body("Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 0 reqs, "
                         "Waiting: 0 reqs, Deferred: 2 reqs, GPU KV cache usage: 0.0%, Corrupted: 1 reqs, MM cache hit rate: 5.0%")
    assert d["deferred_reqs"] == 2 and d["corrupted_reqs"] == 1 and "prefix_cache_hit_rate" not in d


@pytest.mark.parametrize("body,acc,dr,rate,mal,pos", [
    ("Mean acceptance length: 2.41, Accepted throughput: 58.20 tokens/s, Drafted throughput: 121.10 tokens/s, Accepted: 582 "
     "tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253, Avg Draft acceptance rate: 48.1%",
     582, 1211, 0.481, 2.41, [0.702, 0.455, 0.253]),
    ("Draft acceptance rate: 48.1%, Mean acceptance length: 2.41, Accepted: 582 tokens, Drafted: 1211 tokens, "
     "Per-position acceptance rate: 0.702, 0.455, 0.253", 582, 1211, 0.481, 2.41, [0.702, 0.455, 0.253]),
    ("Draft acceptance rate: 48.1%, Accepted: 582 tokens, Drafted: 1211 tokens", 582, 1211, 0.481, None, None),
    ("Draft acceptance rate: 0.512, Number of accepted tokens: 10, Number of draft tokens: 20, ", 10, 20, 0.512, None, None),
    ("Draft acceptance rate: 0.512, System efficiency: 0.400, Number of speculative tokens: 3, Number of accepted tokens: 100, "
     "Number of draft tokens: 200, Number of emitted tokens: 150.", 100, 200, 0.512, None, None),
    ("Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, "
     "Drafted: 0 tokens, Per-position acceptance rate: 0.000, 0.000, Avg Draft acceptance rate: nan%", 0, 0, None, 1.0, [0.0, 0.0]),
])
def test_spec_body_every_era(body, acc, dr, rate, mal, pos) -> None:
    d = parse_spec_body(body)
    assert d["accepted_tokens"] == acc and d["drafted_tokens"] == dr
    assert d.get("draft_acceptance_rate") == rate
    assert d.get("mean_acceptance_length") == mal
    assert d.get("per_position") == pos


def test_spec_body_dev_build_with_both_fields_keeps_the_first_rate() -> None:
    d = parse_spec_body("Draft acceptance rate: 50.0%, Mean acceptance length: 2.50, Accepted: 10 tokens, Drafted: 20 tokens, "
                        "Avg Draft acceptance rate: 49.0%")
    assert d["draft_acceptance_rate"] == 0.5
    assert d["num_drafts"] == pytest.approx(10 / 1.5)


@pytest.mark.parametrize("era", list(sdgen.ERAS))
def test_every_era_joins_stats_and_spec_lines(era: str, tmp_path: Path) -> None:
    sc = sdgen.Scenario(era=era, rates=[0.5, None, 0.4], running=[1, 2, 1], ext=[0.1, 0.2, 0.3], preempt=[0, 1, 2],
                        kv_fetch=True, cpu=(era == "0.32"))
    p = tmp_path / f"{era}.log"
    p.write_text(sdgen.make_log(sc))
    col = collect([str(p)])
    engines = col.engines()
    assert len(engines) == 1
    _label, items = engines[0]
    assert [iv.running for iv in items] == [1, 2, 1]
    assert [iv.has_spec for iv in items] == [True, False, True]
    assert items[0].acceptance == pytest.approx(0.5, abs=0.01)
    assert items[2].acceptance == pytest.approx(0.4, abs=0.01)
    assert items[0].kv == pytest.approx(0.15)
    if era not in ("v0",):
        assert items[0].prefix == pytest.approx(0.35)
        assert items[0].pos and len(items[0].pos) == 3
        assert items[0].mal > 1.0
    if era in ("0.11.2", "0.20", "0.25", "0.32"):
        assert items[2].ext == pytest.approx(0.3) and items[2].preempt == 2
    if era == "0.32":
        assert items[0].kv_device == "CPU"


def test_engines_aggregated_and_per_engine_attribution(tmp_path: Path) -> None:
    api = "(APIServer pid=7) INFO 03-14 09:00:{s:02d} [loggers.py:335] "
    body = ("Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 50.0 tokens/s, Running: {r} reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    spec = ("SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
            "2.00 tokens/s, Accepted: {a} tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.5, 0.5, Avg Draft "
            "acceptance rate: 50.0%")
    lines = []
    for i in range(3):
        lines.append(api.format(s=i * 10) + "Engine 000: " + body.format(r=1))
        lines.append(api.format(s=i * 10).replace("loggers.py:335", "metrics.py:120") + spec.format(a=150))
        lines.append(api.format(s=i * 10) + "Engine 001: " + body.format(r=2))
        lines.append(api.format(s=i * 10).replace("loggers.py:335", "metrics.py:120") + spec.format(a=30))
    lines.append(api.format(s=40) + "2 Engines Aggregated: " + body.format(r=3))
    p = tmp_path / "dp.log"
    p.write_text("\n".join(lines) + "\n")
    eng = dict(collect([str(p)]).engines())
    assert set(eng) == {"engine 0", "engine 1", "2 engines aggregated"}
    assert [iv.acc for iv in eng["engine 0"]] == [150, 150, 150]
    assert [iv.acc for iv in eng["engine 1"]] == [30, 30, 30]
    assert eng["2 engines aggregated"][0].running == 3


def test_spec_line_without_stats_line_still_counts(tmp_path: Path) -> None:
    p = tmp_path / "only-spec.log"
    p.write_text("INFO 03-14 09:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 10 tokens, "
                 "Drafted: 20 tokens, Avg Draft acceptance rate: 50.0%\n")
    (_label, items), = collect([str(p)]).engines()
    assert items[0].acc == 10 and items[0].running is None


def test_new_template_rows_parse_their_samples() -> None:
    for tid in ("V_ARCH", "V_SHUTDOWN_STEP", "V_SIGTERM_OLD", "V_EXC"):
        t = next(t for t in MATCHER.templates if t.id == tid)
        assert t.match(t.sample) is not None
