"""Long quiet records: vLLM's request logger prints a prompt and its token ids on one line, 5–50 KiB. A record
of a registered place is counted unread up to the length the per-line stages parse (``MAX_QUIET_LINE``,
``sources.MAX_PARSE_LINE``); any other line past ``MAX_INERT_LINE`` is still read. Both copies must agree,
and whole analyses must not change. Also: a block's colour residue is found in one search."""

from __future__ import annotations

import random
import sys
from array import array
from pathlib import Path

import pytest

from specdiag.ingest import cleaner, prefilter, sources
from specdiag.ingest.prefilter import (
    ESC_BLOCK,
    KEEP,
    MAX_INERT_LINE,
    MAX_QUIET_LINE,
    PLAIN_BLOCK,
    QUIET,
    RESIDUE_BLOCK,
)

sys.path.insert(0, str(Path(__file__).parent))
from test_prefilter import FOREIGN, WIDTHS, YEAR, _analyse, _offsets, _places, _quiet_count  # noqa: E402

compiled = pytest.importorskip("specdiag.ingest._scan")

FLAGS = [0, ESC_BLOCK, RESIDUE_BLOCK, PLAIN_BLOCK, ESC_BLOCK | PLAIN_BLOCK]


def _record(body_len: int, colour: bool = False) -> bytes:
    """A registered vLLM DEBUG place's record whose message is ``body_len`` bytes of token ids."""
    head = b"\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m " if colour else b"(EngineCore_DP0 pid=7) "
    ids = b", ".join(b"%d" % (100 + i % 150_000) for i in range(body_len // 5))
    return head + b"DEBUG 05-06 15:56:03 [shm_broadcast.py:393] ids: [" + ids[:body_len] + b"]"


def _lmcache_record(body_len: int) -> bytes:
    return (b"[2026-05-06 15:56:03,745] LMCache DEBUG: Releasing " + b"x" * body_len
            + b" (cache_engine.py:1431:lmcache.v1.cache_engine)")


def _both(block: list[bytes], flags: int, widths=WIDTHS) -> bytes:
    """The kinds of ``block`` by both copies, asserted equal."""
    quiet = _places()
    data = b"\n".join(block)
    starts, ends = _offsets(block)
    ref = prefilter.kinds(data, 0, starts, ends, flags, quiet, None, widths, YEAR)
    got = compiled.prefilter(data, 0, starts, ends, flags, len(data), *quiet.blobs(), prefilter.width_mask(widths),
                             YEAR)
    assert got == ref, [len(x) for x in block]
    return ref


def test_the_quiet_limit_is_the_length_the_per_line_stages_parse():
    assert MAX_QUIET_LINE == sources.MAX_PARSE_LINE > MAX_INERT_LINE


@pytest.mark.parametrize("flags", FLAGS)
def test_long_records_of_a_registered_place_are_quiet_in_both_copies(flags):
    after = b"(Worker pid=1) next"
    for n in (MAX_INERT_LINE + 1, 12_000, 50_000):
        assert _both([_record(n), after], flags)[0] >= QUIET, n  # QUIET_FIRST: the block's first of its process
        assert _both([_lmcache_record(n), after], flags)[0] >= QUIET, n


@pytest.mark.parametrize("flags", FLAGS)
def test_a_record_longer_than_the_parsed_length_is_read(flags):
    """Past ``MAX_QUIET_LINE`` the cleaner cuts the line and says so: only reading it does that."""
    after = b"(Worker pid=1) next"
    line = _record(MAX_QUIET_LINE + 10)
    assert len(line) > MAX_QUIET_LINE
    assert _both([line, after], flags)[0] == KEEP
    assert _both([_lmcache_record(MAX_QUIET_LINE), after], flags)[0] == KEEP


@pytest.mark.parametrize("flags", FLAGS)
def test_long_lines_that_are_no_quiet_record_are_read(flags):
    """A foreign line, a record of an unregistered place, or a warning, past ``MAX_INERT_LINE``: read."""
    long_foreign = FOREIGN[0] + b" " + b"0 1 " * 2_000
    unregistered = _record(8_000).replace(b"shm_broadcast.py:393", b"shm_broadcast.py:394")
    warning = _record(8_000).replace(b"DEBUG", b"WARNING")
    kinds = _both([long_foreign, unregistered, warning, b""], flags)
    assert kinds[:3] == bytes([KEEP] * 3)
    assert _both([FOREIGN[0] + b" " + b"0 1 " * 900, b""], flags)[0] != KEEP  # under the limit: inert


def test_a_long_held_record_agrees_whatever_its_width_and_the_next_line():
    """A coloured record whose raw length passes the width mask is taken to be at a terminal's width (so a
    next line may be its rest, and it is read); widths inside the mask are read from it, in both copies."""
    coloured = _record(MAX_QUIET_LINE - 200, colour=True).replace(b", ", b"\x1b[0m, ")
    assert len(coloured) > MAX_QUIET_LINE
    for line in (coloured, _record(9_000), _record(9_000, colour=True)):
        for widths in (WIDTHS, WIDTHS | {len(line)}, WIDTHS | {len(line) - 1}):
            for after in (b"short", b"y" * (len(line) - 1), b"", b"(Worker pid=1) next"):
                for flags in (ESC_BLOCK, ESC_BLOCK | PLAIN_BLOCK, 0):
                    _both([line, after], flags, widths)


def test_a_width_past_the_mask_is_taken_as_a_terminal_width():
    assert prefilter.width_mask({80, MAX_QUIET_LINE, MAX_QUIET_LINE + 1})[MAX_QUIET_LINE] == 1
    assert len(prefilter.width_mask(set())) == MAX_QUIET_LINE + 1
    # the reference reads a record past the mask as possibly held: a next line shorter than it may be its rest
    line = _record(60_000, colour=True).replace(b", ", b"\x1b[0m, ")
    assert len(line) > MAX_QUIET_LINE
    assert prefilter.inert_kind(line, ESC_BLOCK, _places(), b"short", WIDTHS, YEAR) == KEEP
    assert prefilter.inert_kind(line, ESC_BLOCK, _places(), b"(Worker pid=1) next", WIDTHS, YEAR) == QUIET


def _request_log(tmp_path: Path, n: int) -> Path:
    """vLLM 0.10.1's request logger (``entrypoints/logger.py:40``, a place of one message) at 1–20 KiB a line,
    with the engine's ``Added request`` and the access line after each."""
    rng = random.Random(3)
    rows = ["INFO 05-06 08:00:00 [api_server.py:1805] vLLM API server version 0.10.1"]
    for i in range(n):
        ids = ", ".join(str(rng.randrange(100, 150_000)) for _ in range(rng.choice((40, 400, 1500, 3000))))
        rows += [f"(APIServer pid=1) INFO 05-06 08:{i // 600 % 60:02d}:{i // 10 % 60:02d} [logger.py:40] Received "
                 f"request chatcmpl-{i:016x}: prompt: '<|im_start|>user\\nhello there<|im_end|>\\n', params: "
                 f"SamplingParams(n=1, temperature=0.7, max_tokens=512), prompt_token_ids: [{ids}], prompt_embeds "
                 f"shape: None, lora_request: None.",
                 f"(APIServer pid=1) INFO 05-06 08:{i // 600 % 60:02d}:{i // 10 % 60:02d} [async_llm.py:283] Added "
                 f"request chatcmpl-{i:016x}.",
                 f'(APIServer pid=1) INFO:     10.0.0.{i % 250}:5{i % 10_000:04d} - "POST /v1/chat/completions '
                 f'HTTP/1.1" 200 OK']
    log = tmp_path / "requests.log"
    log.write_text("\n".join(rows) + "\n")
    return log


def test_long_request_logger_lines_are_counted_and_report_the_same(tmp_path):
    log = _request_log(tmp_path, 900)
    assert log.stat().st_size > 3 << 20
    assert max(len(x) for x in log.read_bytes().splitlines()) > 3 * MAX_INERT_LINE
    assert _analyse(log, "on") == _analyse(log, "off")
    # 900 request lines and 900 'Added request' lines: all but the first few of each were counted, not read
    # (with the request lines read, at most the 900 'Added request' lines are)
    assert _quiet_count(log) > 1_700


def _colour_reference(chunk: bytes) -> tuple[bool, bool]:
    esc = b"\x1b" in chunk
    return esc, not esc and any(r in chunk for r in cleaner.RESIDUES)


def test_colour_residue_is_found_wherever_it_lies_in_a_block():
    rng = random.Random(9)
    body = b"".join(b"%d, [%d] " % (rng.randrange(1000), rng.randrange(100)) for _ in range(40_000))
    for residue in (*cleaner.RESIDUES, b"", b"\x1b[0m", b"[0", b"20m", b"[1;3"):
        for at in (0, 1, len(body) // 2, len(body) - 1, len(body)):
            chunk = body[:at] + residue + body[at:]
            assert cleaner.colour_of(chunk, 0, len(chunk)) == _colour_reference(chunk), (residue, at)
            lo, hi = at // 2, min(len(chunk), at + len(residue) // 2)  # a span that cuts the residue
            assert cleaner.colour_of(chunk, lo, hi) == _colour_reference(chunk[lo:hi]), (residue, at)


def _both_wrapped(block: list[bytes], flags: int, wraps: tuple[list[int], list[int]], widths=WIDTHS) -> bytes:
    """:func:`_both` with the widths of the wrappers a copy took off each row and the line after it."""
    quiet = _places()
    data = b"\n".join(block)
    starts, ends = _offsets(block)
    columns = (array("q", wraps[0]), array("q", wraps[1]))
    ref = prefilter.kinds(data, 0, starts, ends, flags, quiet, None, widths, YEAR, columns)
    got = compiled.prefilter(data, 0, starts, ends, flags, len(data), *quiet.blobs(), prefilter.width_mask(widths),
                             YEAR, *columns)
    assert got == ref, ([len(x) for x in block], wraps)
    return ref


@pytest.mark.parametrize("width", [1, 18, 39, 41, 300])
def test_a_wrappers_width_counts_in_a_rows_width_in_both_copies(width):
    """``wraps``: the width of the wrapper a block's copy took off each line, which the reader counts in a
    row's width: a record shorter than 40 columns may be held once its wrapper is counted, and its next line's
    wrapper counts in that line's width. Both copies agree, for the same and for different widths."""
    short = b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] x"  # 70 columns
    tiny = b"DEBUG 05-06 15:56:03 [core.py:94] x"  # 35 columns
    for line in (short, tiny, _record(200)):
        for after in (b"", b"short", b"y" * (len(line) - 1), b"y" * len(line), b"(Worker pid=1) next"):
            for flags in (0, ESC_BLOCK, RESIDUE_BLOCK):
                for widths in (WIDTHS, WIDTHS | {len(line) + width}):
                    for after_width in (0, width, width + 3):
                        _both_wrapped([line, after], flags, ([width, after_width], [after_width, 0]), widths)
    rest = b"y" * len(tiny)  # as wide as the record: its rest, were the record held
    assert prefilter.inert_kind(tiny, ESC_BLOCK, _places(), rest, WIDTHS, YEAR) == QUIET  # under 40: never held
    wrap = prefilter.HELD_WIDTH - len(tiny)
    assert prefilter.inert_kind(tiny, ESC_BLOCK, _places(), rest, WIDTHS, YEAR, (wrap, wrap)) == KEEP  # 40: held
    assert prefilter.inert_kind(tiny, ESC_BLOCK, _places(), rest, WIDTHS, YEAR, (wrap, wrap + 1)) == QUIET  # wider


def test_the_wrapper_widths_are_one_per_row_in_both_copies():
    quiet = _places()
    block = [b"x", b"y"]
    data = b"\n".join(block)
    starts, ends = _offsets(block)
    short = (array("q", [1]), array("q", [1]))
    with pytest.raises(ValueError):
        prefilter.kinds(data, 0, starts, ends, 0, quiet, None, WIDTHS, YEAR, short)
    with pytest.raises(ValueError):
        compiled.prefilter(data, 0, starts, ends, 0, len(data), *quiet.blobs(), prefilter.width_mask(WIDTHS), YEAR,
                           *short)


@pytest.mark.parametrize("flags", [0, ESC_BLOCK, RESIDUE_BLOCK])
def test_a_crlf_line_end_is_read_as_the_line_without_it_in_both_copies(flags):
    """The cleaner drops a CRLF line end's CR and the reader does not count it in a row's width: a line (and
    the line after it) is decided as without it. A CR anywhere else keeps the line (the bare-CR splitter)."""
    from test_prefilter import AFTER, QUIET_LINES, READ, _check_sound

    quiet = _places()
    for line in [*FOREIGN, *READ, *QUIET_LINES]:
        for after in (b"(Worker pid=1) next", b"short", b"y" * len(line), b""):
            plain = prefilter.inert_kind(line, flags, quiet, after, WIDTHS, YEAR)
            assert prefilter.inert_kind(line + b"\r", flags, quiet, after + b"\r", WIDTHS, YEAR) == plain, line
            _both([line + b"\r", after + b"\r"], flags)
        if line:
            assert prefilter.inert_kind(line[:1] + b"\r" + line[1:], flags, quiet) == KEEP
    for line in FOREIGN:
        _check_sound(line + b"\r", flags)
    for after in AFTER:
        _both([QUIET_LINES[0] + b"\r", after + b"\r"], flags)


def test_noise_with_crlf_line_ends_is_counted_unread_and_reports_the_same(tmp_path):
    from test_scan_wrapped_blocks import _noise

    log = tmp_path / "crlf.log"
    log.write_text("\r\n".join(_noise(3 << 20)) + "\r\n")
    assert _analyse(log, "on") == _analyse(log, "off")
    assert _quiet_count(log) > 4_000
