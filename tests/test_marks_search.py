"""The block search for server-start markers: the compiled copy (``_scan.find_any``, one pass for all the
literals) must give the reference's offset (``marks.first_literal``, one search per literal) on any bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdiag.ingest.marks import (
    MARKER_LITERALS,
    MAX_CUTS,
    first_among_rare,
    first_literal,
    first_marker,
    marked_lines,
)

_scan = pytest.importorskip("specdiag.ingest._scan")
ALPHABET = sorted(set(b"".join(MARKER_LITERALS)) | set(b"\n \x00\xff"))


def _text(rng: random.Random, n: int) -> bytes:
    """Bytes made of the literals' own bytes, with whole literals and their cut prefixes and suffixes spread in."""
    out = bytearray(rng.choice(ALPHABET) for _ in range(n))
    for _ in range(rng.randrange(4)):
        lit = rng.choice(MARKER_LITERALS)
        piece = rng.choice([lit, lit[: rng.randrange(1, len(lit))], lit[rng.randrange(1, len(lit)):]])
        at = rng.randrange(n + 1)
        out[at:at] = piece
    return bytes(out)


@pytest.mark.parametrize("seed", range(300))
def test_the_compiled_search_gives_the_references_offset_on_generated_spans(seed: int) -> None:
    rng = random.Random(seed)
    buf = _text(rng, rng.choice([0, 1, 15, 16, 17, 40, 200, 3000]))
    lo = rng.randrange(len(buf) + 1)
    hi = rng.randrange(lo, len(buf) + 1)
    assert _scan.find_any(buf, lo, hi, MARKER_LITERALS) == first_literal(buf, lo, hi, MARKER_LITERALS)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 320), st.integers(0, 320),
       st.lists(st.binary(min_size=2, max_size=20), min_size=1, max_size=16))
def test_the_compiled_search_agrees_for_any_literals(buf: bytes, lo: int, hi: int, lits: list[bytes]) -> None:
    lo, hi = min(lo, len(buf)), min(hi, len(buf))
    want = first_literal(buf, lo, hi, tuple(lits)) if lo < hi else -1
    assert _scan.find_any(buf, lo, hi, tuple(lits)) == want


@pytest.mark.parametrize("where", ["first", "last", "straddles the end", "at every 16-byte step"])
def test_a_marker_at_the_span_edges_is_found_exactly_there(where: str) -> None:
    lit = MARKER_LITERALS[2]
    pad = b"x" * 100
    if where == "first":
        buf, lo, hi, want = lit + pad, 0, len(lit) + 100, 0
    elif where == "last":
        buf, lo, hi, want = pad + lit, 0, 100 + len(lit), 100
    elif where == "straddles the end":
        buf, lo, hi, want = pad + lit, 0, 100 + len(lit) - 1, -1
    else:
        for k in range(40):
            buf = b"y" * k + lit + pad
            assert first_marker(buf, 0, len(buf)) == k
        return
    assert first_marker(buf, lo, hi) == want == first_literal(buf, lo, hi, MARKER_LITERALS)


def test_bad_literals_are_refused_with_an_error_not_a_crash() -> None:
    with pytest.raises(ValueError):
        _scan.find_any(b"abc", 0, 3, (b"a",))
    with pytest.raises(ValueError):
        _scan.find_any(b"abc", 0, 3, tuple([b"ab"] * 17))


def _naive_marked(rare: dict, buf: bytes, off: int) -> list[tuple[int, int]]:
    """What ``marked_lines`` answered before it jumped from hit to hit: every rare line holding a literal."""
    return [(n, s) for n, s, e in zip(rare["line"], rare["start"], rare["end"], strict=True)
            if any(lit in buf[off + s : off + e] for lit in MARKER_LITERALS)][:MAX_CUTS]


@pytest.mark.parametrize("seed", range(60))
def test_marked_lines_are_the_rare_lines_holding_a_marker_and_no_other(seed: int) -> None:
    """Markers in rare lines, in counted lines (skipped), straddling a line's cut end, several per line."""
    from types import SimpleNamespace

    rng = random.Random(seed)
    off = rng.randrange(3)
    lines = [_text(rng, rng.randrange(0, 60)).replace(b"\n", b" ") for _ in range(rng.randrange(1, 40))]
    buf = b"x" * off + b"\n".join(lines)
    rare: dict[str, list[int]] = {"line": [], "start": [], "end": []}
    pos = 0
    for n, line in enumerate(lines, 1):
        if rng.random() < 0.7:  # the rest are lines the scanner counted
            cut = rng.choice([len(line), max(0, len(line) - rng.randrange(1, 5))])  # a row cut short
            rare["line"].append(n), rare["start"].append(pos), rare["end"].append(pos + cut)
        pos += len(line) + 1
    res = SimpleNamespace(columns={"rare": rare}, marker=None)
    assert marked_lines(res, buf, off) == _naive_marked(rare, buf, off)
    res.marker = first_among_rare(res, buf, off)  # the first search made ahead, as a scan thread makes it
    assert marked_lines(res, buf, off) == _naive_marked(rare, buf, off)
