"""Physical lines → logical records.

For every line: strip ANSI colour (also the ESC-less residue) and CR, then the collector or paste
wrappers (recognised per line, see ``wrappers.py``); peel the vLLM process prefixes into an Origin;
recognise the logger envelope (LMCache's formatter, its legacy form, vLLM's formatter of every era,
uvicorn); and join continuation lines (multi-line LMCache messages, raw Python tracebacks, hard-wrapped
dumps, rows cut by a terminal) into one record. Knows nothing about KV caches.

Three stages, one line at a time (``LineReader``): the cleaner (``cleaner.py``), the envelope parsers
(their patterns, ``split_suffix`` and :class:`~specdiag.ingest.envelope.Record` in ``envelope.py``) and
the continuation joiner (its tests and joins in ``joiner.py``). This module keeps the per-line state
machine that runs them (what is open, held and proven for one input) and :func:`iter_records`; a bare CR
inside a line is split first (``cr_lines.py``). In front of the stages, per block (``blocks.py``), the
scanner (``scan.py``) takes the high-volume lines out: they are counted, lookups and metric lines are
handed on as columns (``hot.LookupRows``, ``hot.MetricRows``), and only the rest reaches the stages. The
stages work on bytes: a record's text is decoded only when something reads it, which on a multi-GB log
is a small minority of lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial

from specdiag.catalog.wording import BYTES
from specdiag.ingest.ahead import is_flood, scan_ahead
from specdiag.ingest.blocks import counted, plain_block, prefilter_state, scanned_block
from specdiag.ingest.cleaner import Cleaner
from specdiag.ingest.cr_lines import after_bar, cr_records
from specdiag.ingest.envelope import (
    EXC_LINE,
    FATAL_PYTHON,
    FATAL_SIGNAL,
    GLOG,
    GLOG_LEVELS,
    LMC_LEGACY,
    LMC_LEVELS,
    RAY_CPP,
    RAY_LEVELS,
    RAY_SERVE,
    RAYLET,
    SEGFAULT_BANNER,
    TORCH_C10,
    VLLM_LEVELS,
    VLLM_REST,
    WORKER_DIED,
    Record,
    canonical_lmcache_ts,
    split_suffix,
)
from specdiag.ingest.hot import HotWindow, LookupRows, MetricRows
from specdiag.ingest.joiner import (
    MAX_JOIN_CHARS,
    MAX_JOIN_LINES,
    TERMINAL_WIDTHS,
    WRAP_MIN_WIDTH,
    CutHead,
    OpenRecord,
    append_line,
    continues_row,
    fills,
    join_head,
    join_lmcache,
    opens_wrap,
    under_wrapper,
    wrapped_continuation,
)
from specdiag.ingest.marks import CountMark, cut_at_markers, starts_marked, take_mark
from specdiag.ingest.origin import NO_ORIGIN, Origin, OriginCache
from specdiag.ingest.prefilter import QuietOrigin, QuietPlaces
from specdiag.ingest.rows import MIN_ROW, cut_head, cut_suffix
from specdiag.ingest.shapes import SHAPE_FIRST, SHAPE_HEAD, read_head, uvicorn_line
from specdiag.ingest.sources import Source
from specdiag.ingest.wrappers import (
    INDENT,
    LineUnwrapper,
    looks_plain,
    lost_bracket,
    lost_csi_end,
    lost_paren,
)
from specdiag.ingest.years import DeploymentYears
from specdiag.numbers import to_int
from specdiag.patterns import lazy
from specdiag.timeutil import initial_year


class LineReader:
    """The per-line stages for the lines the scanner left (or every line, without it), in line order.

    ``feed`` runs, for one physical line: the cleaner (colour, CR, binary junk, over-long lines), the
    wrapper and process-prefix peeling, the envelope parsers (LMCache, vLLM, uvicorn, legacy, raw text)
    and the continuation joiner (multi-line LMCache messages, tracebacks, hard-wrapped dumps, terminal
    rows). Finished records are appended to ``out``; the block loop hands them on in order.
    """

    def __init__(self, path: str, stats, window: HotWindow | None = None, count_hot: bool = False) -> None:
        self.path = path
        self.stats = stats
        #: read again as a paste of message texts without headers (``sources.BARE_PASTE_MAX``): every line no
        #: other stage takes becomes a ``bare`` record, for the events layer to look up by its text alone
        self.bare = False
        self.window = window
        #: count complete store/retrieve lines the scanner could not take (a wrapper) instead of yielding them
        self.count_hot = count_hot
        self.out: list = []
        self.origins = OriginCache()
        self.unwrapper = LineUnwrapper()
        self.open_recs: dict[str, OpenRecord] = {}
        self.last_cut: OpenRecord | None = None  # the LMCache record most recently left open (no suffix yet)
        self.held: Record | None = None  # a long vLLM record held for one line, in case a terminal wrapped it
        self.held_width = self.held_last = 0
        self.widths = set(TERMINAL_WIDTHS)
        #: widths at which this input was proven cut (a row ended inside a header or a suffix): narrower than
        #: 80 columns is only joined at one of these, or when the rows themselves show the wrap
        self.proven: set[int] = set()
        self.head: CutHead | None = None
        self.core = b""  # the current line after its wrappers, before its process prefix (set by ``peel``)
        self.cleaner = Cleaner(stats)
        self.year_hint: int | None = None
        self.last_month = 0
        self.last_y = b""
        self.years = DeploymentYears()  # the year states of the other deployments the input names
        self.recognized = 0
        self.esc = self.cr = self.caret_cr = False  # the cleaner's block-level answers, read here for every line fed
        #: the places whose records the prefilter may count (set by the analysis; None: none)
        self.quiet: QuietPlaces | None = None
        self.line_at = _no_line

    def begin_block(self, chunk: bytes, line_at, few_lines: bool = False, start: int = 0, end: int | None = None) -> None:
        """A new block: the cleaner's prechecks (``Cleaner.begin_block``) and ``line_at(n)``, the raw line
        ``n`` of the block (for the joiner's look back over blank lines)."""
        cleaner = self.cleaner
        cleaner.begin_block(chunk, few_lines, start, end)
        self.esc, self.cr, self.caret_cr = cleaner.esc, cleaner.cr, cleaner.caret_cr
        self.line_at = line_at

    def peel(self, line: bytes) -> tuple[Origin, bytes] | None:
        """Collector / paste wrappers, then process prefixes; the first bytes of an unwrapped line prove it has none."""
        c0 = line[:1]
        self.core = line
        if c0 == b"(":
            return self.origins.peel(line)
        if looks_plain(line):  # (a CI runner's bracketed time is a wrapper: Buildkite's '[2025-…T…Z] '; so is '[rank2]: ')
            return NO_ORIGIN, line
        line = self.core = self.unwrapper.strip(line)
        if cut := lost_csi_end(line):
            line = self.core = line[cut:]
        if lost_bracket(line):
            line = self.core = b"[" + line
        elif lost_paren(line):
            line = self.core = b"(" + line
        named = self.unwrapper.deployment
        if named is not None and named != self.years.current:
            self.years.turn_to(self, named)
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
        if self.caret_cr and b"^M" in line:
            line = line.replace(b"^M", b"\r")
        if self.cr and line.find(b"\r", 0, len(line) - 1) >= 0:
            pieces = cr_records(line)
            if len(pieces) > 1:
                self._feed_pieces(lineno, pieces)
                return
        cut = after_bar(line) if b"%|" in line else None
        if cut is not None:  # a record glued to a progress bar: the bar, then the record, as a CR would cut them
            self._feed_pieces(lineno, [line[:cut], line[cut:]], cr=False)
            return
        self._feed_one(lineno, line)

    def _feed_pieces(self, lineno: int, pieces: list[bytes], cr: bool = True) -> None:
        """A line in which a bare CR started a record (a log record written after a progress bar's ``\\r``):
        each piece is read in order as a line of its own, numbered as the physical line and counted once.

        A piece without a process prefix of its own takes the first piece's origin: vLLM writes its
        ``(Worker_TP2 pid=N)`` prefix (and a collector its wrapper) only where a line begins after an LF."""
        before = self.recognized
        inherit = self._feed_one(lineno, pieces[0])
        for piece in pieces[1:]:
            inherit = self._feed_one(lineno, piece, inherit) or inherit
        self.recognized = min(self.recognized, before + 1)
        if cr:
            self.stats.cr_splits += len(pieces) - 1

    def _feed_one(self, lineno: int, line: bytes, inherit: Origin | None = None) -> Origin | None:
        """The stages for one line (or one CR-separated piece of one); the origin it was read with."""
        raw_len = len(line) - line.count(b"\r") if self.esc else 0
        cleaner = self.cleaner
        line = cleaner.clean(lineno, line)
        if line is None:
            return None
        cut, cleaner.cut = cleaner.cut, False
        plen = raw_len or len(line)  # a row's width as cut: ``fold`` counts the escapes a terminal hides
        if self.head is not None:
            head = self.head
            got = join_head(head, lineno, line, plen, self.peel, self.origins.peel_for)
            if got is True:
                return None
            if got is not None:
                self.head = None
                self._prove(head.width)
                self._feed_peeled(head.first, *got)
                self._stretch(head.first, lineno)
                return None
            self.release_head()
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
            line = canonical_lmcache_ts(line)  # a patched formatter or collector changed the timestamp shape
        if self._lmcache(lineno, origin, line, plen) or self._vllm(lineno, origin, line, plen):
            return
        if line[:1] in SHAPE_FIRST and SHAPE_HEAD.match(line) is not None and self._shape(lineno, origin, line, plen):
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
        self.head = CutHead(lineno, core, cleaned[: len(cleaned) - len(core)], origin.deployment, plen)
        return True

    def release_head(self) -> None:
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
        (``plen``), so an indentation or a kubectl prefix on every row counts alike. A warning or error's
        terminal width is also known under the wrapper this row carries (``under_wrapper``)."""
        held = self.held
        width = self.held_width
        if (lineno == self.held_last + 1 and origin.pid is None and plen <= width
                and (width in self.widths or plen == width or under_wrapper(held, width, plen - len(line), self.widths))
                and (origin.deployment is None or origin.deployment == held.origin.deployment)
                and continues_row(line, len(line)) and not (line[:1] == b"[" and cut_head(line, False))):
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

    def close_open(self, key: str) -> None:
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
        self._dated(ts[:4])
        return self._lmcache_msg(lineno, origin, level, ts, msg, plen, line[-1:] == b" ")

    def _dated(self, y: bytes) -> None:
        """A line that prints its year: vLLM's year-less lines after it take it."""
        if y != self.last_y and y.isdigit():
            self.last_y = y
            self.year_hint, self.last_month = int(y), 0  # a dated line: no New Year wrap to infer across it

    def _lmcache_msg(self, lineno: int, origin: Origin, level: str, ts: bytes | None, msg: bytes, plen: int,
                     space: bool) -> bool:
        """An LMCache record from its message (``ts`` None: the paste cut the time off). Without its
        ``(file:line:logger)`` suffix it stays open: the next rows may be the rest of it."""
        msg, file, src_line, logger = split_suffix(msg)
        self.close_open(origin.key)
        rec = Record(self.path, lineno, origin, "lmcache", level, ts, None, file, src_line, logger, msg)
        self.recognized += 1
        self.stats.formats.add("lmcache")
        if file is not None and self.count_hot and level == "INFO" and counted(self.stats, self.window, rec):
            return True
        if file is not None:
            self.out.append(rec)
        else:
            rec.raw = msg.rstrip()
            self.last_cut = self.open_recs[origin.key] = OpenRecord(rec, "lmcache", space, plen)
            if plen >= MIN_ROW and plen not in self.proven and (not rec.raw or cut_suffix(rec.raw)):
                self._prove(plen)  # the row ended at ``ERROR:`` or inside ``(file.py:NNN:logger)``: a cut
        return True

    def _vllm(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """vLLM's formatter: ``LEVEL MM-DD HH:MM:SS [file:line] msg`` (no year: inferred)."""
        sp = line.find(b" ", 3, 10)
        lvl = VLLM_LEVELS.get(line[:sp]) if sp > 0 else None
        if lvl is None:
            return False
        at = sp + 1
        while line[at : at + 1] == b" " and at < sp + 9:  # a format that pads the level (``%(levelname)-8s``)
            at += 1
        m = VLLM_REST.match(line, at)
        if not m:
            return False
        ts = m.group(1)
        month = int(ts[:2])
        if self.year_hint and self.last_month == 12 and month == 1:
            self.year_hint += 1
        self.last_month = month
        self.close_open(origin.key)
        msg = line[m.end() :]
        rec = Record(self.path, lineno, origin, "vllm", lvl, ts, self.year_hint, m.group(2), to_int(m.group(3)), None, msg)
        self.recognized += 1
        self.stats.formats.add("vllm")
        if opens_wrap(msg):
            self.open_recs[origin.key] = OpenRecord(rec, "wrap")
        elif plen >= MIN_ROW:  # handed on with the next line, which may be the rest of it (``_continue_held``)
            self.held, self.held_width, self.held_last = rec, plen, lineno
        else:
            self.out.append(rec)
        return True

    def _shape(self, lineno: int, origin: Origin, line: bytes, plen: int) -> bool:
        """The rarer headers (``shapes.py``): Python logging's formats with a vLLM or LMCache logger name,
        and a paste that cut the time off (no time is made up for it). Asked only for a line whose first
        byte can start one, after vLLM's and LMCache's own formatters failed."""
        head = read_head(line)
        if head is None:
            return False
        if head.open:  # LMCache's formatter without time or suffix: open like any suffix-less LMCache line
            return self._lmcache_msg(lineno, origin, head.level, None, head.msg, plen, line[-1:] == b" ")
        if head.year is not None:
            self._dated(line[:4])
        self.close_open(origin.key)
        year = head.year if head.kind == "vllm" else None
        rec = Record(self.path, lineno, origin, head.kind, head.level, head.ts, year, head.file, head.src_line,
                     head.logger, head.msg)
        self.recognized += 1
        self.stats.formats.add(head.style)
        self.stats.formats.add(head.kind)
        if head.kind == "lmcache" and self.count_hot and head.level == "INFO" and counted(self.stats, self.window, rec):
            return True
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
            o = wrapped_continuation(cut, self.open_recs, origin, line, self.line_at, lineno) \
                if fills(cut, line, plen, self.proven) else None
            if o is not None:
                okey = o.rec.origin.key
                wrapped = True
        if o is None:
            return False
        if o.mode == "lmcache" and opens_traceback(line):
            self.close_open(okey)  # no row of an LMCache message: a thread's uncaught exception after it (#89)
            return False
        if o.mode == "lmcache":
            done, width = join_lmcache(o, wrapped, lineno, line, plen, self.widths, self.proven)
            if width is not None:
                self._prove(width)
            self.recognized += 1
            if done:
                self.close_open(okey)
            return True
        rec = o.rec
        if o.mode == "traceback":
            if (not line.strip() or line.startswith((b" ", b"\t", b"Traceback", b"During handling",
                                                     b"The above exception", *NCCL_TAIL)) or EXC_LINE.match(line)
                    or flush_frame(line) or flush_frame(rec.cont[-1] if rec.cont else rec.raw)):
                # (the row after a frame row pasted flush left is its code row, flush left too)
                append_line(o, line, lineno)
                self.recognized += 1
                if len(rec.cont) > MAX_JOIN_LINES:
                    self.close_open(okey)
                return True
            self.close_open(okey)
            return False
        append_line(o, line, lineno)  # mode 'wrap': a hard-wrapped config dump
        self.recognized += 1
        if not opens_wrap(rec.raw_text) or o.chars > MAX_JOIN_CHARS:
            self.close_open(okey)
        return True

    def _prove(self, width: int) -> None:
        """A row of this input ``width`` wide was shown cut (bounded: a hostile input proves few widths)."""
        if len(self.widths) < 64:
            self.widths.add(width)
        if width < WRAP_MIN_WIDTH and len(self.proven) < 16:
            self.proven.add(width)

    # ---- other recognisable lines -----------------------------------------------------------------
    def _other(self, lineno: int, origin: Origin, line: bytes) -> None:
        path, year = self.path, self.year_hint
        # a frame line outside any open traceback: the excerpt starts below the "Traceback" header
        if line.startswith(b'  File "') or opens_traceback(line) or flush_frame(line) or indented_frame(line):
            self.close_open(origin.key)
            rec = Record(path, lineno, origin, "traceback", "ERROR", None, year, None, None, None, line)
            self.open_recs[origin.key] = OpenRecord(rec, "traceback")
            self.recognized += 1
            return
        if line.startswith((b"INFO:", b"WARNING:", b"ERROR:")) and uvicorn_line(line):
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
        prefixed = origin.pid is not None
        if prefixed:
            self.recognized += 1  # a vLLM process prefix: vLLM output even without a logger header (counted once)
        if (ray := self._ray(lineno, origin, line)) is not None:
            self.out.append(ray)
            return
        if (torch := self._torch(lineno, origin, line)) is not None:
            self.recognized += not prefixed  # torch's C++ core in a vLLM process: NCCL's watchdog (events/torch.py)
            self.out.append(torch)
            return
        if line[:1] in b"WEC" and (serve := RAY_SERVE.match(line)) is not None:
            self.recognized += not prefixed  # Ray Serve's controller or a replica, around a vLLM deployment
            self.out.append(Record(path, lineno, origin, "ray", VLLM_LEVELS[serve.group(1)], serve.group(2),
                                   int(serve.group(2)[:4]), None, None, None, line[serve.end() :]))
            return
        if line[:7] == b"(raylet" and (ray := self._raylet(lineno, origin, line)) is not None:
            self.recognized += not prefixed
            self.out.append(ray)
            return
        if line[:1] in b"WEF" and (glog := GLOG.match(line)) is not None:
            self.recognized += not prefixed  # a native library in the process (Mooncake's store client): its errors
            date = glog.group(2)  # MMDD, or YYYYMMDD from glog 0.7 (``E20260106``)
            year = int(date[:4]) if len(date) == 8 else year
            self.out.append(Record(path, lineno, origin, "glog", GLOG_LEVELS[glog.group(1)], None, year,
                                   glog.group(4), to_int(glog.group(5)), None, line[glog.end() :]))
            return
        if line.startswith(FATAL_PYTHON):
            self.out.append(Record(path, lineno, origin, "text", "CRITICAL", None, year, None, None, None, line))
            return
        self._raw_text(lineno, origin, line)

    def _raw_text(self, lineno: int, origin: Origin, line: bytes) -> None:
        """A line no logger header opens: kept only where it may matter (an exception, a banner, a version,
        argparse's exit), or as a bare message of a paste; anything else is dropped."""
        path, year = self.path, self.year_hint
        # a paste may indent it by a space or two, or quote it (a reply's ``> ``)
        at = len(line) - len(line.lstrip(b" \t>"))
        exc = EXC_LINE.match(line, at)
        if exc and line[:1] == b">":
            line = line[at:]  # the reply's quote is not the message
        if exc or b"LMCache v" in line or b"version" in line[:80] or any(w in line for w in BYTES.KEPT_TEXT_WORDS):
            self.out.append(Record(path, lineno, origin, "text", _exception_level(exc), None, year, None, None,
                                   None, line))
        elif line[:4] in (b"vllm", b"api_") and b": error: " in line[:40]:
            # argparse's exit: ``vllm serve: error: argument …``, ``api_server.py: error: unrecognized arguments: …``
            self.out.append(Record(path, lineno, origin, "text", "ERROR", None, year, None, None, None, line))
        elif self.bare and origin.pid is None and (text := unmarked(line.strip())):
            self.out.append(Record(path, lineno, origin, "bare", "", None, year, None, None, None, text))

    def _ray(self, lineno: int, origin: Origin, line: bytes) -> Record | None:
        """A warning or worse of Ray's C++ core (``RAY_CPP``), or the fatal signal it reports
        (``FATAL_SIGNAL``): a record of kind ``ray``, so that a TP worker's crash under a Ray actor is named
        (INFO lines and anything else: None)."""
        if line[:1] != b"[" and line[:3] != b"***":
            return None
        m = RAY_CPP.match(line)
        if m is not None:
            level = RAY_LEVELS.get(m.group(2))
            if level is None:
                return None
            ts = m.group(1)
            return Record(self.path, lineno, origin, "ray", level, ts, int(ts[:4]), m.group(3), to_int(m.group(4)),
                          None, line[m.end() :])
        if (sig := FATAL_SIGNAL.match(line)) is not None:  # SIGTERM: most often a stop that was asked for
            level = "WARNING" if sig.group(1) == b"SIGTERM" else "CRITICAL"
            return Record(self.path, lineno, origin, "ray", level, None, self.year_hint, None, None, None, line)
        return None

    def _torch(self, lineno: int, origin: Origin, line: bytes) -> Record | None:
        """torch's C++ logging at ERROR or worse (``TORCH_C10``), as a record of kind ``glog`` (its header is
        glog's): what NCCL's watchdog says of a collective that timed out. A Ray worker's colour, its ESC lost in
        a paste, leaves a space before it (`` [0m [E …``)."""
        line = line.lstrip(b" ") if line[:1] == b" " else line
        if line[:2] not in (b"[r", b"[E", b"[F") or (m := TORCH_C10.match(line)) is None:
            return None
        return Record(self.path, lineno, origin, "glog", GLOG_LEVELS[m.group(1)], None, self.year_hint, m.group(2),
                      to_int(m.group(3)), None, line[m.end() :])

    def _raylet(self, lineno: int, origin: Origin, line: bytes) -> Record | None:
        """What a raylet pushed to the driver (``(raylet) …``): its C++ core's warnings or worse, and its report
        that a worker process died (``envelope.WORKER_DIED``, at ERROR: Ray prints it as an error); None for
        anything else it prints."""
        m = RAYLET.match(line)
        if m is None:
            return None
        rest = line[m.end() :]
        if rest.startswith(WORKER_DIED):
            return Record(self.path, lineno, origin, "ray", "ERROR", None, self.year_hint, None, None, None, rest)
        return self._ray(lineno, origin, rest)

    def busy(self) -> bool:
        """Whether the next line may be read differently for what came before it: a record open or held, a
        header row held, an escape cut at the end of the last line, a wrapper carried to the next line.
        While not, an inert line (``prefilter.py``) can be counted instead of read."""
        return bool(self.open_recs or self.held is not None or self.head is not None or self.cleaner.esc_cut
                    or self.unwrapper.carries())

    def hand_on_held(self) -> None:
        """A line the scanner took comes next: the held record (and a held header row) is complete."""
        if self.head is not None:
            self.release_head()
        if self.held is not None:
            self.out.append(self.held)
            self.held = None

    def end(self) -> None:
        """The input ended: hand on the held record and every record still open."""
        self.hand_on_held()
        for key in list(self.open_recs):
            self.close_open(key)


#: the lines NCCL's error text goes on with under an exception line (``ncclUnhandledCudaError: Call to CUDA
#: function failed.`` / ``Last error:`` / ``Cuda failure 'out of memory'``): the CUDA error behind the NCCL one
NCCL_TAIL = (b"Last error:", b"Cuda failure ", b"NCCL WARN ")


#: markdown emphasis around a line pasted into an issue (``**…**``, ``__…__``, ``*…*``)
_EMPHASIS = (b"**", b"__", b"*", b"_")


def unmarked(text: bytes) -> bytes:
    """A bare pasted line without the markdown around it: ``- **Speculative metrics: …**`` is the message (the
    bullet, quote or indentation as the unwrapper reads them: ``wrappers.INDENT``)."""
    if (m := INDENT.match(text)) is not None:
        text = text[m.end() :]
    for mark in _EMPHASIS:
        if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
            return text[len(mark) : -len(mark)].strip()
    return text


def _exception_level(exc: re.Match[bytes] | None) -> str:
    """The level of a raw line: an exception's line (``RuntimeError: CUDA error: …``, what an uncaught
    exception prints last) is an error, whatever printed it and with or without its traceback; a warning
    class's (``FutureWarning: …``), an exit's or an interrupt's is no level."""
    if exc is None:
        return ""
    name = exc.group(0).rstrip(b":")
    return "ERROR" if name.endswith((b"Error", b"Exception")) else ""


#: the first line of a traceback Python prints: its own, and the banner of a thread's uncaught exception
#: (``threading.excepthook``: ``Exception in thread Thread-1 (handle_client):``), and of one a finaliser or callback
#: raised that Python could only report (``Exception ignored in: <function Remote.__del__ at 0x…>``)
TRACEBACK_HEADS = (b"Traceback (most recent call last)", b"Exception in thread ", b"Exception ignored in",
                   SEGFAULT_BANNER)  # (apache-tvm-ffi's, its native frames after it: ``envelope.SEGFAULT_BANNER``)
#: the banner CPython's multiprocessing prints when a process's target raises (``process.py``, ``_bootstrap``:
#: ``Process EngineCore_DP0:``, then the traceback; the process exits with code 1): a traceback's first line
MP_BANNER = lazy(rb"Process [\w.-]{1,64}:[ \t]*")


#: a traceback's frame row pasted without its indentation (``File "lmcache/v1/cache_engine.py", line 558, in store``)
_FLUSH_FRAME = lazy(rb'File "[^"\n]{1,1000}", line \d{1,7}, in ')


def flush_frame(line: bytes) -> bool:
    """Whether ``line`` is a frame row whose indentation the paste lost: the whole of Python's frame shape, which
    no other program's line has (a bare ``File "`` may start anything)."""
    return line[:6] == b'File "' and _FLUSH_FRAME.match(line) is not None


def indented_frame(line: bytes) -> bool:
    """A frame row a paste indented further (each row one space more: ``   File "…", line 100, in __init__``), at most
    eight spaces in: Python's frame shape, as ``flush_frame`` reads it."""
    if line[:1] != b" ":
        return False
    at = len(line) - len(line.lstrip(b" "))
    return at <= 8 and line[at : at + 6] == b'File "' and _FLUSH_FRAME.match(line, at) is not None


def opens_traceback(line: bytes) -> bool:
    """Whether ``line`` is the first line of a traceback: Python's own header, a thread's banner, a process's."""
    return line.startswith(TRACEBACK_HEADS) or (line[:8] == b"Process " and MP_BANNER.fullmatch(line) is not None)


def _no_line(n: int) -> bytes | None:
    return None


def iter_records(source: Source, hot: object = None, window: HotWindow | None = None,
                 scan_threads: int = 0, scan_processes: int = 0, marks: bool = False,
                 quiet: QuietPlaces | None = None,
                 bare: bool = False) -> Iterator[Record | LookupRows | MetricRows | CountMark | QuietOrigin]:
    """Yield the records of one input, updating ``source.stats``. Never raises on bad content.

    With ``hot`` set, every block goes through the scanner first (``scan.scan_block``): store, retrieve,
    lookup and access lines are counted (``stats.hot``), lookups are yielded as :class:`LookupRows`
    between the records (in line order), ``window`` keeps the blocks' rows for look-back, and only the
    other lines (and the flagged ones: short retrieves, 5xx) reach the per-line stages. Without ``hot``
    every line does (what tests of the per-line stages use). ``scan_threads`` scans the blocks on that
    many threads while this one reads them, ``scan_processes`` on worker processes where only the Python
    scanner runs (``ahead.py``); the records are the same. With ``marks`` the scanned blocks are cut before
    every line that holds a server-start marker's literal and a :class:`~specdiag.ingest.marks.CountMark`
    (the counts before that line) is yielded ahead of each such part's records (``marks.py``). With ``bare``
    (a small input read again after nothing in it was recognised) the prefilter is off and every line no stage
    takes is a record of kind ``bare``, for the events layer to look up by its text alone.
    """
    stats = source.stats
    reader = LineReader(source.display, stats, window, count_hot=bool(hot))
    reader.quiet = quiet
    reader.bare = bare
    lineno = 0
    state = partial(prefilter_state, reader)
    for item in scan_ahead(source.blocks(), bool(hot), scan_threads, scan_processes, state):
        data, start, read_end, res, _ = item
        if res is None and is_flood(data, start, read_end):  # a newline flood: no list of empties
            lineno += read_end - start
            continue
        if reader.year_hint is None:  # vLLM lines print no year: take it from a line of this input that does
            reader.year_hint = initial_year(data, start, read_end)
        reader.years.block = (data, start, read_end)
        for data, start, end, res, copy in cut_at_markers(item, lineno) if marks else (item,):
            base = lineno
            if marks and res is not None and starts_marked(data, start, end):  # what a run ending here holds
                yield take_mark(stats.hot, base + 1)
                reader.years.new_run(reader, data, start, read_end)
            if res is not None:
                lineno = base + scanned_block(reader, data, start, end, res, stats, window, copy, base)
            else:
                lineno = base + plain_block(reader, data[start:end], base)
            if reader.out:
                yield from reader.out
                reader.out.clear()
    reader.end()
    yield from reader.out
    stats.lines = lineno
    stats.year = reader.year_hint
    stats.recognized = reader.recognized
    stats.formats.update(reader.unwrapper.seen)
    skipped = reader.cleaner.skipped
    stats.skipped += skipped
    if skipped and len(stats.errors) < 21:
        stats.errors.append(f"{skipped} line(s) skipped: binary data or NUL bytes")
    if lineno == 0 and stats.bytes_read == 0 and not stats.errors:
        stats.errors.append("empty input")


