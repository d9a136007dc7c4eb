"""Rows' lines packed into one bytes object: the compiled copy loop gives the reference's bytes, refuses a
span outside its buffer, and a packed row reads back as the line it was."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdiag.ingest import scan
from specdiag.ingest.hot import PackedRows

compiled = pytest.mark.skipif(scan._compiled is None, reason="the scanner is not compiled here")


@st.composite
def _rows(draw):
    block = draw(st.binary(min_size=0, max_size=300))
    base = draw(st.integers(0, len(block)))
    spans = draw(st.lists(st.tuples(st.integers(0, len(block) - base), st.integers(0, len(block) - base)), max_size=12))
    spans = [(min(a, b), max(a, b)) for a, b in spans]
    lo = draw(st.integers(0, len(spans)))
    return block, base, array("q", [a for a, _ in spans]), array("q", [b for _, b in spans]), lo, draw(
        st.integers(lo, len(spans)))


@compiled
@settings(max_examples=300, deadline=None)
@given(_rows())
def test_the_compiled_pack_gives_the_references_bytes(case) -> None:
    block, base, starts, ends, lo, hi = case
    assert scan._compiled.pack(block, base, starts, ends, lo, hi) == scan.pack_rows_py(block, base, starts, ends, lo, hi)


@compiled
@pytest.mark.parametrize(("starts", "ends", "lo", "hi"), [
    ([0, 5], [4, 99], 0, 2),  # past the end of the buffer
    ([3], [2], 0, 1),  # a span that ends before it starts
    ([-1], [2], 0, 1),
    ([0], [1], 0, 2),  # more rows than the columns hold
    ([0], [1, 2], 0, 1),  # columns of different lengths
])
def test_the_compiled_pack_refuses_a_span_outside_its_buffer(starts, ends, lo, hi) -> None:
    with pytest.raises(ValueError):
        scan._compiled.pack(b"0123456789", 0, array("q", starts), array("q", ends), lo, hi)


def test_a_packed_row_reads_back_as_its_line() -> None:
    block = b"xx" + b"first line\nsecond\n\nlast one\n"
    starts, ends = array("q", [0, 11, 18, 19]), array("q", [10, 17, 18, 27])
    rows = PackedRows.of(block, 2, starts, ends, 1, 4)
    assert len(rows) == 3
    assert [rows[i] for i in range(3)] == [b"second", b"", b"last one"]
    assert rows[-1] == b"last one"
    with pytest.raises(IndexError):
        rows[3]
