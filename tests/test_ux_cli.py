"""CLI habits every command shares: configuration, comma lists, -h, -q, -o, "wrote …", one error style,
partial analysis, severity that depends on the failure policy, and the CI gate's default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from logbuilder import lookup, shortfall_pair, vllm, write
from typer.testing import CliRunner

from specdiag.analyzers.base import all_rules
from specdiag.cli import app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples/tp8-shortfall/serve.log")
HEALTHY = str(ROOT / "examples/healthy-ngram/serve.log")
REQ = "cmpl-1"


def invoke(*args: str, cwd: Path | None = None, monkeypatch=None):
    if cwd is not None and monkeypatch is not None:
        monkeypatch.chdir(cwd)
    return CliRunner().invoke(app, list(args), env={"NO_COLOR": "1"})


def shortfall_log(tmp_path: Path, outcome: str = "fail") -> str:
    lines = [lookup(REQ, 9000, 8192, proc=None)] + shortfall_pair(REQ, 7168, 8192, proc="Worker_TP0 pid=100")
    if outcome == "recompute":
        lines.append(vllm("Recovered from KV load failure: 1 request(s) rescheduled (1024 tokens affected).",
                          level="WARNING", proc="EngineCore pid=5"))
    else:
        lines.append(vllm(f"Failing 1 request(s) due to KV load failure (failure_policy=fail, 1024 tokens "
                          f"affected). Request IDs: {{'{REQ}'}}", level="ERROR", proc="EngineCore pid=5"))
    return write(tmp_path / f"{outcome}.log", lines)


# --- configuration ------------------------------------------------------------------------------------


def test_analyze_reads_the_project_configuration_like_check(tmp_path, monkeypatch) -> None:
    log = shortfall_log(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.specdiag]\nignore = ["KV001"]\n')
    r = invoke("analyze", log, "--format", "json", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "KV001" not in [f["rule"] for f in json.loads(r.stdout)["findings"]]
    r = invoke("analyze", log, "--format", "json", "--no-config")
    assert "KV001" in [f["rule"] for f in json.loads(r.stdout)["findings"]]


def test_a_configuration_typo_exits_2_in_analyze_check_and_metrics(tmp_path, monkeypatch) -> None:
    log = shortfall_log(tmp_path)
    (tmp_path / "specdiag.yaml").write_text("fial-on: warning\n")
    monkeypatch.chdir(tmp_path)
    for cmd in ("analyze", "check", "metrics"):
        r = invoke(cmd, log)
        assert r.exit_code == 2, (cmd, r.output)
        assert "unknown setting 'fial-on'" in r.stderr and "Traceback" not in r.output
        assert invoke(cmd, log, "--no-config").exit_code != 2, cmd


def test_config_option_names_the_file(tmp_path) -> None:
    log = shortfall_log(tmp_path)
    cfg = tmp_path / "ci.yaml"
    cfg.write_text("select: [KV003]\n")
    r = invoke("analyze", log, "--format", "json", "--config", str(cfg))
    assert [f["rule"] for f in json.loads(r.stdout)["findings"]] == ["KV003"]
    r = invoke("analyze", log, "--config", str(tmp_path / "nope.yaml"))
    assert r.exit_code == 2 and "configuration file not found" in r.stderr


def test_select_and_ignore_take_comma_lists_in_every_command(tmp_path) -> None:
    log = shortfall_log(tmp_path)
    r = invoke("analyze", log, "--format", "json", "--no-config", "--select", "KV001,KV003")
    assert sorted({f["rule"] for f in json.loads(r.stdout)["findings"]}) == ["KV001", "KV003"]
    r = invoke("check", log, "--format", "json", "--no-config", "--ignore", "KV001, KV003")
    assert not {f["rule"] for f in json.loads(r.stdout)["findings"]} & {"KV001", "KV003"}
    r = invoke("rules", "--select", "KV001,SD001")
    assert [ln.split()[0] for ln in r.stdout.splitlines()] == ["KV001", "SD001"]


# --- conventional flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", [[], ["analyze"], ["check"], ["metrics"], ["rules"], ["explain"], ["config", "show"],
                                 ["repro"]])
def test_dash_h_is_help_for_every_command(cmd) -> None:
    r = invoke(*cmd, "-h")
    assert r.exit_code == 0 and "Usage:" in r.stdout


def test_quiet_prints_only_the_verdict() -> None:
    r = invoke("analyze", EXAMPLE, "-q", "--no-config")
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("specdiag: 2 errors") and "KV001 error" in r.stdout
    assert "Evidence:" not in r.stdout and "deployment" not in r.stdout
    assert r.stderr == ""


def test_output_file_and_html_into_new_folders_say_where_they_wrote(tmp_path) -> None:
    out = tmp_path / "new" / "deep" / "report.json"
    html = tmp_path / "other" / "dir" / "report.html"
    r = invoke("analyze", EXAMPLE, "--no-config", "-f", "json", "-o", str(out), "--html", str(html))
    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert json.loads(out.read_text())["findings"] and html.read_text().startswith("<!DOCTYPE html>")
    assert f"wrote the json report to {out}" in r.stderr and f"wrote the HTML report to {html}" in r.stderr
    r = invoke("check", EXAMPLE, "--no-config", "--format", f"sarif:{tmp_path / 'x' / 'y.sarif'}")
    assert "wrote the sarif report to" in r.stderr
    r = invoke("metrics", EXAMPLE, "-f", "csv", "-o", str(tmp_path / "m" / "m.csv"))
    assert r.exit_code == 0 and "wrote the csv export to" in r.stderr


def test_an_unwritable_output_is_one_line_exit_2(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    r = invoke("analyze", EXAMPLE, "--no-config", "--html", str(tmp_path / "file" / "r.html"))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("specdiag: error: ")


@pytest.mark.parametrize("args,needle", [
    (["analyze", EXAMPLE, "--bogus"], "No such option: --bogus"),
    (["analyze", EXAMPLE, "--fail-on", "bogus"], "--fail-on must be one of"),
    (["check", EXAMPLE, "--fail-on", "bogus"], "--fail-on must be one of"),
    (["analyze", EXAMPLE, "--format", "xml"], "unknown --format 'xml'"),
    (["nosuchcommand"], "No such command"),
])
def test_every_error_has_one_style_and_one_line(run_cli, args, needle) -> None:
    code, out, err = run_cli(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specdiag: error: ") and needle in lines[0], err
    assert not re.search(r"(--[\w-]+): \1", lines[0])  # no "--fail-on: --fail-on must be"


def test_one_missing_path_of_several_is_listed_and_the_rest_analysed(tmp_path) -> None:
    log = shortfall_log(tmp_path)
    r = invoke("analyze", log, str(tmp_path / "rank1.log"), "--no-config", "-f", "json")
    assert r.exit_code == 2
    assert [f["rule"] for f in json.loads(r.stdout)["findings"]]
    assert "rank1.log: no such file" in r.stderr
    r = invoke("analyze", str(tmp_path / "rank1.log"), "--no-config")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_explain_routes_a_cause_id_to_its_rules() -> None:
    r = invoke("explain", "pin-accounting-bug")
    out = r.stdout + r.stderr
    assert "KV001" in out
    r = invoke("explain", "no-such-thing")
    assert r.exit_code == 2 and "unknown rule or cause id" in r.stderr


# --- severity vs the failure policy ---------------------------------------------------------------------


def test_rules_and_config_show_state_the_policy_dependent_severity() -> None:
    r = invoke("rules")
    kv001 = next(ln for ln in r.stdout.splitlines() if ln.startswith("KV001"))
    assert "error" in kv001 and "warning when vLLM recomputed" in kv001
    r = invoke("config", "show", "--no-config")
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("severity.KV001"))
    assert "error" in row and "recompute" in row and "check default" in row
    assert all(getattr(c, "severity_note", None) is not None for c in all_rules().values())


def test_rule_docs_state_both_severities() -> None:
    page = (ROOT / "docs/rules/KV001.md").read_text()
    assert "**Severity:**" in page and "recompute" in page


def test_check_fails_on_a_recomputed_shortfall_by_default_analyze_calls_it_a_warning(tmp_path) -> None:
    log = shortfall_log(tmp_path, "recompute")
    r = invoke("analyze", log, "--no-config", "-f", "json")
    kv001 = next(f for f in json.loads(r.stdout)["findings"] if f["rule"] == "KV001")
    assert kv001["severity"] == "warning" and r.exit_code == 0
    r = invoke("check", log, "--no-config")
    assert r.exit_code == 1, r.output
    assert re.search(r"error KV001", r.stdout)
    cfg = tmp_path / "lenient.yaml"
    cfg.write_text("severity:\n  KV001: warning\n")
    assert invoke("check", log, "--config", str(cfg)).exit_code == 0


# --- CI anchors ---------------------------------------------------------------------------------------


def _error_line_of_example() -> int:
    lines = Path(EXAMPLE).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if "ERROR" in ln and "Num retrieved tokens:" in ln)


def test_kv001_is_anchored_at_its_error_line_in_sarif_github_and_markdown(tmp_path) -> None:
    want = _error_line_of_example()
    sarif = tmp_path / "r.sarif"
    invoke("check", EXAMPLE, "--no-config", "--format", f"sarif:{sarif}")
    res = next(r for r in json.loads(sarif.read_text())["runs"][0]["results"] if r["ruleId"] == "KV001")
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == want
    gh = invoke("check", EXAMPLE, "--no-config", "--format", "github").stdout
    assert re.search(rf"^::error file=[^,]+,line={want},title=KV001", gh, re.M)
    md = invoke("check", EXAMPLE, "--no-config", "--format", "markdown").stdout
    kv001 = md[md.index("KV001"):]
    first_loc = re.search(r"serve\.log:(\d+)", kv001)
    assert first_loc and int(first_loc.group(1)) == want


# --- docs a newcomer reads ------------------------------------------------------------------------------


def test_readme_links_the_report_guide_on_its_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:15])
    assert "docs/reading-a-report.md" in first_screen
    guide = (ROOT / "docs/reading-a-report.md").read_text()
    for term in ("do not add up to 1", "also weighed", "×160", "last 60%", "`+`", "`−`"):
        assert term in guide, term


def test_user_docs_point_at_nothing_a_user_does_not_have() -> None:
    pages = [ROOT / "README.md", ROOT / "examples/README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        for bad in ("shared/reference", "mismatch-causes.md", "issue #2"):
            assert bad not in text, (page.name, bad)


def test_every_install_line_names_the_real_distribution() -> None:
    import tomllib

    dist = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert dist != "specdiag"  # taken on PyPI by an unrelated project
    from specdiag import DISTRIBUTION

    assert DISTRIBUTION == dist
    texts = [p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]]
    texts += [p.read_text() for p in (ROOT / "specdiag").rglob("*.py")]
    for text in texts:
        assert not re.search(r"pip install '?specdiag(?![-\w])", text)
        assert "specdiag[" not in text


# --- progress on long inputs ----------------------------------------------------------------------------


def test_progress_bar_only_for_long_inputs_on_a_terminal_and_not_with_quiet(tmp_path, monkeypatch) -> None:
    from specdiag.cli import common

    log = shortfall_log(tmp_path)
    assert common.Progress([log], quiet=False).callback is None  # stderr is not a terminal here
    assert common.Progress([log], quiet=True, force=True, min_bytes=1).callback is None
    assert common.Progress([log], force=True).callback is None  # far below 50 MB
    bar = common.Progress([log], force=True, min_bytes=1)
    assert bar.callback is not None
    with bar:
        bar.callback(log, 10**9)  # more than the file: compressed inputs read more than their size
    assert bar._bar.tasks[0].completed == Path(log).stat().st_size


def test_long_inputs_drive_the_bar_from_the_engine(tmp_path) -> None:
    from specdiag.cli.common import Progress
    from specdiag.engine import analyze

    lines = Path(HEALTHY).read_text().splitlines()
    big = tmp_path / "big.log"
    big.write_text("\n".join(lines * (40_000 // len(lines) + 1)) + "\n")
    bar = Progress([str(big)], force=True, min_bytes=1)
    seen: list[int] = []
    cb = bar.callback

    def spy(display: str, n: int) -> None:
        seen.append(n)
        cb(display, n)

    with bar:
        analyze([str(big)], progress=spy)
    assert seen and seen == sorted(seen)


def test_markdown_report_has_no_html_entities_for_quotes() -> None:
    md = invoke("analyze", EXAMPLE, "--no-config", "-f", "markdown").stdout
    assert "'Pin count of MemoryObj" in md and "&#x27;" not in md and "&quot;" not in md


def test_metrics_exports_the_readable_inputs_and_exits_2_for_a_missing_one(tmp_path) -> None:
    r = invoke("metrics", HEALTHY, str(tmp_path / "rank1.log"), "-f", "csv")
    assert r.exit_code == 2 and r.stdout.startswith("time,") and "rank1.log: no such file" in r.stderr
