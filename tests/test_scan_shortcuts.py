"""The compiled scanner's shortcuts, each attacked where it could part from the reference.

The C scanner reads a line once (``classify``: 16 bytes a step where SSE2 is built) and keeps the positions
of its ESC and CR bytes (at most ``MAX_EVENTS``); a line that cleaning would not change is parsed where it
lies, a coloured one is copied segment by segment, 16 bytes at a time, when the block goes on for 16 more
bytes (else the portable cleaner runs: the last lines of a block); LMCache's envelope is checked a word
at a time and the suffix's `` (`` is searched backwards a word at a time; a one-entry cache remembers the
last process prefix. Each case below goes inside a block and at its very end, and must give exactly
the reference's result (``scan_block_py``).
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from scan_cases import ENV, SUFFIX, adversarial_block

from specdiag.ingest import scan
from specdiag.ingest.scan import scan_block_c, scan_block_py

MAX_EVENTS = 32  # _scan.c
COLOUR_PREFIX = b"\x1b[1;36m(Worker_TP7 pid=772)\x1b[0;0m "
STORE = b"[req_id=chatcmpl-bf0208e8c756fd35-df2d11a1] Stored 2304 out of total 2304 tokens. size: 0.0890 GB"
LOOKUP = (b"Reqid: chatcmpl-3220a0efed89008f-fb7cfa99, Total tokens 12451, Inference Engine computed tokens: 0, "
          b"LMCache hit tokens: 9472, need to load: 9472")
STATS = (b"INFO 05-06 08:00:10 [loggers.py:273] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation "
         b"throughput: 96.0 tokens/s, Running: 3 reqs, Waiting: 5 reqs, GPU KV cache usage: 7.3%")


def _need_compiled() -> None:
    if scan._compiled is None:
        if os.environ.get("SPECDIAG_REQUIRE_EXT") == "1":
            pytest.fail("the compiled scanner was not built but SPECDIAG_REQUIRE_EXT=1")
        pytest.skip("compiled scanner not built (pure-Python fallback in use)")


def coloured(msg: bytes, kind: str = "store", prefix: bytes = COLOUR_PREFIX) -> bytes:
    """An LMCache line as ColoredFormatter prints it behind a coloured vLLM process prefix (the TP=8 shape)."""
    return prefix + b"\x1b[32;20m" + ENV[:-1] + b"\x1b[0m " + msg + b" \x1b[3m" + SUFFIX[kind][1:] + b"\x1b[0m"


def plain(msg: bytes, kind: str = "store", prefix: bytes = b"(Worker_TP7 pid=772) ") -> bytes:
    return prefix + ENV + msg + SUFFIX[kind]


def residue(msg: bytes, kind: str = "store") -> bytes:
    return b"(Worker_TP7 pid=772) [32;20m" + ENV[:-1] + b"[0m " + msg + b" [3m" + SUFFIX[kind][1:] + b"[0m"


def _same(block: bytes, base: int = 7) -> scan.ScanResult:
    ref = scan_block_py(block, base)
    assert scan_block_c(block, base) == ref, block[:400]
    return ref


def _everywhere(lines: list[bytes], filler: bytes = b"x") -> int:
    """Each line inside a block, then last (with and without its newline, and with 0-20 bytes after it);
    returns how many of the lines were hot inside a block (so that a test can demand the fast paths ran)."""
    _need_compiled()
    hot = _same(b"\n".join(lines) + b"\n")
    _same(b"\n".join(lines))
    for line in lines:
        for tail in range(0, 21, 4):
            _same(line + b"\n" + filler * tail)
        _same(line)
    return sum(hot.counts.values())


def test_a_line_needing_a_copy_right_after_one_parsed_in_place_and_back() -> None:
    kinds = [plain(STORE), coloured(STORE), residue(STORE), plain(LOOKUP, "lookup"), coloured(LOOKUP, "lookup"),
             plain(STORE) + b"\r", coloured(STORE) + b"\r", STATS, b"\x1b[32m" + STATS + b"\x1b[0m"]
    rng = random.Random(5)
    lines = [rng.choice(kinds) for _ in range(300)]
    assert _everywhere(lines) == 300


@pytest.mark.parametrize("tail", [b"[0m", b"[0", b"[", b"[1;", b"[1;2", b"[1234m", b"\x1b[0m", b"\x1b[", b"\x1b",
                                  b"\x1b[0", b"\r", b"\r\r", b"[0m\r", b"[0\rm", b"\x1b[0\rm", b"\x1b\r[0m"])
def test_colour_residue_cr_and_stray_esc_at_the_end_of_a_line(tail: bytes) -> None:
    _everywhere([plain(STORE) + tail, coloured(STORE) + tail, residue(STORE) + tail, STATS + tail, plain(STORE)])


@pytest.mark.parametrize("insert", [b"\r", b"\x1b", b"\x1b[", b"\x1b[3\rm", b"\r\x1b[0m", b"[0\rm", b"[0m", b"\x1b[0m"])
def test_cr_and_colour_inside_every_part_of_a_line(insert: bytes) -> None:
    for line in (plain(STORE), coloured(STORE), residue(STORE), STATS):
        _everywhere([line[:i] + insert + line[i:] for i in range(0, len(line) + 1, 7)])


@pytest.mark.parametrize("extra", [MAX_EVENTS - 7, MAX_EVENTS - 6, MAX_EVENTS - 5, MAX_EVENTS, 60])
def test_more_colour_codes_than_the_classifier_keeps(extra: int) -> None:
    """A coloured store holds 6 ESC: ``extra`` more codes (and some CRs) around the MAX_EVENTS boundary."""
    line = coloured(STORE)
    cut = line.index(b"Stored")
    for code in (b"\x1b[0m", b"\r", b"\x1b[1\r;2m", b"\x1b"):
        many = line[:cut] + code * extra + line[cut:]
        assert _everywhere([many, line]) >= 1


@pytest.mark.parametrize("byte", [b"\x00", b"\x01", b"\t", b"\x1f", b"\x80", b"\xc3\xa9", b"\xff", b"\x7f"])
def test_a_byte_no_cleaning_removes_at_every_place_near_a_line_end(byte: bytes) -> None:
    """In the line (it becomes rare, except DEL) and at the start of the next line (this one stays hot), both
    inside the 16 bytes the classifier reads at once."""
    line = coloured(STORE)
    cases = [line[:len(line) - k] + byte + line[len(line) - k:] for k in range(0, 34)]
    cases += [line + b"\n" + byte * k + line for k in range(1, 18)]
    _everywhere(cases)
    inside = line.replace(b". size", byte + b". size")  # DEL is printable: that store stays hot
    hot = _same(b"\n".join([line, inside, line]) + b"\n")
    assert sum(hot.counts.values()) == (3 if byte == b"\x7f" else 2)


def test_every_line_length_modulo_the_16_byte_step_with_and_without_colour() -> None:
    lines = []
    for k in range(1, 40):
        msg = b"[req_id=" + b"r" * k + b"] Stored 5 out of total 5 tokens"
        lines += [coloured(msg), plain(msg), residue(msg)]
    assert _everywhere(lines) == len(lines)


@pytest.mark.parametrize("at", range(40))
def test_every_envelope_byte_mutated(at: int) -> None:
    lines = []
    for line in (plain(STORE), coloured(STORE)):
        start = line.index(ENV[:-1])
        for b in b"09a:/ [-,A\x7f":
            lines.append(line[:start + at] + bytes([b]) + line[start + at + 1:])
    _everywhere(lines)


@pytest.mark.parametrize("msg", [
    b"Stored 5 out of total 5 tokens (x) (a.py:1:b)", b"Stored 5 out of total 5 tokens(a.py:1:b)",
    b"(a.py:1:b)", b" (a.py:1:b)", b"Stored 5 out of total 5 tokens (a.py:1:b", b"Stored 5 out of total 5 tokens (a.py:1:b))",
    b"Stored 5 out of total 5 tokens ((a.py:1:b)", b"Stored 5 out of total 5 tokens  (a.py:1:b)",
    b"Stored 5 out of total 5 tokens (a.py:x:b)", b"Stored 5 out of total 5 tokens (a.p:1:b)",
])
def test_the_suffix_search_finds_the_last_space_parenthesis(msg: bytes) -> None:
    _everywhere([b"(W pid=1) " + ENV + msg, b"\x1b[32m" + ENV[:-1] + b"\x1b[0m " + msg, ENV + msg])


def test_the_suffix_parenthesis_at_every_offset_from_the_message_start() -> None:
    lines = []
    for k in range(0, 24):
        for body in (b"x" * k, b"(" * k, b" (" * (k // 2), b"Stored 5 out of total 5 tokens"[:k]):
            lines += [ENV + body + b" (cache_engine.py:588:lmcache.v1.cache_engine)", ENV + body + b"(a.py:1:b)",
                      coloured(body)]
    _everywhere(lines)


@pytest.mark.parametrize("raw_len", [16383, 16384, 16385, 16400])
def test_the_length_limit_is_on_the_raw_line(raw_len: int) -> None:
    for make in (coloured, plain):
        short = make(LOOKUP.replace(b"Reqid: ", b"Reqid: q"), "lookup")
        line = make(LOOKUP.replace(b"Reqid: ", b"Reqid: " + b"q" * (raw_len - len(short) + 1)), "lookup")
        assert len(line) == raw_len
        hot = _same(line + b"\n" + short + b"\n")
        assert sum(hot.counts.values()) == (2 if raw_len <= scan.MAX_HOT_LINE else 1)
        _same(line)


def test_process_prefixes_that_share_length_and_ends_but_differ_inside() -> None:
    """The prefix table hashes the length and the first and last 8 bytes: prefixes alike there must stay apart."""
    prefixes = [b"(Worker_TP%d pid=772) " % i for i in range(8)] + [b"(Worker_TP0 pid=773) ", b"(Worker_TP0 pid=772)"]
    prefixes += [b"(EngineCore_DP0 pid=1) (RayWorkerWrapper pid=7%s1, ip=10.4.0.17) " % bytes([c]) for c in b"0123"]
    rng = random.Random(11)
    lines = []
    for _ in range(400):
        p = rng.choice(prefixes)
        lines.append(rng.choice([plain(STORE, prefix=p), coloured(STORE, prefix=p), p + STATS]))
        if rng.random() < 0.3:
            lines.append(lines[-1])  # the same prefix twice in a row
    res = _same(b"\n".join(lines) + b"\n")
    assert sorted(res.prefixes) == sorted(set(prefixes))
    _everywhere(lines[:60])


@pytest.mark.parametrize("seed", range(12))
def test_random_blocks_of_mixed_shapes_cut_at_every_kind_of_boundary(seed: int) -> None:
    """Blocks of coloured, plain, residue, CR and damaged lines, cut into sub-blocks at random line starts
    (every sub-block scanned on its own, so each shortcut also meets the end of a block)."""
    _need_compiled()
    rng = random.Random(seed)
    shapes = [coloured(STORE), plain(STORE), residue(STORE), coloured(LOOKUP, "lookup"), STATS,
              b"\x1b[32mINFO\x1b[0m" + STATS[4:], b"(APIServer pid=1) " + STATS + b"\r"]
    lines = []
    for _ in range(200):
        line = rng.choice(shapes)
        r = rng.random()
        if r < 0.3:
            i = rng.randrange(len(line) + 1)
            line = line[:i] + rng.choice([b"\r", b"\x1b", b"[0m", b"\x1b[0m", b"\x00", b"\xc3\xa9", b"(", b" (", b"9"]) + line[i:]
        elif r < 0.4:
            line = line[:rng.randrange(len(line) + 1)]
        lines.append(line)
    block = b"\n".join(lines) + b"\n"
    _same(block, seed)
    starts = [0] + [i + 1 for i, c in enumerate(block) if c == 0x0A]
    cuts = sorted(rng.sample(starts, 8))
    for a, b in zip(cuts, cuts[1:], strict=False):
        _same(block[a:b], a)


def test_consecutive_scans_share_nothing_through_the_kept_state() -> None:
    """The C keeps one state (its column buffers) from call to call: a block must not see the prefixes,
    counts, positions or rows of the one before, whether that one was larger, had more prefixes (up to the
    256 cap) or held SpecDecoding positions."""
    _need_compiled()
    many = b"\n".join(plain(STORE, prefix=b"(Worker pid=%d) " % i) for i in range(300)) + b"\n"
    spec = (b"(APIServer pid=1) INFO 05-06 08:06:30 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.41, "
            b"Accepted throughput: 58.20 tokens/s, Drafted throughput: 121.10 tokens/s, Accepted: 582 tokens, Drafted: "
            b"1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253, Avg Draft acceptance rate: 48.1%")
    small = b"\n".join([coloured(STORE), spec, plain(LOOKUP, "lookup")]) + b"\n"
    big = (many + small) * 40
    for block in (many, small, big, small, many, b"", small, b"\n", spec):
        assert scan_block_c(block, 3) == scan_block_py(block, 3)
    assert len(scan_block_c(many, 0).prefixes) == scan.MAX_PREFIXES


def _shortcut_block() -> bytes:
    """One block of the shapes the cases above attack: coloured, plain, residue, CR, many codes, bad bytes."""
    rng = random.Random(3)
    shapes = [coloured(STORE), plain(STORE), residue(STORE), coloured(LOOKUP, "lookup"), STATS, plain(STORE) + b"\r",
              coloured(STORE).replace(b"Stored", b"\x1b[0m" * 40 + b"Stored"), coloured(STORE) + b"\x01",
              b"(W pid=1) " + ENV + b"Stored 5 out of total 5 tokens (x) (a.py:1:b)"]
    return b"\n".join(rng.choice(shapes) for _ in range(500)) + b"\n" + coloured(STORE)


def test_the_portable_build_without_sse2_or_word_tricks_matches_the_reference(tmp_path: Path) -> None:
    """Where SSE2 or little-endian GCC/Clang are missing (aarch64, MSVC) the byte loops run instead. Built
    here with -DSPECDIAG_SCAN_PORTABLE, they must decide exactly what the reference decides too."""
    _need_compiled()
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "CFLAGS": "-DSPECDIAG_SCAN_PORTABLE", "SPECDIAG_REQUIRE_EXT": "1"}
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
                        "--build-temp", str(tmp_path / "tmp")], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    built = [p for p in (tmp_path / "lib").rglob("_scan*") if any(p.name.endswith(x) for x in EXTENSION_SUFFIXES)]
    spec = importlib.util.spec_from_file_location("specdiag.ingest._scan", built[0])
    assert spec is not None and spec.loader is not None
    portable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(portable)
    assert portable.LOOP == "bytes"
    for base, block in enumerate([_shortcut_block()] + [adversarial_block(seed) for seed in range(12)]):
        assert scan.assemble(*portable.scan(block, base)) == scan_block_py(block, base), base
    from specdiag.ingest.marks import MARKER_LITERALS, first_literal

    for k in range(0, 200, 7):  # the marker search's byte loop too
        buf = b"y" * k + MARKER_LITERALS[k % len(MARKER_LITERALS)] + _shortcut_block()[:k]
        assert portable.find_any(buf, 0, len(buf), MARKER_LITERALS) == first_literal(buf, 0, len(buf),
                                                                                      MARKER_LITERALS) == k
