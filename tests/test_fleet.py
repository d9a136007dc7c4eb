"""specdiag fleet: finds the affected pods, states what they share with counts, keeps failed pods as rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.engine import AnalyzeOptions
from specdiag.fleet import run as fleet_run
from specdiag.fleet.contrast import attributes, contrast, majority_differences
from specdiag.fleet.run import run_fleet

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("fleet")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_fleet.py"), str(out), "--pods", "8",
                           "--size-mb", "3", "--kv001", "3", "--collapse", "0"],
                          capture_output=True, text=True, check=True)
    return out, json.loads(proc.stdout)


def test_fleet_finds_the_kv001_pods_and_states_their_shared_attributes_with_p(fleet):
    root, plan = fleet
    rep = run_fleet([str(root)], AnalyzeOptions(paths=(), jobs=1))
    with_kv001 = {r.id for r in rep.deployments if any(f.rule == "KV001" for f in r.findings)}
    assert with_kv001 == {p for p, kind in plan["pods"].items() if kind == "kv001"}
    (sep,) = [s for s in rep.contrast if s.rule == "KV001"]
    # the planted build and CPU size are on exactly the same pods: one contrast naming both
    pairs = {(sep.attribute, sep.value), *sep.same_deployments}
    assert ("lmcache_version", plan["affected_version"]) in pairs and ("lmcache.max_local_cpu_size", "20.0") in pairs
    assert (sep.affected_with, sep.affected, sep.others_with, sep.others) == (3, 3, 0, 5)
    assert sep.p_value == pytest.approx(1 / 56) and sep.decisive  # 1 / C(8, 3): only the table seen is as extreme
    assert sep.sentence().startswith("KV001 in 3/3 = 100.0 % (95 % CI 43.9–100.0 %) of deployments with ")
    assert "in 0/5 = 0.0 % (95 % CI 0.0–43.4 %) without (p = 0.018)" in sep.sentence()


def test_fleet_json_follows_the_contract_and_exit_code_is_check_style(fleet):
    root, _plan = fleet
    res = CliRunner().invoke(app, ["fleet", str(root), "--format", "json", "-j", "2"])
    assert res.exit_code == 1, res.output  # KV001 errors
    data = json.loads(res.stdout)
    assert data["schema"] == "specdiag.fleet/1"
    assert [d["id"] for d in data["deployments"]] == sorted(d["id"] for d in data["deployments"])
    assert all(d["error"] is None and d["sources"] and "context" in d for d in data["deployments"])
    assert data["summary"]["deployments"] == 8 and data["contrast"]
    never = CliRunner().invoke(app, ["fleet", str(root), "--format", "json", "--fail-on", "never", "-j", "1"])
    assert never.exit_code == 0
    assert json.loads(never.stdout)["deployments"] == data["deployments"]  # -j 2 and serial agree


def test_a_pod_that_fails_twice_is_a_row_with_its_error(fleet, monkeypatch):
    root, _plan = fleet
    real = fleet_run.analyze_group
    calls: dict[str, int] = {}

    def flaky(group, opts, progress=None):
        calls[group.id] = calls.get(group.id, 0) + 1
        if group.id == "pod-03":
            raise OSError("disk went away")
        return real(group, opts)

    monkeypatch.setattr(fleet_run, "analyze_group", flaky)
    rep = run_fleet([str(root)], AnalyzeOptions(paths=(), jobs=1))
    row = next(r for r in rep.deployments if r.id == "pod-03")
    assert row.error == "OSError: disk went away" and calls["pod-03"] == 2  # retried once
    assert len(rep.deployments) == 8 and rep.exit_code("never") == 2


def test_contrast_skips_values_shared_by_all_or_unique_to_each():
    attrs = {f"p{i}": {"v": "same", "id": f"x{i}", "cpu": "20" if i < 3 else "40"} for i in range(8)}
    (rc,) = contrast(attrs, {"KV001": {"p0", "p1", "p2"}})
    assert [(s.attribute, s.value) for s in rc.shown] == [("cpu", "20")] and rc.compared == 1
    assert majority_differences(attrs)["p0"] == {"cpu": "20"} and majority_differences(attrs)["p4"] == {}


def test_attributes_read_versions_spec_and_scalar_config_keys():
    ctx = {"vllm_version": "0.11.0", "speculative": {"method": "eagle3"},
           "lmcache_config": {"chunk_size": 256, "lmcache_instance_id": "abc", "extra": {"a": 1}}}
    assert attributes(ctx) == {"vllm_version": "0.11.0", "speculative.method": "eagle3", "lmcache.chunk_size": "256"}


def test_hostile_pod_names_are_escaped_in_markdown(tmp_path):
    from specdiag.fleet.model import FleetReport, FleetRow
    from specdiag.report.fleet import render_fleet_markdown, render_fleet_text

    rep = FleetReport([FleetRow("pod-<img src=x onerror=alert(1)>|\x1b]52;c;x\x07", [], None, [], "boom")], [])
    md = render_fleet_markdown(rep)
    assert "<img" not in md and "\x1b" not in md and "\\|" in md
    assert "\x1b" not in render_fleet_text(rep)


def test_fleet_html_is_a_self_contained_heat_map(fleet, tmp_path):
    root, plan = fleet
    out = tmp_path / "new" / "fleet.html"
    res = CliRunner().invoke(app, ["fleet", str(root), "--html", str(out), "--fail-on", "never", "-j", "1"])
    assert res.exit_code == 0 and out.exists()
    page = out.read_text()
    assert "<script" not in page and "default-src 'none'" in page and "zone unknown" in page
    rows = page.count("<tr><th>") - 1  # minus the header row
    assert rows == len(plan["pods"]) and page.count('class="c s3"') >= 2  # the two KV001 pods have error cells


def test_fleet_html_escapes_what_came_from_logs():
    from specdiag.fleet.model import FleetReport, FleetRow
    from specdiag.report.fleet_html import render_fleet_html

    page = render_fleet_html(FleetReport([FleetRow('"><script>alert(1)</script>', [], None, [], "x\u202ey")], []))
    assert "<script>alert" not in page and "\u202e" not in page and "&quot;&gt;&lt;script&gt;" in page
