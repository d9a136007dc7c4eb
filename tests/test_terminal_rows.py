"""Logs pasted from a terminal narrower than 80 columns (or ``fold -w N``): the rows are joined back into
lines before any parser reads them (``ingest/rows.py``), also when each line carried a kubectl prefix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdiag.engine import analyze
from specdiag.ingest.rows import RowJoiner, block_width
from specdiag.report.json_report import render_json

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tp8-shortfall" / "serve.log"


def _fold(data: bytes, width: int) -> bytes:
    """``fold -w width``: each line cut into rows of exactly ``width`` bytes, the last one shorter or equal."""
    out = []
    for line in data.split(b"\n")[:-1]:
        out += [line[i : i + width] for i in range(0, max(len(line), 1), width)] or [b""]
    return b"\n".join(out) + b"\n"


def _findings(path: Path) -> list[tuple]:
    doc = json.loads(render_json(analyze([str(path)], jobs=1)))
    return [(f["rule"], f["severity"], json.dumps(f["measurements"], sort_keys=True),
             [(c["id"], c["confidence"]) for c in f["causes"]]) for f in doc["findings"]]


@pytest.fixture(scope="module")
def original() -> list[tuple]:
    return _findings(EXAMPLE)


@pytest.mark.parametrize("width", [60, 72])
@pytest.mark.parametrize("shape", ["as-written", "no-colour", "kubectl-prefix"])
def test_a_narrow_terminal_wrap_gives_the_findings_of_the_original(tmp_path, original, width, shape) -> None:
    data = EXAMPLE.read_bytes()
    if shape == "no-colour":  # copied from the terminal: no escape codes
        data = re.sub(rb"\x1b\[[0-9;]*m", b"", data)
    elif shape == "kubectl-prefix":  # the continuation rows carry no [pod/...] prefix
        data = b"".join(b"[pod/vllm-0/vllm] " + s + b"\n" for s in data.split(b"\n")[:-1])
    path = tmp_path / "wrapped.log"
    path.write_bytes(_fold(data, width))
    assert _findings(path) == original


def test_an_unwrapped_log_has_no_wrap_width() -> None:
    lines = EXAMPLE.read_bytes().split(b"\n")
    assert block_width(map(len, lines)) is None
    assert block_width([72] * 10 + [40] * 20) == 72


def test_short_lines_that_fill_the_width_are_not_glued_to_the_next_line() -> None:
    rows = RowJoiner()
    rows.width = 40
    whole = b"[2026-05-06 10:00:00,000] LMCache INFO: x (a.py:1:lmc)"[:40]
    traceback = [b'  File "/x/y.py", line 1, in f' + b" " * 10, b"    return g()"]
    got = [rows.push(1, whole), rows.push(2, b"(Worker pid=1) INFO 05-06 10:00:00 [a.py:1] y"),
           rows.push(3, traceback[0]), rows.push(4, traceback[1])]
    handed = [x for pair in [*got, (rows.flush(), None)] for x in pair if x is not None]
    assert [n for n, _ in handed] == [1, 2, 3, 4]  # four lines, none joined
