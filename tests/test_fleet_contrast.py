"""Fleet contrasts rest on enough affected deployments, carry their exact-test p, and say what they leave out."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest

from specdiag.fleet.contrast import MIN_AFFECTED, TOP_PER_RULE, contrast
from specdiag.fleet.model import FleetReport, FleetRow
from specdiag.report.fleet import render_fleet_json, render_fleet_markdown, render_fleet_text
from specdiag.report.fleet_html import render_fleet_html
from specdiag.stats import ALPHA, fisher_exact


def _fleet(n: int, **columns: dict[int, str]) -> dict[str, dict[str, str]]:
    """``n`` deployments ``d00…``; each column maps deployment index → value (others get ``"base"``)."""
    return {f"d{i:02d}": {name: values.get(i, "base") for name, values in columns.items()} for i in range(n)}


def _ids(*idx: int) -> set[str]:
    return {f"d{i:02d}" for i in idx}


def _report(attrs: dict[str, dict[str, str]], affected: dict[str, set[str]]) -> FleetReport:
    return FleetReport([FleetRow(d, [], None, []) for d in attrs], contrast(attrs, affected))


def test_one_affected_deployment_among_22_draws_no_contrast():
    # d00 differs from the 21 others in 24 config values: each "separates" it at p = 1/22 < 0.05
    attrs = _fleet(22, **{f"key{k}": {0: f"odd{k}"} for k in range(24)})
    assert fisher_exact(1, 0, 0, 21) < ALPHA  # why a floor is needed at all
    rep = _report(attrs, {"KV002": _ids(0)})
    (rc,) = rep.contrast_rules
    assert not rc.drawn and rc.shown == () and rep.contrast == []
    assert rc.heading() == (f"KV002: no contrast can be drawn: only 1 affected deployment "
                            f"(at least {MIN_AFFECTED} are needed)")
    text = render_fleet_text(rep)
    assert "no contrast can be drawn: only 1 affected deployment" in text and "odd" not in text


def test_below_the_floor_no_contrast_even_when_the_split_is_perfect():
    attrs = _fleet(40, cpu={0: "20", 1: "20"})
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1)})
    assert MIN_AFFECTED == 3 and not rc.drawn and rc.shown == ()
    assert "only 2 affected deployments" in rc.heading()


def test_five_of_six_against_none_of_sixteen_is_decisive_and_prints_p():
    attrs = _fleet(22, local_disk={i: "file:///nvme/" for i in range(6)})
    (rc,) = contrast(attrs, {"KV002": _ids(0, 1, 2, 3, 4)})
    (sep,) = rc.shown
    assert (sep.affected_with, sep.affected, sep.others_with, sep.others) == (5, 5, 1, 17)
    # only the table seen is as unlikely as itself: P = C(6,5)·C(16,0) / C(22,5)
    assert sep.p_value == pytest.approx(comb(6, 5) / comb(22, 5)) and sep.decisive
    assert sep.sentence().startswith("KV002 in 5/6 = 83.3 % (95 % CI ")
    assert "of deployments with local_disk = file:///nvme/, in 0/16 = 0.0 % (95 % CI 0.0–" in sep.sentence()
    assert sep.sentence().endswith("without (p < 0.001)")
    assert rc.heading() == "KV002: 5 of 22 deployments; decisive (p < 0.05): 1 of 1 contrast(s) compared"


def test_a_contrast_that_is_not_significant_says_so():
    attrs = _fleet(6, cpu={0: "20", 1: "20", 2: "20"})
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2)})
    (sep,) = rc.shown
    assert sep.p_value == pytest.approx(0.1) and not sep.decisive  # 3/3 vs 0/3: two tables as extreme
    assert sep.sentence().endswith("(p = 0.10, not significant)")
    assert rc.heading().endswith("none of 1 contrast(s) compared is decisive (smallest p = 0.10)")


def test_an_imperfect_contrast_that_is_not_significant_is_counted_not_stated():
    attrs = _fleet(10, cpu={0: "20", 1: "20", 2: "20", 5: "20"})
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2, 3)})  # 3/4 with, 1/6 without
    assert rc.shown == () and rc.lines() == [] and rc.compared == 1 and rc.decisive == 0
    assert rc.smallest_p == pytest.approx(fisher_exact(3, 1, 1, 5)) and rc.smallest_p > ALPHA


def test_ties_are_named_same_deployments_merged_and_left_out_counted():
    attrs = _fleet(10, build={0: "x", 1: "x", 2: "x"}, cpu={0: "20", 1: "20", 2: "20"},
                   a={0: "y", 1: "y", 2: "y", 3: "y"}, b={0: "y", 1: "y", 2: "y", 4: "y"},
                   c={0: "y", 1: "y", 2: "y", 5: "y"}, d={0: "y", 1: "y", 2: "y", 6: "y"})
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2)})
    shown = [(s.attribute, s.same_deployments) for s in rc.shown]
    # build and cpu sit on exactly the same pods: one contrast; a–d tie (3/4 vs 0/6), cut by name
    assert shown == [("build", (("cpu", "20"),)), ("a", ()), ("b", ())]
    assert (rc.compared, rc.left_out, rc.tied_left_out, rc.left_out_decisive) == (5, 2, 2, 2)
    assert "cannot tell apart" in rc.shown[0].sentence()
    assert rc.lines()[-1] == "2 more left out (2 of them decisive; 2 with the same p and rates as the last shown)"


def test_contrasts_are_ranked_by_p_not_by_attribute_or_input_order():
    # inserted weakest first: z (5/7 with, 0/13 without), y (4/4, 1/16), x (5/5, 0/15)
    attrs = _fleet(20, z={0: "v", 1: "v", 2: "v", 3: "v", 4: "v", 5: "v", 6: "v"},
                   y={0: "v", 1: "v", 2: "v", 3: "v"}, x={0: "v", 1: "v", 2: "v", 3: "v", 4: "v"})
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2, 3, 4)})
    ps = [s.p_value for s in rc.shown]
    assert rc.shown[0].attribute == "x" and ps == sorted(ps) and len(set(ps)) == 3


def test_an_attribute_few_affected_logs_show_gives_no_contrast():
    attrs = _fleet(12, cpu={0: "20", 1: "20", 2: "20", 3: "20"})
    for d in _ids(2, 3):
        del attrs[d]["cpu"]  # these pods' logs have no config dump
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2, 3)})
    assert rc.drawn and rc.shown == () and rc.compared == 0


def test_deployments_whose_logs_lack_the_attribute_are_left_out_of_the_table():
    attrs = _fleet(12, cpu={0: "20", 1: "20", 2: "20"})
    for d in _ids(3, 9, 10):
        del attrs[d]["cpu"]  # one affected and two other pods without a config dump
    (rc,) = contrast(attrs, {"KV001": _ids(0, 1, 2, 3)})
    (sep,) = rc.shown
    assert (sep.affected_with, sep.affected, sep.others_with, sep.others) == (3, 4, 0, 8)
    assert (sep.affected_not_shown, sep.others_not_shown) == (1, 2) and not sep.perfect
    assert (sep.without_value.hits, sep.without_value.n) == (0, 6)  # not 1/9: a missing dump is not a value
    assert sep.p_value == pytest.approx(fisher_exact(3, 0, 0, 6))


def test_json_carries_counts_p_value_decisive_and_the_rules_not_drawn():
    attrs = _fleet(22, local_disk={i: "X" for i in range(6)}, odd={21: "only-me"})
    data = json.loads(render_fleet_json(_report(attrs, {"KV002": _ids(0, 1, 2, 3, 4), "KV007": _ids(21)})))
    (c,) = data["contrast"]
    assert {k: c[k] for k in ("rule", "attribute", "value", "affected_with", "affected", "others_with", "others",
                              "perfect", "decisive")} == {
        "rule": "KV002", "attribute": "local_disk", "value": "X", "affected_with": 5, "affected": 5,
        "others_with": 1, "others": 17, "perfect": False, "decisive": True}
    assert c["p_value"] == pytest.approx(fisher_exact(5, 1, 0, 16))
    assert c["with_value"]["count"] == 5 and c["with_value"]["n"] == 6 and len(c["with_value"]["ci95"]) == 2
    assert c["without_value"] == {"count": 0, "n": 16, "rate": 0.0, "ci95": [0.0, pytest.approx(0.194, abs=1e-3)]}
    assert c["statement"].endswith("(p < 0.001)") and c["same_deployments"] == []
    assert c["not_shown"] == {"affected": 0, "others": 0}
    kv007 = next(r for r in data["contrast_rules"] if r["rule"] == "KV007")
    assert kv007["drawn"] is False and kv007["shown"] == 0 and "only 1 affected" in kv007["statement"]
    assert data["contrast_method"]["min_affected"] == MIN_AFFECTED and data["contrast_method"]["alpha"] == ALPHA


HOSTILE = "<script>alert(1)</script>|*x*\x1b[31m[bold]red[/bold]\u202e"


@pytest.mark.parametrize("render", [render_fleet_text, render_fleet_markdown, render_fleet_html, render_fleet_json])
def test_attribute_values_from_logs_are_escaped_in_every_format(render):
    attrs = _fleet(8, **{"lmcache.<b>key</b>": {0: HOSTILE, 1: HOSTILE, 2: HOSTILE}})
    out = render(_report(attrs, {"KV001": _ids(0, 1, 2)}))
    assert "\x1b" not in out  # no escape sequence reaches a terminal, a page or a JSON string unencoded
    if render is render_fleet_json:
        assert json.loads(out)["contrast"][0]["value"] == HOSTILE  # JSON keeps the value, encoded
        return
    assert "\u202e" not in out and "[bold]red[/bold]" in out.replace("\\", "")  # shown, never interpreted
    if render is render_fleet_text:
        assert "\\u202e" in out  # the bidi override made visible
    else:
        assert "<script>" not in out and "<b>key" not in out
    if render is render_fleet_markdown:
        assert "\\|" in out and "\\*x\\*" in out


def test_the_fleet_doc_states_the_floor_and_limits_the_code_uses():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text()
    assert f"**At least {MIN_AFFECTED} affected deployments.**" in doc
    assert f"at most {TOP_PER_RULE} per rule are stated" in doc and f"below p = {ALPHA:g}" in doc.replace("\n", " ")
