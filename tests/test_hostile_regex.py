"""Linear-time matching: every per-line pattern, on adversarial 1 MB lines built from its own structure,
stays under 50 ms (CPU time of the test thread, best of three when over), as the code applies it."""

from __future__ import annotations

import re

import pytest
from regex_budget import SIZE, Case, budget, per_line_patterns, worst

CASES = per_line_patterns()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_per_line_pattern_backtracks_on_a_hostile_line(case: Case) -> None:
    seconds, label = worst(case, SIZE)
    assert seconds <= budget(), f"{case.name}: {seconds * 1000:.0f} ms on {label} ({case.rx.pattern!r})"


def test_every_template_and_module_pattern_is_covered() -> None:
    names = {c.name for c in CASES}
    assert "template E_GENERIC" in names and "envelope.VLLM_REST" in names and "parse._ITEM" in names
    assert "bench._START" in names and "context._SPEC_REPR" in names and "pyrepr._KV_DICT" in names
    assert len(names) > 100


@pytest.mark.parametrize("pattern,sample", [
    (r"=+ ?Serving Benchmark Result ?=+", "============ Serving Benchmark Result ============"),  # the old frame
    (r".*?LMCache v(?P<version>\d+\.\d+\.\d+\S*)", "| |   LMCache v0.5.6 (g3e11e108)"),  # the old banner
])
def test_the_generator_finds_the_quadratic_patterns_that_were_fixed(pattern: str, sample: str) -> None:
    """The old forms of fixed patterns blow the budget already on 8 KB lines: the lines are hostile enough."""
    case = Case("old", re.compile(pattern), False, sample)
    seconds, _ = worst(case, 8 * 1024, stop_at=budget())
    assert seconds > budget()


def test_ingest_cuts_a_line_before_the_bounded_patterns_see_it(tmp_path) -> None:
    from specdiag.ingest import expand_inputs, iter_records
    from specdiag.ingest.cleaner import MAX_PARSE_LINE

    log = tmp_path / "long.log"
    log.write_bytes(b"INFO 05-06 15:56:03 [x.py:1] " + b"(" * (3 * MAX_PARSE_LINE) + b"\n")
    src = expand_inputs([str(log)])[0]
    recs = list(iter_records(src))
    assert all(len(r.raw) <= MAX_PARSE_LINE for r in recs)
    assert any("cut to" in e for e in src.stats.errors)
