"""Physical lines → logical records.

For every line: strip ANSI colour (also the ESC-less residue) and CR, then the collector or paste
wrappers (recognised per line, see ``wrappers.py``); peel the vLLM process prefixes into an Origin;
recognise the logger envelope (LMCache's formatter, its legacy form, vLLM's formatter of every era,
uvicorn); and join continuation lines (multi-line LMCache messages, raw Python tracebacks, hard-wrapped
dumps, rows cut by a terminal) into one record. Knows nothing about KV caches.

Three stages, one line at a time (``_Reader``): the cleaner, the envelope parsers and the continuation
joiner. In front of them, per block, the scanner (``scan.py``) takes the high-volume lines out: they are
counted, lookups are handed on as columns (``hot.LookupRows``), and only the rest reaches the stages. The
stages work on bytes: a record's text is decoded only when something reads it, which on a multi-GB log
is a small minority of lines.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator
from itertools import pairwise, repeat

from specdiag.ingest import rows, scan, wrappers
from specdiag.ingest.ahead import is_flood, scan_ahead
from specdiag.ingest.hot import BlockView, HotWindow, LookupRows, MetricRows
from specdiag.ingest.origin import NO_ORIGIN, Origin, OriginCache
from specdiag.ingest.rows import MIN_ROW, cut_head, cut_suffix, cut_wrapper, esc_cut_at_end
from specdiag.ingest.scan import ScanResult
from specdiag.ingest.sources import Source
from specdiag.ingest.wrappers import PLAIN_STARTS, LineUnwrapper, is_envelope
from specdiag.numbers import to_int
from specdiag.timeutil import initial_year

VLLM_LEVELS = {b"INFO": "INFO", b"WARNING": "WARNING", b"ERROR": "ERROR", b"DEBUG": "DEBUG", b"CRITICAL": "CRITICAL",
               b"WARN": "WARNING"}
LMC_LEVELS = {b"INFO": "INFO", b"WARNING": "WARNING", b"ERROR": "ERROR", b"DEBUG": "DEBUG", b"CRITICAL": "CRITICAL",
              b"WARN": "WARNING"}
LMC_LEVELS.update({k + b" ": v for k, v in list(LMC_LEVELS.items())})  # "LMCache WARN :" after addLevelName
VLLM_REST = re.compile(rb"(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?([^\]:\s]+?):(\d+)\] ?")
LMC_LEGACY = re.compile(
    rb"(DEBUG|INFO|WARNING|ERROR|CRITICAL) LMCache: (.*) \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] -- (\S+\.py):(\d+)$"
)
EXC_LINE = re.compile(rb"(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)")
ANSI_ESC = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
ANSI_RESIDUE = re.compile(rb"\[\d{1,3}(?:;\d{1,3})*m")
MAX_JOIN_LINES = 400
MAX_JOIN_CHARS = 256 * 1024
#: a logical line longer than this is cut before parsing (no vLLM/LMCache record is anywhere near it)
MAX_PARSE_LINE = 64 * 1024


def _d(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


class Record:
    """One logical log record.

    ``raw`` is the message as bytes; ``msg``/``text``/``ts`` decode on first use. ``year`` is the inferred
    year for vLLM timestamps, which print none.
    """

    __slots__ = ("path", "line", "end_line", "origin", "kind", "level", "_ts", "year",
                 "_file", "src_line", "_logger", "raw", "cont", "_msg")

    def __init__(self, path: str, line: int, origin: Origin, kind: str, level: str, ts: bytes | None,
                 year: int | None, file: bytes | None, src_line: int | None, logger: bytes | None, raw: bytes) -> None:
        self.path = path
        self.line = line
        self.end_line = line
        self.origin = origin
        self.kind = kind
        self.level = level
        self._ts = ts
        self.year = year
        self._file = file
        self.src_line = src_line
        self._logger = logger
        self.raw = raw
        self.cont: list[bytes] | None = None
        self._msg: str | None = None

    @property
    def msg(self) -> str:
        if self._msg is None:
            self._msg = self.raw.decode("utf-8", "replace")
        return self._msg

    @property
    def ts(self) -> str | None:
        return _d(self._ts)

    @property
    def file(self) -> str | None:
        return _d(self._file)

    @property
    def logger(self) -> str | None:
        return _d(self._logger)

    @property
    def raw_text(self) -> bytes:
        """Message plus continuation lines, as bytes (what templates match against)."""
        if self.cont:
            return self.raw + b"\n" + b"\n".join(self.cont)
        return self.raw

    @property
    def text(self) -> str:
        """Message plus continuation lines."""
        return self.raw_text.decode("utf-8", "replace") if self.cont else self.msg

    def display(self) -> str:
        """A one-line rendering for evidence: prefix, level and message (no colour)."""
        who = f"({self.origin.proc} pid={self.origin.pid}) " if self.origin.pid is not None else ""
        if self.kind == "lmcache":
            loc = f" ({self.file}:{self.src_line}:{self.logger})" if self._file else ""
            return f"{who}[{self.ts}] LMCache {self.level}: {self.msg}{loc}"
        if self.kind == "vllm":
            return f"{who}{self.level} {self.ts} [{self.file}:{self.src_line}] {self.msg}"
        return f"{who}{self.msg}"

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Record({self.path}:{self.line} {self.kind} {self.level} {self.msg[:60]!r})"


class _Head:
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


class _Open:
    """A record still collecting continuation lines for one process."""

    __slots__ = ("rec", "mode", "chars", "space", "plen")

    def __init__(self, rec: Record, mode: str, space: bool = False, plen: int = 0) -> None:
        self.rec = rec
        self.mode = mode  # 'lmcache' (until suffix) | 'traceback' | 'wrap' (hard-wrapped dump)
        self.chars = len(rec.raw)
        self.space = space  # the last physical line ended in a space (kept when a terminal wrap is joined)
        self.plen = plen  # width of its last physical line, to tell a terminal wrap from a multi-line message


def split_suffix(msg: bytes) -> tuple[bytes, bytes | None, int | None, bytes | None]:
    """Remove LMCache's trailing ``(file.py:123:logger.name)``; returns (msg, file, line, logger)."""
    if msg[-1:] != b")":
        msg = msg.rstrip()
        if msg[-1:] != b")":
            return msg, None, None, None
    i = msg.rfind(b" (")
    if i >= 0:
        a = msg.find(b":", i)
        b = msg.find(b":", a + 1) if a > 0 else -1
        if b > 0 and msg[a - 3 : a] == b".py":
            num = msg[a + 1 : b]
            if num.isdigit() and b < len(msg) - 2:
                return msg[:i], msg[i + 2 : a], to_int(num), msg[b + 1 : -1]
    return msg, None, None, None


class _Reader:
    """The per-line stages for the lines the scanner left (or every line, without it), in line order.

    ``feed`` runs, for one physical line: the cleaner (colour, CR, binary junk, over-long lines), the
    wrapper and process-prefix peeling, the envelope parsers (LMCache, vLLM, uvicorn, legacy, raw text)
    and the continuation joiner (multi-line LMCache messages, tracebacks, hard-wrapped dumps, terminal
    rows). Finished records are appended to ``out``; the block loop hands them on in order.
    """

    def __init__(self, path: str, stats, window: HotWindow | None = None, count_hot: bool = False) -> None:
        self.path = path
        self.stats = stats
        self.window = window
        #: count complete store/retrieve lines the scanner could not take (a wrapper) instead of yielding them
        self.count_hot = count_hot
        self.out: list = []
        self.origins = OriginCache()
        self.unwrapper = LineUnwrapper()
        self.open_recs: dict[str, _Open] = {}
        self.last_cut: _Open | None = None  # the LMCache record most recently left open (no suffix yet)
        self.held: Record | None = None  # a long vLLM record held for one line, in case a terminal wrapped it
        self.held_width = self.held_last = 0
        self.widths = set(TERMINAL_WIDTHS)
        #: widths at which this input was proven cut (a row ended inside a header or a suffix): narrower than
        #: 80 columns is only joined at one of these, or when the rows themselves show the wrap
        self.proven: set[int] = set()
        self.head: _Head | None = None
        self.core = b""  # the current line after its wrappers, before its process prefix (set by ``peel``)
        self.esc_cut = False  # the last line ended inside an ANSI escape: its rest starts the next line
        self.year_hint: int | None = None
        self.last_month = 0
        self.last_y = b""
        self.recognized = 0
        self.skipped = 0
        self.esc = self.residue = self.cr = self.suspicious = False
        self.cut = False  # the line ``clean`` returned last was cut to MAX_PARSE_LINE
        self.line_at = _no_line

    def begin_block(self, chunk: bytes, line_at, few_lines: bool = False, start: int = 0, end: int | None = None) -> None:
        """Block-level prechecks (C-speed searches of ``chunk[start:end]``) that let most lines skip the
        per-line ones.

        With ``few_lines`` (the scanner took the rest) the CR and binary checks run on each line fed
        instead, which gives the same answers; whether colour residue is stripped stays a block-level
        decision (a block holding ESC keeps bracket text that merely looks like residue)."""
        end = len(chunk) if end is None else end
        find = chunk.find
        self.esc = find(b"\x1b", start, end) >= 0
        self.residue = not self.esc and any(find(r, start, end) >= 0 for r in (b"[0m", b"[0;0m", b";20m", b"[1;36m"))
        self.cr = few_lines or find(b"\r", start, end) >= 0
        self.suspicious = few_lines or find(b"\x00", start, end) >= 0 or not chunk.isascii()
        self.line_at = line_at

    # ---- the cleaner ------------------------------------------------------------------------------
    def clean(self, lineno: int, line: bytes) -> bytes | None:
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
            if len(self.stats.errors) < 20:
                self.stats.errors.append(f"line {lineno}: {len(line):,} bytes long, cut to {MAX_PARSE_LINE:,} for parsing")
            line = line[:MAX_PARSE_LINE]
        return line

    def peel(self, line: bytes) -> tuple[Origin, bytes] | None:
        """Collector / paste wrappers, then process prefixes; the first bytes of an unwrapped line prove it has none."""
        c0 = line[:1]
        self.core = line
        if c0 == b"(":
            return self.origins.peel(line)
        if (c0 == b"[" and line[1:5] != b"pod/") or line.startswith(PLAIN_STARTS):
            return NO_ORIGIN, line
        line = self.core = self.unwrapper.strip(line)
        if self.unwrapper.year:
            self.year_hint = self.unwrapper.year
            self.last_month = 0  # the wrapper dated this line: no Dec→Jan inference on top of it
        if not line:
            return None
        return self.origins.peel_for(self.unwrapper.deployment, line)

    # ---- one physical line ------------------------------------------------------------------------
    def feed(self, lineno: int, line: bytes) -> None:
        if not line:
            return
        if self.cr and line.find(b"\r", 0, len(line) - 1) >= 0:
            pieces = cr_records(line)
            if len(pieces) > 1:
                self._feed_pieces(lineno, pieces)
                return
        self._feed_one(lineno, line)

    def _feed_pieces(self, lineno: int, pieces: list[bytes]) -> None:
        """A line in which a bare CR started a record (a log record written after a progress bar's ``\\r``):
        each piece is read in order as a line of its own, numbered as the physical line and counted once.

        A piece without a process prefix of its own takes the first piece's origin: vLLM writes its
        ``(Worker_TP2 pid=N)`` prefix (and a collector its wrapper) only where a line begins after an LF."""
        before = self.recognized
        inherit = self._feed_one(lineno, pieces[0])
        for piece in pieces[1:]:
            inherit = self._feed_one(lineno, piece, inherit) or inherit
        self.recognized = min(self.recognized, before + 1)
        self.stats.cr_splits += len(pieces) - 1

    def _feed_one(self, lineno: int, line: bytes, inherit: Origin | None = None) -> Origin | None:
        """The stages for one line (or one CR-separated piece of one); the origin it was read with."""
        raw_len = len(line) - line.count(b"\r") if self.esc else 0
        line = self.clean(lineno, line)
        if line is None:
            return None
        cut, self.cut = self.cut, False
        plen = raw_len or len(line)  # a row's width as cut: ``fold`` counts the escapes a terminal hides
        if self.head is not None:
            head = self.head
            got = self._join_head(lineno, line, plen)
            if got is True:
                return None
            if got is not None:
                self._feed_peeled(head.first, *got)
                self._stretch(head.first, lineno)
                return None
            self._release_head()
        cleaned = line
        if inherit is None:
            peeled = self.peel(line)
        elif line[:1] == b"(":
            peeled = self.origins.peel_for(inherit.deployment, line)
        else:
            peeled = inherit, line
        if peeled is None:
            return None
        origin, line = peeled
        before = self.recognized
        self._feed_peeled(lineno, origin, line, plen, cleaned)
        if cut:  # a recognised line read only in part: the verdict must not call it judged
            self.stats.cut_recognized += self.recognized > before
        return origin

    def _feed_peeled(self, lineno: int, origin: Origin, line: bytes, plen: int, cleaned: bytes | None = None) -> None:
        """The envelope parsers and the joiner, for a line whose wrappers and process prefix are peeled.
        ``cleaned``: the row as read (None for a header already held and joined: it is not held again)."""
        if self.held is not None and self._continue_held(lineno, origin, line, plen):
            return
        if line[:1] == b"[" and not line.startswith(b"] LMCache ", 24) and b"] LMCache " in line[:48]:
            line = _canonical_lmcache_ts(line)  # a patched formatter or collector changed the timestamp shape
        if self._lmcache(lineno, origin, line, plen) or self._vllm(lineno, origin, line, plen):
            return
        if (cleaned is not None and plen >= MIN_ROW and cut_head(line, origin.pid is not None)
                and self._hold_head(lineno, origin, cleaned, plen)):
            return  # only a line no parser took: a whole header never reaches the test
        if self.open_recs and self._continuation(lineno, origin, line, plen):
            return
        self._other(lineno, origin, line)

    # ---- rows cut inside a header -----------------------------------------------------------------
    def _hold_head(self, lineno: int, origin: Origin, cleaned: bytes, plen: int) -> bool:
        """Keep a row that ended inside a header (``(Worker_TP2 pid=76``, ``[2026-05-06 15:5``) for the
        next row: no writer ends a line there, so only a cut does. What came before it is complete."""
        core = self.core
        if not cleaned.endswith(core):
            return False
        if self.held is not None:
            self.out.append(self.held)
            self.held = None
        self.head = _Head(lineno, core, cleaned[: len(cleaned) - len(core)], origin.deployment, plen)
        return True

    def _join_head(self, lineno: int, line: bytes, plen: int) -> tuple[Origin, bytes, int] | bool | None:
        """The row after a cut header: joined when, with it, the header parses (or is still cut and the row
        was full). True: still a header, held; None: not its rest (the held row is handed on as it was)."""
        head = self.head
        if lineno != head.last + 1 or plen > head.width:
            return None
        for piece in _pieces(head, line):
            core = head.core + piece
            if head.whole:  # the collector's prefix was cut: peel the joined row as a whole row
                peeled = self.peel(head.outer + core)
                if peeled is None:
                    continue
                origin, rest = peeled
            else:
                origin, rest = self.origins.peel_for(head.deployment, core)
            if cut_head(rest, origin.pid is not None) and plen == head.width:
                head.core, head.last = core, lineno
                return True
            if _parses_as_record(rest):
                self.head = None
                self._prove(head.width)
                return origin, rest, plen
        return None

    def _release_head(self) -> None:
        """The held row was no cut header after all (the input ended, or the next row does not complete
        it): read it as it would have been read."""
        head, self.head = self.head, None
        origin, rest = self.origins.peel_for(head.deployment, head.core)
        self._feed_peeled(head.first, origin, rest, head.width)
        self._stretch(head.first, head.last)

    def _stretch(self, first: int, last: int) -> None:
        """The record that starts at row ``first`` ends at row ``last`` (its header spanned rows)."""
        if self.held is not None and self.held.line == first:
            self.held.end_line = self.held_last = max(last, self.held_last)
            return
        for o in self.open_recs.values():
            if o.rec.line == first:
                o.rec.end_line = max(o.rec.end_line, last)
                return
        if self.out and isinstance(self.out[-1], Record) and self.out[-1].line == first:
            self.out[-1].end_line = max(self.out[-1].end_line, last)

    def _continue_held(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """The long vLLM record on the line before may have been cut by a terminal: this row is its rest.

        At a width not known to be a terminal's, only a row as wide as the record's (two full rows)
        shows the cut; the width is then proven for the rows after it. Widths compare rows as read
        (``plen``), so an indentation or a kubectl prefix on every row counts alike."""
        held = self.held
        width = self.held_width
        if (lineno == self.held_last + 1 and origin.pid is None and plen <= width
                and (width in self.widths or plen == width)
                and (origin.deployment is None or origin.deployment == held.origin.deployment)
                and _continues_row(line, len(line)) and not (line[:1] == b"[" and cut_head(line, False))):
            if width not in self.widths:
                self._prove(width)
            if not held.raw and line[:1] == b" ":
                line = line[1:]  # cut between ``[file.py:NN]`` and the space before the message
            held.raw += line
            held._msg = None
            held.end_line = self.held_last = lineno
            self.recognized += 1
            if plen < width:  # a short row is the last one
                self.out.append(held)
                self.held = None
            return True
        self.out.append(held)
        self.held = None
        return False

    def _close_open(self, key: str) -> None:
        prev = self.open_recs.pop(key, None) if self.open_recs else None
        if prev is not None:
            self.out.append(prev.rec)

    # ---- envelope parsers -------------------------------------------------------------------------
    def _lmcache(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """LMCache's formatter: ``[YYYY-MM-DD HH:MM:SS,mmm] LMCache LEVEL: msg (file:line:logger)``."""
        if line[:1] != b"[" or not line.startswith(b"] LMCache ", 24):
            return False
        colon = line.find(b":", 34)
        level = LMC_LEVELS.get(line[34:colon]) if colon > 0 else None
        if level is None:
            return False
        msg = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
        ts = line[1:24]
        y = ts[:4]
        if y != self.last_y and y.isdigit():
            self.last_y = y
            self.year_hint, self.last_month = int(y), 0  # a dated line: no New Year wrap to infer across it
        msg, file, src_line, logger = split_suffix(msg)
        self._close_open(origin.key)
        rec = Record(self.path, lineno, origin, "lmcache", level, ts, None, file, src_line, logger, msg)
        self.recognized += 1
        self.stats.formats.add("lmcache")
        if file is not None and self.count_hot and level == "INFO" and self._counted(rec):
            return True
        if file is not None:
            self.out.append(rec)
        else:
            rec.raw = msg.rstrip()
            self.last_cut = self.open_recs[origin.key] = _Open(rec, "lmcache", line[-1:] == b" ", plen)
            if plen >= MIN_ROW and plen not in self.proven and (not rec.raw or cut_suffix(rec.raw)):
                self._prove(plen)  # the row ended at ``ERROR:`` or inside ``(file.py:NNN:logger)``: a cut
        return True

    def _counted(self, rec: Record) -> bool:
        """A complete store or retrieve line the scanner could not take (behind a wrapper): counted as
        the scanner would count it, kept for the look-back, never an event. The scanner's grammar
        decides (``scan.message_values``): what it rejects stays a record for the templates."""
        msg = rec.raw
        tag = msg.find(b"] ") + 2 if msg[:8] == b"[req_id=" else 0
        if msg.startswith(b"Stored ", tag):
            if scan.message_values("S1", msg) is None:
                return False
            self.stats.hot.add_line("S1", rec)
            return True
        if msg.startswith(b"Retrieved ", tag):
            vals = scan.message_values("R4", msg)
            if vals is None or vals[0] < vals[1]:
                return False  # a short retrieve is a shortfall: it reaches the rules
            self.stats.hot.add_line("R4", rec)
            if self.window is not None:
                self.window.note(rec, "R4")
            return True
        return False

    def _vllm(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """vLLM's formatter: ``LEVEL MM-DD HH:MM:SS [file:line] msg`` (no year: inferred)."""
        sp = line.find(b" ", 3, 10)
        lvl = VLLM_LEVELS.get(line[:sp]) if sp > 0 else None
        if lvl is None:
            return False
        m = VLLM_REST.match(line, sp + 1)
        if not m:
            return False
        ts = m.group(1)
        month = int(ts[:2])
        if self.year_hint and self.last_month == 12 and month == 1:
            self.year_hint += 1
        self.last_month = month
        self._close_open(origin.key)
        msg = line[m.end() :]
        rec = Record(self.path, lineno, origin, "vllm", lvl, ts, self.year_hint, m.group(2), to_int(m.group(3)), None, msg)
        self.recognized += 1
        self.stats.formats.add("vllm")
        if _opens_wrap(msg):
            self.open_recs[origin.key] = _Open(rec, "wrap")
        elif plen >= MIN_ROW:  # handed on with the next line, which may be the rest of it (``_continue_held``)
            self.held, self.held_width, self.held_last = rec, plen, lineno
        else:
            self.out.append(rec)
        return True

    # ---- the continuation joiner ------------------------------------------------------------------
    def _continuation(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """A line that continues an open record of its process (or, prefixless, a terminal-cut one)."""
        okey = origin.key
        o = self.open_recs.get(okey)
        wrapped = False
        if o is None and self.last_cut is not None and origin.pid is None:
            cut = self.last_cut
            o = _wrapped_continuation(cut, self.open_recs, origin, line, self.line_at, lineno) \
                if self._fills(cut, line, plen) else None
            if o is not None:
                okey = o.rec.origin.key
                wrapped = True
        if o is None:
            return False
        if o.mode == "lmcache":
            self._join_lmcache(o, okey, wrapped, lineno, line, plen)
            return True
        rec = o.rec
        if o.mode == "traceback":
            if (not line.strip() or line.startswith((b" ", b"\t", b"Traceback", b"During handling",
                                                     b"The above exception")) or EXC_LINE.match(line)):
                _append(o, line, lineno)
                self.recognized += 1
                if len(rec.cont) > MAX_JOIN_LINES:
                    self._close_open(okey)
                return True
            self._close_open(okey)
            return False
        _append(o, line, lineno)  # mode 'wrap': a hard-wrapped config dump
        self.recognized += 1
        if not _opens_wrap(rec.raw_text) or o.chars > MAX_JOIN_CHARS:
            self._close_open(okey)
        return True

    def _join_lmcache(self, o: _Open, okey: str, wrapped: bool, lineno: int, line: bytes, plen: int) -> None:
        rec = o.rec
        if wrapped or _looks_wrapped(o.plen, line, o.plen in self.widths or not rec.raw) and self._fills(o, line, plen):
            width = o.plen
            file, src_line, logger = _concat(o, line, lineno)  # the suffix may have been cut too
            if file is not None:
                self._prove(width)  # proven: this input was wrapped at that width
            elif plen >= MIN_ROW and cut_suffix(rec.cont[-1] if rec.cont else rec.raw):
                self._prove(plen)  # this row ends inside the suffix: it was cut too
        else:
            body, file, src_line, logger = split_suffix(line)
            _append(o, body, lineno)
            o.space = line[-1:] == b" "
        o.plen = plen
        self.recognized += 1
        if file is not None:
            rec._file, rec.src_line, rec._logger = file, src_line, logger
            self._close_open(okey)
        elif o.chars > MAX_JOIN_CHARS or len(rec.cont or ()) > MAX_JOIN_LINES:
            self._close_open(okey)

    def _prove(self, width: int) -> None:
        """A row of this input ``width`` wide was shown cut (bounded: a hostile input proves few widths)."""
        if len(self.widths) < 64:
            self.widths.add(width)
        if width < WRAP_MIN_WIDTH and len(self.proven) < 16:
            self.proven.add(width)

    def _fills(self, o: _Open, line: bytes, plen: int) -> bool:
        """Whether the open record's last row filled a terminal row that ``line`` (``plen`` wide) goes on.

        80 columns and more, as before; a narrower row only at a width this input was proven cut at, or
        when the rows show it: this one is as wide (two full rows), or it closes the record's suffix."""
        width = o.plen
        if plen > width:
            return False  # a terminal's next row is never wider than the one it cut
        if width >= WRAP_MIN_WIDTH or width in self.proven:
            return True
        if width < MIN_ROW:
            return False
        if plen == width:
            return True
        rec = o.rec
        tail = (rec.cont[-1] if rec.cont else rec.raw) + (b" " if o.space else b"") + line
        return split_suffix(tail)[1] is not None

    # ---- other recognisable lines -----------------------------------------------------------------
    def _other(self, lineno: int, origin: Origin, line: bytes) -> None:
        path, year = self.path, self.year_hint
        # a frame line outside any open traceback: the excerpt starts below the "Traceback" header
        if line.startswith((b"Traceback (most recent call last)", b'  File "')):
            self._close_open(origin.key)
            rec = Record(path, lineno, origin, "traceback", "ERROR", None, year, None, None, None, line)
            self.open_recs[origin.key] = _Open(rec, "traceback")
            self.recognized += 1
            return
        if line.startswith((b"INFO:", b"WARNING:", b"ERROR:")):
            self.recognized += 1
            self.stats.formats.add("uvicorn")
            if b'" 5' in line or line.startswith(b"ERROR:"):
                self.out.append(Record(path, lineno, origin, "uvicorn", "INFO", None, year, None, None, None, line))
            else:
                self.stats.access_lines += 1
            return
        if b"LMCache:" in line[:16]:
            m = LMC_LEGACY.match(line)
            if m:
                self.recognized += 1
                self.stats.formats.add("lmcache")
                self.out.append(Record(path, lineno, origin, "lmcache", m.group(1).decode(), m.group(3), None,
                                       m.group(4).rsplit(b"/", 1)[-1], to_int(m.group(5)), None, m.group(2)))
                return
        if origin.pid is not None:
            self.recognized += 1  # a vLLM process prefix: vLLM output even without a logger header
        # raw text: keep only what may matter (exceptions, banners, versions)
        if EXC_LINE.match(line) or b"Error" in line or b"LMCache v" in line or b"version" in line[:80]:
            self.out.append(Record(path, lineno, origin, "text", "", None, year, None, None, None, line))

    # ---- metric rows the scanner parsed ----------------------------------------------------------
    def metric_rows(self, view: BlockView, todo: list[tuple[int, str, int]], original: _OriginalLines | None) -> None:
        """Stats / SpecDecoding lines the scanner parsed (``todo``: ``(line, table, row)`` in line order, no
        other line between them) → ``MetricRows`` batches in ``out``, cut where anything else must come
        between two rows.

        Each row still does what any vLLM-header line does to the line state (the per-line stages would
        have read it): it hands on a held record, closes the open record of its process, moves the Dec→Jan
        year roll (a batch has one year). A line whose width this input proved to be a terminal's could
        be the first row of a cut line: it goes through the per-line stages instead.
        """
        if self.head is not None:
            self._release_head()  # a whole metric line comes next: the held header row had no rest
        learned = len(self.widths) > len(TERMINAL_WIDTHS)
        if original is None and not learned and self._metric_batch(view, todo):
            return
        batch: MetricRows | None = None
        prefixes, columns = view.res.prefixes, view.res.columns
        for n, table, i in todo:
            cols = columns[table]
            raw = view.raw(table, i)
            line = scan.clean_line(raw)
            if original is not None:  # scanned from the block's copy without kubectl timestamps: as read decides
                as_read = original.line_at(n)
                if len(self.clean(n, as_read) or b"") in self.widths:
                    batch = self._flush(batch)
                    self.feed(n, as_read)
                    continue
                if as_read[4:5] == b"-" and as_read[10:11] == b"T" and as_read[:4].isdigit():
                    self.year_hint, self.last_month = int(as_read[:4]), 0  # what the wrapper's timestamp does
            elif learned and len(line) in self.widths:
                batch = self._flush(batch)
                self.feed(n, raw)
                continue
            if self.held is not None:
                batch = self._flush(batch)
                self.out.append(self.held)
                self.held = None
            proc, stamp = cols["proc"][i], cols["stamp"][i]
            month = scan.stamp_month(stamp)
            if self.year_hint and self.last_month == 12 and month == 1:
                self.year_hint += 1
            self.last_month = month
            origin = view.origin(proc)
            if self.open_recs and origin.key in self.open_recs:
                batch = self._flush(batch)
                self._close_open(origin.key)
            if batch is None or batch.year != self.year_hint:
                self._flush(batch)
                batch = MetricRows(self.path, self.year_hint, view)
            batch.add(table, i, n, origin, len(prefixes[proc]), stamp)
        self._flush(batch)

    def _metric_batch(self, view: BlockView, todo: list[tuple[int, str, int]]) -> bool:
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
        if self.open_recs and any(o.key in self.open_recs for o in by_proc.values()):
            return False
        stamps = [t0[i] if t == "stats" else t1[i] for t, i in pairs]
        if self.year_hint:
            months = set(map(scan.stamp_month, stamps))
            if 1 in months and (self.last_month == 12 or 12 in months):
                return False  # the year may roll inside: the per-row path cuts the batch there
        if self.held is not None:
            self.out.append(self.held)
            self.held = None
        self.last_month = scan.stamp_month(stamps[-1])
        plen = [len(p) for p in view.res.prefixes]
        batch = MetricRows.of_columns(self.path, self.year_hint, view, list(tables), list(idx), list(ns),
                                      list(map(by_proc.__getitem__, procs)), list(map(plen.__getitem__, procs)),
                                      stamps)
        self._flush(batch)
        return True

    def _flush(self, batch: MetricRows | None) -> None:
        """Hand on a batch of metric rows (before whatever must follow it); None, the next batch's start
        (``batch = self._flush(batch)``)."""
        if batch is not None and len(batch):
            self.recognized += len(batch)
            self.stats.formats.add("vllm")
            self.out.append(batch)

    def hand_on_held(self) -> None:
        """A line the scanner took comes next: the held record (and a held header row) is complete."""
        if self.head is not None:
            self._release_head()
        if self.held is not None:
            self.out.append(self.held)
            self.held = None

    def end(self) -> None:
        """The input ended: hand on the held record and every record still open."""
        self.hand_on_held()
        for key in list(self.open_recs):
            self._close_open(key)


def _no_line(n: int) -> bytes | None:
    return None


def _paste_prefix_end(line: bytes) -> int:
    """Where a row starts after a paste's indentation / quote and a kubectl ``--prefix`` (0 without them)."""
    m = wrappers.INDENT.match(line) if line[:1] in b" \t>" else None
    at = m.end() if m is not None else 0
    k = wrappers.KUBECTL_PREFIX.match(line, at) if line[at : at + 5] == b"[pod/" else None
    return k.end() if k is not None else at


def _pieces(head: _Head, line: bytes) -> Iterator[bytes]:
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


def _parses_as_record(rest: bytes) -> bool:
    """Whether ``rest`` (after the process prefixes) opens an LMCache or vLLM record the parsers accept."""
    if rest[:1] == b"[":
        if not rest.startswith(b"] LMCache ", 24):
            return False
        colon = rest.find(b":", 34)
        return colon > 0 and rest[34:colon] in LMC_LEVELS
    sp = rest.find(b" ", 3, 10)
    return sp > 0 and rest[:sp] in VLLM_LEVELS and VLLM_REST.match(rest, sp + 1) is not None



def iter_records(source: Source, hot: object = None, window: HotWindow | None = None,
                 scan_threads: int = 0, scan_processes: int = 0) -> Iterator[Record | LookupRows | MetricRows]:
    """Yield the records of one input, updating ``source.stats``. Never raises on bad content.

    With ``hot`` set, every block goes through the scanner first (``scan.scan_block``): store, retrieve,
    lookup and access lines are counted (``stats.hot``), lookups are yielded as :class:`LookupRows`
    between the records (in line order), ``window`` keeps the blocks' rows for look-back, and only the
    other lines (and the flagged ones: short retrieves, 5xx) reach the per-line stages. Without ``hot``
    every line does (what tests of the per-line stages use). ``scan_threads`` scans the blocks on that
    many threads while this one reads them, ``scan_processes`` on worker processes where only the Python
    scanner runs (``ahead.py``); the records are the same.
    """
    stats = source.stats
    reader = _Reader(source.display, stats, window, count_hot=bool(hot))
    lineno = 0
    for data, start, end, res, copy in scan_ahead(source.blocks(), bool(hot), scan_threads, scan_processes):
        if res is None and is_flood(data, start, end):  # a newline flood: no list of empties
            lineno += end - start
            continue
        base = lineno
        if reader.year_hint is None:  # vLLM lines print no year: take it from a line of this input that does
            reader.year_hint = initial_year(data[start:end])
        if res is not None:
            lineno = base + _scanned_block(reader, data, start, end, res, stats, window, copy, base)
        else:
            lineno = base + _plain_block(reader, data[start:end], base)
        if reader.out:
            yield from reader.out
            reader.out.clear()
    reader.end()
    yield from reader.out
    stats.lines = lineno
    stats.year = reader.year_hint
    stats.recognized = reader.recognized
    stats.formats.update(reader.unwrapper.seen)
    stats.skipped += reader.skipped
    if reader.skipped and len(stats.errors) < 21:
        stats.errors.append(f"{reader.skipped} line(s) skipped: binary data or NUL bytes")
    if lineno == 0 and stats.bytes_read == 0 and not stats.errors:
        stats.errors.append("empty input")


#: CRs inside one line tried as record starts (``cr_records``): past them the line's rest stays one piece
MAX_CR_TRIES = 4096
#: bytes after a CR that ``_starts_record`` reads: a colour code or two and a record header fit well within
CR_HEAD = 256
_RECORD_FIRST = frozenset(b"([\x1bIWEDCT")


def _starts_record(line: bytes, at: int) -> bool:
    """Whether ``line[at:]`` starts a log record (colour codes in front allowed): a vLLM process prefix or
    header, an LMCache header, a uvicorn line or a traceback. A progress bar's redraw starts with none."""
    if at >= len(line) or line[at] not in _RECORD_FIRST:
        return False
    head = line[at : at + CR_HEAD]
    if b"\x1b" in head:
        head = ANSI_ESC.sub(b"", head)
    elif head[:1] == b"[":
        head = ANSI_RESIDUE.sub(b"", head)
    return is_envelope(head)


def cr_records(line: bytes) -> list[bytes]:
    """``line`` cut before every bare CR that starts a log record (a record written after a progress bar's
    ``\\r``, or a stretch of CR-ended lines inside an LF file); other CRs stay where they are (the cleaner
    drops them: a bar's redraws are one line). Linear: one ``find`` per CR and, at most :data:`MAX_CR_TRIES`
    times per line, a first-byte test and literal tests on the :data:`CR_HEAD` bytes after it (the colour
    patterns run on those bytes only); no pattern runs over the line."""
    cuts = [0]
    last = len(line) - 1
    pos = line.find(b"\r", 0, last)
    tries = 0
    while pos >= 0 and tries < MAX_CR_TRIES:
        tries += 1
        if _starts_record(line, pos + 1):
            cuts.append(pos + 1)
        pos = line.find(b"\r", pos + 1, last)
    if len(cuts) == 1:
        return [line]
    cuts.append(len(line))
    return [line[a:b] for a, b in pairwise(cuts)]


def _plain_block(reader: _Reader, chunk: bytes, base: int) -> int:
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


def _scanned_block(reader: _Reader, data: bytes, start: int, end: int, res: ScanResult, stats,
                   window: HotWindow | None, copy: bytes | None = None, base: int = 0) -> int:
    """A scanned block (``data[start:end]``; ``res`` with offsets from ``start``, or into ``copy``, the block
    without its kubectl timestamps): the lines the scanner left go to the per-line stages as they were
    read, the lookups out as rows, in line order."""
    view = BlockView(reader.path, data, start, res, reader.origins, reader.year_hint) if copy is None else \
        BlockView(reader.path, copy, 0, res, reader.origins, reader.year_hint)
    n_hot = stats.hot.add(view)
    if n_hot:
        reader.recognized += n_hot
        _note_formats(stats, res)
    if window is not None:
        window.push(view)
    rare = res.columns["rare"]
    lk_lines = res.columns["lookups"]["line"]
    n_lk = len(lk_lines)
    original = _OriginalLines(data, start, end, base) if copy is not None else None
    if original is not None:
        reader.unwrapper.seen.add("iso-timestamp")
        line_at = original.line_at
    else:
        line_at = _rare_line_at(data, start, rare)
    reader.begin_block(data, line_at, few_lines=True, start=start, end=end)
    out, feed = reader.out, reader.feed
    j = 0
    metric: list[tuple[int, str, int]] = []
    for n, s, e, table, i in _line_order(res):
        if table is not None:  # a metric row: no lookup observer reads those, so lookups need not stop here
            metric.append((n, table, i))
            continue
        if metric:
            reader.metric_rows(view, metric, original)
            metric = []
        if j < n_lk and lk_lines[j] < n:
            k = bisect_left(lk_lines, n, j)
            reader.hand_on_held()  # a lookup line came between: the held record had no next row
            out.append(LookupRows.from_view(view, j, k))
            j = k
        feed(n, original.line_at(n) if original is not None else data[start + s : start + e])
    if metric:
        reader.metric_rows(view, metric, original)
    if j < n_lk:
        reader.hand_on_held()
        out.append(LookupRows.from_view(view, j, n_lk))
    return res.lines


class _OriginalLines:
    """The lines of a block as read, by number (for a block whose scan ran on a copy without timestamps)."""

    def __init__(self, data: bytes, start: int, end: int, base: int) -> None:
        self._range = (data, start, end)
        self._lines: list[bytes] | None = None  # split on the first line asked for (often none is)
        self.base = base

    def line_at(self, n: int) -> bytes | None:
        if self._lines is None:
            data, start, end = self._range
            self._lines = data[start:end].split(b"\n")
        i = n - self.base - 1
        return self._lines[i] if 0 <= i < len(self._lines) else None


def _line_order(res: ScanResult):
    """``(line, start, end, table, row)`` of what the per-line stages must see, in line order: the rare and
    flagged lines (``table`` None: fed as bytes) and the metric rows (``table`` "stats"/"spec": events)."""
    rare, flagged = res.columns["rare"], res.columns["flagged"]
    stats, spec = res.columns["stats"], res.columns["spec"]
    if not (flagged["line"] or stats["line"] or spec["line"]):
        return zip(rare["line"], rare["start"], rare["end"], repeat(None), repeat(0))
    todo = [*zip(rare["line"], rare["start"], rare["end"], repeat(None), repeat(0)),
            *zip(flagged["line"], flagged["start"], flagged["end"], repeat(None), repeat(0))]
    for table, cols in (("stats", stats), ("spec", spec)):
        if cols["line"]:
            todo += zip(cols["line"], cols["start"], cols["end"], repeat(table), range(len(cols["line"])))
    todo.sort(key=_first)
    return todo


def _first(row: tuple) -> int:
    return row[0]


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


_TS_PARTS = re.compile(rb"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?")


def _canonical_lmcache_ts(line: bytes) -> bytes:
    """``[2026-05-06T15:56:03.745123+00:00] LMCache …`` → ``[2026-05-06 15:56:03,745] LMCache …``."""
    idx = line.find(b"] LMCache ")
    m = _TS_PARTS.match(line, 1)
    if m is None or m.start() != 1:
        return line
    frac = (m.group(3) or b"0")[:3].ljust(3, b"0")
    return b"[" + m.group(1) + b" " + m.group(2) + b"," + frac + line[idx:]


def record_from_hot(item: tuple) -> Record | None:
    """Turn a line that ingest only counted (a scanner row: evidence, look-back) into its Record."""
    path, lineno, origin, line, year = item
    colon = line.find(b":", 34)
    level = LMC_LEVELS.get(line[34:colon])
    msg = line[colon + 2 :]
    msg, file, src_line, logger = split_suffix(msg)
    return Record(path, lineno, origin, "lmcache", level or "INFO", line[1:24], None, file, src_line, logger, msg)


#: the narrowest common terminal width: an LMCache row at least this wide may be taken for cut on its width
#: alone; a narrower one (down to ``rows.MIN_ROW``) only when this input proved a cut at that width (a row
#: ended inside a header, at ``ERROR:`` or inside the suffix) or the rows themselves show it (``_fills``)
WRAP_MIN_WIDTH = 80
#: terminal widths at which a vLLM line may be followed by a shorter last row: the usual default sizes,
#: plus every width this input proved cut (``_Reader._prove``). Real logs are full of headerless lines after
#: vLLM lines of arbitrary length (torch glog, prints), so at any other width a vLLM record is only joined
#: to a row exactly as wide as its own (two full rows), which then proves the width.
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250})


def _wrapped_continuation(cut: _Open, open_recs: dict[str, _Open], origin: Origin, line: bytes,
                          line_at, lineno: int) -> _Open | None:
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


def _continues_row(line: bytes, width: int) -> bool:
    """Whether a headerless line can be the next terminal row of a cut vLLM record ``width`` wide.

    A terminal row is never wider than the first one, does not start with the indentation of a
    traceback (one space is a cut before a word), and is not a line ingest would keep on its own (an exception, a version banner): joining
    it can then only add the rest of the record's text, never hide a line.
    """
    return (len(line) <= width and line[:2] != b"  " and line[:1] != b"\t" and not is_envelope(line)
            and EXC_LINE.match(line) is None and b"Error" not in line and b"LMCache v" not in line
            and b"version" not in line[:80] and b"LMCache:" not in line[:16]
            and b"it/s]" not in line and b"s/it]" not in line and b"%|" not in line)  # tqdm, printed unprefixed


def _looks_wrapped(plen: int, line: bytes, proven: bool = False) -> bool:
    """A continuation of the same process that is a cut line rather than the next line of a multi-line
    message: the record's last line filled a terminal row, and this one is not indented or an exception.
    One leading space is a cut before a word when a word follows, or after a row exactly a terminal's
    width (or one this input was proven cut at) or an empty message; a dict repr pretty-printed over lines
    indents its items by one space, but before a quote or a bracket (`` 'chunk_size': 256,``)."""
    if line[:1] == b" " and (proven and line[1:2] not in (b" ", b"\t", b"") or line[1:2].isalnum()):
        line = line[1:]
    return plen >= MIN_ROW and line[:1] not in (b" ", b"\t") and EXC_LINE.match(line) is None


def _concat(o: _Open, line: bytes, lineno: int) -> tuple[bytes | None, int | None, bytes | None]:
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


def _append(o: _Open, text: bytes, lineno: int) -> None:
    rec = o.rec
    if rec.cont is None:
        rec.cont = []
    rec.cont.append(text)
    rec.end_line = lineno
    o.chars += len(text)


def _opens_wrap(msg: bytes) -> bool:
    """A config dump hard-wrapped by a paste: brackets still open at the end of the line."""
    if len(msg) < 20 or not (msg.startswith(b"Initializing a V1 LLM engine") or msg.startswith(b"non-default args")):
        return False
    return msg.count(b"{") > msg.count(b"}") or msg.count(b"(") > msg.count(b")")


def _mostly_binary(line: bytes) -> bool:
    """Lines of control bytes / invalid UTF-8 (binary junk appended to a log) are skipped."""
    try:
        line.decode("utf-8")
        return False
    except UnicodeDecodeError:
        bad = line.decode("utf-8", "replace").count("\ufffd")
        return bad > 8 and bad * 4 > len(line)
