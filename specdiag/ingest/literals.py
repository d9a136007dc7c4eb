"""Where the first of a few literals occurs in a span of bytes: a block is searched once for all of them.

Searching a 1 MiB block once per literal reads it once per literal; the compiled copy (``_scan.find_any``,
``_prefilter.c``) reads it once. Used for the server-start markers (``marks.py``) and for the colour residue
a block may hold (``cleaner.colour_of``): both searches come back empty on most blocks, so the whole block
is read each time.
"""

from __future__ import annotations


def first_literal(buf: bytes, lo: int, hi: int, literals: tuple[bytes, ...]) -> int:
    """The lowest offset in ``buf[lo:hi]`` where one of ``literals`` starts, or -1: the reference, one search
    of the span per literal."""
    hits = [at for lit in literals if (at := buf.find(lit, lo, hi)) >= 0]
    return min(hits) if hits else -1


try:  # the compiled copy: the span read once for all the literals
    from specdiag.ingest._scan import find_any as _compiled_find_any
except ImportError:  # pragma: no cover - exercised by the build without a compiler
    _compiled_find_any = None


def first_of(buf: bytes, lo: int, hi: int, literals: tuple[bytes, ...]) -> int:
    """:func:`first_literal`, by the compiled copy where it was built (literals of 2–256 bytes, at most 16)."""
    if _compiled_find_any is not None:
        return _compiled_find_any(buf, lo, hi, literals)
    return first_literal(buf, lo, hi, literals)
