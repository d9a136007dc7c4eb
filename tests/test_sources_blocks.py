"""``Source.blocks`` hands the bytes read on without copying them into line-aligned blocks; the lines it
yields must be exactly those of the straightforward copy-and-cut loop it replaced (kept here as the oracle)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specdiag.ingest import sources
from specdiag.ingest.sources import expand_inputs


def _oracle(data: bytes, block_size: int, max_line: int) -> bytes:
    """The previous ``chunks()``: join the carry to each read, cut at the last newline, cut over-long lines."""
    out, carry, skipping = [], b"", False
    for i in range(0, len(data), block_size):
        block = data[i : i + block_size]
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                continue
            block, skipping = block[nl + 1 :], False
        buf = carry + block
        cut = buf.rfind(b"\n")
        if cut < 0:
            if len(buf) > max_line:
                out.append(buf[:max_line] + b"\n")
                carry, skipping = b"", True
            else:
                carry = buf
            continue
        carry = buf[cut + 1 :]
        out.append(buf[: cut + 1])
        if len(carry) > max_line:
            out.append(carry[:max_line] + b"\n")
            carry, skipping = b"", True
    if carry:
        out.append(carry + b"\n")
    return b"".join(out)


def _random_log(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 60)):
        n = rng.choice([0, 1, 5, 30, 90, 300, 700, 2000])
        parts.append(bytes(rng.choice(b"abc \t\x1b[") for _ in range(n)) + b"\n" * rng.choice([0, 1, 1, 1, 2]))
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(60))
def test_blocks_yield_the_lines_of_the_copying_loop_they_replaced(seed: int, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    data = _random_log(rng)
    block_size, max_line = rng.choice([7, 64, 256, 1000]), rng.choice([50, 300, 5000])
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    monkeypatch.setattr(sources, "MAX_LINE", max_line)
    log = tmp_path / "x.log"
    log.write_bytes(data)
    blocks = list(expand_inputs([str(log)])[0].blocks())
    assert b"".join(d[s:e] for d, s, e in blocks) == _oracle(data, block_size, max_line)
    assert all(e > s and d[e - 1 : e] == b"\n" for d, s, e in blocks)


def test_a_read_of_whole_lines_is_handed_on_without_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "BLOCK_SIZE", 12)
    log = tmp_path / "x.log"
    log.write_bytes(b"line one\nline two\nthree\n")
    blocks = list(expand_inputs([str(log)])[0].blocks())
    # the second read starts inside "line two": its head joins the carry, the rest is the read itself
    assert [(d[s:e], s, e == len(d)) for d, s, e in blocks] == [
        (b"line one\n", 0, False), (b"line two\n", 0, True), (b"three\n", 6, True)]
