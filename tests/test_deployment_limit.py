"""Many deployments in one stream: what each costs before its first line, and the group's limit.

A stream that names thousands of deployments (a hostile one, or a fleet through one aggregator) grew a
deployment per name with every rule's state: 20,000 three-line pods (7.6 MB) took 893 MiB and 9.5 s. Each
deployment now shares its observers' dispatch plan and its rules' default options, and an input group
analyses at most ``deployments.MAX_DEPLOYMENTS``; the records of the rest are counted and named, and the
verdict says they were not read.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from peak_rss import run_cli

from specdiag import deployments
from specdiag.deployments import Deployment, DeploymentRun, dispatch_plan
from specdiag.engine import AnalyzeOptions, analyze, deployment_runs
from specdiag.report.verdict import status

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tp8-shortfall" / "serve.log"


def _pod_lines(pod: str, lines: list[str]) -> list[str]:
    return [f"[pod/{pod}/vllm] {line}" for line in lines]


def test_lazy_dispatch_gives_each_template_the_observers_eager_dispatch_gave():
    run = deployment_runs(AnalyzeOptions(paths=("x",)))("d")
    eager: dict[str, list] = {}
    for obs in run.observers:
        for eid in obs.events:
            eager.setdefault(eid, []).append(obs)
    assert len(eager) > 50
    for eid, observers in eager.items():
        assert run.observers_of(eid) == observers, eid
    assert run.observers_of("NO_SUCH_TEMPLATE") == []
    assert run.read_events() == frozenset(eager)


def test_runs_of_one_analysis_share_one_dispatch_plan_but_not_their_observers():
    make = deployment_runs(AnalyzeOptions(paths=("x",)))
    a, b = make("a"), make("b")
    assert a._plan is b._plan
    assert dispatch_plan(a.observers) is a._plan
    eid = next(iter(a._plan))
    assert a.observers_of(eid) and not set(map(id, a.observers_of(eid))) & set(map(id, b.observers_of(eid)))


def test_a_deployment_before_its_first_line_costs_under_24_kib():
    make = deployment_runs(AnalyzeOptions(paths=("x",)))
    Deployment("warm", make)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [Deployment(f"d{i}", make) for i in range(200)]
        gc.collect()
        per = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per < 24 * 1024, per  # 34 KiB when every run built its dispatch lists and option dicts


def test_rules_without_configured_options_share_their_defaults():
    run: DeploymentRun = deployment_runs(AnalyzeOptions(paths=("x",)))("d")
    rule = next(r for r in run.rules if r.defaults)
    assert rule.options is type(rule).defaults
    configured = deployment_runs(AnalyzeOptions(paths=("x",), rule_options={rule.code: {"extra": 1}}))("d")
    mine = next(r for r in configured.rules if r.code == rule.code)
    assert mine.options == {**type(rule).defaults, "extra": 1} and type(rule).defaults.get("extra") is None


def _interleaved(tmp_path: Path, pods: int, head: int) -> tuple[Path, list[str]]:
    """Pod 0 holds the whole example (its shortfall); pods 1.. its first ``head`` lines; interleaved line by line."""
    lines = EXAMPLE.read_text().splitlines()
    streams = [_pod_lines("vllm-0", lines)] + [_pod_lines(f"vllm-{n}", lines[:head]) for n in range(1, pods)]
    out: list[str] = []
    for i in range(max(map(len, streams))):
        out += [s[i] for s in streams if i < len(s)]
    log = tmp_path / "pods.log"
    log.write_text("\n".join(out) + "\n")
    return log, streams[0]


def test_a_stream_naming_more_deployments_than_the_limit_counts_the_rest_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(deployments, "MAX_DEPLOYMENTS", 3)
    log, first = _interleaved(tmp_path, pods=5, head=40)
    rep = analyze([str(log)])
    assert [d.id for d in rep.deployments] == ["pod/vllm-0/vllm", "pod/vllm-1/vllm", "pod/vllm-2/vllm"]
    over = rep.inputs[0]["beyond_limit"]
    assert over == {"records": 80, "first": ["pod/vllm-3/vllm", "pod/vllm-4/vllm"], "limit": 3}
    assert any("80 record(s) of deployments beyond the first 3" in e for e in rep.inputs[0]["errors"])
    st = status(rep, [])
    assert "NOT READ: 80 record(s) of deployments beyond the first 3" in st.text
    # the deployments within the limit are analysed as they would be alone
    alone = tmp_path / "alone.log"
    alone.write_text("\n".join(first) + "\n")
    ours = [_gist(f.to_dict()) for f in rep.findings if f.deployment == "pod/vllm-0/vllm"]
    theirs = [_gist(f.to_dict()) for f in analyze([str(alone)]).findings]
    assert ours == theirs and "KV001" in [f["rule"] for f in ours]


def _gist(finding: dict) -> dict:
    """A finding without what depends on where its lines are (line numbers shift with the other pods')."""
    causes = [(c["id"], c["confidence"]) for c in finding.get("causes") or ()]
    evidence = [e["text"] for e in finding.get("evidence") or ()]
    keep = ("rule", "severity", "title", "count", "measurements")
    return {**{k: finding.get(k) for k in keep}, "causes": causes, "evidence": evidence}


def test_within_the_limit_nothing_is_counted_beyond_it(tmp_path):
    log, _ = _interleaved(tmp_path, pods=4, head=40)
    rep = analyze([str(log)])
    assert len(rep.deployments) == 4 and "beyond_limit" not in rep.inputs[0]
    assert "NOT READ" not in status(rep, []).text


def test_unnamed_lines_after_a_deployment_beyond_the_limit_are_its_own(tmp_path, monkeypatch):
    """A line without a wrapper follows the last named one: beyond the limit, it is counted, not given to
    the group's default deployment."""
    monkeypatch.setattr(deployments, "MAX_DEPLOYMENTS", 1)
    line = "(APIServer pid=1) WARNING 05-06 15:31:12 [api_server.py:1] something odd"
    log = tmp_path / "two.log"
    log.write_text("\n".join([f"[pod/a/vllm] {line}", f"[pod/b/vllm] {line}", line, line]) + "\n")
    rep = analyze([str(log)])
    assert [d.id for d in rep.deployments] == ["pod/a/vllm"]
    assert rep.inputs[0]["beyond_limit"]["records"] == 3


def test_twenty_thousand_three_line_pods_stay_under_100_mib(tmp_path):
    head = EXAMPLE.read_text().splitlines()[:3]
    log = tmp_path / "many.log"
    with log.open("w") as fh:
        for n in range(20_000):
            fh.writelines(f"[pod/vllm-{n}/vllm] {line}\n" for line in head)
    out = tmp_path / "r.json"
    proc = run_cli(["analyze", str(log), "-f", "json", "-o", str(out)], text=True)
    peak_mib = int(proc.stderr.rsplit("MAXRSS_KB=", 1)[1].split()[0]) / 1024
    rep = json.loads(out.read_text())
    assert len(rep["deployments"]) == deployments.MAX_DEPLOYMENTS
    assert rep["inputs"][0]["beyond_limit"]["records"] == 3 * (20_000 - deployments.MAX_DEPLOYMENTS)
    assert peak_mib < 100, peak_mib  # 893 MiB before the limit


def test_pods_whose_facts_are_the_same_share_one_context_block(tmp_path):
    from specdiag.report.layout import deployment_blocks
    from specdiag.report.terminal import render_terminal

    log, _ = _interleaved(tmp_path, pods=5, head=40)
    rep = analyze([str(log)])
    titles = [t for t, _ in deployment_blocks(rep)]
    assert titles == ["deployment pod/vllm-0/vllm",
                      "4 deployments with the same facts: pod/vllm-1/vllm, pod/vllm-2/vllm, pod/vllm-3/vllm, …"]
    import io

    buf = io.StringIO()
    render_terminal(rep, color=False, file=buf, width=160)
    assert buf.getvalue().count("deployments with the same facts") == 1
