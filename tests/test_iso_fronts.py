"""Timestamps (kubectl / docker ``--timestamps``) and the CRI format's stream and tag taken off every line of a
block: the compiled copy (``_scan.iso_fronts``, ``_scan.iso_row_wraps``) must give the regex reference's
copy and widths on any bytes, in linear time."""

from __future__ import annotations

import random
import time
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdiag.ingest import ahead, blocks

_scan = pytest.importorskip("specdiag.ingest._scan")

FRONTS = [b"2026-05-06T15:56:03Z ", b"2026-05-06T15:56:03.745518223Z ", b"2025-01-02T03:04:05+01:00 ",
          b"2025-01-02T03:04:05,5-0130 ", b"2026-05-06T15:56:03.1Z stdout F ", b"2026-05-06T15:56:03Z stderr P ",
          b"2026-05-06T15:56:03+01:0 ", b"2026-05-06T15:56:03.Z ", b"2026-05-06T15:56:03Z stdout X ",
          b"2026-05-06T15:56:03Z stdout F", b"2026-05-06T15:56:03", b"2026-05-06 15:56:03Z ", b"1", b""]
PIECES = FRONTS + [b"INFO x", b"\n", b" ", b"stdout F ", b"+", b":", b"0", b"Z", b"\xff", b"\r"]


def _compiled(data: bytes, start: int, end: int) -> tuple[bytes, array]:
    copy, raw = _scan.iso_fronts(data, start, end)
    widths = array("q")
    widths.frombytes(raw)
    return copy, widths


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30), st.integers(0, 40), st.integers(0, 40))
def test_the_compiled_copy_and_widths_are_the_references(pieces, cut_lo, cut_hi) -> None:
    data = b"".join(pieces)
    start = min(cut_lo, len(data))
    end = max(start, len(data) - cut_hi)
    assert _compiled(data, start, end) == ahead.iso_fronts_reference(data, start, end)


@pytest.mark.parametrize("seed", range(40))
def test_row_widths_of_the_compiled_lookup_are_the_references(seed, monkeypatch) -> None:
    rng = random.Random(seed)
    lines = [rng.choice(FRONTS) + b"x" * rng.randrange(5) for _ in range(rng.randrange(1, 60))]
    data = b"pre\n" + b"\n".join(lines) + rng.choice([b"\n", b""])
    start, first = 4, 100
    rows = array("q", sorted(rng.sample(range(first, first + len(lines)), rng.randrange(len(lines) + 1))))
    got = blocks._iso_row_wraps(data, start, len(data), first, {"line": rows})
    monkeypatch.setattr(blocks, "_compiled_iso_row_wraps", None)
    assert got == blocks._iso_row_wraps(data, start, len(data), first, {"line": rows})
    with pytest.raises(ValueError):
        _scan.iso_row_wraps(data, start, len(data), array("q", [first + len(lines)]), first)


def test_a_cri_block_loses_exactly_its_fronts() -> None:
    data = b"2026-05-06T15:56:03.5Z stdout F INFO a\n2026-05-06T15:56:04Z stderr P (W pid=1) b\nplain\n"
    assert _compiled(data, 0, len(data)) == (b"INFO a\n(W pid=1) b\nplain\n", array("q", [32, 30, 0]))


def test_adversarial_lines_cost_linear_time() -> None:
    """Lines that almost carry a front, 64 KiB each, ending in a byte that breaks it."""
    shapes = [b"2026-05-06T15:56:03" + b"1" * 65536 + b"x", b"2026-05-06T15:56:03." + b"9" * 65536,
              b"2026-05-06T15:56:03+01:" * 2900, b"2026-05-06T15:56:03Z stdout " * 2400]
    data = b"\n".join(shapes * 8)
    t = time.perf_counter()
    for _ in range(5):
        _scan.iso_fronts(data, 0, len(data))
    assert time.perf_counter() - t < 1.0
