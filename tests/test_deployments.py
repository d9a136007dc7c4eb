"""Deployments: each server's logs get their own context and findings; results do not depend on -j."""

from __future__ import annotations

import json

import pytest

from specdiag.analyzers.base import all_rules
from specdiag.engine import analyze
from specdiag.metrics.collect import collect
from specdiag.report.json_report import render_json

ShortfallRule = all_rules()["KV001"]
from corpus_paths import CORPUS  # noqa: E402

A = CORPUS / "tp4-cpu-eviction-vllm011"
B = CORPUS / "tp2-lookup-disagreement-vllm025"


def _without_timing(report) -> dict:
    d = json.loads(render_json(report))
    d.pop("elapsed_s", None)
    return d


def test_each_folder_is_a_deployment_with_its_own_context():
    rep = analyze([str(A), str(B)])
    ids = [d.id for d in rep.deployments]
    assert ids == [str(A), str(B)]
    versions = {d.id: d.context.vllm_version for d in rep.deployments}
    assert versions[str(A)] != versions[str(B)]  # two servers' configs are not merged into one
    out = rep.to_dict()
    assert out["context"] is None  # several deployments: no single top-level context
    assert {f["deployment"] for f in out["findings"]} <= set(ids)
    assert {f["deployment"] for f in out["findings"]} == {d.id for d in rep.deployments if d.findings}
    for d in out["deployments"]:
        assert d["context"]["vllm_version"] == versions[d["id"]] and d["sources"]


def test_a_single_deployment_keeps_the_top_level_context():
    rep = analyze([str(A)])
    out = rep.to_dict()
    assert len(out["deployments"]) == 1
    assert out["context"] == out["deployments"][0]["context"]
    assert all(f["deployment"] == str(A) for f in out["findings"])


def test_findings_equal_those_of_each_deployment_alone():
    both = analyze([str(A), str(B)])
    alone = {str(p): analyze([str(p)]) for p in (A, B)}
    for d in both.deployments:
        assert [f.fingerprint for f in d.findings] == [f.fingerprint for f in alone[d.id].findings]


def test_parallel_jobs_give_the_identical_report():
    serial = analyze([str(A), str(B)], jobs=1)
    parallel = analyze([str(A), str(B)], jobs=2)
    assert _without_timing(parallel) == _without_timing(serial)


def test_a_rule_that_raises_is_reported_and_the_others_still_finish(monkeypatch):
    def boom(self, ev):
        raise ValueError("synthetic failure")

    monkeypatch.setattr(ShortfallRule, "observe", boom)
    rep = analyze([str(A)])
    failed = rep.to_dict()["rules_failed"]
    assert [f["rule"] for f in failed] == [ShortfallRule.code]
    assert "ValueError" in failed[0]["error"] and failed[0]["deployment"] == str(A)
    assert rep.findings and all(f.rule != ShortfallRule.code for f in rep.findings)


def test_metrics_of_several_deployments_are_labelled_by_deployment():
    col = collect([str(A), str(B)])
    labels = [label for label, _items in col.engines()]
    assert labels and all(label.startswith((str(A), str(B))) for label in labels)


@pytest.mark.parametrize("fail_on,expected", [("never", 0), ("info", 1)])
def test_report_exit_code_follows_fail_on(fail_on, expected):
    assert analyze([str(A)]).exit_code(fail_on) == expected


def test_a_bare_vllm_exception_line_that_a_rule_reads_counts_as_recognised(tmp_path):
    log = tmp_path / "one.log"
    log.write_text("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    rep = analyze([str(log)])
    assert [f.rule for f in rep.findings] == ["SRV001"]
    assert rep.recognized_lines == 1 and rep.exit_code("error") == 1  # a finding, not "nothing recognised" (3)
