"""Per-block plumbing between the scanner and the per-line stages.

A block read from the input is either fed to the per-line stages whole (``plain_block``: no scanner) or
scanned first (``scanned_block``): the scanner counts the high-volume lines, hands the lookups on as
``LookupRows`` and the metric lines as ``MetricRows`` batches (``metric_rows``), and only the lines it left
reach the reader, in line order. Also how a store/retrieve line the scanner could not take (behind a
wrapper) is counted as the scanner would have counted it (``counted``). Apart from ``records.py`` so that
the reader holds the per-line state machine only; these functions drive it, a block or a batch at a time.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from itertools import compress, repeat
from operator import floordiv, itemgetter
from typing import TYPE_CHECKING, NamedTuple

from specdiag.catalog.wording import BYTES as _W
from specdiag.ingest import prefilter, scan
from specdiag.ingest.ahead import holds_cri, iso_fronts
from specdiag.ingest.hot import BlockView, HotWindow, LookupRows, MetricRows
from specdiag.ingest.joiner import TERMINAL_WIDTHS, maybe_under_wrapper
from specdiag.ingest.origin import OriginCache
from specdiag.ingest.prefilter import FOREIGN_HEADER, QuietOrigin
from specdiag.ingest.scan import ScanResult
from specdiag.ingest.wrappers import ISO_TS, LineUnwrapper, json_line

try:
    from specdiag.ingest._scan import iso_row_wraps as _compiled_iso_row_wraps
except ImportError:  # pragma: no cover - exercised by the build without a compiler
    _compiled_iso_row_wraps = None

#: ``SPECDIAG_PREFILTER=off`` reads every rare line (the differential tests compare whole analyses both ways)
PREFILTER = os.environ.get("SPECDIAG_PREFILTER", "on").strip().lower() != "off"

if TYPE_CHECKING:
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.records import LineReader


def plain_block(reader: LineReader, chunk: bytes, base: int) -> int:
    """A block without a scan (``chunk``: whole lines, the first numbered ``base + 1``): every line to the
    per-line stages. Returns its number of lines."""
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()

    def line_at(n: int) -> bytes | None:
        i = n - base - 1
        return lines[i] if 0 <= i < len(lines) else None

    reader.begin_block(chunk, line_at)
    feed = reader.feed
    for i, line in enumerate(lines, base + 1):
        feed(i, line)
    return len(lines)


def scanned_block(reader: LineReader, data: bytes, start: int, end: int, res: ScanResult, stats,
                   window: HotWindow | None, copy: bytes | None = None, base: int = 0) -> int:
    """A scanned block (``data[start:end]``; ``res`` with offsets from ``start``, or into ``copy``, the block
    without its wrapper: ``ahead.unwrapped``): the lines the scanner left go to the per-line stages as they were
    read (those the prefilter found inert or quiet only counted, while no record is open), the lookups out
    as rows, in line order."""
    named = None
    if copy is not None:
        named, res, copy = _named_copy(reader, data, start, end, res, copy, base)
        if named is not None:
            reader.years.turn_to(reader, named)
    origins = reader.origins.for_deployment(named)
    view = BlockView(reader.path, data, start, res, origins, reader.year_hint) if copy is None else \
        BlockView(reader.path, copy, 0, res, origins, reader.year_hint)
    n_hot = stats.hot.add(view, named)
    if n_hot:
        reader.recognized += n_hot
        _note_formats(stats, res)
    if window is not None:
        window.push(view)
    rare = res.columns["rare"]
    original = _OriginalLines(data, start, end, base) if copy is not None else None
    if original is not None:
        line_at = original.line_at
    else:
        line_at = _rare_line_at(data, start, rare)
    reader.begin_block(data, line_at, few_lines=True, start=start, end=end)
    skip = _prefilter(reader, data, start, end, res, copy, original, named, origins) \
        if PREFILTER and rare["line"] and not reader.bare else None
    block = _BlockFeed(reader, view, original)
    for n, s, e, table, i in _line_order(res, skip.kept if skip is not None else rare):
        if skip is not None and skip.before(n) and (table is None or not skip.passes_over(n)):
            skip.read_until(n, block)
        if table is not None:  # a metric row: no lookup observer reads those, so lookups need not stop here
            block.metric.append((n, table, i))
            continue
        block.flush_metric()
        block.flush_lookups(n)
        reader.feed(n, original.line_at(n) if original is not None else data[start + s : start + e])
        if skip is not None:
            skip.passable = None  # what was open may have changed
    if skip is not None:
        skip.read_until(1 << 62, block)
        skip.count()
    block.flush_metric()
    block.flush_lookups(1 << 62)
    return res.lines


class _Wrapped(NamedTuple):
    """A block scanned from its copy without a wrapper: its lines as read, the origins of the deployment the
    wrapper names, the widths of the wrapper taken off each rare row and the line after it
    (``prefilter.kinds``' ``wraps``), and whether it dates each line (``--timestamps``, json-file)."""

    lines: _OriginalLines
    origins: OriginCache
    wraps: tuple[array, array]
    dated: bool
    docker: bool = False  # docker json-file texts: the reader sees them without their colour (``DOCKER_TEXT``)


def _prefilter(reader: LineReader, data: bytes, start: int, end: int, res: ScanResult, copy: bytes | None,
               original: _OriginalLines | None, named: str | None, origins: OriginCache) -> _Inert:
    """The prefilter of a block's rare lines: of the block, or of its copy without a wrapper. Reading a line
    behind a kubectl ``--prefix`` or journald wrapper changes nothing its inner line would not but the row's
    width (the prefilter adds each line's wrapper width to it, as the reader counts it); behind a timestamp or
    in a docker json-file line, the reader's year too (each line's own), which the lines counted unread then
    set as reading them would (``_Inert._dated``)."""
    rare = res.columns["rare"]
    if copy is None:
        return _Inert(reader, data, start, end, rare, res.ahead)
    if named is not None and data[start] != 0x7B:  # kubectl --prefix, journald: one width on every line
        width = array("q", [_wrap_width(data, start, copy)]) * len(rare["line"])
        wrapped = _Wrapped(original, origins, (width, width), False)
    elif 48 <= data[start] <= 57:  # timestamps (and CRI tags): the widths the copy took off, line by line
        wrapped = _Wrapped(original, origins, _iso_row_wraps(data, start, end, original.base + 1, rare), True)
    else:  # docker's json-file (its copy holds the residue its line does), a collector's JSON (its copy none)
        docker = named is None and data[start : start + 8] == b'{"log":"'  # (``ahead._export_unwrapped``)
        residue = reader.cleaner.residue and not docker
        wrapped = _Wrapped(original, origins, _row_wraps(original, copy, rare, residue), True, docker)
    return _Inert(reader, copy, 0, len(copy), rare, None, wrapped)


def _holds_only(reader: LineReader, deployment: str) -> bool:
    """Whether all that is open is a held record of ``deployment``: the block's first line read decides
    whether it is its rest, and handing it on keeps the analysis on that deployment."""
    held = reader.held
    return (held is not None and held.origin.deployment == deployment and not reader.open_recs
            and reader.head is None and not reader.cleaner.esc_cut and not reader.unwrapper.carries())


def _row_wraps(original: _OriginalLines, copy: bytes, rare: dict, residue: bool = False) -> tuple[array, array]:
    """Per rare row, the width of the wrapper the copy took off it and off the line after it: the reader
    counts it in a row's width (``LineReader._continue_held``). Only the rows are measured (the lines as read
    are split for the rows read anyway); a row's next line in the copy is found from the row's end. In a
    block whose cleaner strips colour residue (``residue``) the reader measures a row without it, and so
    are both lines here: a collector's JSON around a coloured text holds residue its copy does not (a
    docker json-file line holds the same residue as its copy: its JSON escapes hold no ``[``, digit, ``;``
    or ``m``, so the raw widths differ by exactly the wrapper)."""
    lines, starts, ends = rare["line"], rare["start"], rare["end"]
    orig, base = original.all(), original.base + 1
    last = len(orig) - 1
    find, size = copy.find, len(copy)
    if residue:
        width, flags = prefilter.row_width, prefilter.RESIDUE_BLOCK
        rows = array("q", [width(orig[n - base], flags) - width(copy[s:e], flags)
                           for n, s, e in zip(lines, starts, ends, strict=True)])
        after = array("q", [width(orig[n - base + 1], flags) - width(copy[e + 1 : size if (nl := find(b"\n", e + 1)) < 0 else nl], flags)
                            if n - base < last else 0 for n, e in zip(lines, ends, strict=True)])
        return rows, after
    rows = array("q", [len(orig[n - base]) - (e - s) for n, s, e in zip(lines, starts, ends, strict=True)])
    after = array("q", [len(orig[n - base + 1]) - ((size if (nl := find(b"\n", e + 1)) < 0 else nl) - e - 1)
                        if n - base < last else 0 for n, e in zip(lines, ends, strict=True)])
    return rows, after


def _iso_row_wraps(data: bytes, start: int, end: int, first: int, rare: dict) -> tuple[array, array]:
    """``_row_wraps`` of a block whose copy lost each line's timestamp (``first``: its first line's number):
    the widths ``ahead.iso_fronts`` took off, looked up by line instead of measured (compiled:
    ``_scan.iso_row_wraps``)."""
    lines = rare["line"]
    if _compiled_iso_row_wraps is not None and isinstance(lines, array) and lines.typecode == "q":
        rows, after = array("q"), array("q")
        for col, raw in zip((rows, after), _compiled_iso_row_wraps(data, start, end, lines, first), strict=True):
            col.frombytes(raw)
        return rows, after
    widths = iso_fronts(data, start, end)[1]
    last = len(widths) - 1
    rows = array("q", [widths[n - first] for n in lines])
    after = array("q", [widths[n - first + 1] if n - first < last else 0 for n in lines])
    return rows, after


def _wrap_width(data: bytes, start: int, copy: bytes) -> int:
    """The width of the wrapper taken off the block's first line (and so off every line)."""
    end = data.find(b"\n", start)
    first = (len(data) if end < 0 else end) - start
    end = copy.find(b"\n")
    return first - (len(copy) if end < 0 else end)


class NamedBlock:
    """A block scanned from its copy without a wrapper that names a deployment (kubectl ``--prefix``, journald,
    ``ahead.unwrapped``): the deployment its rows are of, told before them, as the rows carry no wrapper."""

    __slots__ = ("path", "line", "deployment")

    def __init__(self, path: str, line: int, deployment: str) -> None:
        self.path, self.line, self.deployment = path, line, deployment


def _named_copy(reader: LineReader, data: bytes, start: int, end: int, res: ScanResult, copy: bytes,
                base: int) -> tuple[str | None, ScanResult, bytes | None]:
    """The deployment the wrapper of a block's lines names (every line carries the same one: kubectl
    ``--prefix``, journald; None for timestamps and docker's json-file, which name none), with the scan to
    use; the wrapper's style noted for the input's formats, as reading its lines would. A block that names
    one is scanned from its copy only while nothing but a record of that deployment is held: an open record
    or a wrapper carried over must see the lines as read (and rows would come before the record that names
    their deployment); then the block is scanned again as it is, and the per-line stages unwrap its lines."""
    if 48 <= data[start] <= 57:  # kubectl / docker --timestamps, taken off the lines that carry them
        reader.unwrapper.seen.add("iso-timestamp")
        if "cri" not in reader.unwrapper.seen and holds_cri(data, start, end):
            reader.unwrapper.seen.add("cri")
        return None, res, copy
    nl = data.find(b"\n", start, end)
    unwrapper = LineUnwrapper()
    unwrapper.strip(data[start : nl if nl >= 0 else end])
    named = unwrapper.deployment
    if named is not None and reader.busy() and not _holds_only(reader, named):
        return None, scan.scan_range(data, start, end, base), None
    reader.unwrapper.seen |= unwrapper.seen
    if named is not None:
        reader.out.append(NamedBlock(reader.path, base + 1, named))
    return named, res, copy


class _BlockFeed:
    """What must come out before a line the per-line stages read, in line order: the metric rows and the
    lookup rows of the lines before it."""

    def __init__(self, reader: LineReader, view: BlockView, original: _OriginalLines | None) -> None:
        self.reader, self.view, self.original = reader, view, original
        self.metric: list[tuple[int, str, int]] = []
        self.lk_lines = view.res.columns["lookups"]["line"]
        self.j = 0

    def flush_metric(self) -> None:
        if self.metric:
            metric_rows(self.reader, self.view, self.metric, self.original)
            self.metric = []

    def flush_lookups(self, n: int) -> None:
        lk_lines, j = self.lk_lines, self.j
        if j < len(lk_lines) and lk_lines[j] < n:
            k = bisect_left(lk_lines, n, j)
            self.reader.hand_on_held()  # a lookup line came between: the held record had no next row
            self.reader.out.append(LookupRows.from_view(self.view, j, k))
            self.j = k

    def inert(self, n: int, raw: bytes, whole: bool, force: bool = False) -> bool:
        """An inert or quiet line while a record is open (or ``force``: whatever is open): read (``whole``),
        or only hand the held record on (all that reading it would do); False when it was not read."""
        if self.metric:
            self.flush_metric()
            if not force and not self.reader.busy():
                return False  # the metric rows before it closed what was open
        self.flush_lookups(n)
        if whole:
            self.reader.feed(n, raw)
            return True
        self.reader.hand_on_held()
        return False

    def announce(self, n: int, origin) -> None:
        """A process first seen on a quiet line that is not read: told in its turn."""
        self.flush_metric()
        self.flush_lookups(n)
        self.reader.out.append(QuietOrigin(self.reader.path, n, origin))  # nothing is held: it was not read


class _Inert:
    """The rare lines of a block that the prefilter (``prefilter.py``) found inert or quiet: counted, not
    read, while no record is open; read in their turn while one is (``read_until``), as every line was."""

    def __init__(self, reader: LineReader, data: bytes, start: int, end: int, rare: dict,
                 ahead: prefilter.Ahead | None = None, wrapped: _Wrapped | None = None) -> None:
        cleaner = reader.cleaner
        self.flags = prefilter.colour_flags(cleaner.esc, cleaner.residue) | plain_flag(reader)
        if wrapped is not None and wrapped.docker and not cleaner.esc:
            self.flags |= prefilter.DOCKER_TEXT
        # ``wrapped``: ``data`` is a block's copy without its wrapper; the prefilter counts each line's wrapper
        # width in the row's, as the reader does, and a line read is read as read (with its wrapper)
        self.wrapped = wrapped
        self.reader, self.data, self.start = reader, data, start
        self.lines, self.starts, self.ends = rare["line"], rare["start"], rare["end"]
        kinds = prefilter.block_kinds(data, start, self.starts, self.ends, self.flags, reader.quiet, end,
                                      frozenset(reader.widths), reader.last_y, ahead,
                                      prefilter.NO_WRAPS if wrapped is None else wrapped.wraps)
        # a record nothing recognises is counted as a quiet one is (its process told, its month read); the
        # kinds as decided tell the unknown ones apart for the count (``_skip_quiet``)
        has_unknown = any(kinds.find(b) >= 0 for pair in _UNKNOWN_BYTES.values() for b in pair)
        self.decided: bytes | None = kinds if has_unknown else None
        self.kinds = kinds.translate(_AS_QUIET) if has_unknown else kinds
        # a width proven inside the block may make a quiet record's next row its rest; a dated line of another
        # year makes an LMCache record of the old one move the year back; a wrapper first seen inside the block
        # may change the next row's first bytes: quiet lines are then read
        self.decided_at = _decided_by(reader)
        self.kept = _kept_rows(self.kinds, rare)
        self.quiet = self.kinds.find(FIRST_BYTE) >= 0  # a block's first quiet record of a process is QUIET_FIRST
        self.p = 0  # the next rare line not yet read or skipped
        self.read_prefixed = self.quiet_skipped = 0
        self.unknown_skipped: dict[str, int] = {}  # per project
        self._first = -1  # the index of the next QUIET_FIRST line at or after ``p`` (-1: not looked for yet)
        #: whether nothing is open that reading the inert lines would touch (``passes_over``), as of the last
        #: line read; None once a line was read
        self.passable: bool | None = None

    def before(self, n: int) -> bool:
        """Whether inert lines may lie before line ``n`` (a literal comparison: the common answer is no)."""
        return self.p < len(self.lines) and self.lines[self.p] < n

    def raw(self, p: int) -> bytes:
        return self.data[self.start + self.starts[p] : self.start + self.ends[p]]

    def passes_over(self, n: int) -> bool:
        """Whether the inert lines before metric row ``n`` may be left to the next read line's turn: nothing
        is open (a metric row only ever closes what is), the kinds are not stale, no quiet line before ``n``
        tells a process, no December month waits for its year roll and no wrapper dates them. Counting them
        then tells exactly what counting them now would, and a log of stats and SpecDecoding lines among
        counted ones no longer stops at each of its tens of thousands of metric rows."""
        if self.passable is None:
            reader = self.reader
            self.passable = not (reader.busy() or reader.last_month == 12 or _decided_by(reader) != self.decided_at
                                 or (self.wrapped is not None and self.wrapped.dated))
        if not self.passable:
            return False
        if not self.quiet:
            return True
        if self._first < self.p:
            self._first = self.kinds.find(FIRST_BYTE, self.p)
            if self._first < 0:
                self._first = len(self.lines)
        return self._first >= len(self.lines) or self.lines[self._first] >= n

    def read_until(self, n: int, block: _BlockFeed) -> None:
        """Past the rare lines before line ``n``: kept ones were read already; inert and quiet ones are read
        while a record is open, else skipped all at once."""
        lines, kinds, reader = self.lines, self.kinds, self.reader
        p = self.p
        self.passable = None
        while p < len(lines) and lines[p] < n:
            kind = kinds[p]
            if kind == prefilter.KEEP:
                p += 1
                continue
            stale = self.quiet and _decided_by(reader) != self.decided_at
            if not reader.busy() and not stale:
                q = bisect_left(lines, n, p)
                if self.quiet:
                    self._skip_quiet(p, q, block)
                if self.wrapped is not None and self.wrapped.dated:
                    self._dated(p, q, block)
                p = q
                break
            # a wrapped block's line is read as read: its width counts its wrapper
            as_read = self.raw(p) if self.wrapped is None else self.wrapped.lines.line_at(lines[p])
            if stale and kind >= prefilter.QUIET:  # decided at the block's widths: read instead
                block.inert(lines[p], as_read, True, force=True)
            elif reader.busy() and block.inert(lines[p], as_read, self._continues(lines[p], kind, as_read)):
                self.read_prefixed += kind == prefilter.PREFIXED
            else:  # counted unread (a held record only handed on): what reading it would tell
                if kind >= prefilter.QUIET:
                    self._skip_quiet(p, p + 1, block)
                if self.wrapped is not None and self.wrapped.dated:
                    self._dated(p, p + 1, block)
            p += 1
        self.p = p

    def _skip_quiet(self, p: int, q: int, block: _BlockFeed) -> None:
        """Quiet lines ``p..q-1`` (among inert ones) counted: what reading them would tell — recognised vLLM
        output, a process first seen (looked at only on a block's first quiet record of each process), the
        month the reader's year roll compares against (only December's matters)."""
        kinds, reader = self.kinds, self.reader
        self.quiet_skipped += kinds.count(QUIET_BYTE, p, q)
        if self.decided is not None:
            for project, (kind, first) in _UNKNOWN_BYTES.items():
                n = self.decided.count(kind, p, q) + self.decided.count(first, p, q)
                if n:
                    self.unknown_skipped[project] = self.unknown_skipped.get(project, 0) + n
        i = kinds.find(FIRST_BYTE, p, q)
        origins = reader.origins if self.wrapped is None else self.wrapped.origins
        while i >= 0:
            self.quiet_skipped += 1
            line = prefilter.cleaned_line(self.raw(i), self.flags)  # the analysis tells a process it saw before
            block.announce(self.lines[i], origins.peel(line)[0] if line[:1] == b"(" else origins.bare)
            i = kinds.find(FIRST_BYTE, i + 1, q)
        if reader.last_month == 12:  # a December record before: the next January line rolls the year
            self._last_month(p, q)

    def _dated(self, p: int, q: int, block: _BlockFeed) -> None:
        """Lines ``p..q-1`` counted unread, each behind a wrapper that dates it: the reader's year and month as
        reading the last dated one would leave them — its wrapper's year, and a quiet vLLM record's month (an
        LMCache record of the reader's year leaves both). The metric rows before them, which date
        themselves, go first."""
        block.flush_metric()
        line_at = self.wrapped.lines.line_at
        for i in range(q - 1, p - 1, -1):
            year = _wrapper_year(line_at(self.lines[i]) or b"")
            if year is not None:
                month = prefilter.quiet_month(self.raw(i), self.flags) if self.kinds[i] >= prefilter.QUIET else None
                self.reader.year_hint, self.reader.last_month = year, month or 0
                return

    def _last_month(self, p: int, q: int) -> None:
        """The month of the last quiet vLLM record of ``p..q-1`` becomes the reader's (LMCache's leave it)."""
        kinds, reader = self.kinds, self.reader
        i = max(kinds.rfind(QUIET_BYTE, p, q), kinds.rfind(FIRST_BYTE, p, q))
        while i >= p:
            month = prefilter.quiet_month(self.raw(i), self.flags)
            if month is not None:
                reader.last_month = month
                return
            i = max(kinds.rfind(QUIET_BYTE, p, i), kinds.rfind(FIRST_BYTE, p, i))

    def _continues(self, n: int, kind: int, raw: bytes) -> bool:
        """Whether reading inert line ``n`` can do more than hand on the held record: something else is open,
        or the line could be the held record's next terminal row (``LineReader._continue_held``: the very
        next line, without a process prefix, no wider than the record's row, at a width a terminal cuts at).
        A quiet line never is: it has a process prefix or starts with vLLM's header."""
        reader = self.reader
        if reader.held is None or reader.open_recs or reader.head is not None or reader.cleaner.esc_cut \
                or reader.unwrapper.carries():
            return True
        if kind != prefilter.INERT or n != reader.held_last + 1:
            return False
        width = len(raw) - (raw[-1:] == b"\r")  # the row's width as the reader measures it (CRLF's CR not), and without the
        if reader.cleaner.residue:  # colour residue a cleaner strips, as read
            return True
        held_width = reader.held_width
        if not (width <= held_width and (held_width in reader.widths or width == held_width
                                         or maybe_under_wrapper(reader.held, held_width, width, reader.widths))):
            return False
        # another program's line with its whole header is never a cut rest (``joiner.continues_row``): known from
        # the raw bytes while no wrapper of this input could change the line's first bytes before the joiner
        return bool(reader.unwrapper.seen) or FOREIGN_HEADER.match(raw) is None

    def count(self) -> None:
        """The block is done: a skipped line with a process prefix is vLLM output, as the reader counts it;
        a skipped quiet record is a recognised vLLM record."""
        reader = self.reader
        reader.recognized += self.kinds.count(prefilter.PREFIXED) - self.read_prefixed + self.quiet_skipped
        if self.quiet_skipped:  # its format was named when the record that taught its place was read
            reader.stats.quiet += self.quiet_skipped - sum(self.unknown_skipped.values())
            for project, n in self.unknown_skipped.items():
                reader.stats.unknown[project] = reader.stats.unknown.get(project, 0) + n


def plain_flag(reader: LineReader) -> int:
    """``prefilter.PLAIN_BLOCK`` while the input has shown no wrapper (a line's first bytes are then what the
    joiner reads), else 0."""
    return 0 if reader.unwrapper.seen else prefilter.PLAIN_BLOCK


def prefilter_state(reader: LineReader) -> tuple | None:
    """What a block's prefilter kinds depend on besides its bytes, read now (on the reading thread) for a
    scan thread to decide them ahead (``ahead.py``): the plain flag, the quiet places' blobs, the width mask
    and the year. None where the prefilter is off."""
    if not PREFILTER or reader.bare:
        return None
    return plain_flag(reader), prefilter.blobs_of(reader.quiet), prefilter.width_mask(reader.widths), reader.last_y


def _decided_by(reader: LineReader) -> tuple:
    """What of the reader's state a block's quiet kinds were decided on: the widths it knows, its year, the
    wrappers it has seen (any of them changing inside the block makes those kinds stale)."""
    return len(reader.widths), reader.last_y, len(reader.unwrapper.seen)


QUIET_BYTE, FIRST_BYTE = bytes([prefilter.QUIET]), bytes([prefilter.QUIET_FIRST])
#: per project, the kind of a record nothing recognises and of the block's first of its process prefix
_UNKNOWN_BYTES = {project: (bytes([kind]), bytes([kind + 1])) for project, kind in prefilter.UNKNOWN_OF.items()}
#: the kinds as the counting reads them: a record nothing recognises as QUIET, the first of its process as
#: QUIET_FIRST
_AS_QUIET = bytes(prefilter.QUIET if k in prefilter.UNKNOWN_OF.values() else
                  prefilter.QUIET_FIRST if k - 1 in prefilter.UNKNOWN_OF.values() else k for k in range(256))
KEEP_BYTE = bytes([prefilter.KEEP])
_TAG_END = _W.TAG_CLOSE + b" "  # the end of a store or retrieve message's ``[req_id=…] `` tag
_KEPT = bytes([1 if k == prefilter.KEEP else 0 for k in range(256)])


def _kept_rows(kinds: bytes, rare: dict) -> dict:
    """The rare rows the per-line stages read (kind KEEP), each column as a list. Most blocks of a noisy
    log keep a few dozen of thousands of rows: those are found with ``bytes.find`` and picked by index
    (compressing the columns made an int of every row, ~0.3 ms a block); a block that keeps many is
    compressed through a 0/1 mask."""
    n = kinds.count(KEEP_BYTE)
    if n * 8 > len(kinds):
        keep = kinds.translate(_KEPT)  # 1 for a line the per-line stages read, 0 for one only counted
        return {name: list(compress(col, keep)) for name, col in rare.items()}
    idx, find = [], kinds.find
    at = find(KEEP_BYTE)
    while at >= 0:
        idx.append(at)
        at = find(KEEP_BYTE, at + 1)
    return {name: [col[i] for i in idx] for name, col in rare.items()}


class _OriginalLines:
    """The lines of a block as read, by number (for a block whose scan ran on a copy without timestamps)."""

    def __init__(self, data: bytes, start: int, end: int, base: int) -> None:
        self._range = (data, start, end)
        self._lines: list[bytes] | None = None  # split on the first line asked for (often none is)
        self.base = base

    def line_at(self, n: int) -> bytes | None:
        lines = self.all()
        i = n - self.base - 1
        return lines[i] if 0 <= i < len(lines) else None

    def all(self) -> list[bytes]:
        """The block's lines (split on the first line asked for)."""
        if self._lines is None:
            data, start, end = self._range
            self._lines = data[start:end].split(b"\n")
        return self._lines


def _line_order(res: ScanResult, rare: dict):
    """``(line, start, end, table, row)`` of what the per-line stages must see, in line order: the rare lines
    ``rare`` (those the prefilter kept) and the flagged lines (``table`` None: fed as bytes) and the metric
    rows (``table`` "stats"/"spec": events)."""
    flagged = res.columns["flagged"]
    stats, spec = res.columns["stats"], res.columns["spec"]
    if not (flagged["line"] or stats["line"] or spec["line"]):
        return zip(rare["line"], rare["start"], rare["end"], repeat(None), repeat(0))
    todo = [*zip(rare["line"], rare["start"], rare["end"], repeat(None), repeat(0)),
            *zip(flagged["line"], flagged["start"], flagged["end"], repeat(None), repeat(0))]
    for table, cols in (("stats", stats), ("spec", spec)):
        if cols["line"]:
            todo += zip(cols["line"], cols["start"], cols["end"], repeat(table), range(len(cols["line"])))
    todo.sort(key=itemgetter(0))  # line numbers are unique: one key, compared in C
    return todo


def _wrapper_year(line: bytes) -> int | None:
    """The year of a line's kubectl / docker ``--timestamps``, of its json-file ``time``, or of a collector's or an
    export's JSON line (``wrappers.json_line``), or None."""
    if line[4:5] == b"-" and line[10:11] == b"T":
        m = ISO_TS.match(line)  # as ``LineUnwrapper`` reads it
        return int(m.group(1)) if m is not None else None
    if line[:8] == b'{"log":"':
        at = line.rfind(b'","time":"') + 10
        if at >= 10 and line[at : at + 4].isdigit():
            return int(line[at : at + 4])
    if line[:1] == b"{":  # a collector's or an export's JSON line (``ahead._export_unwrapped``)
        got = json_line(line)
        return None if got is None else got[1]
    return None


_FORMAT_OF = {"UACCESS": "uvicorn", "U5XX": "uvicorn", "V_STATS": "vllm", "V_SPEC": "vllm"}


def _note_formats(stats, res) -> None:
    for _prefix, tid in res.counts:
        stats.formats.add(_FORMAT_OF.get(tid, "lmcache"))


def _rare_line_at(data: bytes, off: int, rare: dict):
    """``line_at`` for the joiner's look back over blank lines: a rare line's bytes; a hot line is not blank."""
    lines, starts, ends = rare["line"], rare["start"], rare["end"]

    def line_at(n: int) -> bytes | None:
        i = bisect_left(lines, n)
        if i < len(lines) and lines[i] == n:
            return data[off + starts[i] : off + ends[i]]
        return b"hot"

    return line_at


def metric_rows(reader: LineReader, view: BlockView, todo: list[tuple[int, str, int]], original: _OriginalLines | None) -> None:
    """Stats / SpecDecoding lines the scanner parsed (``todo``: ``(line, table, row)`` in line order, no
    other line between them) → ``MetricRows`` batches in ``out``, cut where anything else must come
    between two rows.

    Each row still does what any vLLM-header line does to the line state (the per-line stages would
    have read it): it hands on a held record, closes the open record of its process, moves the Dec→Jan
    year roll (a batch has one year). A line whose width this input proved to be a terminal's could
    be the first row of a cut line: it goes through the per-line stages instead.
    """
    if reader.head is not None:
        reader.release_head()  # a whole metric line comes next: the held header row had no rest
    learned = len(reader.widths) > len(TERMINAL_WIDTHS)
    if original is None and not learned and _metric_batch(reader, view, todo):
        return
    batch: MetricRows | None = None
    prefixes, columns = view.res.prefixes, view.res.columns
    for n, table, i in todo:
        cols = columns[table]
        raw = view.raw(table, i)
        line = scan.clean_line(raw)
        if original is not None:  # scanned from the block's copy without kubectl timestamps: as read decides
            as_read = original.line_at(n)
            if len(reader.cleaner.clean(n, as_read) or b"") in reader.widths:
                batch = _flush(reader, batch)
                reader.feed(n, as_read)
                continue
            year = _wrapper_year(as_read)
            if year is not None:
                reader.year_hint, reader.last_month = year, 0  # what the wrapper's timestamp does
        elif learned and len(line) in reader.widths:
            batch = _flush(reader, batch)
            reader.feed(n, raw)
            continue
        if reader.held is not None:
            batch = _flush(reader, batch)
            reader.out.append(reader.held)
            reader.held = None
        proc, stamp = cols["proc"][i], cols["stamp"][i]
        month = scan.stamp_month(stamp)
        if reader.year_hint and reader.last_month == 12 and month == 1:
            reader.year_hint += 1
        reader.last_month = month
        origin = view.origin(proc)
        if reader.open_recs and origin.key in reader.open_recs:
            batch = _flush(reader, batch)
            reader.close_open(origin.key)
        if batch is None or batch.year != reader.year_hint:
            _flush(reader, batch)
            batch = MetricRows(reader.path, reader.year_hint, view)
        batch.add(table, i, n, origin, len(prefixes[proc]), stamp)
    _flush(reader, batch)


def _metric_batch(reader: LineReader, view: BlockView, todo: list[tuple[int, str, int]]) -> bool:
    """``metric_rows`` as one batch, a column at a time, where no row needs the per-row path: no
    Dec→Jan roll among them, no open record of their processes (a held record goes first, as the first
    row would hand it on). No line is cleaned: times come from the ``stamp`` column and a Record is
    built, from the line as read, only when shown. False, having done nothing, otherwise."""
    ns, tables, idx = zip(*todo, strict=True)
    stats, spec = view.res.columns["stats"], view.res.columns["spec"]
    p0, t0, p1, t1 = stats["proc"], stats["stamp"], spec["proc"], spec["stamp"]
    pairs = list(zip(tables, idx, strict=True))
    procs = [p0[i] if t == "stats" else p1[i] for t, i in pairs]
    by_proc = {p: view.origin(p) for p in set(procs)}
    if reader.open_recs and any(o.key in reader.open_recs for o in by_proc.values()):
        return False
    stamps = [t0[i] if t == "stats" else t1[i] for t, i in pairs]
    if reader.year_hint:
        months = set(map(floordiv, stamps, repeat(scan.STAMP_MONTH)))  # scan.stamp_month of each, in C
        if 1 in months and (reader.last_month == 12 or 12 in months):
            return False  # the year may roll inside: the per-row path cuts the batch there
    if reader.held is not None:
        reader.out.append(reader.held)
        reader.held = None
    reader.last_month = scan.stamp_month(stamps[-1])
    plen = [len(p) for p in view.res.prefixes]
    batch = MetricRows.of_columns(reader.path, reader.year_hint, view, list(tables), list(idx), list(ns),
                                  list(map(by_proc.__getitem__, procs)), list(map(plen.__getitem__, procs)),
                                  stamps)
    _flush(reader, batch)
    return True


def _flush(reader: LineReader, batch: MetricRows | None) -> None:
    """Hand on a batch of metric rows (before whatever must follow it); None, the next batch's start
    (``batch = _flush(reader, batch)``)."""
    if batch is not None and len(batch):
        reader.recognized += len(batch)
        reader.stats.formats.add("vllm")
        reader.out.append(batch)


def counted(stats, window: HotWindow | None, rec: Record) -> bool:
    """A complete store or retrieve line the scanner could not take (behind a wrapper): counted as
    the scanner would count it, kept for the look-back, never an event. The scanner's grammar
    decides (``scan.message_values``): what it rejects stays a record for the templates."""
    msg = rec.raw
    tag = msg.find(_TAG_END) + len(_TAG_END) if msg.startswith(_W.TAG_OPEN) else 0
    if msg.startswith(_W.STORED, tag):
        if scan.message_values("S1", msg) is None:
            return False
        stats.hot.add_line("S1", rec)
        return True
    if msg.startswith(_W.RETRIEVED, tag):
        vals = scan.message_values("R4", msg)
        if vals is None or vals[0] < vals[1]:
            return False  # a short retrieve is a shortfall: it reaches the rules
        stats.hot.add_line("R4", rec)
        if window is not None:
            window.note(rec, "R4")
        return True
    return False
