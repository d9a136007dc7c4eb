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


def _carrying(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks as a pipe, a decompressed or a re-encoded input gets them: the cut line carried to the next read."""
    monkeypatch.setattr(sources.Source, "_can_rewind", lambda self, fh: False)


@pytest.mark.parametrize("seed", range(60))
def test_blocks_yield_the_lines_of_the_copying_loop_they_replaced(seed: int, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    data = _random_log(rng)
    block_size, max_line = rng.choice([7, 64, 256, 1000]), rng.choice([50, 300, 5000])
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    monkeypatch.setattr(sources, "MAX_LINE", max_line)
    _carrying(monkeypatch)
    log = tmp_path / "x.log"
    log.write_bytes(data)
    blocks = list(expand_inputs([str(log)])[0].blocks())
    assert b"".join(d[s:e] for d, s, e in blocks) == _oracle(data, block_size, max_line)
    assert all(e > s and d[e - 1 : e] == b"\n" for d, s, e in blocks)


def test_a_read_of_whole_lines_is_handed_on_without_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "BLOCK_SIZE", 12)
    _carrying(monkeypatch)
    log = tmp_path / "x.log"
    log.write_bytes(b"line one\nline two\nthree\n")
    blocks = list(expand_inputs([str(log)])[0].blocks())
    # the second read starts inside "line two": its head joins the carry, the rest is the read itself
    assert [(d[s:e], s, e == len(d)) for d, s, e in blocks] == [
        (b"line one\n", 0, False), (b"line two\n", 0, True), (b"three\n", 6, True)]


def test_a_file_is_read_again_from_the_line_a_read_cut_instead_of_carrying_it(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """No one-line block after every read: the next read starts with the cut line."""
    monkeypatch.setattr(sources, "BLOCK_SIZE", 12)
    log = tmp_path / "x.log"
    log.write_bytes(b"line one\nline two\nthree\n")
    src = expand_inputs([str(log)])[0]
    blocks = list(src.blocks())
    assert [(d[s:e], s) for d, s, e in blocks] == [(b"line one\n", 0), (b"line two\n", 0), (b"three\n", 0)]
    assert src.stats.bytes_read == log.stat().st_size


@pytest.mark.parametrize("seed", range(60))
def test_a_file_read_again_from_each_cut_line_yields_every_line_once(seed: int, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines no longer than a read: exactly the file's lines, every block a read from a line's start, every
    byte counted once."""
    rng = random.Random(seed)
    block_size = rng.choice([64, 256, 1000, 4096])
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    lines = [bytes(rng.choice(b"abc \t\x1b[") for _ in range(rng.randrange(0, block_size))) for _ in range(200)]
    data = b"\n".join(lines) + rng.choice([b"\n", b""])
    log = tmp_path / "x.log"
    log.write_bytes(data)
    src = expand_inputs([str(log)])[0]
    blocks = list(src.blocks())
    assert b"".join(d[s:e] for d, s, e in blocks) == (data if data.endswith(b"\n") else data + b"\n")
    assert all(s == 0 for d, s, e in blocks)  # every read starts at a line: none joined a carried one
    assert src.stats.bytes_read == len(data)


@pytest.mark.parametrize("content", [b"a\r\nb\r\nc\r\n" * 40, b"a\rb\rc\r" * 40], ids=["CRLF", "CR"])
def test_files_whose_lines_do_not_end_in_lf_alone_keep_carrying(content: bytes, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """CRLF and CR files: their line ends are rewritten per read, so a cut line is carried, not read again."""
    monkeypatch.setattr(sources, "BLOCK_SIZE", 13)
    log = tmp_path / "x.log"
    log.write_bytes(content)
    answers: list[bool] = []
    real = sources.Source._rewound

    def asked(*args) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(sources.Source, "_rewound", asked)
    blocks = list(expand_inputs([str(log)])[0].blocks())
    assert b"".join(d[s:e] for d, s, e in blocks).replace(b"\r\n", b"\n") == b"a\nb\nc\n" * 40
    assert answers and not any(answers)


def test_a_pipe_is_never_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import threading

    monkeypatch.setattr(sources, "BLOCK_SIZE", 12)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = b"line one\nline two\nthree\n"
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    blocks = list(expand_inputs([str(fifo)])[0].blocks())
    writer.join()
    assert b"".join(d[s:e] for d, s, e in blocks) == data
    # the cut line carried and joined into a block of its own; the rest of that read handed on from its middle
    assert [(d[s:e], s) for d, s, e in blocks] == [(b"line one\n", 0), (b"line two\n", 0), (b"three\n", 6)]


def test_the_first_reads_of_an_input_are_small_and_grow_to_a_whole_block(tmp_path: Path) -> None:
    """A block's prefilter kinds are decided before its records teach the analysis which places it may count
    unread: small first reads let it learn them within a few hundred lines."""
    line = b"node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1\n"
    path = tmp_path / "noise.log"
    path.write_bytes(line * (3 * sources.BLOCK_SIZE // len(line)))
    (src,) = expand_inputs([str(path)])
    sizes = [end - start for _, start, end in src.blocks()]
    whole = [s for s in sizes if s > sources.BLOCK_SIZE - len(line)]
    assert sizes[0] <= sources.FIRST_BLOCK < sources.BLOCK_SIZE
    assert all(b <= 2 * a + len(line) for a, b in zip(sizes, sizes[1:], strict=False))  # at most twice the last
    assert len(sizes) - len(whole) <= 6 and len(whole) >= 2
    assert sum(sizes) == path.stat().st_size
