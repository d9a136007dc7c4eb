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


def test_a_tail_still_accepted_is_no_finding(tmp_path):
    rates = "0.600, 0.385, 0.215, 0.108, 0.062" + ", 0.020" * 10
    assert "SD008" not in _findings(tmp_path, [LINE.format(m="24:50", rates=rates)])


def test_a_drafter_that_barely_works_is_left_to_the_acceptance_rules(tmp_path):
    rates = "0.027" + ", 0.000" * 14
    assert "SD008" not in _findings(tmp_path, [LINE.format(m="24:50", rates=rates)])
