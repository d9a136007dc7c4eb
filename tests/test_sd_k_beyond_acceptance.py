"""SD008: per-position acceptance that is zero past some depth means K drafts tokens that are never kept."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

LINE = ("(APIServer pid=1) INFO 05-01 14:{m} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.37, "
        "Accepted throughput: 8.90 tokens/s, Drafted throughput: 97.50 tokens/s, Accepted: 89 tokens, Drafted: 975 "
        "tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 9.1%")
DEAD_TAIL = "0.600, 0.385, 0.215, 0.108, 0.062" + ", 0.000" * 10


def _findings(tmp_path: Path, lines: list[str]) -> dict:
    return findings_by_rule(write_paste(tmp_path, lines))


def test_ten_of_fifteen_positions_never_accepted_suggest_k_five(tmp_path):
    sd = _findings(tmp_path, [LINE.format(m="24:50", rates=DEAD_TAIL)])["SD008"]
    m = sd.measurements
    assert (m["k"], m["first_dead_position"], m["dead_positions"], m["drafts"]) == (15, 6, 10, 65)
    assert sd.severity == "info" and sd.causes[0].confidence == 0.6  # one interval: capped
    assert sd.next_steps[0].startswith("Set num_speculative_tokens to 5 (or 6)")


def test_three_intervals_raise_the_confidence(tmp_path):
    lines = [LINE.format(m=m, rates=DEAD_TAIL) for m in ("24:50", "25:00", "25:10")]
    assert _findings(tmp_path, lines)["SD008"].causes[0].confidence == 0.8


def test_a_tail_still_accepted_above_the_low_rate_is_no_finding(tmp_path):
    rates = "0.600, 0.385, 0.215, 0.158, 0.122, 0.110"
    assert "SD008" not in _findings(tmp_path, [LINE.format(m="24:50", rates=rates)])


def test_a_tail_rarely_accepted_is_said_as_rarely_at_a_lower_confidence(tmp_path):
    """club-3090 #105: MTP K=6 with 0.740 … 0.099, 0.057 — the maintainer: 'n=6 is over-aggressive, try n=3'. A tail
    at 2-10 % still returns that share of a token a step: rarely, not never, and throughput decides."""
    rates = "0.600, 0.385, 0.215, 0.108, 0.062" + ", 0.020" * 10
    sd = _findings(tmp_path, [LINE.format(m="24:50", rates=rates)])["SD008"]
    assert sd.measurements["first_dead_position"] == 5 and "rarely kept" in sd.summary
    assert sd.causes[0].confidence == 0.5 and any("not never" in a for a in sd.causes[0].against)


def test_a_drafter_that_barely_works_is_left_to_the_acceptance_rules(tmp_path):
    rates = "0.027" + ", 0.000" * 14
    assert "SD008" not in _findings(tmp_path, [LINE.format(m="24:50", rates=rates)])


def test_a_real_k6_tail_at_six_per_cent_is_rarely_accepted():
    from pathlib import Path

    from pasted import findings_by_rule

    log = Path(__file__).resolve().parent / "real_sd" / "mtp-k6-tail-rarely-accepted.log"
    sd = findings_by_rule(log)["SD008"]
    assert sd.measurements["k"] == 6 and sd.measurements["first_dead_position"] == 5
