"""Terminal rows: rejoin the rows a narrow terminal (or ``fold -w N``) cut each long line into.

A terminal that wraps a long line and is then copied as text (``tmux capture-pane`` without ``-J``,
``screen``, a chat box, ``fold``) turns one physical line into rows of exactly its width, the last one
shorter; the rows after the first carry none of the prefixes the writer put on each line (no vLLM process
prefix, no kubectl ``[pod/…]``, no timestamp). At 60 or 72 columns the cut falls inside the record header
itself (``(Worker_TP2 pid=767) [2026-05-06 15:56:`` is 40 columns before LMCache's level word), so the
rows must be joined before any envelope parser reads them. The record joiner in ``records.py`` handles
rows of an already recognised record at the usual widths (80 and wider); this stage handles any width,
on evidence taken from the block itself:

* **the width**: a wrapped block's longest rows all have exactly the wrap width, and many do; an unwrapped
  log's longest line is one of a kind. A block's width is its longest row length when at least
  ``MIN_ROWS`` rows and ``MIN_SHARE`` of its rows have it (lengths as read, colour codes included: ``fold``
  counts bytes, and a terminal showed the codes' residue as text). A block whose scanner counted a store,
  retrieve, lookup or stats line holds lines longer than any narrow width: it is not wrapped below
  ``LONG_HOT`` columns. A block too small to tell keeps the width of the input's previous block;
* **the join**: a row exactly that wide is held; the next line is joined to it (without a line break: the
  terminal inserted none) when it is the next line, starts no record or wrapper of its own (no envelope,
  ``[pod/…]``, timestamp, journald or compose prefix, ``Traceback``; not a line number of a paste that
  numbered the held row too), is not indented by two spaces or a tab (a traceback's code line), and the
  held row did not already end with LMCache's
  ``(file.py:N:logger)`` suffix (LMCache prints it last: a row ending with it is a whole line that
  happened to fill the width). A held row that ends inside its own prefixes or header
  (``[pod/vllm-0/vllm] (Worker_TP3 pid=768)``, ``… [2026-05-06 15:3``) takes the next row even when that
  one looks like a record start (it is the rest of the header), unless a collector's prefix opens it. A
  joined row that is again exactly the width goes on to the next one.

Line numbers stay those of the rows (the joined line has the number of its first row).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from specdiag.ingest.wrappers import ANSI_BYTES, ISO_TS, JOURNALD_SHORT, KUBECTL_PREFIX, is_envelope

#: a block is wrapped only when this many of its rows have the wrap width …
MIN_ROWS = 3
#: … and at least this share of its rows
MIN_SHARE = 0.1
#: the narrowest width taken for a terminal's (below it, a row of equal lengths is a table, not a wrap)
MIN_WIDTH = 40
#: a block with counted store/retrieve/lookup/stats lines has lines at least this long: no narrower wrap
LONG_HOT = 150
#: scanner templates whose lines are always longer than ``LONG_HOT`` (a uvicorn access line can be short)
LONG_TEMPLATES = frozenset({"S1", "R4", "L1", "V_STATS", "V_SPEC"})
_SUFFIX_END = re.compile(rb"\([\w./-]+\.py:\d+:[\w.]+\)\s*$")
_COMPOSE_START = re.compile(rb"[A-Za-z0-9][\w.-]* +\| ")


def block_width(lengths: Iterable[int], *, long_hot: bool = False) -> int | None:
    """The wrap width of a block from the lengths of the rows the per-line stages read, or None."""
    lens = list(lengths)
    if not lens:
        return None
    top = max(lens)
    if top < MIN_WIDTH or (long_hot and top < LONG_HOT):
        return None
    n = lens.count(top)
    return top if n >= MIN_ROWS and n >= MIN_SHARE * len(lens) else None


def _plain(row: bytes) -> bytes:
    return ANSI_BYTES.sub(b"", row).replace(b"\r", b"") if b"[" in row or b"\x1b" in row or b"\r" in row else row


def starts_line(row: bytes) -> bool:
    """Whether a row begins a line of its own: a record or a collector's wrapper, as ingest recognises them."""
    row = _plain(row)
    if not row.strip() or row[:2] == b"  " or row[:1] == b"\t":
        return True  # blank, or a traceback's indented code line
    if is_envelope(row) or row.startswith(b"Traceback"):
        return True
    c = row[:1]
    if c == b"[":
        return KUBECTL_PREFIX.match(row) is not None
    if c.isdigit():
        return ISO_TS.match(row) is not None
    if c == b"{":
        return row.startswith((b'{"log"', b'{"asctime"', b'{"time"', b'{"levelname"'))
    if b"]: " in row[:160] and JOURNALD_SHORT.match(row) is not None:
        return True
    return b"| " in row[:64] and _COMPOSE_START.match(row) is not None


#: what ingest peels before a record's header: kubectl ``[pod/…]``, an RFC 3339 timestamp, vLLM process prefixes
_PREFIXES = re.compile(rb"(?:\[pod/[^\]\s]{1,200}\] )?(?:\d{4}-\d\d-\d\dT[\d:.,]{8,20}(?:Z|[+-]\d\d:?\d\d)? )?"
                       rb"(?:\([^()\n]{1,120}? pid=\d+[^()\n]{0,80}\) ?){0,4}")
_LMC_HEAD = re.compile(rb"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{1,9}\] LMCache [A-Z]{4,8} ?:")
_VLLM_HEAD = re.compile(rb"[A-Z]{4,8} \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[^\]:\s]{1,200}:\d+\]")
_LEVELS = (b"INFO", b"WARNING", b"WARN", b"ERROR", b"DEBUG", b"CRITICAL")


def cut_header(row: bytes) -> bool:
    """Whether a row ends inside the prefixes or the header of the record it starts (``(Worker_TP2 pid=767)
    [2026-05-06 15:5``): then the record goes on in the next row, whatever that row starts with."""
    row = _plain(row)
    m = _PREFIXES.match(row)
    rest = row[m.end() :]
    if not rest.strip():
        return m.end() > 0  # nothing but prefixes: the record itself is on the next row
    c = rest[:1]
    if c == b"(":
        return b")" not in rest  # cut inside a process prefix
    if c == b"[":
        if rest.startswith(b"[pod/") or b"[pod/".startswith(rest):
            return b"] " not in rest
        return rest[1:5].isdigit() and _LMC_HEAD.match(rest) is None
    for level in _LEVELS:
        if level.startswith(rest):
            return True  # cut inside the level word
        if rest.startswith(level + b" "):
            return rest[len(level) + 1 : len(level) + 2].isdigit() and _VLLM_HEAD.match(rest) is None
    return False


#: a paste that numbered every line (``grep -n``, ``grep -H``, ``cat -n``): each numbered row is a line
_NUMBERED = re.compile(rb"(?:[^\s:()\[\]{}|]{1,200}?[:-])?\s{0,6}\d{1,9}(?:[:-]|\t)")


def _wrapper_start(row: bytes) -> bool:
    """A collector's prefix opens the row: a line of its own even after a row cut inside its header."""
    return row.startswith(b"[pod/") or row[:1].isdigit() and ISO_TS.match(row) is not None


class RowJoiner:
    """The held row of one input and the current block's wrap width (see the module docstring)."""

    __slots__ = ("width", "last_width", "row", "first", "last", "cut", "end")

    def __init__(self) -> None:
        self.width: int | None = None
        self.last_width: int | None = None
        self.row: bytes | None = None
        self.first = self.last = 0
        self.cut = False  # the held row ends inside its record's header
        self.end = 0  # the last row of the line ``push`` or ``flush`` handed on joined

    def begin_block(self, lengths: Iterable[int], long_hot: bool) -> None:
        """Decide this block's width (a block too small to tell keeps the previous block's)."""
        lens = list(lengths)
        w = block_width(lens, long_hot=long_hot)
        if w is None and not long_hot and len(lens) < MIN_ROWS / MIN_SHARE and self.last_width in lens:
            w = self.last_width
        self.width = w
        if w is not None:
            self.last_width = w

    def push(self, lineno: int, line: bytes) -> tuple[tuple[int, bytes] | None, tuple[int, bytes] | None]:
        """``line`` read: (a line ready for the stages or None, a second one or None), in line order."""
        done = None
        if self.row is not None:
            if lineno == self.last + 1 and not self._numbered(line) and (
                    not starts_line(line) or self.cut and not _wrapper_start(line)):
                self.row = (self.row[:-1] if self.row[-1:] == b"\r" else self.row) + line  # CRLF rows
                self.last, self.cut = lineno, False
                if len(line) == self.width and _SUFFIX_END.search(_plain(line)) is None:
                    return None, None  # the row goes on
                done, self.row = (self.first, self.row), None
                self.end = lineno
                return done, None
            done = self.flush()
        if self.width is not None and len(line) == self.width and _SUFFIX_END.search(_plain(line)) is None:
            self.row, self.first, self.last, self.cut = line, lineno, lineno, cut_header(line)
            return done, None
        return done, (lineno, line)

    def _numbered(self, line: bytes) -> bool:
        """Both the held row and ``line`` open with a paste's line number: ``line`` is the next line."""
        return _NUMBERED.match(line) is not None and _NUMBERED.match(self.row) is not None

    def flush(self) -> tuple[int, bytes] | None:
        """The held row as it is (what follows it is no continuation, or nothing does)."""
        if self.row is None:
            return None
        out, self.row = (self.first, self.row), None
        self.end = self.last
        return out
