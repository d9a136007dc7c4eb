"""The continuation joiner: which physical lines are the rest of a record already begun, and the joining.

A record spans lines four ways: a multi-line LMCache message (open until its ``(file:line:logger)``
suffix), a raw Python traceback, a config dump hard-wrapped by a paste, and a line a terminal (or a chat
box, or ``fold``) cut into rows, which adds no prefix to the rows after the first. The reader
(``records.py``) keeps the state of one input (which records are open, the widths proven cut); the tests
that decide from the rows alone whether a line continues a record, and the joins themselves, are here, as
plain functions of the rows and the open record, so that they can be read and tested apart from the
per-line state machine. ``rows.py`` holds the lower-level test of a row cut by its template.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from specdiag.catalog.wording import BYTES
from specdiag.ingest import wrappers
from specdiag.ingest.envelope import EXC_LINE, Record, parses_as_record, split_suffix
from specdiag.ingest.origin import Origin
from specdiag.ingest.prefilter import FOREIGN_HEADER, QUIET_LEVELS
from specdiag.ingest.rows import MIN_ROW, cut_head, cut_suffix, cut_wrapper
from specdiag.ingest.wrappers import is_envelope

MAX_JOIN_LINES = 400
MAX_JOIN_CHARS = 256 * 1024
#: the narrowest common terminal width: an LMCache row at least this wide may be taken for cut on its width
#: alone; a narrower one (down to ``rows.MIN_ROW``) only when this input proved a cut at that width (a row
#: ended inside a header, at ``ERROR:`` or inside the suffix) or the rows themselves show it (``fills``)
WRAP_MIN_WIDTH = 80
#: terminal widths at which a vLLM line may be followed by a shorter last row: the usual default sizes,
#: plus every width this input proved cut (``records.LineReader._prove``). Real logs are full of headerless lines
#: after vLLM lines of arbitrary length (torch glog, prints), so at any other width a vLLM record is only joined
#: to a row exactly as wide as its own (two full rows), which then proves the width.
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250})


class CutHead:
    """A row that ended inside a record's header (``rows.cut_head``): held until the next row completes it."""

    __slots__ = ("first", "last", "core", "outer", "deployment", "width", "whole")

    def __init__(self, first: int, core: bytes, outer: bytes, deployment: str | None, width: int) -> None:
        self.first = self.last = first
        #: the cut fell inside a collector's prefix (``rows.cut_wrapper``): the joined row is peeled whole
        self.whole = cut_wrapper(core)
        self.core = core  # the row after its wrappers (collector, paste), process prefix kept
        self.outer = outer  # the wrappers the row had: rows the app cut carry them too, a terminal's rows do not
        self.deployment = deployment
        self.width = width


class OpenRecord:
    """A record still collecting continuation lines for one process."""

    __slots__ = ("rec", "mode", "chars", "space", "plen")

    def __init__(self, rec: Record, mode: str, space: bool = False, plen: int = 0) -> None:
        self.rec = rec
        self.mode = mode  # 'lmcache' (until suffix) | 'traceback' | 'wrap' (hard-wrapped dump)
        self.chars = len(rec.raw)
        self.space = space  # the last physical line ended in a space (kept when a terminal wrap is joined)
        self.plen = plen  # width of its last physical line, to tell a terminal wrap from a multi-line message


def _pieces(head: CutHead, line: bytes) -> Iterator[bytes]:
    """What the row after a cut header may add to it: the row as it is (a terminal's wrap adds no prefix),
    without the wrappers the header row had (the app's line was cut before a collector or a paste prefixed
    every piece), or without only the paste's indentation / quote (indented after a terminal wrapped it)."""
    yield line
    outer = head.outer
    if outer and line.startswith(outer):
        yield line[len(outer) :]
    m = wrappers.INDENT.match(outer) if outer else None
    if m is not None and m.end() < len(outer) and line.startswith(m.group(0)):
        yield line[m.end() :]
    m = wrappers.KUBECTL_PREFIX.match(outer) if outer[:5] == b"[pod/" else None
    if m is not None and m.end() < len(outer) and line.startswith(m.group(0)):
        yield line[m.end() :]  # ``--prefix --timestamps``: the pod prefix on every piece, the time on the first


def join_head(head: CutHead, lineno: int, line: bytes, plen: int, peel: Callable, peel_for: Callable
              ) -> tuple[Origin, bytes, int] | bool | None:
    """The row after a cut header: joined when, with it, the header parses (or is still cut and the row
    was full). True: still a header, held (``head`` now ends at this row); None: not its rest (the held row
    is handed on as it was); else ``(origin, rest, plen)``: the record, whose width the reader takes for
    proven. ``peel`` peels a whole row (wrappers too), ``peel_for`` the process prefix of one deployment."""
    if lineno != head.last + 1 or plen > head.width:
        return None
    for piece in _pieces(head, line):
        core = head.core + piece
        if head.whole:  # the collector's prefix was cut: peel the joined row as a whole row
            peeled = peel(head.outer + core)
            if peeled is None:
                continue
            origin, rest = peeled
        else:
            origin, rest = peel_for(head.deployment, core)
        if cut_head(rest, origin.pid is not None) and plen == head.width:
            head.core, head.last = core, lineno
            return True
        if parses_as_record(rest):
            return origin, rest, plen
    return None


def fills(o: OpenRecord, line: bytes, plen: int, proven: set[int]) -> bool:
    """Whether the open record's last row filled a terminal row that ``line`` (``plen`` wide) goes on.

    80 columns and more, as before; a narrower row only at a width this input was proven cut at
    (``proven``), or when the rows show it: this one is as wide (two full rows), or it closes the record's
    suffix."""
    width = o.plen
    if plen > width:
        return False  # a terminal's next row is never wider than the one it cut
    if width >= WRAP_MIN_WIDTH or width in proven:
        return True
    if width < MIN_ROW:
        return False
    if plen == width:
        return True
    rec = o.rec
    tail = (rec.cont[-1] if rec.cont else rec.raw) + (b" " if o.space else b"") + line
    return split_suffix(tail)[1] is not None


def wrapped_continuation(cut: OpenRecord, open_recs: dict[str, OpenRecord], origin: Origin, line: bytes,
                          line_at, lineno: int) -> OpenRecord | None:
    """The cut LMCache record a headerless, prefixless line continues, if it is one.

    A terminal (or a chat box) that wraps a long line inserts a newline but none of the prefixes the
    writer put on each physical line, so the continuation cannot be found by its process key. It is
    joined only to the record on the line just before (blank lines aside), which must still be open (no
    ``(file:line:logger)`` suffix yet: LMCache prints it last, so its absence proves the record was cut),
    must have been long enough to wrap, and must come from the same deployment. ``line_at(n)`` gives the
    raw line ``n`` of the current block (None outside it).
    """
    rec = cut.rec
    if open_recs.get(rec.origin.key) is not cut:
        return None
    prev = lineno - 1
    while lineno - prev < 8:
        raw = line_at(prev)
        if raw is None or raw.strip():
            break
        prev -= 1
    if rec.end_line != prev:
        return None
    if origin.deployment is not None and origin.deployment != rec.origin.deployment:
        return None
    if line.startswith((b"INFO:", b"WARNING:", b"ERROR:", b"Traceback")):
        return None
    return cut


def continues_row(line: bytes, width: int) -> bool:
    """Whether a headerless line can be the next terminal row of a cut vLLM record ``width`` wide.

    A terminal row is never wider than the first one, does not start with the indentation of a
    traceback (one space is a cut before a word), and is not a line ingest would keep on its own (an exception, a version banner): joining
    it can then only add the rest of the record's text, never hide a line. Nor is it another program's
    line with its whole header (``FOREIGN_HEADER``).
    """
    return (len(line) <= width and line[:2] != b"  " and line[:1] != b"\t" and not is_envelope(line)
            and FOREIGN_HEADER.match(line) is None
            and EXC_LINE.match(line) is None and not any(w in line for w in BYTES.KEPT_TEXT_WORDS)
            and b"LMCache v" not in line
            and b"version" not in line[:80] and b"LMCache:" not in line[:16]
            and b"it/s]" not in line and b"s/it]" not in line and b"%|" not in line)  # tqdm, printed unprefixed


def looks_wrapped(plen: int, line: bytes, proven: bool = False) -> bool:
    """A continuation of the same process that is a cut line rather than the next line of a multi-line
    message: the record's last line filled a terminal row, and this one is not indented or an exception.
    One leading space is a cut before a word when a word follows, or after a row exactly a terminal's
    width (or one this input was proven cut at) or an empty message, or before LMCache's whole suffix (the row
    is `` (file.py:N:logger)``: the cut fell at the space before it); a dict repr pretty-printed over lines
    indents its items by one space, but before a quote or a bracket (`` 'chunk_size': 256,``)."""
    if line[:1] == b" " and (proven and line[1:2] not in (b" ", b"\t", b"") or line[1:2].isalnum()
                             or _whole_suffix(line)):
        line = line[1:]
    return plen >= MIN_ROW and line[:1] not in (b" ", b"\t") and EXC_LINE.match(line) is None


def _whole_suffix(line: bytes) -> bool:
    """Whether ``line`` is `` (file.py:N:logger)`` and nothing else: LMCache's suffix with the space before it."""
    if line[:2] != b" (":
        return False
    body, file, _, _ = split_suffix(line)
    return file is not None and body == b""


def concat_row(o: OpenRecord, line: bytes, lineno: int) -> tuple[bytes | None, int | None, bytes | None]:
    """Join a terminal-wrapped piece to the record without a line break (a wrap inserted none), then look
    for LMCache's suffix on the joined text, since the cut may have fallen inside it."""
    rec = o.rec
    last = rec.cont[-1] if rec.cont else rec.raw
    glue = b" " if o.space and last else b""  # a row cut right after ``ERROR: `` adds no space to an empty message
    if not last and line[:1] == b" ":
        line = line[1:]  # cut between ``ERROR:`` and the space before the message
    tail = last + glue + line
    tail, file, src_line, logger = split_suffix(tail)
    if rec.cont:
        rec.cont[-1] = tail
    else:
        rec.raw = tail
        rec._msg = None
    rec.end_line = lineno
    o.chars += len(line)
    o.space = line[-1:] == b" "
    return file, src_line, logger


def append_line(o: OpenRecord, text: bytes, lineno: int) -> None:
    rec = o.rec
    if rec.cont is None:
        rec.cont = []
    rec.cont.append(text)
    rec.end_line = lineno
    o.chars += len(text)


def opens_wrap(msg: bytes) -> bool:
    """A config dump hard-wrapped by a paste: brackets still open at the end of the line."""
    if len(msg) < 20 or not (msg.startswith(b"Initializing a V1 LLM engine") or msg.startswith(b"non-default args")):
        return False
    return msg.count(b"{") > msg.count(b"}") or msg.count(b"(") > msg.count(b")")


def join_lmcache(o: OpenRecord, wrapped: bool, lineno: int, line: bytes, plen: int, widths: set[int],
                 proven: set[int]) -> tuple[bool, int | None]:
    """The next line of an open LMCache record (``plen`` wide as read), joined: without a line break where
    a terminal cut the record (``wrapped``: a prefixless row ``wrapped_continuation`` found; or a row of the
    same process that ``looks_wrapped`` and ``fills`` the last one), else as a line of its own. The suffix
    ends the record. ``(done, width)``: whether the record is complete (its suffix found, or too long to
    keep open), and a width this input was thereby shown cut at (None: none). ``widths``: the terminal
    widths known for this input, ``proven`` those proven below 80 columns."""
    rec = o.rec
    shown = None
    if wrapped or looks_wrapped(o.plen, line, o.plen in widths or not rec.raw) and fills(o, line, plen, proven):
        width = o.plen
        file, src_line, logger = concat_row(o, line, lineno)  # the suffix may have been cut too
        if file is not None:
            shown = width  # proven: this input was wrapped at that width
        elif plen >= MIN_ROW and cut_suffix(rec.cont[-1] if rec.cont else rec.raw):
            shown = plen  # this row ends inside the suffix: it was cut too
    else:
        body, file, src_line, logger = split_suffix(line)
        append_line(o, body, lineno)
        o.space = line[-1:] == b" "
    o.plen = plen
    if file is not None:
        rec._file, rec.src_line, rec._logger = file, src_line, logger
        return True, shown
    return o.chars > MAX_JOIN_CHARS or len(rec.cont or ()) > MAX_JOIN_LINES, shown


def under_wrapper(held: Record, width: int, outer: int, widths: set[int] | frozenset[int]) -> bool:
    """Whether a held record's row, ``width`` wide as read, is a terminal's row under a wrapper ``outer`` wide
    (the wrapper ingest took off the row after it): a paste indents, quotes or prefixes every row of what a
    120-column terminal cut, so the first row is 124 wide, which no terminal is. Only for warnings and
    errors: an INFO or DEBUG record may be quiet, and the prefilter decides a quiet record's next row with
    the known widths alone (``prefilter._ends_held``)."""
    return 0 < outer < width and held.level not in QUIET_LEVELS and width - outer in widths


def maybe_under_wrapper(held: Record, width: int, row: int, widths: set[int] | frozenset[int]) -> bool:
    """Whether ``under_wrapper`` may hold for a held record's next row ``row`` wide as read, whatever wrapper
    the row turns out to carry (known only once it is read): some known width lies between the widths
    its wrapper could leave."""
    if held.level in QUIET_LEVELS:
        return False
    lo = width - min(row, width)
    return any(lo < w < width for w in widths)
