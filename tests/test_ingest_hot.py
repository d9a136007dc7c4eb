"""The scanner in front of the per-line stages changes nothing a report says, only how fast it is said.

Three ways to read the same input must give the same report: the compiled scanner, the pure-Python
scanner (what a machine without a compiler runs) and no scanner at all (every line through the per-line
stages, as the records tests read them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdiag import engine
from specdiag.engine import analyze
from specdiag.ingest import hot, scan
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import expand_inputs
from specdiag.report.json_report import render_json

ROOT = Path(__file__).resolve().parent.parent
INPUTS = sorted(
    [p for p in (ROOT / "tests" / "corpus").glob("*/") if p.is_dir()]
    + [p for p in (ROOT / "examples").glob("*/") if p.is_dir()]
    + [p for p in (ROOT / "tests" / "fragments").glob("*/") if p.is_dir()]
)
VOLATILE = ("elapsed_s", "generated_at", "tool")


def _report(path: Path) -> dict:
    logs = sorted(str(p) for p in path.iterdir() if p.is_file() and p.name != "expected.json" and p.suffix != ".md")
    doc = json.loads(render_json(analyze(logs, jobs=1)))
    for key in VOLATILE:
        doc.pop(key, None)
    return doc


def _without_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine.iter_records

    def every_line(src, hot=None, window=None):  # noqa: ARG001 - the engine's call, minus the scanner
        return real(src, None, window)

    monkeypatch.setattr(engine, "iter_records", every_line)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_report_is_the_same_with_compiled_python_and_no_scanner(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _report(path)
    with monkeypatch.context() as m:
        m.setattr(scan, "_compiled", None)
        assert _report(path) == compiled, "pure-Python scanner"
    with monkeypatch.context() as m:
        _without_scanner(m)
        assert _report(path) == compiled, "no scanner"
