"""Positive and negative cases for every speculative-decoding rule (SD001–SD007), on logs of every era."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "sd"))

import sdgen  # noqa: E402

from specdiag.engine import analyze  # noqa: E402
from specdiag.findings import SEVERITY_RANK  # noqa: E402


def run(tmp_path: Path, sc: sdgen.Scenario, name: str = "serve.log", extra: list[str] | None = None):
    p = tmp_path / name
    text = sdgen.make_log(sc)
    if extra:
        text += "\n".join(extra) + "\n"
    p.write_text(text)
    return analyze([str(p)])


def by_rule(report, rule: str):
    return [f for f in report.findings if f.rule == rule]


def worst(report, prefix: str = "SD") -> str | None:
    sev = [f.severity for f in report.findings if f.rule.startswith(prefix)]
    return max(sev, key=lambda s: SEVERITY_RANK[s]) if sev else None


# ------------------------------------------------------------------------------------------------ SD003 / SD005
@pytest.mark.parametrize("era", ["0.25", "0.32"])
def test_dynamic_k_drop_after_k0_is_stale_draft_kv(tmp_path: Path, era: str) -> None:
    r = run(tmp_path, sdgen.dynamic_k(stale=True, era=era))
    (f,) = by_rule(r, "SD003")
    assert f.severity == "warning"
    assert f.causes[0].id == "stale-draft-kv"
    m = f.measurements
    assert m["schedule"] == [[1, 1, 3], [2, 64, 0]]
    assert len(m["k0_stretches"]) == 3 and m["k0_intervals"] == 9
    assert m["acceptance_after_k0"] < 0.3 < 0.55 < m["acceptance_baseline"]
    assert m["mean_length_after_k0"] < m["mean_length_baseline"]
    assert m["after_intervals"] == 9 and len(m["after_k0_intervals"]) == 9
    # evidence: the schedule line, the K=0 stretches, the low intervals and a baseline one
    texts = [e.text for e in f.evidence]
    assert "num_speculative_tokens_per_batch_size" in texts[0]
    assert any("Running: 2 reqs" in t for t in texts)
    assert any("SpecDecoding metrics" in t for t in texts)
    assert "specdiag repro --preset dynamic-k" in f.causes[0].confirm_with
    # a drop that recovers is not a sustained change-point
    assert not by_rule(r, "SD001")
    # and it is on the timeline
    kinds = {m["kind"] for m in r.timeline["markers"]}
    assert {"k0", "finding"} <= kinds


@pytest.mark.parametrize("era", ["0.25", "0.32"])
def test_dynamic_k_steady_acceptance_gives_no_warning(tmp_path: Path, era: str) -> None:
    r = run(tmp_path, sdgen.dynamic_k(stale=False, era=era))
    assert worst(r) == "info"
    assert not by_rule(r, "SD003") and not by_rule(r, "SD001")
    (info,) = by_rule(r, "SD005")
    assert info.causes[0].id == "spec-disabled-by-schedule"
    assert info.measurements["k0_intervals"] == 9


def test_dynamic_k_with_ngram_cannot_be_stale_draft_kv(tmp_path: Path) -> None:
    r = run(tmp_path, sdgen.dynamic_k(stale=True, method="ngram"))
    (f,) = by_rule(r, "SD003")
    assert f.causes[0].id == "workload-shift"


def test_vllm_metal_proposer_strengthens_stale_draft_kv(tmp_path: Path) -> None:
    sc = sdgen.dynamic_k(stale=True)
    metal = ("(EngineCore pid=4500) INFO 03-14 08:59:10 [draft_model_proposer.py:230] Draft model loaded for speculative "
             "decoding: /models/chat-8b (layers=36, kv_heads=8, head_dim=128, patched=0, committed_blocks=64, scratch_blocks=8)")
    lines = sdgen.make_log(sc).splitlines()
    p = tmp_path / "metal.log"
    p.write_text("\n".join(lines[:4] + [metal] + lines[4:]) + "\n")
    (f,) = by_rule(analyze([str(p)]), "SD003")
    assert f.causes[0].id == "stale-draft-kv"
    assert any("vllm-metal" in x for x in f.causes[0].for_)
    assert not f.causes[0].against


def test_no_schedule_no_dynamic_k_findings(tmp_path: Path) -> None:
    sc = sdgen.dynamic_k(stale=True)
    sc.schedule = None
    r = run(tmp_path, sc)
    assert not by_rule(r, "SD003") and not by_rule(r, "SD005") and not by_rule(r, "SD006")


def test_dynamic_k_disabled_by_dp_warning(tmp_path: Path) -> None:
    extra = ["(APIServer pid=4410) WARNING 03-14 09:20:00 [vllm.py:1067] Dynamic speculative decoding is not supported with "
             "data parallelism. Disabling num_speculative_tokens_per_batch_size and falling back to static "
             "num_speculative_tokens=3."]
    r = run(tmp_path, sdgen.dynamic_k(stale=True), extra=extra)
    assert not by_rule(r, "SD003")
    (f,) = by_rule(r, "SD005")
    assert "data parallelism" in f.title


# ------------------------------------------------------------------------------------------------ SD006
def test_per_position_caveat_under_mixed_k(tmp_path: Path) -> None:
    rng = random.Random(3)
    sc = sdgen.Scenario(era="0.32", method="eagle3", draft="/models/eagle3", schedule=[[1, 4, 3], [5, 64, 1]],
                        rates=sdgen.noisy(rng, 0.5, 10), running=[2] * 5 + [8] * 5)
    r = run(tmp_path, sc)
    (f,) = by_rule(r, "SD006")
    assert f.severity == "info" and f.measurements["comparable_positions"] == 1
    assert f.causes[0].id == "per-position-denominator"


def test_no_per_position_caveat_for_k_or_zero(tmp_path: Path) -> None:
    r = run(tmp_path, sdgen.dynamic_k(stale=False))
    assert not by_rule(r, "SD006")


# ------------------------------------------------------------------------------------------------ SD002
@pytest.mark.parametrize("era", list(sdgen.ERAS))
def test_zero_acceptance_every_era(tmp_path: Path, era: str) -> None:
    sc = sdgen.Scenario(era=era, method="eagle3", draft="/models/eagle3", rates=[0.0] * 8, running=[2] * 8)
    r = run(tmp_path, sc)
    (f,) = by_rule(r, "SD002")
    assert f.severity == "warning" and f.measurements["accepted_tokens"] == 0
    assert not by_rule(r, "SD004") and not by_rule(r, "SD001")


@pytest.mark.parametrize("era", list(sdgen.ERAS))
def test_healthy_acceptance_every_era_gives_no_warning(tmp_path: Path, era: str) -> None:
    rng = random.Random(5)
    sc = sdgen.Scenario(era=era, method="eagle3", draft="/models/eagle3", rates=sdgen.noisy(rng, 0.55, 30, 0.06),
                        running=[rng.randint(1, 6) for _ in range(30)])
    r = run(tmp_path, sc)
    assert worst(r) is None, [(f.rule, f.summary) for f in r.findings]


def test_zero_acceptance_kv_consumer_eagle_is_draft_state_not_restored(tmp_path: Path) -> None:
    sc = sdgen.Scenario(era="0.25", method="eagle3", draft="/models/eagle3", kv_role="kv_consumer",
                        rates=[0.0] * 8, running=[1] * 8, ext=[0.9] * 8, prefix=[0.0] * 8)
    (f,) = by_rule(run(tmp_path, sc), "SD002")
    assert f.causes[0].id == "draft-state-not-restored"
    assert f.measurements["kv_role"] == "kv_consumer"


def test_zero_acceptance_without_connector_points_at_the_draft(tmp_path: Path) -> None:
    sc = sdgen.Scenario(era="0.32", method="draft_model", rates=[0.0] * 8, running=[1] * 8)
    (f,) = by_rule(run(tmp_path, sc), "SD002")
    assert f.causes[0].id == "draft-target-mismatch"
    assert "draft-state-not-restored" in [c.id for c in f.causes]


def test_zero_acceptance_ngram_is_unexplained(tmp_path: Path) -> None:
    sc = sdgen.Scenario(era="0.32", method="ngram", draft=None, rates=[0.0] * 8, running=[1] * 8)
    (f,) = by_rule(run(tmp_path, sc), "SD002")
    assert f.causes[0].id == "drafts-never-accepted"


def test_a_few_zero_intervals_are_not_zero_acceptance(tmp_path: Path) -> None:
    rng = random.Random(9)
    rates = sdgen.noisy(rng, 0.5, 20)
    rates[3] = rates[9] = 0.0
    sc = sdgen.Scenario(era="0.32", method="eagle3", draft="/models/eagle3", rates=rates, running=[1] * 20)
    assert not by_rule(run(tmp_path, sc), "SD002")


SPEC_LINE = ("INFO 05-06 15:56:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.01, Accepted "
             "throughput: 0.30 tokens/s, Drafted throughput: 60.00 tokens/s, Accepted: 3 tokens, Drafted: 600 tokens, "
             "Per-position acceptance rate: 0.010, 0.005, 0.000, Avg Draft acceptance rate: 0.5%")


def test_two_pasted_zero_acceptance_lines_are_zero_acceptance_with_capped_confidence(tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text("\n".join(SPEC_LINE.format(s=s) for s in (3, 13)) + "\n")
    (f,) = by_rule(analyze([str(log)]), "SD002")
    assert f.measurements["drafted_tokens"] == 1200 and f.measurements["config_in_excerpt"] is False
    assert "Method not in the log" in f.summary and f.causes[0].confidence <= 0.6


def _with_startup_noise(tmp_path: Path, sc: sdgen.Scenario, name: str):
    """The scenario as a real server log: its start prints dozens of lines (model load, KV cache, graphs)."""
    lines = sdgen.make_log(sc).splitlines()
    noise = [f"(EngineCore pid=4500) INFO 03-14 08:59:{i % 60:02d} [gpu_model_runner.py:2602] Capturing CUDA graphs "
             f"(decode, FULL): {i}/60" for i in range(60)]
    p = tmp_path / name
    p.write_text("\n".join(lines[:4] + noise + lines[4:]) + "\n")
    return analyze([str(p)])


def test_a_full_log_still_needs_three_zero_acceptance_intervals(tmp_path: Path) -> None:
    """With the server start in the log, two intervals may be a warm-up: the excerpt rule does not apply."""
    two = sdgen.Scenario(era="0.32", method="eagle3", draft="/models/eagle3", rates=[0.0] * 2, running=[1] * 2)
    assert not by_rule(_with_startup_noise(tmp_path, two, "two.log"), "SD002")
    three = sdgen.Scenario(era="0.32", method="eagle3", draft="/models/eagle3", rates=[0.0] * 3, running=[1] * 3)
    assert by_rule(_with_startup_noise(tmp_path, three, "three.log"), "SD002")


# ------------------------------------------------------------------------------------------------ SD001
def _drop(method: str, ext: bool, before: float = 0.55, after: float = 0.2, n: int = 15, seed: int = 4) -> sdgen.Scenario:
    rng = random.Random(seed)
    rates = sdgen.noisy(rng, before, n, 0.04) + sdgen.noisy(rng, after, n, 0.04)
    return sdgen.Scenario(era="0.32", method=method, draft=None if method == "ngram" else "/models/d",
                          kv_role="kv_both" if ext else None, rates=rates, running=[3] * (2 * n),
                          ext=([0.05] * n + [0.7] * n) if ext else None)


def test_sustained_drop_with_external_hits_is_draft_state_not_restored(tmp_path: Path) -> None:
    r = run(tmp_path, _drop("eagle3", ext=True))
    (f,) = by_rule(r, "SD001")
    m = f.measurements
    assert f.causes[0].id == "draft-state-not-restored"
    assert m["acceptance_before"] > 0.5 and m["acceptance_after"] < 0.25
    assert m["intervals_before"] == 15 and m["intervals_after"] == 15
    assert m["drafted_before"] > 0 and m["drafted_after"] > 0 and m["z"] >= 4
    assert m["mean_length_before"] > m["mean_length_after"]
    assert len(f.evidence) >= 3


def test_sustained_drop_with_ngram_is_workload_shift(tmp_path: Path) -> None:
    (f,) = by_rule(run(tmp_path, _drop("ngram", ext=False)), "SD001")
    assert f.causes[0].id == "workload-shift" and f.severity == "info"


def test_noisy_steady_acceptance_has_no_change_point(tmp_path: Path) -> None:
    for seed in range(5):
        r = run(tmp_path, _drop("eagle3", ext=False, before=0.5, after=0.5, seed=seed), name=f"s{seed}.log")
        assert not by_rule(r, "SD001")


def test_small_dip_is_not_a_drop(tmp_path: Path) -> None:
    assert not by_rule(run(tmp_path, _drop("eagle3", ext=False, before=0.55, after=0.5)), "SD001")


# ------------------------------------------------------------------------------------------------ SD004
def test_low_from_start_is_draft_target_mismatch(tmp_path: Path) -> None:
    rng = random.Random(2)
    sc = sdgen.Scenario(era="0.20", method="draft_model", draft="/models/other-family-0.5b",
                        rates=sdgen.noisy(rng, 0.08, 12, 0.02), running=[2] * 12)
    r = run(tmp_path, sc)
    (f,) = by_rule(r, "SD004")
    assert f.severity == "warning" and f.causes[0].id == "draft-target-mismatch"
    assert not by_rule(r, "SD001") and not by_rule(r, "SD002")


def test_ngram_with_moderate_acceptance_is_fine(tmp_path: Path) -> None:
    rng = random.Random(2)
    sc = sdgen.Scenario(era="0.20", method="ngram", draft=None, k=4, rates=sdgen.noisy(rng, 0.29, 20, 0.02),
                        running=[2] * 20)
    assert worst(run(tmp_path, sc)) is None


# ------------------------------------------------------------------------------------------------ SD007
def _hybrid(arch: str, prefix: float) -> sdgen.Scenario:
    rng = random.Random(1)
    return sdgen.Scenario(era="0.32", method="eagle3", draft="/models/eagle3", model="/models/qwen3-next-80b" if "Next" in arch
                          else "/models/qwen3-8b", arch=arch, rates=sdgen.noisy(rng, 0.5, 8), running=[2] * 8,
                          prefix=[prefix] * 8)


def test_prefix_zero_with_eagle_on_hybrid(tmp_path: Path) -> None:
    (f,) = by_rule(run(tmp_path, _hybrid("Qwen3NextForCausalLM", 0.0)), "SD007")
    assert f.causes[0].id == "eagle-block-drop" and f.severity == "warning"


@pytest.mark.parametrize("arch,prefix", [("Qwen3ForCausalLM", 0.0), ("Qwen3NextForCausalLM", 0.3)])
def test_prefix_zero_negative(tmp_path: Path, arch: str, prefix: float) -> None:
    sc = _hybrid(arch, prefix)
    if "Next" not in arch:
        sc.model = "/models/qwen3-8b"
    assert not by_rule(run(tmp_path, sc), "SD007")


# ------------------------------------------------------------------------------------------------ shared corpus
def test_corpus_spec_case(tmp_path: Path) -> None:
    case = Path(__file__).resolve().parent / "corpus" / "spec-zero-acceptance-kv-consumer"
    if not case.exists():
        pytest.skip("corpus copy not present")
    r = analyze([str(case)])
    (f,) = by_rule(r, "SD002")
    assert f.causes[0].id == "draft-state-not-restored"
    assert not by_rule(r, "KV001")


def test_corpus_healthy_ngram_has_no_sd_warning() -> None:
    case = Path(__file__).resolve().parent / "corpus" / "clean-healthy-ngram-tp2"
    if not case.exists():
        pytest.skip("corpus copy not present")
    assert worst(analyze([str(case)])) is None


def test_example_log_is_current_and_diagnosed() -> None:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "scripts"))
    import gen_sd_example

    log = root / "examples" / "dynamic-k-stale-draft" / "serve.log"
    assert log.read_text() == gen_sd_example.build(), "run scripts/gen_sd_example.py"
    r = analyze([str(log)])
    (f,) = by_rule(r, "SD003")
    assert f.causes[0].id == "stale-draft-kv" and worst(r) == "warning"


def test_example_control_log_has_no_warning(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "scripts"))
    import gen_sd_example

    p = tmp_path / "ctl.log"
    p.write_text(gen_sd_example.build(steady=True))
    assert worst(analyze([str(p)])) == "info"


def test_zero_acceptance_with_lmcache_retrieves_counts_them(tmp_path: Path) -> None:
    """Retrieve lines are only counted by ingest (high volume): SD002 reads run.count("R4")."""
    from logbuilder import retrieve

    sc = sdgen.Scenario(era="0.20", method="eagle3", draft="/models/eagle3", rates=[0.0] * 6, running=[1] * 6)
    extra = [retrieve(f"cmpl-{i}", 512, 512, 600, proc="EngineCore pid=4500") for i in range(5)]
    (f,) = by_rule(run(tmp_path, sc, extra=extra), "SD002")
    assert f.measurements["lmcache_retrieves"] == 5
    assert f.causes[0].id == "draft-state-not-restored"
    assert any("Retrieved 512 out of 512" in e.text for e in f.evidence)
