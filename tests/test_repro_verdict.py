"""Verdict logic: log counting, metric rates, per-phase acceptance and the differential's words."""

from __future__ import annotations

from pathlib import Path

from specdiag.repro.verdict import (
    CellResult,
    build_verdict,
    count_log,
    differential,
    headline,
    k0_summary,
    metrics_numbers,
    phase_acceptance,
)

LOG = """\
(Worker pid=8121) [2026-03-14 10:02:23,647] LMCache INFO: Reqid: cmpl-1, Total tokens 1100, Inference Engine computed tokens: 0, LMCache hit tokens: 1024, need to load: 1024 (vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter)
[2026-03-14 10:02:24,001] LMCache WARNING: Key exists but KV cache does not exist.Might happen when the cache is evicted by redis. (redis_connector.py:308:x)
[2026-03-14 10:02:24,002] LMCache WARNING: The cache block is in the storage, but it can't be retrieved (cache_engine.py:1793:x)
[2026-03-14 10:02:24,003] LMCache ERROR: Request cmpl-1The number of retrieved tokens is less than the expected number of tokens! This should not happen! (vllm_v1_adapter.py:876:x)
[2026-03-14 10:02:24,003] LMCache ERROR: Num retrieved tokens: 256, num expected tokens: 1024 (vllm_v1_adapter.py:882:x)
(EngineCore pid=1) ERROR 03-14 10:02:24 [scheduler.py:3417] Failing 1 request(s) due to KV load failure (failure_policy=fail, 768 tokens affected). Request IDs: {'cmpl-1'}
(Worker pid=8121) [2026-03-14 10:02:25,000] LMCache INFO: Reqid: cmpl-2, Total tokens 900, Inference Engine computed tokens: 0, LMCache hit tokens: 0, need to load: 0 (vllm_v1_adapter.py:1476:x)
[2026-03-14 10:02:26,003] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: 512 (vllm_v1_adapter.py:882:x)
(EngineCore pid=1) WARNING 03-14 10:02:26 [scheduler.py:3426] Recovered from KV load failure: 2 request(s) rescheduled (512 tokens affected).
(APIServer pid=1) INFO 03-14 10:02:27 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 3.90, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: 90 tokens, Drafted: 100 tokens, Per-position acceptance rate: 1.0, 0.9, 0.8, Avg Draft acceptance rate: 90.0%
"""
SHUTDOWN = "(APIServer pid=1) ERROR 03-14 10:03:00 [async_llm.py:906] EngineCore encountered a fatal error\n"


def test_count_log_symptoms(tmp_path: Path) -> None:
    p = tmp_path / "vllm.log"
    p.write_text(LOG)
    c = count_log(p)
    assert c.shortfalls == 2
    assert c.shortfall_pairs == [(256, 1024), (0, 512)]
    assert c.missing_tokens == 768 + 512
    assert c.load_failed_requests == 1
    assert c.recovered_requests == 2
    assert c.lookups == 2 and c.lookup_total_tokens == 2000 and c.lookup_hit_tokens == 1024
    assert c.markers["cant_be_retrieved"] == 1
    assert c.markers["redis_key_evicted"] == 1
    assert (c.spec_accepted, c.spec_drafted) == (90, 100)
    assert not c.crashed


def test_count_log_ignores_shutdown_noise_after_stop_offset(tmp_path: Path) -> None:
    p = tmp_path / "vllm.log"
    p.write_text(LOG + SHUTDOWN)
    assert count_log(p).crashed
    assert not count_log(p, stop_offset=len(LOG.encode())).crashed


def test_metrics_numbers() -> None:
    text = """# HELP x
vllm:spec_decode_num_drafts_total{engine="0",model_name="repro"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="repro"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="repro"} 27.0
vllm:external_prefix_cache_queries_total{engine="0"} 1000.0
vllm:external_prefix_cache_hits_total{engine="0"} 250.0
"""
    m = metrics_numbers(text)
    assert m["acceptance_pct"] == 90.0
    assert m["mean_acceptance_length"] == 3.7
    assert m["external_prefix_cache_hit_pct"] == 25.0
    assert m["prefix_cache_hit_pct"] is None


def test_phase_acceptance_and_k0_summary() -> None:
    a, d = "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"
    snaps = [{a: 0, d: 0}, {a: 90, d: 100}, {a: 90, d: 100}, {a: 150, d: 200}]
    phases = phase_acceptance([1, 2, 1], snaps)
    assert [p["acceptance_pct"] for p in phases] == [90.0, None, 60.0]
    s = k0_summary(phases)
    assert s == {"acceptance_first_batch1_pct": 90.0, "acceptance_batch1_after_batch2_pct": 60.0,
                 "drafted_in_batch2_phases": 0, "phases_left_out": []}


def res(toggled: dict[str, str], rep: int, shortfalls: int, acc: float | None = None, failed: int = 0,
        status: str = "ok", loads: int = 10) -> CellResult:
    name = ",".join(f"{k}={v}" for k, v in toggled.items())
    return CellResult(cell=name, toggled=toggled, repeat=rep, status=status,
                      log={"shortfalls": shortfalls, "crashed": False, "lookups": 10, "lines": 200, "loads": loads,
                           "lookups_with_hits": loads, "lookup_need_load": 256 * loads,
                           "missing_tokens": 256 * min(shortfalls, loads)},
                      workload={"failed": failed, "requests": 64, "ok": 64 - failed},
                      metrics={"acceptance_pct": acc})


TOGGLES = {"redis_maxmemory": ["4mb", "1gb"], "save_decode_cache": ["false", "true"]}


def cells_from(rows: list[tuple[str, str, list[int]]]) -> list[CellResult]:
    out = []
    for mm, sdc, counts in rows:
        for rep, n in enumerate(counts):
            out.append(res({"redis_maxmemory": mm, "save_decode_cache": sdc}, rep, n))
    return out


def entry(diff: list[dict], toggle: str, symptom: str = "shortfalls") -> dict:
    return next(d for d in diff if d["toggle"] == toggle and d["symptom"] == symptom)


def conclusion(diff: list[dict], toggle: str, symptom: str = "shortfalls") -> str:
    return entry(diff, toggle, symptom)["conclusion"]


def test_four_runs_each_way_decide_the_toggle_and_clear_the_other() -> None:
    results = cells_from([("4mb", "false", [10, 12, 9, 8]), ("4mb", "true", [13, 11, 7, 9]),
                          ("1gb", "false", [0, 0, 0, 0]), ("1gb", "true", [0, 0, 0, 0])])
    diff = differential(results, TOGGLES, {"redis_maxmemory": "remote-backend-loss"})
    mm = conclusion(diff, "redis_maxmemory")
    assert entry(diff, "redis_maxmemory")["decision"] == "follows"
    assert ("follows redis_maxmemory=4mb: present in 4/4 exposed runs with redis_maxmemory=4mb, 0/4 exposed runs "
            "with redis_maxmemory=1gb (p = 0.029)") in mm
    sdc = entry(diff, "save_decode_cache")
    assert sdc["decision"] == "rejected"
    assert "does not follow save_decode_cache: save_decode_cache rejected" in sdc["conclusion"]
    assert "with redis_maxmemory=4mb: rejected: present in 4/4" in sdc["conclusion"]
    assert "is not necessary for it" in sdc["conclusion"]
    assert headline(diff) == (
        "the retrieval shortfall (retrieved < expected): follows redis_maxmemory=4mb (4/4 exposed runs with "
        "redis_maxmemory=4mb vs 0/4 with redis_maxmemory=1gb, p = 0.029, in each of 2 contexts); "
        "save_decode_cache rejected (4/4 exposed runs with save_decode_cache=false vs 4/4 with "
        "save_decode_cache=true, p = 1.00, with redis_maxmemory=4mb (1 of 2 contexts))")


def test_a_rare_symptom_with_both_values_is_not_necessary_but_not_rejected() -> None:
    """Present with both values, but in 1 of 4 runs on one side: the value is not necessary for it, yet
    flipping it made the symptom rarer, so it is not rejected as a cause."""
    results = cells_from([("4mb", "false", [10, 12, 9, 8]), ("4mb", "true", [0, 0, 3, 0])])
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "not-necessary"
    assert "rejected" not in d["conclusion"]
    assert "save_decode_cache not necessary (4/4 exposed runs with save_decode_cache=false vs 1/4" in headline(
        [d])


def test_one_run_each_way_with_the_symptom_is_not_enough_to_reject() -> None:
    results = cells_from([("4mb", "false", [10]), ("4mb", "true", [7])])
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "not-necessary"


def test_two_runs_each_way_are_undecided_and_say_how_many_would_decide() -> None:
    results = cells_from([("4mb", "false", [10, 12]), ("1gb", "false", [0, 0])])
    d = entry(differential(results, {"redis_maxmemory": ["4mb", "1gb"]}), "redis_maxmemory")
    assert d["decision"] == "undecided"
    assert "present in 2/2 exposed runs with redis_maxmemory=4mb, 0/2" in d["conclusion"]
    assert "(p = 0.33)" in d["conclusion"]
    assert "about 4 exposed runs per value would decide it" in d["conclusion"]


def test_one_exposure_against_zero_is_never_a_verdict() -> None:
    """The measured remote-eviction case: the false cell attempted no load, the true cell one that came up short."""
    results = [res({"redis_maxmemory": "4mb", "save_decode_cache": "false"}, 0, 0, loads=0),
               res({"redis_maxmemory": "4mb", "save_decode_cache": "true"}, 0, 1, loads=1)]
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "undecided" and "follows" not in d["conclusion"]
    assert "no exposed run with save_decode_cache=false" in d["conclusion"]
    assert "redis_maxmemory=4mb,save_decode_cache=false r0: not exposed, 0 loads attempted" in d["conclusion"]


def test_a_server_failed_cell_is_excluded_and_named() -> None:
    results = cells_from([("4mb", "false", [0, 0, 0, 0]), ("4mb", "true", [3, 2, 4])])
    results.append(res({"redis_maxmemory": "4mb", "save_decode_cache": "true"}, 3, 0, status="server-failed"))
    results[-1].workload = {}
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["comparisons"][0]["arms"]["true"] == {"present": 3, "exposed": 3, "left_out": [
        "redis_maxmemory=4mb,save_decode_cache=true r3: excluded, server-failed"]}
    assert "excluded, server-failed" in d["conclusion"]


def test_shortfall_that_follows_names_the_catalog_mechanism_and_the_toggle_role() -> None:
    from specdiag.analyzers.causes import CATALOG

    results = cells_from([("4mb", "false", [0, 0, 0, 0]), ("4mb", "true", [4, 4, 4, 4])])
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]},
                           {"save_decode_cache": "pin-timeout"}), "save_decode_cache")
    assert d["mechanism"]["id"] == "pin-timeout"
    assert CATALOG["pin-timeout"].mechanism in d["conclusion"]
    assert "decode-phase stores" in d["conclusion"]


def test_differential_says_absent_when_symptom_never_appears() -> None:
    results = cells_from([("1gb", "false", [0]), ("1gb", "true", [0])])
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "absent" and "absent with every value of save_decode_cache" in d["conclusion"]


def test_no_exposure_anywhere_can_neither_implicate_nor_clear() -> None:
    results = [res({"save_decode_cache": v}, 0, 0, loads=0) for v in ("false", "true")]
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "no-exposure" and "can neither implicate nor clear" in d["conclusion"]


def test_differential_toggle_needed_only_in_one_context() -> None:
    results = cells_from([("4mb", "false", [0, 0, 0, 0]), ("4mb", "true", [4, 4, 4, 4]),
                          ("1gb", "false", [0, 0, 0, 0]), ("1gb", "true", [0, 0, 0, 0])])
    text = conclusion(differential(results, TOGGLES), "save_decode_cache")
    assert "follows save_decode_cache — with redis_maxmemory=4mb: follows save_decode_cache=true" in text
    assert "with redis_maxmemory=1gb: absent" in text


def test_differential_flags_chance_when_repeats_disagree() -> None:
    results = cells_from([("4mb", "false", [3, 0]), ("4mb", "true", [0, 0])])
    d = entry(differential(results, {"save_decode_cache": ["false", "true"]}), "save_decode_cache")
    assert d["decision"] == "undecided" and "(p = 1.00)" in d["conclusion"]


def test_cell_rate_is_shortfalls_per_load_with_its_interval() -> None:
    from specdiag.repro.evidence import cell_rate

    rate = cell_rate([res({"x": "1"}, 0, 3, loads=40), res({"x": "1"}, 1, 0, loads=0)], "shortfalls")
    assert (rate["events"], rate["opportunities"]) == (3, 40)
    assert rate["text"] == "3/40 = 7.5 % (95 % CI 2.6–19.9 %)"


def test_exposure_denominators_and_null_when_not_recorded() -> None:
    from specdiag.repro.evidence import exposure

    e = exposure(res({"x": "1"}, 0, 1, loads=4))
    assert (e["requests_served"], e["loads_attempted"], e["tokens_promised"], e["tokens_retrieved"]) == (64, 4, 1024, 768)
    bare = CellResult(cell="x=1", toggled={"x": "1"}, repeat=0, status="ok")
    assert set(exposure(bare).values()) == {None}


def test_rate_conclusion_acceptance_drop() -> None:
    results = [res({"dynamic_k": "off"}, 0, 0, acc=99.0), res({"dynamic_k": "off"}, 1, 0, acc=98.5),
               res({"dynamic_k": "on"}, 0, 0, acc=70.0), res({"dynamic_k": "on"}, 1, 0, acc=72.0)]
    diff = differential(results, {"dynamic_k": ["off", "on"]})
    text = conclusion(diff, "dynamic_k", "acceptance_pct")
    assert "lower with dynamic_k=on by 27.8 points" in text and "do not overlap" in text
    same = [res({"dynamic_k": "off"}, 0, 0, acc=99.0), res({"dynamic_k": "on"}, 0, 0, acc=98.0)]
    assert "does not depend on dynamic_k" in conclusion(differential(same, {"dynamic_k": ["off", "on"]}),
                                                       "dynamic_k", "acceptance_pct")


def test_engine_findings_preferred_for_shortfalls() -> None:
    r = res({"x": "1"}, 0, shortfalls=5)
    assert r.symptom("shortfalls") == 5.0
    r.engine = [{"rule": "KV001", "count": 3}]
    assert r.symptom("shortfalls") == 3.0
    r.engine = []  # engine ran and found nothing: trust it
    assert r.symptom("shortfalls") == 0.0


def test_build_verdict_rows_and_degraded_note() -> None:
    results = cells_from([("4mb", "false", [10, 12]), ("1gb", "false", [0, 0])])
    results[0].log["markers"] = {"lmcache_degraded": 1}
    v = build_verdict({"name": "t", "toggles": {"redis_maxmemory": ["4mb", "1gb"]}}, {"kind": "cpu"},
                      [("redis_maxmemory=4mb,save_decode_cache=false", {}),
                       ("redis_maxmemory=1gb,save_decode_cache=false", {})], results)
    assert v["cells"][0]["shortfalls"] == [10.0, 12.0]
    assert v["cells"][1]["shortfalls"] == [0.0, 0.0]
    assert any("degraded mode" in n for n in v["notes"])
    assert v["conclusions"]


def test_rate_conclusion_is_computed_within_contexts() -> None:
    def hit(mm: str, sdc: str, pct: float) -> CellResult:
        r = res({"redis_maxmemory": mm, "save_decode_cache": sdc}, 0, 0)
        r.log.update({"lookup_total_tokens": 10000, "lookup_hit_tokens": int(pct * 100)})
        return r

    results = [hit("4mb", "false", 1.5), hit("4mb", "true", 2.24), hit("1gb", "false", 71.78),
               hit("1gb", "true", 71.78)]
    diff = differential(results, TOGGLES)
    sdc = conclusion(diff, "save_decode_cache", "lmcache_hit_pct")
    assert sdc.startswith("the LMCache hit rate does not depend on save_decode_cache")
    assert "[redis_maxmemory=4mb] save_decode_cache=false: 1.5%; save_decode_cache=true: 2.24%" in sdc
    mm = conclusion(diff, "redis_maxmemory", "lmcache_hit_pct")
    assert "lower with redis_maxmemory=4mb by 69.5–70.3 points" in mm


def test_load_run_roundtrip(tmp_path: Path) -> None:
    import json

    (tmp_path / "cells" / "a").mkdir(parents=True)
    (tmp_path / "cells" / "b").mkdir(parents=True)
    (tmp_path / "plan.json").write_text(json.dumps({"name": "p", "toggles": {"x": ["1", "2"]}}))
    r = res({"x": "1"}, 0, 4)
    (tmp_path / "cells" / "a" / "cell.json").write_text(json.dumps(r.to_dict()))
    (tmp_path / "cells" / "b" / "cell.json").write_text(json.dumps({"cell": "x=2", "status": "interrupted"}))
    from specdiag.repro.verdict import load_run

    plan, results = load_run(tmp_path)
    assert plan["name"] == "p"
    assert [x.symptom("shortfalls") for x in results if x.status == "ok"] == [4.0]
    assert [(x.cell, x.toggled, x.status) for x in results if x.status != "ok"] == [("x=2", {"x": "2"}, "interrupted")]


def test_no_shortfall_line_when_lmcache_never_looked_up() -> None:
    results = [res({"dynamic_k": "off"}, 0, 0, acc=100.0), res({"dynamic_k": "on"}, 0, 0, acc=100.0)]
    for r in results:
        r.log["lookups"] = 0
    diff = differential(results, {"dynamic_k": ["off", "on"]})
    assert [d["symptom"] for d in diff] == ["acceptance_pct"]
    results[0].log["lookups"] = 5
    assert "shortfalls" in [d["symptom"] for d in differential(results, {"dynamic_k": ["off", "on"]})]


def test_cli_from_run_prints_table_and_verdict(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from specdiag.cli import app

    (tmp_path / "plan.json").write_text(json.dumps({"name": "remote-eviction",
                                                    "toggles": {"redis_maxmemory": ["4mb", "1gb"]}}))
    for i, (mm, n) in enumerate((("4mb", 3), ("1gb", 0))):
        for rep in range(4):
            d = tmp_path / "cells" / f"c0{i}-r{rep}"
            d.mkdir(parents=True)
            d.joinpath("cell.json").write_text(json.dumps(res({"redis_maxmemory": mm}, rep, n).to_dict()))
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "redis_maxmemory=4mb" in r.output and "redis_maxmemory=1gb" in r.output
    assert "follows redis_maxmemory" in r.output
    v = json.loads((tmp_path / "verdict.json").read_text())
    assert v["cells"][0]["shortfalls"] == [3.0] * 4
    page = (tmp_path / "report.html").read_text()  # one self-contained page per run
    assert "redis_maxmemory" in page and "<script src" not in page
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path), "--format", "json"])
    assert json.loads(r.output)["conclusions"][0].startswith("the retrieval shortfall")


def test_cli_prints_the_verdict_first_in_100_columns_with_names_escaped_and_unstarted_cells_as_dashes(
        tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from specdiag.cli import app

    (tmp_path / "plan.json").write_text(json.dumps({"name": "p", "toggles": {"env.X": ["[red]a[/red]", "b"]}}))
    d = tmp_path / "cells" / "c00-r0"
    d.mkdir(parents=True)
    d.joinpath("cell.json").write_text(json.dumps(res({"env.X": "[red]a[/red]"}, 0, 2).to_dict()))
    r = CliRunner().invoke(app, ["repro", "--from-run", str(tmp_path)])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(x) for x in lines) <= 100
    verdict_at = next(i for i, x in enumerate(lines) if x.strip() == "Verdict")
    table_at = next(i for i, x in enumerate(lines) if "cells (one value per repeat)" in x)
    assert verdict_at < table_at
    assert "env.X=[red]a[/red]" in r.output  # printed as typed, not taken for markup
    assert "1 cell(s) never ran (excluded): env.X=b" in " ".join(r.output.split())
    row_b = next(x for x in lines if "env.X=b" in x and "│" in x)
    assert "0" not in row_b.replace("env.X=b", "") and "–" in row_b


def test_plain_progress_lines_carry_a_counter_and_a_timestamp(capsys) -> None:
    import re

    from specdiag.cli.repro import _plain_progress

    _plain_progress(3, 8, "[repro] c=[b]x[/b]: healthy after 46.0 s")
    err = capsys.readouterr().err
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ repro 3/8 \[repro\] c=\[b\]x\[/b\]: healthy after 46.0 s\n", err)
