"""``specdiag metrics`` (table/csv/json/parquet round trip), ``report.timeline`` and the sparkline helpers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "sd"))

import sdgen  # noqa: E402

from specdiag.engine import analyze  # noqa: E402
from specdiag.metrics.collect import collect  # noqa: E402
from specdiag.metrics.collector import SERIES, MetricsCollector  # noqa: E402
from specdiag.metrics.series import SeriesTracker  # noqa: E402
from specdiag.metrics.sparkline import BARS, marker_row, sparkline, timeline_rows  # noqa: E402

pd = pytest.importorskip("pandas")


@pytest.fixture
def cli():
    """The real Typer app, in process (the subprocess form costs a pandas import per call)."""
    from typer.testing import CliRunner

    from specdiag.cli import app

    runner = CliRunner()

    def run(*args: str):
        res = runner.invoke(app, list(args))
        return res.exit_code, res.output

    return run


@pytest.fixture
def log(tmp_path: Path) -> Path:
    sc = sdgen.dynamic_k(stale=True)
    sc.ext = [0.1 + 0.01 * i for i in range(len(sc.rates))]
    sc.preempt = [i // 10 for i in range(len(sc.rates))]
    p = tmp_path / "serve.log"
    extra = ["[2026-03-14 09:02:00,100] LMCache ERROR: Num retrieved tokens: 256, num expected tokens: 512 "
             "(vllm_v1_adapter.py:882:lmcache.integration.vllm.vllm_v1_adapter)",
             "(EngineCore pid=4500) ERROR 03-14 09:02:01 [scheduler.py:3417] Failing 1 request(s) due to KV load failure "
             "(failure_policy=fail, 256 tokens affected). Request IDs: {'cmpl-1'}"]
    p.write_text(sdgen.make_log(sc) + "\n".join(extra) + "\n")
    return p


def _frame(path: Path):
    from specdiag.metrics.frames import to_frame

    return to_frame(collect([str(path)]).engines())


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_round_trip(log: Path, tmp_path: Path, fmt: str) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    from specdiag.metrics.frames import read_frame, write_frame

    df = _frame(log)
    assert len(df) == len(sdgen.dynamic_k(True).rates)
    out = tmp_path / f"m.{fmt}"
    write_frame(df, fmt, str(out))
    back = read_frame(str(out))
    pd.testing.assert_frame_equal(df, back)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_cli_round_trip(log: Path, tmp_path: Path, fmt: str, cli) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    from specdiag.metrics.frames import read_frame

    out = tmp_path / f"cli.{fmt}"
    code, err = cli("metrics", str(log), "--format", fmt, "-o", str(out))
    assert code == 0, err
    pd.testing.assert_frame_equal(read_frame(str(out)), _frame(log))


def test_frame_content(log: Path) -> None:
    df = _frame(log)
    first = df.iloc[0]
    assert first["engine"] == "engine 0" and first["running_reqs"] == 1.0
    assert 0.5 < first["draft_acceptance_rate"] < 0.7 and first["mean_acceptance_length"] > 2
    assert {"pos_0", "pos_1", "pos_2"} <= set(df.columns)
    k0 = df[df["running_reqs"] >= 2]
    assert k0["drafted_tokens"].isna().all()  # K=0 intervals: no SpecDecoding line
    assert df["t"].is_monotonic_increasing


def test_cli_table_and_stdout_formats(log: Path, cli) -> None:
    code, out = cli("metrics", str(log))
    assert code == 0 and "acceptance" in out and "engine 0" in out
    assert any(ch in out for ch in "▁▂▃▄▅▆▇█")
    code, out = cli("metrics", str(log), "--format", "json")
    data = json.loads(out)
    assert data["schema"] == "specdiag.metrics/1" and data["columns"][0] == "time"
    code, out = cli("metrics", str(log), "--format", "csv")
    assert out.splitlines()[0].startswith("time,source,engine,line,t,")


def test_cli_errors(log: Path, tmp_path: Path, cli) -> None:
    code, _o = cli("metrics", str(log), "--format", "parquet")
    assert code == 2
    code, _o = cli("metrics", str(log), "--format", "xml")
    assert code == 2
    empty = tmp_path / "empty.log"
    empty.write_text("hello\n")
    code, _o = cli("metrics", str(empty), "--format", "csv")
    assert code == 3


def test_timeline_schema(log: Path) -> None:
    r = analyze([str(log)])
    t = r.timeline
    for name in ("mean_acceptance_length", "draft_acceptance_rate", "accepted_tokens", "drafted_tokens",
                 "per_position_acceptance", "prefix_cache_hit_rate", "external_prefix_cache_hit_rate", "prompt_throughput",
                 "generation_throughput", "running_reqs", "waiting_reqs", "kv_cache_usage", "preemptions"):
        s = t["series"][name]
        assert set(s) == {"unit", "label", "points", "by"}
        assert s["points"] and all(len(p) == 2 for p in s["points"])
    assert isinstance(t["series"]["per_position_acceptance"]["points"][0][1], list)
    assert all(0 <= v <= 1 for _t, v in t["series"]["draft_acceptance_rate"]["points"])
    kinds = {m["kind"] for m in t["markers"]}
    assert {"shortfall", "load_failure", "preemption", "k0", "finding"} <= kinds
    for m in t["markers"]:
        assert set(m) >= {"t", "kind", "label", "rank", "rule"}
    assert [m["t"] for m in t["markers"]] == sorted(m["t"] for m in t["markers"])
    assert any(m["rule"] == "SD003" for m in t["markers"] if m["kind"] == "finding")
    json.dumps(t)  # serialisable
    assert r.timeline == analyze([str(log)]).timeline  # deterministic, markers not duplicated


def test_timeline_multi_engine_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(sdgen.make_log(sdgen.dynamic_k(False)))
    b.write_text(sdgen.make_log(sdgen.Scenario(rates=[0.5] * 3, running=[1] * 3)).replace("pid=4410", "pid=9"))
    t = analyze([str(a), str(b)]).timeline
    assert "draft_acceptance_rate" in t["series"]
    others = [k for k in t["series"] if k.startswith("draft_acceptance_rate@")]
    assert len(others) == 1 and t["series"][others[0]]["by"]


def test_downsampling_keeps_pooled_acceptance(tmp_path: Path) -> None:
    col = MetricsCollector(max_points=16)
    p = tmp_path / "long.log"
    p.write_text(sdgen.make_log(sdgen.dynamic_k(True, cycles=6)))
    src = collect([str(p)])
    ((_label, items),) = src.engines()
    col.series = src.series
    t = col.timeline()
    pts = t["series"]["accepted_tokens"]["points"]
    assert len(t["series"]["running_reqs"]["points"]) <= 16
    assert sum(v for _t, v in pts) == sum(iv.acc or 0 for iv in items)


def test_series_tracker_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    p.write_text(sdgen.make_log(sdgen.dynamic_k(True, cycles=20)))
    from specdiag.events import default_matcher
    from specdiag.ingest import expand_inputs, iter_records
    from specdiag.metrics.parse import spec_fields

    tr = SeriesTracker(cap=32)
    m = default_matcher()
    n = acc = 0
    for src in expand_inputs([str(p)]):
        for rec in iter_records(src):
            ev = m.match(rec)
            if ev is not None and ev.id in ("V_STATS", "V_SPEC"):
                tr.observe(ev)
                if ev.id == "V_STATS":
                    n += 1
                else:
                    acc += spec_fields(ev)["accepted_tokens"]
    (items,) = tr.engines.values()
    assert len(items) <= 32 and sum(iv.n for iv in items) == n
    assert sum(iv.acc or 0 for iv in items) == acc


def test_sparkline_basics() -> None:
    assert sparkline([], 10) == ""
    assert sparkline([0.0, 1.0], 10, 0.0, 1.0) == "▁█"
    assert sparkline([0.5, None, 0.5], 10) == "▅ ▅"
    assert len(sparkline(list(range(1000)), 40)) == 40
    assert sparkline([0.0, 1.0], 10, 0.0, 1.0, ascii_only=True) == "_#"
    assert marker_row(0, 100, 11, [(0, "!"), (100, "x")]) == "!         x"


def test_timeline_rows(log: Path) -> None:
    rows = timeline_rows(analyze([str(log)]).timeline, width=50)
    assert rows[0].startswith("draft acceptance rate")
    assert rows[-1].startswith("log time (zone unknown)")
    assert timeline_rows({}, 50) == []


def test_analyze_does_not_import_pandas(log: Path) -> None:
    code = (f"import sys; from specdiag.engine import analyze; analyze([{str(log)!r}]); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_series_names_documented() -> None:
    doc = Path(__file__).resolve().parent.parent / "docs" / "spec-decode.md"
    if doc.exists():
        text = doc.read_text()
        for name in SERIES:
            assert name in text, name


def _bench_block() -> str:
    """As vLLM's benchmarks/serve.py prints it: "{:<40} {:<10}" rows (trailing spaces included)."""
    rows = [("Successful requests:", "100"), ("Benchmark duration (s):", "12.34"),
            ("Output token throughput (tok/s):", "1036.80"), "Time to First Token", ("Mean TTFT (ms):", "120.43"),
            "Speculative Decoding", ("Acceptance rate (%):", "62.15"), ("Acceptance length:", "2.86"),
            ("Drafts:", "12345"), ("Draft tokens:", "37035"), ("Accepted tokens:", "23018"),
            "Per-position acceptance (%):", ("  Position 0:", "78.12"), ("  Position 1:", "61.05")]
    out = ["INFO 03-14 10:00:00 [api_server.py:1] noise", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    for r in rows:
        if isinstance(r, tuple):
            out.append("{:<40} {:<10}".format(*r))
        elif r.endswith(":"):
            out.append(r)
        else:
            out.append("{s:{c}^{n}}".format(s=r, n=50, c="-"))
    out.append("=" * 50)
    return "\n".join(out) + "\n"


BENCH = _bench_block()


def test_bench_serve_blocks(tmp_path: Path, cli) -> None:
    from specdiag.metrics.bench import parse_bench_lines, parse_bench_sources

    p = tmp_path / "bench.txt"
    p.write_text(BENCH + BENCH.replace("62.15", "30.00"))
    rows = parse_bench_sources([str(p)])
    assert [r["line"] for r in rows] == [2, 19]
    r = rows[0]
    assert r["successful_requests"] == 100 and r["benchmark_duration_s"] == 12.34
    assert r["output_token_throughput_tok_per_s"] == 1036.8 and r["mean_ttft_ms"] == 120.43
    assert r["acceptance_rate_pct"] == 62.15 and r["acceptance_length"] == 2.86 and r["drafts"] == 12345
    assert r["per_position_acceptance_pct_1"] == 61.05
    assert rows[1]["acceptance_rate_pct"] == 30.0
    truncated = list(parse_bench_lines(BENCH.splitlines()[:8]))
    assert truncated and "mean_ttft_ms" in truncated[0]
    code, out = cli("metrics", str(p), "--bench", "--format", "json")
    assert code == 0 and json.loads(out)[1]["acceptance_rate_pct"] == 30.0
    empty = tmp_path / "none.txt"
    empty.write_text("nothing\n")
    assert cli("metrics", str(empty), "--bench")[0] == 3


def test_the_terminal_timeline_names_the_engine_its_values_are_of_when_several_print_intervals() -> None:
    """vllm-ascend issue #12521: two API servers' engines (Engine 002, Engine 004) each print one stats and one
    SpecDecoding line. The rows show one engine's values (62 %, 2.87; the other's last line says 66 %, 2.98),
    so the timeline must say whose, and that there is another."""
    log = Path(__file__).resolve().parent / "real_sd" / "dp-two-api-servers-spec.log"
    rows = timeline_rows(analyze([str(log)]).timeline, width=50)
    assert rows[0].startswith("engine shown")
    assert "APIServer pid=95669" in rows[0] and "1 of 2 engines" in rows[0]
    assert any(r.startswith("draft acceptance rate") and r.endswith("last 62%") for r in rows)


def test_one_engines_timeline_names_no_engine(log: Path) -> None:
    assert not any(r.startswith("engine shown") for r in timeline_rows(analyze([str(log)]).timeline, width=50))


def test_v0_speculative_metrics_that_print_the_unit_twice_count_their_drafts() -> None:
    """vLLM issue #6768 (Medusa, K=16): V0 before 0.6 printed 'Number of draft tokens tokens: 42272'. Read as
    an unknown key, the intervals had no drafts and the report said 'no problem found' with 0 of 51,056
    drafted tokens accepted."""
    from specdiag.metrics.parse import parse_spec_body

    body = ("Draft acceptance rate: 0.000, System efficiency: 0.059, Number of speculative tokens: 16, Number of "
            "accepted tokens: 0, Number of draft tokens tokens: 42272, Number of emitted tokens tokens: 2642.")
    got = parse_spec_body(body)
    assert (got["drafted_tokens"], got["accepted_tokens"], got["emitted_tokens"]) == (42272, 0, 2642)
    log = Path(__file__).resolve().parent / "real_sd" / "v0-medusa-draft-tokens-tokens.log"
    sd = [f for f in analyze([str(log)]).findings if f.rule == "SD002"]
    assert sd and sd[0].measurements["drafted_tokens"] == 51056 and sd[0].measurements["accepted_tokens"] == 0


def test_a_pastes_one_interval_that_accepted_none_of_hundreds_is_a_note_not_no_problem() -> None:
    """vLLM #8620 (Medusa, K=3): one V0 metrics line, in bold, accepting 0 of 483 drafted tokens. It was 'no problem
    found': SD002 needs two intervals in a paste. One interval is a note saying so."""
    log = Path(__file__).resolve().parent / "real_sd" / "v0-medusa-one-interval-bold.log"
    (sd,) = [f for f in analyze([str(log)]).findings if f.rule == "SD002"]
    assert sd.severity == "info" and sd.measurements["drafted_tokens"] == 483


def test_a_paste_that_starts_at_a_spec_line_is_one_engine_not_two() -> None:
    """club-3090 #46: the paste starts with the SpecDecoding line of an interval whose stats line was not copied.
    It was a second, unnamed engine ('1 of 2 engines', acceptance split 38.2 % / 33.3 %); it is the same engine's
    earlier interval: 1193/3340 = 35.7 %."""
    log = Path(__file__).resolve().parent / "real_sd" / "paste-starts-at-a-spec-line.log"
    (label, items), = collect([str(log)]).engines()
    assert label == "engine 0"
    assert sum(iv.acc or 0 for iv in items) == 1193 and sum(iv.dr or 0 for iv in items) == 3340
    assert not any(r.startswith("engine shown") for r in timeline_rows(analyze([str(log)]).timeline, width=50))


def test_a_spec_line_minutes_after_the_stats_line_it_follows_is_not_that_interval() -> None:
    """vLLM #43295: lines were cut between the 10:27:23 stats line and the 10:30:33 SpecDecoding line. vLLM prints an
    interval's two lines in one call, so they were joined wrongly (an acceptance moved 3 minutes early)."""
    log = Path(__file__).resolve().parent / "real_sd" / "spec-line-minutes-after-cut.log"
    (label, items), = collect([str(log)]).engines()
    from datetime import datetime, timezone

    stats_only = [iv for iv in items if iv.dr is None]
    clock = [datetime.fromtimestamp(iv.t, timezone.utc).strftime("%H:%M:%S") for iv in stats_only]
    assert clock == ["10:27:23", "10:30:53"]
    assert len(items) == 6 and sum(iv.dr or 0 for iv in items) > 0


def test_a_full_kv_cache_with_a_standing_queue_is_saturation_even_while_it_drains() -> None:
    """vLLM #43295: KV cache usage 95.5–98.4 % in 4 of 5 intervals with 23–43 requests waiting behind 18–21 running.
    The queue shrank, no preemption counter is printed: it was 'no problem found'. A queue that stands in every
    saturated interval is the cache holding requests back; the finding says it stood, not that it grew."""
    log = Path(__file__).resolve().parent / "real_sd" / "kv-full-standing-queue.log"
    (srv,) = [f for f in analyze([str(log)]).findings if f.rule == "SRV002"]
    assert srv.measurements["saturated_intervals"] == 4 and srv.measurements["peak_waiting"] == 43
    assert "23–43 requests waited in each of them" in srv.summary and "grew" not in srv.summary


def test_a_sparkline_does_not_draw_a_change_of_a_few_hundredths_as_the_full_range() -> None:
    """Real pastes' mean acceptance length went 2.91 → 2.93 and 1.92 → 1.90: scaled from the data's own min to max,
    each was drawn lowest bar to highest. A scale taken from the data spans at least a tenth of its magnitude."""
    small = sparkline([2.91, 2.93], 10)
    assert small[0] != small[1] and abs(BARS.index(small[1]) - BARS.index(small[0])) <= 2
    assert sparkline([1.0, 3.0], 10) == BARS[0] + BARS[-1]  # a real change keeps the whole range
    assert sparkline([0.61, 0.62], 10, lo=0.0, hi=1.0) == BARS[4] * 2  # a fixed scale is the caller's


def test_a_drafter_that_collapsed_over_thousands_of_drafts_is_a_warning_from_two_intervals() -> None:
    """vLLM #46367 (GLM-5.2-FP8, MTP K=5, a broken build): 37 of 3020 and 33 of 3025 drafted tokens accepted in two
    intervals. It was an info note 'too few intervals to judge'; 1.2 % over 6,045 drafts is no traffic mix."""
    log = Path(__file__).resolve().parent / "real_sd" / "mtp-collapsed-two-intervals.log"
    (sd,) = [f for f in analyze([str(log)]).findings if f.rule == "SD004"]
    assert sd.severity == "warning" and sd.measurements["drafted_tokens"] == 6045
