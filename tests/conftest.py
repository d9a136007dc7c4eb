from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))


@pytest.fixture
def corpus_dir() -> Path:
    return TESTS / "corpus"


@pytest.fixture
def run_cli():
    """Run the real console entry point in a subprocess: (exit code, stdout, stderr)."""
    import subprocess

    def run(*args: str, stdin: bytes | None = None, cwd: str | None = None, env: dict | None = None):
        e = {**os.environ, "NO_COLOR": "1", **(env or {})}
        p = subprocess.run([sys.executable, "-m", "specdiag", *args], input=stdin, capture_output=True,
                           cwd=cwd, env=e, timeout=120)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    return run
