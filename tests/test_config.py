"""Configuration discovery ([tool.specdiag] / specdiag.yaml), validation, precedence and ``config show``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_paths import CASES, CORPUS, corpus_root  # noqa: E402,F401
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.config import find_config, resolve, toml_reader
from specdiag.engine import ConfigError

HERE = Path(__file__).resolve().parent


needs_toml = pytest.mark.skipif(toml_reader() is None, reason="TOML needs Python 3.11+ or tomli")


def run(args, **kw):
    return CliRunner().invoke(app, args, **kw)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """tmp/proj/pyproject.toml with [tool.specdiag]; cwd = tmp/proj/sub/dir."""
    proj = tmp_path / "proj"
    sub = proj / "sub" / "dir"
    sub.mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n'
        "[tool.specdiag]\n"
        'select = ["KV"]\nignore = ["KV008"]\nfail-on = "warning"\nbaseline = "ci/baseline.json"\n\n'
        "[tool.specdiag.severity]\nKV002 = \"error\"\n\n"
        "[tool.specdiag.rules.KV001]\nwindow_s = 30\n\n"
        "[tool.specdiag.rules.KV007]\nseverity = \"info\"\n"
    )
    monkeypatch.chdir(sub)
    return proj


@needs_toml
def test_discovery_walks_up(project):
    assert find_config() == project / "pyproject.toml"
    cfg = resolve()
    assert cfg.select == ["KV"] and cfg.ignore == ["KV008"] and cfg.fail_on == "warning"
    assert cfg.severity == {"KV002": "error", "KV007": "info"}
    assert cfg.rule_options == {"KV001": {"window_s": 30.0}}
    assert isinstance(cfg.rule_options["KV001"]["window_s"], float)
    # relative paths are relative to the file that names them, not to the cwd
    assert cfg.baseline == str(project / "ci" / "baseline.json")
    assert cfg.source("select").endswith("proj/pyproject.toml [tool.specdiag]")
    assert cfg.source("rules.KV001.window_s") == cfg.source("select")


@needs_toml
def test_flags_override_the_file(project):
    cfg = resolve(select=["KV001"], fail_on="never", baseline="b.json", severity=["KV002=info"])
    assert cfg.select == ["KV001"] and cfg.sources["select"] == "--select"
    assert cfg.fail_on == "never" and cfg.sources["fail_on"] == "--fail-on"
    assert cfg.baseline == "b.json" and cfg.severity["KV002"] == "info"
    assert cfg.ignore == ["KV008"]  # not given on the command line: from the file


@needs_toml
def test_pyproject_without_section_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.specdiag]\nfail-on = "info"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    monkeypatch.chdir(inner)
    assert find_config() == tmp_path / "pyproject.toml"
    assert resolve().fail_on == "info"


@needs_toml
@pytest.mark.parametrize(("inner_text", "found"), [
    ('[project]\nname = "specdiag-plugin"\ndependencies = ["specdiag"]\n', False),  # named, no table
    ('[tool]\nspecdiag = { fail-on = "never" }\n', True),  # the table as an inline value
    ('tool.specdiag.fail-on = "never"\n', True),  # as dotted keys
    ('[tool."specdiag"]\nfail-on = "never"\n', True),  # as a quoted key
    ('[tool.specdiag\nbroken', False),  # a broken file is passed over
])
def test_discovery_parses_only_a_pyproject_that_names_the_table(tmp_path, monkeypatch, inner_text, found):
    """Discovery reads the text of each pyproject.toml on the way up and parses only one that spells
    ``specdiag``; every way TOML can spell the table is still found."""
    (tmp_path / "pyproject.toml").write_text('[tool.specdiag]\nfail-on = "info"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text(inner_text)
    monkeypatch.chdir(inner)
    assert find_config() == (inner if found else tmp_path) / "pyproject.toml"


@needs_toml
def test_yaml_wins_in_the_same_folder(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.specdiag]\nfail-on = "info"\n')
    (tmp_path / "specdiag.yaml").write_text("fail_on: never\nrules:\n  KV002:\n    min_lookups: 5\n")
    monkeypatch.chdir(tmp_path)
    cfg = resolve()
    assert cfg.fail_on == "never" and cfg.rule_options == {"KV002": {"min_lookups": 5}}
    assert cfg.source("fail_on") == "specdiag.yaml"


@needs_toml
def test_no_config_and_defaults(project):
    cfg = resolve(no_config=True)
    assert cfg.config_file is None and cfg.select is None and cfg.fail_on == "error"
    assert cfg.source("fail_on") == "default"


@needs_toml
def test_explicit_config_file_toml_top_level(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ci.toml").write_text('ignore = ["SD"]\n[severity]\nKV = "warning"\n')
    cfg = resolve("ci.toml")
    assert cfg.ignore == ["SD"]
    assert cfg.severity and all(c.startswith("KV") and v == "warning" for c, v in cfg.severity.items())


@pytest.mark.parametrize("text, needle", [
    ('[tool.specdiag]\nselekt = ["KV"]\n', "unknown setting"),
    ('[tool.specdiag]\nfail-on = "sometimes"\n', "fail-on"),
    ('[tool.specdiag]\nselect = ["XX9"]\n', "unknown rule code"),
    ('[tool.specdiag.severity]\nKV001 = "fatal"\n', "severity"),
    ('[tool.specdiag.severity]\nQQ = "error"\n', "unknown rule code"),
    ('[tool.specdiag.rules.KV001]\nwindow = 3\n', "unknown threshold"),
    ('[tool.specdiag.rules.KV001]\nwindow_s = "long"\n', "must be float"),
    ('[tool.specdiag.rules.KV002]\nmin_lookups = 2.5\n', "must be int"),
    ('[tool.specdiag.rules.ZZ001]\nx = 1\n', "unknown rule code"),
    ('[tool.specdiag]\nselect = [1, 2]\n', "list of rule codes"),
    ("[tool.specdiag\n", "invalid TOML"),
])
@needs_toml
def test_invalid_configuration(tmp_path, monkeypatch, text, needle):
    (tmp_path / "pyproject.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=needle):
        resolve("pyproject.toml")


def test_invalid_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specdiag.yaml").write_text("select: [KV\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        resolve()
    (tmp_path / "specdiag.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        resolve()


@needs_toml
def test_config_show(project):
    r = run(["config", "show"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "config file: " in out and "pyproject.toml" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("fail-on "))
    assert '"warning"' not in line and "warning" in line and "pyproject.toml [tool.specdiag]" in line
    line = next(ln for ln in out.splitlines() if ln.startswith("rules.KV001.window_s"))
    assert "30.0" in line and "pyproject.toml" in line
    line = next(ln for ln in out.splitlines() if ln.startswith("rules.KV002.min_lookups"))
    assert line.rstrip().endswith("# default")
    r = run(["config", "show", "--fail-on", "info", "--format", "json"])
    data = json.loads(r.stdout)
    row = next(v for v in data["values"] if v["key"] == "fail-on")
    assert row == {"key": "fail-on", "value": "info", "source": "--fail-on"}


def test_config_show_bad_config_exits_2(tmp_path, monkeypatch):
    (tmp_path / "specdiag.yaml").write_text("fail_on: often\n")
    monkeypatch.chdir(tmp_path)
    r = run(["config", "show"])
    assert r.exit_code == 2 and r.stderr.startswith("specdiag: error:")


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not found")
def test_check_uses_the_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = str(CORPUS / "hash-seed-unset-zero-hits")
    assert run(["check", log]).exit_code == 0  # KV002 is a warning, fail-on error
    Path("specdiag.yaml").write_text("severity:\n  KV002: error\n")
    assert run(["check", log]).exit_code == 1
    Path("specdiag.yaml").write_text("fail_on: warning\n")
    assert run(["check", log]).exit_code == 1
    assert run(["check", log, "--fail-on", "error"]).exit_code == 0  # flag beats file
    Path("specdiag.yaml").write_text("ignore: [KV002, LOG002]\nfail_on: info\n")
    assert run(["check", log]).exit_code == 0
    # thresholds reach the rule: KV002 needs more lookups than the log has
    Path("specdiag.yaml").write_text("fail_on: warning\nrules:\n  KV002:\n    min_lookups: 100000\n")
    assert run(["check", log]).exit_code == 0
    # baseline from the configuration, relative to it
    Path("specdiag.yaml").write_text("fail_on: warning\nbaseline: ci/accepted.json\n")
    assert run(["check", log, "--update-baseline"]).exit_code == 0
    assert (tmp_path / "ci" / "accepted.json").is_file()
    assert run(["check", log]).exit_code == 0
