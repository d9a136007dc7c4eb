"""The prefilter: which of the lines the scanner left can never make a record, so the per-line stages may
count them instead of reading them.

Real logs are mostly other programs' lines: NCCL's ``NCCL INFO`` flood, an application's own logger,
torch's glog warnings, Python's ``warnings`` lines. The per-line stages (``records.py``) read each one
through the cleaner, the wrapper parser, every envelope parser and the joiner, ≈ 20 µs of Python, only to
find that it is nobody's record. A line is *inert* when, read by those stages with no record open (nothing
held for a terminal's next row, no cut header, no open multi-line record, no wrapper carried over from
the line before), it yields no record and changes no state; all it may do is count as vLLM output (a
process prefix) — :data:`PREFIXED`.

The test is conservative by construction: it looks for any byte or word that could start something (an
envelope's first letters, a wrapper, a traceback, an exception name, a vLLM or LMCache name anywhere),
at every place a wrapper could end, and keeps the line when in doubt. So it may keep an inert line (only
slower), never drop a record. ``tests/test_prefilter.py`` checks that against the per-line stages
themselves, over generated lines of every catalogued message and adversarial ones, and that the
compiled copy (``_scan.prefilter``) gives the same answer byte for byte as this reference.

Whether a line is inert also depends on two facts of its block that the cleaner decides per block
(``Cleaner.begin_block``): whether the block holds an ESC (colour is then removed per sequence) or only
the ESC-less residue of colour codes (which is then removed). They are passed in as ``flags``.
"""

from __future__ import annotations

import re

#: kinds, one byte per line
KEEP, INERT, PREFIXED = 0, 1, 2
#: block flags (``Cleaner.esc`` / ``Cleaner.residue``)
ESC_BLOCK, RESIDUE_BLOCK = 1, 2
#: longer lines are always read: the cleaner cuts and announces over-long ones
MAX_INERT_LINE = 4096
#: literals that, anywhere in a line, may make it something: a vLLM / LMCache envelope, logger name or banner,
#: a process prefix, a traceback's lines, an exception, a version line, a JSON or kubectl or journald wrapper
ANCHORS: tuple[bytes, ...] = (
    b"LMCache", b"lmcache", b"vllm", b"vLLM", b"VLLM", b"pid=", b"Traceback", b'File "', b"Error",
    b"Exception", b"Exit", b"Interrupt", b"During handling", b"The above exception", b"version",
    b'"log"', b'"levelname"', b"[pod/", b"]: ",
)
#: the first three letters of every level word (a vLLM header, uvicorn's ``INFO:``, a header cut short)
LEVEL_HEADS: tuple[bytes, ...] = (b"INF", b"WAR", b"ERR", b"DEB", b"CRI")
#: LMCache's header up to its level (``0``: any digit): a row cut inside it is held for the next row
LMC_HEAD = b"[0000-00-00 00:00:00,000] LMCache "
#: how many places a wrapper could end at that are followed before the line is kept unread
MAX_PLACES = 24
_MAX_DEPTH = 6

_ESC_SEQ = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_RESIDUE = re.compile(rb"\[\d{1,3}(?:;\d{1,3})*m")
_ESC_CUT = re.compile(rb"\x1b(?:\[[0-9;?]{0,16})?")
_PREFIX = re.compile(rb"\((?P<proc>[^()]*?) pid=(?P<pid>\d{1,18})(?:, ip=(?P<ip>[^)]*))?\)\s?")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")
_TOKEN = frozenset(range(0x21, 0x7F)) - frozenset(b":()[]{}|")
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGITS = frozenset(b"0123456789")


def inert_kind(raw: bytes, flags: int) -> int:
    """KEEP, INERT or PREFIXED (inert, counted as vLLM output) for one raw line of a block."""
    if not raw:
        return INERT  # an empty line: the per-line stages return before reading it
    if len(raw) > 4 * MAX_INERT_LINE:
        return KEEP  # too long even without its colour: not worth cleaning
    line = _cleaned(raw, flags)
    if line is None or len(line) > MAX_INERT_LINE or _PRINTABLE.fullmatch(line) is None:
        return KEEP
    prefixed = line[:1] == b"("
    rest = _peeled(line) if prefixed else line
    if not rest or any(a in rest for a in ANCHORS):
        return KEEP
    if prefixed or rest[:1] == b"[":
        places = [0]  # a process prefix or a bracket: no wrapper is looked for
    else:
        places = _places(rest)
        if places is None:
            return KEEP
    if any(_may_start(rest, p) for p in places):
        return KEEP
    if _warning_name(rest):  # a wrapper is only stripped before a record: with none, the line is read whole
        return KEEP
    return PREFIXED if prefixed else INERT


def _cleaned(raw: bytes, flags: int) -> bytes | None:
    """The line as the cleaner leaves it, or None where the cleaner would carry state to the next line (an
    escape cut at the line's end) or the line holds a CR (the bare-CR splitter reads those)."""
    if b"\r" in raw:
        return None
    if flags & ESC_BLOCK and b"\x1b" in raw:
        tail = raw.rfind(b"\x1b", max(0, len(raw) - 18))
        if tail >= 0 and _ESC_CUT.fullmatch(raw, tail) is not None:
            return None
        return _ESC_SEQ.sub(b"", raw).replace(b"\x1b", b"")
    if flags & RESIDUE_BLOCK:
        return _RESIDUE.sub(b"", raw)
    return raw


def _peeled(line: bytes) -> bytes:
    """The line after its chain of vLLM process prefixes (as ``OriginCache.peel`` takes it); the line itself
    when the first prefix does not parse (then kept: it starts with ``(``)."""
    pos = 0
    while True:
        m = _PREFIX.match(line, pos)
        if m is None:
            return line[pos:]
        pos = m.end()


def _places(line: bytes) -> list[int] | None:
    """Every place at which a wrapper the per-line stages strip could end (0 included), following wrappers
    inside wrappers; None when there are more than :data:`MAX_PLACES` (the line is then kept)."""
    seen, depth = [0], [0]
    i = 0
    while i < len(seen):  # breadth first: a place is followed at the depth it is first reached
        pos, d = seen[i], depth[i]
        i += 1
        if d >= _MAX_DEPTH:
            continue
        for nxt in _wrapper_ends(line, pos):
            if nxt not in seen:
                if len(seen) >= MAX_PLACES:
                    return None
                seen.append(nxt)
                depth.append(d + 1)
    return seen


def _wrapper_ends(line: bytes, pos: int) -> list[int]:
    """Where each loose wrapper starting at ``pos`` ends (a ``grep -n`` number, an indentation or quote, a
    compose name, a ``grep -H`` file name); strict wrappers are ``_may_start``'s business."""
    n = len(line)
    if pos >= n:
        return []
    c = line[pos]
    if c in _DIGITS:
        end = _grep_n_end(line, pos)
        return [] if end is None else [end]
    if c == 0x20 or c == 0x3E or (c in b"-*+" and line[pos + 1 : pos + 2] == b" "):
        return [_indent_end(line, pos)]
    if c in b"({[":
        return []
    ends = []
    end = _compose_end(line, pos)
    if end is not None:
        ends.append(end)
    end = _grep_h_end(line, pos)
    if end is not None:
        ends.append(end)
    return ends


def _grep_n_end(line: bytes, pos: int) -> int | None:
    """``(\\d{1,9})([:-]|\\t| {1,4}|[.)] {1,3})`` at ``pos`` (tabs never reach here)."""
    j = pos
    while j < len(line) and line[j] in _DIGITS:
        j += 1
    if j - pos > 9 or j >= len(line):
        return None
    c = line[j]
    if c in b":-":
        return j + 1
    if c == 0x20:
        return _spaces_end(line, j, 4)
    if c in b".)" and line[j + 1 : j + 2] == b" ":
        return _spaces_end(line, j + 1, 3)
    return None


def _spaces_end(line: bytes, j: int, most: int) -> int:
    k = j
    while k < len(line) and k - j < most and line[k] == 0x20:
        k += 1
    return k


def _indent_end(line: bytes, pos: int) -> int:
    """``(?:[ \\t]|>|[-*+](?=[ \\t]))+`` at ``pos``."""
    k = pos
    while k < len(line):
        c = line[k]
        if c == 0x20 or c == 0x3E or (c in b"-*+" and line[k + 1 : k + 2] == b" "):
            k += 1
        else:
            break
    return k


def _compose_end(line: bytes, pos: int) -> int | None:
    """``[A-Za-z0-9][\\w.-]*\\s*\\| ?`` at ``pos``."""
    if line[pos] not in _WORD or line[pos] == 0x5F:
        return None
    k = pos + 1
    while k < len(line) and (line[k] in _WORD or line[k] in b".-"):
        k += 1
    while k < len(line) and line[k] == 0x20:
        k += 1
    if k >= len(line) or line[k] != 0x7C:
        return None
    k += 1
    return k + 1 if line[k : k + 1] == b" " else k


def _grep_h_end(line: bytes, pos: int) -> int | None:
    """``([^\\s:()\\[\\]{}|]+?)(?:([:-])(\\d{1,9})\\2|:)`` at ``pos``: the shortest file name before a
    ``:N:`` / ``-N-`` / ``:``."""
    n = len(line)
    i = pos + 1
    if line[pos] not in _TOKEN:
        return None
    while i < n:
        c = line[i]
        if c in b":-":
            j = i + 1
            while j < n and j - i <= 9 and line[j] in _DIGITS:
                j += 1
            if i + 1 < j <= i + 10 and j < n and line[j] == c:
                return j + 1
            if c == 0x3A:
                return i + 1
        if c not in _TOKEN:
            return None
        i += 1
    return None


def _may_start(line: bytes, pos: int) -> bool:
    """Whether something that makes a record (or a strict wrapper, which changes the reader's state) may
    start at ``pos``: a superset of the envelope, shape, cut-header, wrapper and exception tests."""
    rest = line[pos:]
    if not rest:
        return True
    c = rest[0]
    if c in b"({":
        return True
    if c == 0x5B:  # '[': an LMCache header cut short (a longer one holds the anchor ``LMCache``)
        return len(rest) <= len(LMC_HEAD) and all(t == r or t == 0x30 and r in _DIGITS for t, r in zip(LMC_HEAD, rest, strict=False))
    if rest[:3] in LEVEL_HEADS:
        return True
    if c in _DIGITS:
        return rest[4:5] == b"-" and rest[10:11] == b"T"  # an RFC 3339 time: kubectl / docker / journald
    return _journald_head(rest)


def _journald_head(rest: bytes) -> bool:
    """journald's ``Dez 03 10:00:00`` start, whole or cut: a word of at most 12, spaces, a day, a time."""
    if rest[0] in _DIGITS or rest[0] in b"[](){} ":
        return False
    k = 1
    while k < len(rest) and k < 12 and rest[k] != 0x20:
        k += 1
    if k >= len(rest) or rest[k] != 0x20:
        return False
    while k < len(rest) and rest[k] == 0x20:
        k += 1
    j = k
    while j < len(rest) and j - k < 2 and rest[j] in _DIGITS:
        j += 1
    return j > k and rest[j : j + 1] == b" " and rest[j + 1 : j + 2] in (b"0", b"1", b"2", b"3", b"4", b"5", b"6",
                                                                         b"7", b"8", b"9")


def _warning_name(rest: bytes) -> bool:
    """An exception line's name ending in ``Warning`` (``FutureWarning:``); the other endings are anchors."""
    k = 0
    while k < len(rest) and (rest[k] in _WORD or rest[k] == 0x2E):
        k += 1
    return rest[:k].endswith(b"Warning") and (k == len(rest) or rest[k] == 0x3A)


def kinds(data: bytes, off: int, starts, ends, flags: int) -> bytes:
    """One kind byte per line ``data[off + starts[i] : off + ends[i]]``: the reference of ``_scan.prefilter``."""
    return bytes(inert_kind(data[off + s : off + e], flags) for s, e in zip(starts, ends, strict=True))


try:  # the compiled copy, built with the scanner (``_prefilter.c``)
    from specdiag.ingest._scan import prefilter as _compiled_kinds
except ImportError:  # pragma: no cover - exercised by the build without a compiler
    _compiled_kinds = None


def block_kinds(data: bytes, off: int, starts, ends, flags: int) -> bytes:
    """:func:`kinds` by the compiled copy where it was built (and the scanner is not forced to Python)."""
    from specdiag.ingest.scan import compiled_in_use

    if _compiled_kinds is not None and compiled_in_use():
        return _compiled_kinds(data, off, starts, ends, flags)
    return kinds(data, off, starts, ends, flags)
