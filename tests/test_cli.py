"""The analyze command as a user meets it: exit codes, one-line errors, speed of --help/--version."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from logbuilder import lookup, shortfall_pair, write

ROOT_EXAMPLE = "examples/tp8-shortfall/serve.log"


def test_version_and_help_are_fast_and_do_not_import_pandas() -> None:
    code = ("import sys, time; t=time.perf_counter(); sys.argv=['specdiag','--version']\n"
            "from specdiag.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert 'pandas' not in sys.modules, 'pandas imported on the --version path'\n"
            "print(time.perf_counter()-t)")
    timings = []
    for _ in range(3):  # best of three: the budget is for the tool, not for a busy CI neighbour
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        assert lines[0].startswith("specdiag ")
        timings.append(float(lines[-1]))
    assert min(timings) < 0.3, timings
    t = time.perf_counter()
    h = subprocess.run([sys.executable, "-m", "specdiag", "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "analyze" in h.stdout
    assert time.perf_counter() - t < 3.0  # interpreter start included


#: modules whose import was measured to cost 1.6-8.5 ms of each start (2-vCPU machine) and that an analysis
#: written as JSON has no use for: OpenSSL (a fingerprint is one SHA-1: ``specdiag.digests``), the HTML entity
#: table (markdown only), a TOML parser (only a pyproject.toml that names specdiag is parsed), the line filters
#: (only with --since, --until, --request or --rank)
_NOT_ON_THE_JSON_PATH = ("_hashlib", "html", "tomllib", "specdiag.ingest.linefilter")


def test_an_analysis_written_as_json_loads_none_of_the_costly_modules_it_has_no_use_for(tmp_path) -> None:
    code = ("import sys\nsys.argv=['specdiag','analyze',sys.argv[1],'-f','json','-o',sys.argv[2]]\n"
            "from specdiag.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {_NOT_ON_THE_JSON_PATH!r} if m in sys.modules])")
    from pathlib import Path

    example = Path(ROOT_EXAMPLE).resolve()
    out = subprocess.run([sys.executable, "-c", code, str(example), str(tmp_path / "r.json")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert json.loads((tmp_path / "r.json").read_text())["findings"]


def test_user_example_shows_the_arithmetic_and_rejects_the_hunch(run_cli) -> None:
    code, out, err = run_cli("analyze", ROOT_EXAMPLE)
    assert code == 1, err
    assert "6144 missing tokens = 24 chunks of 256" in out and "TP2" in out
    assert "Why not save_decode_cache" in out


@pytest.mark.parametrize("make,expect_code,expect_msg", [
    (lambda d: str(d / "missing.log"), 2, "no such file"),
    (lambda d: (d / "junk").mkdir() or str(d / "junk"), 2, "no log files"),
])
def test_bad_paths_give_one_line_and_exit_2(run_cli, tmp_path, make, expect_code, expect_msg) -> None:
    code, out, err = run_cli("analyze", make(tmp_path))
    assert code == expect_code
    assert expect_msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("content", [
    b"",                                             # empty file
    b"hello world\nnothing to see\n",                 # text that is no vLLM/LMCache output
    bytes(range(256)) * 64,                           # binary data
])
def test_unrecognised_input_exits_3_without_traceback(run_cli, tmp_path, content) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(content)
    code, out, err = run_cli("analyze", str(p), "--format", "json")
    assert code == 3 and "Traceback" not in err
    assert json.loads(out)["findings"] == []


def test_directory_of_junk_files_exits_3(run_cli, tmp_path) -> None:
    for i in range(3):
        (tmp_path / f"f{i}.log").write_bytes(bytes(range(256)) * 10)
    code, out, err = run_cli("analyze", str(tmp_path))
    assert code == 3 and "recognised" in err


def test_truncated_gzip_gives_partial_analysis_and_says_what_was_skipped(run_cli, tmp_path) -> None:
    lines = [lookup(f"r{i}", 9000, 8192) for i in range(3000)] + shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1")
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    p = tmp_path / "cut.log.gz"
    p.write_bytes(data[: int(len(data) * 0.6)])
    code, out, err = run_cli("analyze", str(p), "--format", "json")
    assert code == 0 and "Traceback" not in err
    rep = json.loads(out)
    assert rep["inputs"][0]["recognized"] > 0
    assert any("truncated" in e for e in rep["inputs"][0]["errors"])


def test_stdin_is_read_when_piped(run_cli, tmp_path) -> None:
    data = "\n".join(shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1")) + "\n"
    code, out, err = run_cli("analyze", "--format", "json", "--stdin-name", "serve.log", stdin=data.encode())
    assert code == 1, err
    rep = json.loads(out)
    assert rep["inputs"][0]["path"] == "serve.log"
    assert rep["findings"][0]["evidence"][0]["path"] == "serve.log"


@pytest.mark.parametrize("fail_on,code", [("error", 1), ("warning", 1), ("info", 1), ("never", 0)])
def test_fail_on_levels(run_cli, tmp_path, fail_on, code) -> None:
    p = write(tmp_path / "a.log", shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1"))
    assert run_cli("analyze", p, "--fail-on", fail_on)[0] == code


def test_bad_options_and_bad_config_exit_2(run_cli, tmp_path) -> None:
    p = write(tmp_path / "a.log", shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1"))
    assert run_cli("analyze", p, "--format", "xml")[0] == 2
    assert run_cli("analyze", p, "--select", "ZZ9")[0] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunk_size: [unclosed\n")
    code, out, err = run_cli("analyze", p, "--lmcache-config", str(bad))
    assert code == 2 and "not valid YAML" in err


def test_select_and_ignore_filter_rules(run_cli, tmp_path) -> None:
    p = write(tmp_path / "a.log", shortfall_pair("r1", 7168, 8192, proc="Worker_TP0 pid=1"))
    code, out, _ = run_cli("analyze", p, "--format", "json", "--ignore", "KV001")
    assert code == 0 and not json.loads(out)["findings"]
    code, out, _ = run_cli("analyze", p, "--format", "json", "--select", "KV")
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["KV001"]


def test_log_text_is_never_interpreted_as_rich_markup(run_cli, tmp_path) -> None:
    p = write(tmp_path / "a.log", shortfall_pair("[bold red]evil[/] r1", 7168, 8192, proc="Worker_TP0 pid=1"))
    code, out, err = run_cli("analyze", p)
    assert "[bold red]evil[/]" in out


def test_each_command_runs_from_an_app_of_its_own_module_alone() -> None:
    """``main`` builds only the named command's module: the table it uses must name every command the full
    app has, and that module alone must register it (and nothing else)."""
    import typer

    from specdiag.cli import COMMAND_OF_MODULE, app_for, make_app

    def names(app: typer.Typer) -> set[str]:
        return {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}

    assert names(make_app()) == {c for cs in COMMAND_OF_MODULE.values() for c in cs}
    for commands in COMMAND_OF_MODULE.values():
        for command in commands:
            assert names(app_for(["specdiag", command, "--help"])) == set(commands), command
    assert names(app_for(["specdiag", "--help"])) == names(make_app())
    assert names(app_for(["specdiag", "analyse"])) == names(make_app())  # a misspelling gets every suggestion


_ENTRY = ("import atexit, sys\n"
          "sys.argv = ['specdiag'] + sys.argv[1:]\n"
          "atexit.register(lambda: sys.stderr.write('atexit ran\\n'))\n"
          "{before}"
          "from specdiag.cli import entry\n"
          "entry()\n"
          "sys.stderr.write('not reached: entry returned\\n')\n")


def test_the_console_script_leaves_with_the_reports_status_after_its_atexit_callbacks_and_full_output() -> None:
    example = str(Path(ROOT_EXAMPLE).resolve())
    out = subprocess.run([sys.executable, "-c", _ENTRY.format(before=""), "analyze", example, "-f", "json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # findings present: the contract's 1, through os._exit
    assert json.loads(out.stdout)["findings"]  # every byte of the report was flushed before leaving
    assert out.stderr.endswith("atexit ran\n") and "not reached" not in out.stderr


def test_the_console_script_waits_for_a_thread_still_running_as_the_interpreter_would() -> None:
    thread = ("import threading, time\n"
              "threading.Thread(target=lambda: (time.sleep(0.5), print('thread finished', flush=True))).start()\n")
    out = subprocess.run([sys.executable, "-c", _ENTRY.format(before=thread), "--version"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"specdiag {__import__('specdiag').__version__}", "thread finished"]
    assert "atexit ran" in out.stderr
