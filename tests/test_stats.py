"""The small-sample statistics that repro verdicts and fleet contrasts put into words."""

import pytest

from specdiag.stats import describe_p, fisher_exact, wilson


def test_wilson_matches_published_values():
    # Newcombe (1998), table I: 15/148 → 0.0624–0.1605; 0/20 → 0–0.1611
    r = wilson(15, 148)
    assert r.low == pytest.approx(0.0624, abs=5e-4) and r.high == pytest.approx(0.1605, abs=5e-4)
    r = wilson(0, 20)
    assert r.low == 0.0 and r.high == pytest.approx(0.1611, abs=5e-4)


def test_wilson_of_no_exposure_is_the_whole_range_with_no_value():
    r = wilson(0, 0)
    assert (r.low, r.high, r.value) == (0.0, 1.0, None)
    assert "no exposure" in r.describe()


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_fisher_exact_matches_the_tea_tasting_table():
    # Fisher's lady tasting tea: [[3, 1], [1, 3]] → two-sided p = 0.4857
    assert fisher_exact(3, 1, 1, 3) == pytest.approx(0.4857, abs=1e-4)


def test_fisher_exact_of_a_complete_split():
    # 9/9 with X against 0/8 with Y: only the table seen is that extreme, 1 / C(17, 9) = 4.1e-5
    assert fisher_exact(9, 0, 0, 8) == pytest.approx(4.114e-5, rel=1e-3)


def test_one_affected_deployment_among_22_is_never_significant():
    assert fisher_exact(1, 0, 0, 21) == pytest.approx(1 / 22)
    assert fisher_exact(1, 0, 0, 21) < 0.05  # what one unit can show at best, and why a minimum count is needed
    assert fisher_exact(1, 0, 3, 18) > 0.05


def test_fisher_exact_of_empty_margins_is_one():
    assert fisher_exact(0, 0, 4, 5) == 1.0
    assert fisher_exact(0, 3, 0, 5) == 1.0


def test_p_values_print_as_reports_show_them():
    assert describe_p(0.0004) == "p < 0.001"
    assert describe_p(0.031) == "p = 0.031"
    assert describe_p(0.5) == "p = 0.50"
