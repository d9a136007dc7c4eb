"""``SPECDIAG_SCANNER=python``: the switch the benchmark uses to time the pure-Python fallback on an
install where the compiled scanner was built."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from scan_cases import adversarial_block

from specdiag.ingest import scan
from specdiag.ingest.scan_fast import scan_block_fast


def _compiled_must_not_run(block: bytes, base_line: int):
    raise AssertionError("the compiled scanner ran although SPECDIAG_SCANNER=python")


@pytest.mark.parametrize("value", ["python", "Python", " python "])
def test_scanner_env_forces_the_python_fallback(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    block = adversarial_block(5)
    monkeypatch.setenv("SPECDIAG_SCANNER", value)
    monkeypatch.setattr(scan, "scan_block_c", _compiled_must_not_run)
    assert scan.scan_block(block, 10) == scan_block_fast(block, 10)


def test_other_scanner_values_keep_the_compiled_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    if scan._compiled is None:
        pytest.skip("compiled scanner not built")
    calls: list[int] = []
    real = scan.scan_block_c

    def spy(block: bytes, base_line: int):
        calls.append(base_line)
        return real(block, base_line)

    monkeypatch.setenv("SPECDIAG_SCANNER", "c")
    monkeypatch.setattr(scan, "scan_block_c", spy)
    scan.scan_block(adversarial_block(2), 7)
    assert calls == [7]


def test_implementation_reports_the_forced_fallback() -> None:
    code = "from specdiag.ingest import scan; print(scan.IMPLEMENTATION)"
    env = dict(os.environ, SPECDIAG_SCANNER="python")
    forced = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert forced.stdout.strip() == "python", forced.stderr
    env.pop("SPECDIAG_SCANNER")
    default = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert default.stdout.strip() == ("c" if scan._compiled is not None else "python"), default.stderr
