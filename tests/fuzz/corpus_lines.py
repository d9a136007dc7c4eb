"""Seed lines for the fuzzers: real corpus lines and every template's synthetic sample, and the mutations a
damaged or hostile log applies to them (truncations, inserted bytes, odd numbers, unbalanced brackets)."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
ODD_NUMBERS = [b"inf", b"-inf", b"nan", b"NaN", b"1e999", b"-1", b"-0", b"0", b"9" * 40, b"9" * 5000, b"0x1f",
               b"1_000", b"\xd9\xa3", b"", b"1.2.3", b"18446744073709551616"]
ODD_BYTES = [b"\x00", b"\x1b", b"\x1b[", b"\x1b]0;x\x07", b"\xff", b"\xc3", b"(", b")", b"[", b"]", b"{", b"}", b"'",
             b'"', b":", b",", b"=", b"\r", b"\t", b"\\", b" pid=", b"] LMCache ", b"Traceback (most recent call last):",
             b"\xe2\x80\xae", b"%0A", b"::"]
_DIGITS = re.compile(rb"\d+")


@lru_cache(maxsize=1)
def seed_lines() -> list[bytes]:
    """A few thousand distinct real lines plus the template samples."""
    from specdiag.events import default_matcher

    lines: list[bytes] = []
    seen: set[bytes] = set()
    for p in sorted(CORPUS.glob("*/*.log")):
        for ln in p.read_bytes().splitlines()[:400]:
            key = _DIGITS.sub(b"0", ln)[:120]
            if ln and key not in seen:
                seen.add(key)
                lines.append(ln)
    for t in default_matcher().templates:
        lines.append(b"INFO 05-06 15:56:03 [x.py:1] " + t.sample.encode())
        lines.append(b"[2026-05-06 15:56:03,745] LMCache INFO: " + t.sample.encode() + b" (a.py:1:lmcache.x)")
        lines.append(t.sample.encode())
    return lines


def mutate(line: bytes, rnd: random.Random) -> bytes:
    """One of the damage patterns, chosen by ``rnd``."""
    op = rnd.randrange(6)
    if op == 0 and line:  # truncation
        return line[: rnd.randrange(len(line))]
    if op == 1:  # inserted bytes
        i = rnd.randrange(len(line) + 1)
        return line[:i] + rnd.choice(ODD_BYTES) * rnd.randint(1, 3) + line[i:]
    if op == 2:  # a number replaced by a huge, negative or non-numeric one
        spans = [m.span() for m in _DIGITS.finditer(line)]
        if spans:
            a, b = rnd.choice(spans)
            return line[:a] + rnd.choice(ODD_NUMBERS) + line[b:]
    if op == 3:  # an unbalanced bracket
        for ch in (b"}", b"]", b")"):
            i = line.rfind(ch)
            if i >= 0:
                return line[:i] + line[i + 1 :]
    if op == 4 and line:  # a segment repeated
        i = rnd.randrange(len(line))
        j = min(len(line), i + rnd.randint(1, 40))
        return line[:j] + line[i:j] * rnd.randint(2, 50) + line[j:]
    return line


def hostile_log(seed: int, n_lines: int = 40) -> bytes:
    rnd = random.Random(seed)
    pool = seed_lines()
    out = []
    for _ in range(n_lines):
        ln = rnd.choice(pool)
        for _ in range(rnd.choice((0, 1, 1, 2, 3))):
            ln = mutate(ln, rnd)
        out.append(ln)
    return b"\n".join(out) + b"\n"
