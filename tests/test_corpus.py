"""Every corpus case (copied from the shared corpus) and every pasted-fragment case must meet its expected.json.

``tests/fragments/`` holds short excerpts written from the upstream message formats (not from any one log):
the user's two-line paste with and without its prefix, indented, behind ``grep -n``/``-H``, wrapped by a
terminal, in journald with German month names, behind kubectl and docker wrappers, and one per mechanism
that a single line names (staging exhausted, Redis eviction, pin timeout, LMCache 0.3.1 on every rank, …).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from expectations import check_report

from specdiag.engine import analyze

HERE = Path(__file__).parent
CASES = sorted(p.parent for folder in ("corpus", "fragments") for p in (HERE / folder).glob("*/expected.json"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case_meets_its_expectations(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    logs = sorted(str(p) for p in case.iterdir() if p.name != "expected.json" and not p.name.startswith("."))
    report = analyze(logs).to_dict()
    assert check_report(expected, report) == []


def test_corpus_runs_through_the_cli_with_contract_exit_codes(run_cli, corpus_dir) -> None:
    code, out, err = run_cli("analyze", str(corpus_dir / "tp4-cpu-eviction-vllm011" / "vllm.log"), "--format", "json")
    assert code == 1, err  # an error-level finding → exit 1 at the default --fail-on error
    report = json.loads(out)
    assert report["schema"] == "specdiag.report/1"
    kv = [f for f in report["findings"] if f["rule"] == "KV001"][0]
    assert kv["measurements"]["missing_chunks"] == 13
    code, out, err = run_cli("analyze", str(corpus_dir / "clean-healthy-ngram-tp2" / "vllm.log"), "--format", "json")
    assert code == 0, err
