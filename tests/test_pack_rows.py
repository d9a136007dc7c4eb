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


def test_lookup_rows_sliced_from_the_fallbacks_text_are_those_cut_from_the_block() -> None:
    """The pure-Python scan joins the lookup lines it split (``ScanResult.lookup_text``); every run of rows
    read back from it is the run cut from the block by offsets, as the compiled scan's rows are."""
    from specdiag.ingest.hot import BlockView
    from specdiag.ingest.origin import OriginCache
    from specdiag.ingest.scan_fast import scan_block_fast

    lookup = (b"(EngineCore pid=203) [2026-05-06 15:56:03,745] LMCache INFO: Reqid: r%d, Total tokens %d, LMCache "
              b"hit tokens: 0 (vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter)")
    lines = [lookup % (i, 100 + i) if i % 3 else b"some other line %d" % i for i in range(12)]
    block = b"x\n" + b"\n".join(lines) + b"\n"
    res = scan_block_fast(block[2:], 0)
    assert res.lookup_text is not None
    with_text = BlockView("p", block, 2, res, OriginCache(), None)
    without = BlockView("p", block, 2, scan.ScanResult(res.lines, res.prefixes, res.counts, res.columns), OriginCache(), None)
    n = len(res.columns["lookups"]["line"])
    assert n == 8
    for lo in range(n + 1):
        for hi in range(lo, n + 1):
            a, b = with_text.packed_lookups(lo, hi), without.packed_lookups(lo, hi)
            assert (a.data, list(a.offsets)) == (b.data, list(b.offsets))
            assert [a[i] for i in range(len(a))] == [lines[j] for j in range(12) if j % 3][lo:hi]
