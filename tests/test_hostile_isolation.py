"""The last line of defence: one bad record or one broken rule never loses the whole analysis, a bug exits 4
(never 1, the "findings" code), and a write error on the output is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from corpus_paths import CORPUS
from typer.testing import CliRunner

from specdiag.analyzers.base import all_rules
from specdiag.engine import analyze

KV_LOG = str(CORPUS / "tp4-cpu-eviction-vllm011")


def _kv_rule():
    return all_rules()["KV001"]


def test_a_rule_that_raises_in_finish_is_listed_as_failed_and_the_others_still_report(monkeypatch) -> None:
    baseline = {f.rule for f in analyze([KV_LOG]).findings}
    victim = next(code for code in sorted(all_rules()) if code != "KV001")

    def boom(self, ctx, run):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(all_rules()[victim], "finish", boom)
    report = analyze([KV_LOG])
    assert report.rules_failed == [{"rule": victim, "error": "ZeroDivisionError: division by zero",
                                    "deployment": KV_LOG}]
    assert {f.rule for f in report.findings} == baseline - {victim}
    assert report.to_dict()["rules_failed"][0]["rule"] == victim
    from specdiag.report.text import render_text

    assert f"rule {victim} failed (ZeroDivisionError" in render_text(report)


def test_a_rule_that_raises_on_one_event_costs_that_record_only(monkeypatch) -> None:
    cls = _kv_rule()
    original = cls.observe
    calls = {"n": 0}

    def flaky(self, ev):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("chunk_size")
        return original(self, ev)

    monkeypatch.setattr(cls, "observe", flaky)
    report = analyze([KV_LOG])
    assert any(f.rule == "KV001" for f in report.findings)
    errors = [e for i in report.inputs for e in i["errors"]]
    assert any(e.startswith("line ") and "skipped (KeyError" in e for e in errors), errors


def test_an_ingest_failure_stops_that_input_only(monkeypatch, tmp_path) -> None:
    import specdiag.engine as engine

    real = engine.iter_records
    other = tmp_path / "other.log"
    other.write_text((CORPUS / "seed-minimal-variant" / "serve.log").read_text() if (
        CORPUS / "seed-minimal-variant" / "serve.log").exists() else "INFO 05-06 15:56:03 [x.py:1] hi\n")

    def broken(src, *a, **k):
        if src.path == str(other):
            raise MemoryError("synthetic")
        yield from real(src, *a, **k)

    monkeypatch.setattr(engine, "iter_records", broken)
    report = analyze([str(other), KV_LOG])
    bad = next(i for i in report.inputs if i["path"] == str(other))
    assert any("reading stopped (MemoryError" in e for e in bad["errors"])
    assert any(f.rule == "KV001" for f in report.findings)


def test_an_unexpected_exception_is_one_line_and_exit_4(monkeypatch) -> None:
    import specdiag.engine as engine
    from specdiag.cli import app

    def crash(*a, **k):
        raise RuntimeError("something\x1b]0;evil\x07 broke")

    monkeypatch.setattr(engine, "analyze", crash)
    res = CliRunner().invoke(app, ["analyze", KV_LOG])
    assert res.exit_code == 4
    err = res.stderr if hasattr(res, "stderr") else res.output
    assert "internal error" in err and "please report" in err and "--debug" in err
    assert "Traceback" not in err and "\x1b" not in err


def test_debug_shows_the_traceback() -> None:
    code = ("import sys, specdiag.engine as e\n"
            "def crash(*a, **k):\n    raise RuntimeError('boom')\n"
            "e.analyze = crash\n"
            f"sys.argv = ['specdiag', 'analyze', '--debug', {KV_LOG!r}]\n"
            "from specdiag.cli import main\nmain()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 4
    assert "Traceback" in p.stderr and "RuntimeError: boom" in p.stderr


def test_a_full_disk_is_one_line_and_exit_2() -> None:
    if not os.path.exists("/dev/full"):
        return
    with open("/dev/full", "wb") as full:
        p = subprocess.run([sys.executable, "-m", "specdiag", "analyze", "--format", "json", KV_LOG], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["specdiag: error: cannot write output: No space left on device"]


def test_a_closed_pipe_is_one_line_and_exit_2() -> None:
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "specdiag", "analyze", "--format", "json", KV_LOG], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "cannot write output" in p.stderr


def test_json_report_of_a_good_log_with_a_bad_line_is_complete(tmp_path, run_cli) -> None:
    log = tmp_path / "x.log"
    good = (CORPUS / "tp4-cpu-eviction-vllm011").glob("*.log")
    text = "".join(p.read_text() for p in sorted(good))
    log.write_text(text + "INFO 05-06 15:56:03 [scheduler.py:3426] Recovered from KV load failure: "
                   + "9" * 5000 + " request(s) rescheduled (768 tokens affected).\n")
    code, out, err = run_cli("check", "--format", "sarif", str(log))
    assert code in (0, 1) and out.strip(), err
    json.loads(out)


def test_check_writes_report_files_atomically_and_never_through_a_symlink(tmp_path, run_cli) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "report.sarif"
    os.symlink(victim, out)
    code, _, err = run_cli("check", "--format", f"sarif:{out}", KV_LOG)
    assert code == 1, err
    assert victim.read_text() == "keep me\n"
    assert not out.is_symlink() and json.loads(out.read_text())["version"] == "2.1.0"
    code, _, err = run_cli("check", "--format", f"sarif:{tmp_path}", KV_LOG)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
