"""The cleaner: the first of the per-line stages, what a physical line loses before anything reads it.

Colour (ANSI escapes, and the ESC-less residue some collectors leave), CRs, lines of binary junk and
over-long lines. Apart from the envelope parsers and the joiner because none of this depends on what the
line says: most of it is decided once per block (``Cleaner.begin_block``, C-speed searches), so that
most lines skip the per-line tests. Also read by the bare-CR splitter (``cr_lines.py``), which must see a
record's header through its colour codes.
"""

from __future__ import annotations

from specdiag.ingest import rows, wrappers
from specdiag.ingest.literals import first_of
from specdiag.ingest.rows import esc_cut_at_end

# the line limits live with the reader: MAX_PARSE_LINE, a logical line longer than this is cut before parsing
# (no vLLM/LMCache record is anywhere near it); MAX_LINE, what the reader already cut (and announced)
from specdiag.ingest.sources import MAX_LINE, MAX_PARSE_LINE
from specdiag.patterns import lazy

ANSI_ESC = lazy(rb"\x1b\[[0-9;?]*[A-Za-z]")
#: a colour code whose ESC was lost (``[1;36m``), or printed as the two characters ``^[`` (``cat -v``, some web
#: consoles: ``^[[1;36m``) or as the word ``ESC`` (``ESC[0;0m``, a viewer that names control bytes)
#: (its first bytes an alternation of literals, not an optional group: the engine then skips to a `^`, `E` or `[`
#: instead of trying every position, 1.5x faster on a line of brackets)
ANSI_RESIDUE = lazy(rb"(?:\^\[\[|ESC\[|\[)\d{1,3}(?:;\d{1,3})*m")


#: what is left of colour codes whose ESC was lost (``tee`` of a terminal, a copy out of a web console)
RESIDUES = (b"[0m", b"[0;0m", b";20m", b"[1;36m",
            b"[36m(", b"[33m(")  # Ray's colour before a process prefix, its reset lost with the ESC too


def colour_of(chunk: bytes, start: int, end: int) -> tuple[bool, bool]:
    """Whether ``chunk[start:end]`` holds an ESC, and (without one) colour residue: decided per block, since a
    block holding ESC keeps bracket text that merely looks like residue. A function of the bytes alone, so a
    scan thread can decide it ahead of the reader (``ahead.py``)."""
    esc = chunk.find(b"\x1b", start, end) >= 0
    return esc, not esc and first_of(chunk, start, end, RESIDUES) >= 0  # one pass: most blocks hold none


class Cleaner:
    """The per-line cleaning of one input, with what it learnt of the current block and the line before."""

    __slots__ = ("stats", "esc", "residue", "cr", "caret_cr", "suspicious", "esc_cut", "cut", "skipped")

    def __init__(self, stats) -> None:
        self.stats = stats
        self.esc = self.residue = self.cr = self.caret_cr = self.suspicious = False
        self.esc_cut = False  # the last line ended inside an ANSI escape: its rest starts the next line
        self.cut = False  # the line ``clean`` returned last was cut to MAX_PARSE_LINE
        self.skipped = 0  # lines dropped as binary junk

    def begin_block(self, chunk: bytes, few_lines: bool = False, start: int = 0, end: int | None = None) -> None:
        """Block-level prechecks (C-speed searches of ``chunk[start:end]``) that let most lines skip the
        per-line ones.

        With ``few_lines`` (the scanner took the rest) the CR and binary checks run on each line fed
        instead, which gives the same answers; whether colour residue is stripped stays a block-level
        decision (a block holding ESC keeps bracket text that merely looks like residue)."""
        end = len(chunk) if end is None else end
        find = chunk.find
        self.esc, self.residue = colour_of(chunk, start, end)
        # a paste of ``cat -v`` / ``less`` output prints CR as the two characters ``^M`` and ESC as ``^[``: with both
        # in the block, ``^M`` is a CR (the reader cuts records there as at a real one). Its colour codes are residue
        # (``^[[1;36m`` holds ``[1;36m``), so a block without residue pays nothing for the two searches
        self.caret_cr = self.residue and find(b"^M", start, end) >= 0 and find(b"^[[", start, end) >= 0
        self.cr = few_lines or self.caret_cr or find(b"\r", start, end) >= 0
        self.suspicious = few_lines or find(b"\x00", start, end) >= 0 or not chunk.isascii()

    def clean(self, lineno: int, line: bytes) -> bytes | None:
        """``line`` without colour and CRs, cut to :data:`MAX_PARSE_LINE`; None for nothing left or junk."""
        if self.esc_cut:  # the rest of an escape a cut split: ``6m(Worker_TP2 …`` after ``…\x1b[1;3``
            self.esc_cut = False
            at = _paste_prefix_end(line)  # the app's row prefixed again, or every row of a paste indented
            m = rows.ESC_REST.match(line, at)
            if m is not None:
                line = line[:at] + line[m.end() :]
        if self.esc and b"\x1b" in line:
            i = esc_cut_at_end(line)
            if i >= 0:
                line, self.esc_cut = line[:i], True
            line = ANSI_ESC.sub(b"", line)
            if b"\x1b" in line:
                line = line.replace(b"\x1b", b"")
        elif self.residue:
            line = ANSI_RESIDUE.sub(b"", line)
        if self.cr:
            line = line.replace(b"\r", b"")
            if not line:
                return None
        if self.suspicious and (b"\x00" in line or not line.isascii() and _mostly_binary(line)):
            self.skipped += 1
            return None
        if len(line) > MAX_PARSE_LINE:
            self.cut = True
            # a line the reader already cut (at MAX_LINE) was announced there, with this limit: one message
            if len(self.stats.errors) < 20 and len(line) != MAX_LINE:
                self.stats.errors.append(f"line {lineno}: {len(line):,} bytes long, cut to {MAX_PARSE_LINE:,} for parsing")
            line = line[:MAX_PARSE_LINE]
        return line


def _paste_prefix_end(line: bytes) -> int:
    """Where a row starts after a paste's indentation / quote and a kubectl ``--prefix`` (0 without them)."""
    m = wrappers.INDENT.match(line) if line[:1] in b" \t>" else None
    at = m.end() if m is not None else 0
    k = wrappers.KUBECTL_PREFIX.match(line, at) if line[at : at + 5] == b"[pod/" else None
    return k.end() if k is not None else at


def _mostly_binary(line: bytes) -> bool:
    """Lines of control bytes / invalid UTF-8 (binary junk appended to a log) are skipped."""
    try:
        line.decode("utf-8")
        return False
    except UnicodeDecodeError:
        bad = line.decode("utf-8", "replace").count("\ufffd")
        return bad > 8 and bad * 4 > len(line)
