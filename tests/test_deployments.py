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


def test_a_rule_that_raises_while_observing_costs_the_line_not_the_analysis(monkeypatch):
    def boom(self, ev):
        raise ValueError("synthetic failure")

    monkeypatch.setattr(ShortfallRule, "observe", boom)
    rep = analyze([str(A)])
    errors = [e for i in rep.inputs for e in i["errors"]]
    assert errors and all("skipped (ValueError: synthetic failure)" in e or "more records" in e for e in errors)
    assert rep.findings and all(f.rule != ShortfallRule.code for f in rep.findings)  # the other rules still report


def test_a_rule_whose_finish_raises_is_listed_and_the_others_still_finish(monkeypatch):
    def boom(self, ctx, run):
        raise ValueError("synthetic failure")

    monkeypatch.setattr(ShortfallRule, "finish", boom)
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


def _pod_lines(pod: str, version: str, model: str, rank: int, expected: int) -> list[str]:
    adp = "lmcache.integration.vllm.vllm_v1_adapter"
    cfg = (f"(EngineCore_DP0 pid=7) INFO 05-06 15:00:00 [core.py:93] Initializing a V1 LLM engine (v{version}) "
           f"with config: model='{model}', tensor_parallel_size=2, ")
    err = [f"(Worker_TP{rank} pid=100) [2026-05-06 15:5{i}:03,745] LMCache ERROR: Num retrieved tokens: 0, "
           f"num expected tokens: {expected} (vllm_v1_adapter.py:884:{adp})" for i in range(2)]
    return [f"[pod/{pod}/vllm] {line}" for line in [cfg, *err]]


def test_two_pods_interleaved_by_kubectl_prefix_are_two_deployments(tmp_path):
    a = _pod_lines("vllm-a", "0.11.0", "model-a", 1, 512)
    b = _pod_lines("vllm-b", "0.20.1", "model-b", 0, 768)
    log = tmp_path / "all.log"
    log.write_text("\n".join(x for pair in zip(a, b, strict=True) for x in pair) + "\n")  # same pids in both pods
    out = analyze([str(log)]).to_dict()
    deps = {d["id"]: d for d in out["deployments"]}
    assert set(deps) == {"pod/vllm-a/vllm", "pod/vllm-b/vllm"} and out["context"] is None
    assert deps["pod/vllm-a/vllm"]["context"]["vllm_version"] == "0.11.0"
    assert deps["pod/vllm-b/vllm"]["context"]["ranks_seen"] == ["TP0"]
    by_dep = {f["deployment"]: f for f in out["findings"] if f["rule"] == "KV001"}
    assert by_dep["pod/vllm-a/vllm"]["measurements"]["expected_tokens"] == 512
    assert by_dep["pod/vllm-b/vllm"]["measurements"]["ranks"] == ["TP0"]
    assert all(d["sources"] == [str(log)] for d in out["deployments"])


def test_recognised_lines_never_exceed_the_lines_read():
    rep = analyze([str(CORPUS.parent.parent / "examples" / "tp8-shortfall" / "serve.log"), str(A)])
    assert all(i["recognized"] <= i["lines"] for i in rep.inputs)


def test_verdicts_of_two_pods_are_two_lines_naming_each_pod(tmp_path):
    import io

    from specdiag.report.terminal import render_terminal

    a = _pod_lines("vllm-a", "0.11.0", "model-a", 1, 512)
    b = _pod_lines("vllm-b", "0.20.1", "model-b", 0, 768)
    log = tmp_path / "all.log"
    log.write_text("\n".join(x for pair in zip(a, b, strict=True) for x in pair) + "\n")
    rep = analyze([str(log)])
    assert {f.deployment for f in rep.findings} == {"pod/vllm-a/vllm", "pod/vllm-b/vllm"}
    buf = io.StringIO()
    render_terminal(rep, color=False, file=buf, width=140)
    head = buf.getvalue().splitlines()[:8]  # the status, the suspected settings, then one line per pod
    assert any("pod/vllm-a/vllm: 512 tokens" in line for line in head)
    assert any("pod/vllm-b/vllm: 768 tokens" in line for line in head)
