"""``specdiag check``: exit-code contract, several formats at once, baselines, step summary, determinism."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
from corpus_paths import CASES, CORPUS, corpus_root  # noqa: E402,F401
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.engine import analyze
from specdiag.findings import severity_at_least

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.skipif(not CASES, reason="corpus not found")


def log_of(case: str) -> str:
    """The corpus case's log, relative to the corpus root (tests chdir there, like a CI checkout)."""
    logs = sorted(p for p in (CORPUS / case).iterdir() if p.suffix == ".log")
    assert logs, case
    return f"{case}/{logs[0].name}"


def run(args: list[str], env: dict[str, str] | None = None, input: str | None = None):
    return CliRunner().invoke(app, args, env=env, input=input)


@pytest.fixture
def in_corpus(monkeypatch):
    monkeypatch.chdir(CORPUS)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return CORPUS


@cache
def severities(case: str) -> tuple[str, ...]:
    """Severities as the CI gate sees them: check's defaults (KV001 an error under any policy) applied."""
    from specdiag.config import GATE_SEVERITY

    return tuple(f.severity for f in analyze([str(CORPUS / log_of(case))], severity_overrides=GATE_SEVERITY).findings)


def expected_exit(sevs: tuple[str, ...], fail_on: str) -> int:
    if fail_on == "never":
        return 0
    return 1 if any(severity_at_least(s, fail_on) for s in sevs) else 0


# --- exit codes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fail_on", ["error", "warning", "info", "never"])
@pytest.mark.parametrize("case", ["real-cpu-redis-flushall-shortfall", "hash-seed-unset-zero-hits",
                                  "tp2-lookup-disagreement-vllm025", "clean-healthy-ngram-tp2"])
def test_exit_code_for_every_fail_on_level(in_corpus, case, fail_on):
    sevs = severities(case)
    r = run(["check", log_of(case), "--fail-on", fail_on, "--no-config"])
    assert r.exit_code == expected_exit(sevs, fail_on), r.output


def test_fail_on_levels_are_really_exercised():
    # the corpus cases above cover 1-at-error, 0-at-error-but-1-at-warning, and clean
    assert expected_exit(severities("real-cpu-redis-flushall-shortfall"), "error") == 1
    hs = severities("hash-seed-unset-zero-hits")
    assert expected_exit(hs, "error") == 0 and expected_exit(hs, "warning") == 1
    tp2 = severities("tp2-lookup-disagreement-vllm025")
    assert "info" in tp2 and expected_exit(tp2, "info") == 1
    # a healthy server's own warnings (the experimental KV-connector API) are listed as LOG002, at info
    assert severities("clean-healthy-ngram-tp2") == ("info",)


def test_default_fail_on_is_error(in_corpus):
    assert run(["check", log_of("real-cpu-redis-flushall-shortfall"), "--no-config"]).exit_code == 1
    assert run(["check", log_of("hash-seed-unset-zero-hits"), "--no-config"]).exit_code == 0


def test_exit_zero_keeps_reporting(in_corpus):
    r = run(["check", log_of("real-cpu-redis-flushall-shortfall"), "--exit-zero", "--no-config"])
    assert r.exit_code == 0
    assert "error KV001" in r.stdout


def test_missing_input_exits_2_and_is_reported_in_every_format(in_corpus, tmp_path):
    sarif, junit, gl = tmp_path / "o.sarif", tmp_path / "o.xml", tmp_path / "gl.json"
    r = run(["check", log_of("real-cpu-redis-flushall-shortfall"), "no/such/file.log", "--no-config",
             "-f", f"sarif:{sarif}", "-f", f"junit:{junit}", "-f", f"gitlab:{gl}", "-f", "github"])
    assert r.exit_code == 2
    assert "no/such/file.log" in r.stderr
    # the readable log was still analysed and reported
    doc = json.loads(sarif.read_text())
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    notes = inv["toolExecutionNotifications"]
    assert any(n["level"] == "error" and "no/such/file.log" in n["message"]["text"] for n in notes)
    assert doc["runs"][0]["results"], "findings of the readable input must still be reported"
    root = ET.parse(junit).getroot()
    errs = root.findall(".//testcase/error")
    assert len(errs) == 1 and "no/such/file.log" in errs[0].get("message")
    assert root.get("errors") == "1"
    assert json.loads(gl.read_text())
    assert "::error title=specdiag input problem::" in r.stdout


def test_only_unreadable_inputs_exit_2(in_corpus, tmp_path):
    sarif = tmp_path / "o.sarif"
    r = run(["check", "missing.log", "-f", f"sarif:{sarif}", "--no-config"])
    assert r.exit_code == 2
    doc = json.loads(sarif.read_text())
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert doc["runs"][0]["results"] == []


def test_empty_folder_and_glob_without_match_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    assert run(["check", "empty", "--no-config"]).exit_code == 2
    assert run(["check", "nothing-*.log", "--no-config"]).exit_code == 2


def test_nothing_recognised_exits_3(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("notes.log").write_text("hello\nthis is not a vLLM log\n")
    r = run(["check", "notes.log", "--no-config"])
    assert r.exit_code == 3
    assert "recognised" in r.stderr
    # --exit-zero only forgives findings, not an input that is not a vLLM/LMCache log
    assert run(["check", "notes.log", "--no-config", "--exit-zero"]).exit_code == 3


@pytest.mark.parametrize("args", [
    ["--fail-on", "sometimes"],
    ["--format", "yaml"],
    ["--format", "sarif:"],
    ["--format", "json", "--format", "text"],
    ["--format", "sarif", "--format", "junit"],
    ["--select", "ZZ999"],
    ["--ignore", "NOPE"],
    ["--severity", "KV001=fatal"],
    ["--severity", "KV001"],
    ["--config", "does-not-exist.toml"],
    ["--update-baseline"],
    ["--baseline", "no-such-baseline.json"],
])
def test_usage_and_config_errors_exit_2(in_corpus, args):
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("specdiag: error:")
    assert "Traceback" not in r.output


def test_bad_config_file_exits_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.specdiag]\nfail-on = "sometimes"\n')
    log = CORPUS / log_of("seed-minimal-variant")
    r = run(["check", str(log)])
    assert r.exit_code == 2 and "fail-on" in r.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.specdiag\nbroken")
    r = run(["check", str(log), "--config", "pyproject.toml"])
    assert r.exit_code == 2 and "invalid TOML" in r.stderr


def test_stdin(in_corpus):
    text = (CORPUS / log_of("seed-minimal-variant")).read_text()
    r = run(["check", "-", "--stdin-name", "logs/serve.log", "-f", "github", "--no-config"], input=text)
    assert r.exit_code == 1
    assert "file=logs/serve.log,line=" in r.stdout


# --- formats at once ----------------------------------------------------------------------------------------

def test_several_formats_at_once(in_corpus, tmp_path):
    out = tmp_path / "out"
    case = log_of("tp4-cpu-eviction-vllm011")
    r = run(["check", case, "--no-config", "-f", "text", "-f", "github", "-f", f"sarif:{out}/r.sarif",
             "-f", f"junit:{out}/r.xml", "-f", f"gitlab:{out}/gl.json", "-f", f"json:{out}/r.json",
             "-f", f"markdown:{out}/r.md"])
    assert r.exit_code == 1
    assert f"{case}:" in r.stdout and "::error file=" + case in r.stdout
    assert {p.name for p in out.iterdir()} == {"r.sarif", "r.xml", "gl.json", "r.json", "r.md"}
    assert json.loads((out / "r.json").read_text())["schema"] == "specdiag.report/1"
    assert (out / "r.md").read_text().startswith("## ")


def test_same_output_file_twice_is_a_usage_error(in_corpus, tmp_path):
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", "-f", f"sarif:{tmp_path}/x",
             "-f", f"junit:{tmp_path}/x"])
    assert r.exit_code == 2


def test_auto_adds_annotations_only_on_github(in_corpus):
    case = log_of("seed-minimal-variant")
    plain = run(["check", case, "--no-config", "-f", "auto"])
    assert "::error" not in plain.stdout and "error KV001" in plain.stdout
    gh = run(["check", case, "--no-config", "-f", "auto"], env={"GITHUB_ACTIONS": "true"})
    assert "error KV001" in gh.stdout and "::error file=" in gh.stdout


def test_structured_format_alone_on_stdout_parses(in_corpus, tmp_path):
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", "-f", "sarif", "-f", f"github:{tmp_path}/gh"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["version"] == "2.1.0"
    assert (tmp_path / "gh").read_text().startswith("::error ")


def test_auto_and_github_annotate_once(in_corpus):
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", "-f", "auto", "-f", "github"],
            env={"GITHUB_ACTIONS": "true"})
    assert r.stdout.count("::error file=") == 1


def test_text_output_is_deterministic_and_plain(in_corpus):
    args = ["check", log_of("tp2-lookup-disagreement-vllm025"), log_of("tp4-cpu-eviction-vllm011"), "--no-config"]
    a, b = run(args), run(args)
    assert a.stdout == b.stdout
    assert "\x1b[" not in a.stdout
    assert a.stdout.rstrip().splitlines()[-1].startswith("specdiag: ")


def test_rule_selection_and_severity_override(in_corpus, tmp_path):
    case = log_of("real-cpu-redis-flushall-shortfall")
    js = tmp_path / "r.json"
    r = run(["check", case, "--no-config", "--select", "KV001", "-f", f"json:{js}"])
    d = json.loads(js.read_text())
    assert d["rules_run"] == ["KV001"] and {f["rule"] for f in d["findings"]} == {"KV001"}
    assert r.exit_code == 1
    # the case's failed loads also answered clients with 500s (SRV009, an error of its own): left out here
    r = run(["check", case, "--no-config", "--ignore", "KV,SRV009", "-f", f"json:{js}"])
    assert r.exit_code == 0 and not any(c.startswith("KV") for c in json.loads(js.read_text())["rules_run"])
    r = run(["check", case, "--no-config", "--ignore", "SRV009", "--severity", "KV=info", "-f", f"json:{js}"])
    assert r.exit_code == 0
    assert {f["severity"] for f in json.loads(js.read_text())["findings"] if f["rule"].startswith("KV")} == {"info"}


# --- baselines ----------------------------------------------------------------------------------------------

def test_baseline_roundtrip_exit_codes(in_corpus, tmp_path):
    case = log_of("real-cpu-redis-flushall-shortfall")
    bl = tmp_path / "ci" / "baseline.json"
    assert run(["check", case, "--no-config"]).exit_code == 1
    r = run(["check", case, "--no-config", "--baseline", str(bl), "--update-baseline"])
    assert r.exit_code == 0, r.output
    data = json.loads(bl.read_text())
    assert data["schema"] == "specdiag.baseline/1" and data["findings"]
    # accepted findings no longer fail the job …
    r = run(["check", case, "--no-config", "--baseline", str(bl), "--fail-on", "info"])
    assert r.exit_code == 0
    assert "suppressed by the baseline" in r.stdout
    # … but a new incident in another log still does
    r = run(["check", case, log_of("seed-minimal-variant"), "--no-config", "--baseline", str(bl)])
    assert r.exit_code == 1
    # dropping one accepted entry brings that finding back
    data["findings"] = data["findings"][1:]
    bl.write_text(json.dumps(data))
    r = run(["check", case, "--no-config", "--baseline", str(bl), "--fail-on", "info"])
    assert r.exit_code == 1


def test_baseline_applies_to_formats(in_corpus, tmp_path):
    case = log_of("tp4-cpu-eviction-vllm011")
    bl = tmp_path / "b.json"
    run(["check", case, "--no-config", "--baseline", str(bl), "--update-baseline"])
    sarif = tmp_path / "o.sarif"
    r = run(["check", case, "--no-config", "--baseline", str(bl), "-f", f"sarif:{sarif}"])
    assert r.exit_code == 0
    run_ = json.loads(sarif.read_text())["runs"][0]
    assert run_["results"] == [] and run_["tool"]["driver"]["rules"] == []
    assert run_["properties"]["suppressedByBaseline"] >= 1


def test_malformed_baseline_exits_2(in_corpus, tmp_path):
    bl = tmp_path / "b.json"
    bl.write_text("{not json")
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", "--baseline", str(bl)])
    assert r.exit_code == 2 and "baseline" in r.stderr


def test_update_baseline_refuses_when_inputs_unreadable(in_corpus, tmp_path):
    bl = tmp_path / "b.json"
    r = run(["check", log_of("seed-minimal-variant"), "gone.log", "--no-config", "--baseline", str(bl),
             "--update-baseline"])
    assert r.exit_code == 2 and not bl.exists()


# --- job summary ---------------------------------------------------------------------------------------------

def test_summary_appends_to_step_summary(in_corpus, tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("# earlier step output\n")
    r = run(["check", log_of("tp4-cpu-eviction-vllm011"), "--no-config", "--summary", "-f", "github"],
            env={"GITHUB_STEP_SUMMARY": str(target), "GITHUB_ACTIONS": "true"})
    assert r.exit_code == 1
    text = target.read_text()
    assert text.startswith("# earlier step output\n## ")
    assert "| rule | severity | count | first evidence | top cause |" in text
    assert "KV001" in text


def test_summary_without_variable_is_a_note(in_corpus):
    r = run(["check", log_of("seed-minimal-variant"), "--no-config", "--summary"])
    assert r.exit_code == 1 and "GITHUB_STEP_SUMMARY is not set" in r.stderr


def test_summary_respects_the_remaining_step_budget(in_corpus, tmp_path):
    from specdiag.report.markdown import STEP_SUMMARY_LIMIT

    target = tmp_path / "summary.md"
    target.write_bytes(b"x" * (STEP_SUMMARY_LIMIT - 3000))
    run(["check", log_of("tp4-cpu-eviction-vllm011"), log_of("real-cpu-redis-flushall-shortfall"), "--no-config",
         "--summary"], env={"GITHUB_STEP_SUMMARY": str(target)})
    size = os.path.getsize(target)
    assert STEP_SUMMARY_LIMIT - 3000 < size <= STEP_SUMMARY_LIMIT
    assert "Truncated" in target.read_text()
