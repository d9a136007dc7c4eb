"""The compiled literal searches (the prefilter's anchors, ``find_any``) come in three builds: SSSE3 nibble
tables where the CPU has them, the SSE2 pair test, and a byte loop (``-DSPECDIAG_SCAN_PORTABLE``, tested in
``test_scan_shortcuts``). The other tests run whichever this CPU picks; here the SSE2 one is forced
(``SPECDIAG_SCAN_NO_SSSE3=1``) in a child and must answer as the references do, on the same kind of lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_scan = pytest.importorskip("specdiag.ingest._scan")

CHILD = r"""
import random, sys
sys.path.insert(0, "tests")
from array import array
from specdiag.ingest import _scan, prefilter
from specdiag.ingest.literals import first_literal
from specdiag.ingest.marks import MARKER_LITERALS
from test_prefilter import PIECES, _catalog_lines

assert _scan.SEARCH == sys.argv[1], _scan.SEARCH
rng = random.Random(5)
lines = _catalog_lines()
for _ in range(3000):  # anchors at every offset of every 16-byte step, cut ones at the line's end
    lit = rng.choice(prefilter.ANCHORS)
    lines.append(b"x" * rng.randrange(40) + rng.choice([lit, lit[:-1]]) + b"y" * rng.randrange(3))
    lines.append(b"".join(rng.choice(PIECES) for _ in range(rng.randrange(14))).replace(b"\n", b""))
for flags in (0, prefilter.ESC_BLOCK, prefilter.RESIDUE_BLOCK):
    data = b"\n".join(lines)
    starts, ends, pos = array("q"), array("q"), 0
    for line in lines:
        starts.append(pos)
        ends.append(pos + len(line))
        pos += len(line) + 1
    got = _scan.prefilter(data, 0, starts, ends, flags, len(data), *prefilter.blobs_of(None), prefilter.width_mask(frozenset()), b"")
    assert got == prefilter.kinds(data, 0, starts, ends, flags), flags
for _ in range(3000):
    lits = tuple(bytes(rng.randrange(256) for _ in range(rng.randrange(2, 9))) for _ in range(rng.randrange(1, 17)))
    lits = rng.choice([lits, MARKER_LITERALS])
    buf = bytearray(rng.randrange(256) for _ in range(rng.randrange(200)))
    for _ in range(rng.randrange(3)):
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = rng.choice(lits)
    buf = bytes(buf)
    lo = rng.randrange(len(buf) + 1)
    hi = rng.randrange(lo, len(buf) + 1)
    assert _scan.find_any(buf, lo, hi, lits) == first_literal(buf, lo, hi, lits), (buf, lo, hi, lits)
print("ok")
"""


def test_the_sse2_searches_answer_as_the_references_when_the_ssse3_ones_are_switched_off() -> None:
    if _scan.SEARCH == "bytes":
        pytest.skip("a build without SSE2")
    env = {**os.environ, "SPECDIAG_SCAN_NO_SSSE3": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, "sse2"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_searches_this_cpu_picks_answer_as_the_references() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, _scan.SEARCH], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
