"""The compiled copy of a docker json-file block's texts (``_scan.docker_texts``) against its reference, the
regex ``ahead._DOCKER_LINE`` (``ahead.docker_unwrapped_reference``): the same copy, or None, on blocks built
from the line's own pieces and their near misses, in time linear in the block."""

from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdiag.ingest import ahead

compiled = pytest.importorskip("specdiag.ingest._scan")

TEXT_PIECES = [b"x", b" ", b"(Worker pid=7) ", b"INFO 05-06 15:56:03 [core.py:94] ", b'\\"', b"\\t", b"\\\\", b"\\u001b",
               b"\\u003c", b"\\u003e", b"\\u0026", b"\\u0027", b"\\n", b"\\r", b"\\", b'"', b"\r", b"\xc3\xa9", b"[1;36m",
               b"\\u00", b"\\u001", b"{", b"}"]
TAILS = [b'\\n","stream":"stdout","time":"2026-05-06T15:56:03.745518223Z"}',
         b'\\r\\n","stream":"stderr","time":"2026-05-06T15:56:03Z"}',
         b'\\n","stream":"stdout","time":"2026-05-06T15:56:03.1+02:00"}',
         b'\\n","stream":"stdout","time":"2026-05-06T15:56:03.1+0200"}',
         b'\\n","stream":"stdin","time":"2026-05-06T15:56:03Z"}',
         b'","stream":"stdout","time":"2026-05-06T15:56:03Z"}',
         b'\\n","stream":"stdout","time":"2026-05-06T15:56:03Z"} ',
         b'\\n","stream":"stdout","time":"2026-05-06T15:56:03Z"}\r',
         b'\\n","stream":"stdout","time":"2026-05-06 15:56:03Z"}',
         b'\\n","stream":"stdout","time":"2026-05-06TZ"}',
         b'\\n","stream":"stdout","time":"2026-05-06T15:56:03Z"']
HEADS = [b'{"log":"', b'{"log": "', b'{"log":"']


def _both(block: bytes) -> None:
    for start, end in ((0, len(block)), (0, max(0, len(block) - 1))):
        if end <= start or block[start : start + 8] != b'{"log":"':
            continue
        ref = ahead.docker_unwrapped_reference(block, start, end)
        assert compiled.docker_texts(block, start, end, ahead.DOCKER_MAX_LINE) == ref, block[start:end]


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(HEADS), st.lists(st.sampled_from(TEXT_PIECES), max_size=10),
                          st.sampled_from(TAILS)), min_size=1, max_size=5),
       st.booleans())
def test_built_blocks_give_the_references_copy(lines, final_newline):
    block = b"\n".join(head + b"".join(text) + tail for head, text, tail in lines) + (b"\n" if final_newline else b"")
    _both(block)


def test_docker_s_own_lines_are_copied_with_their_escapes_undone():
    texts = ["\x1b[1;36m(Worker pid=7)\x1b[0;0m INFO 05-06 15:56:03 [core.py:94] <a & b> \"q\"\tx\\", ""]
    lines = [json.dumps({"log": t + "\n", "stream": "stdout", "time": "2026-05-06T15:56:03.1Z"}, separators=(",", ":"))
             .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode() for t in texts]
    block = b"\n".join(lines) + b"\n"
    assert compiled.docker_texts(block, 0, len(block), ahead.DOCKER_MAX_LINE) == ("\n".join(texts) + "\n").encode()
    _both(block)
    assert compiled.docker_texts(block, 0, len(block), 10) is None  # a line longer than asked for
    _both(block + b"\n")  # an empty line


def test_near_misses_cost_linear_time():
    """64 KiB lines of escapes and text that break at their last byte: read once."""
    body = b"\\u001bx" * 9000
    for tail in (b'\\n","stream":"stdout","time":"2026-05-06T15:56:03Z"]', b'\\u00', b'\\n","stream":"stdout","time":"2026-05-06T' + b"1" * 60000):
        block = (b'{"log":"' + body + tail + b"\n") * 16
        t = time.perf_counter()
        got = compiled.docker_texts(block, 0, len(block), 1 << 20)
        assert time.perf_counter() - t < 0.05
        assert got is None
