"""KV001 and KV002 weigh exactly the causes they declare: a prior for a cause the rule does not list (or a
listed cause without a prior) would rank an id the report contract does not expect, or never rank one."""

from __future__ import annotations

import pytest

from specdiag.analyzers.causes import cause
from specdiag.analyzers.kv_hits import ZeroHitsOnRepeats
from specdiag.analyzers.kv_shortfall import RetrievalShortfall


@pytest.mark.parametrize("rule", [RetrievalShortfall, ZeroHitsOnRepeats])
def test_every_declared_cause_has_a_prior_and_no_other_does(rule) -> None:
    assert set(rule.PRIORS) == set(rule.cause_ids)
    assert all(p > 0 for p in rule.PRIORS.values()), "a zero prior could never be ranked"


@pytest.mark.parametrize("rule", [RetrievalShortfall, ZeroHitsOnRepeats])
def test_every_weighed_cause_has_a_fix_and_a_confirming_experiment_in_the_catalog(rule) -> None:
    for cid in rule.PRIORS:
        c = cause(cid)
        assert c.fix and c.confirm, cid
