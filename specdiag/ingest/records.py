"""Physical lines → logical records.

For every line: strip ANSI colour (also the ESC-less residue) and CR, then the collector or paste
wrappers (recognised per line, see ``wrappers.py``); peel the vLLM process prefixes into an Origin;
recognise the logger envelope (LMCache's formatter, its legacy form, vLLM's formatter of every era,
uvicorn); and join continuation lines (multi-line LMCache messages, raw Python tracebacks, hard-wrapped
dumps, rows cut by a terminal) into one record. Knows nothing about KV caches.

The hot loop works on bytes: a record's text is decoded only when something reads it, which on a
multi-GB log is a small minority of lines.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from itertools import compress

from specdiag.ingest.origin import NO_ORIGIN, Origin, OriginCache
from specdiag.ingest.sources import Source
from specdiag.ingest.wrappers import PLAIN_STARTS, LineUnwrapper, is_envelope, looks_plain
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
#: the high-volume LMCache INFO lines (stores, retrieves), tested at C speed on each raw (coloured) line
#: a retrieve line is only hot when it loaded everything it was asked for (``Retrieved N out of N …``, or the
#: layerwise ``Retrieved N tokens``): one that came up short is a shortfall on its own and must reach the rules
HOT_LINE = re.compile(rb"\] LMCache INFO:\S* (?:\[req_id=[^\]]*\] )?(?:Stored \d|Retrieved (?:(\d+) out of (?:total )?\1 |\d+ tokens))")
#: uvicorn access lines that are not server errors (one per request; only 5xx ones matter)
ACCESS_OK = re.compile(rb'INFO: +\S+ - "[^"\n]*" [1-4]\d\d ')
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


def _clean_chunk(chunk: bytes) -> bytes:
    # colour codes (also the residue left when a collector dropped the ESC byte) and CRs, on the whole
    # block at C speed; line numbers stay those of '\n' (as grep -n and editors count)
    if b"\x1b" in chunk:
        chunk = ANSI_ESC.sub(b"", chunk)
        if b"\x1b" in chunk:
            chunk = chunk.replace(b"\x1b", b"")
    elif b"[0m" in chunk or b"[0;0m" in chunk or b";20m" in chunk or b"[1;36m" in chunk:
        chunk = ANSI_RESIDUE.sub(b"", chunk)
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r", b"")
    return chunk


class LineWindow:
    """The raw lines of the current block (and the tail of the previous one), for looking back.

    High-volume lines are blanked before the line loop; a rule that needs the one just before an
    incident (the retrieve line before a shortfall) asks ``find_back`` while that incident is read.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: list[bytes] = []
        self.first = 1
        self.prev: list[bytes] = []
        self.prev_first = 1
        self.origins = OriginCache()
        self.year: int | None = None
        self.unwrap = LineUnwrapper()

    def set(self, lines: list[bytes], first: int) -> None:
        if self.lines:
            self.prev, self.prev_first = self.lines[-2000:], self.first + max(len(self.lines) - 2000, 0)
        self.lines, self.first = lines, first

    def _line(self, n: int) -> bytes | None:
        i = n - self.first
        if 0 <= i < len(self.lines):
            return self.lines[i]
        i = n - self.prev_first
        if 0 <= i < len(self.prev):
            return self.prev[i]
        return None

    def find_back(self, before: int, needle: bytes, origin_key: str, limit: int = 2000) -> Record | None:
        """The nearest LMCache record before line ``before`` of process ``origin_key`` containing ``needle``."""
        for n in range(before - 1, max(before - limit, 0), -1):
            line = self._line(n)
            if line is None:
                return None
            if needle not in line:
                continue
            origin, rest = split_line(line, self.unwrap, self.origins)
            if origin.key != origin_key or not rest.startswith(b"] LMCache ", 24):
                continue
            return record_from_hot((self.path, n, origin, rest, self.year))
        return None


def split_line(line: bytes, unwrap: LineUnwrapper, origins: OriginCache) -> tuple[Origin, bytes]:
    """One raw physical line → (origin, the rest after colours, wrappers and process prefixes).

    The slow, complete path for the few lines looked at out of the main loop (the first of each
    high-volume template, a line looked back at).
    """
    line = _clean_chunk(line)
    dep = None
    if line and not looks_plain(line):
        line = unwrap.strip(line)
        dep = unwrap.deployment
    return origins.peel_for(dep, line)


def iter_records(source: Source, hot: dict[bytes, str] | None = None,
                 window: LineWindow | None = None) -> Iterator[Record]:
    """Yield the records of one input, updating ``source.stats``. Never raises on bad content.

    ``hot`` maps the first word of high-volume LMCache INFO messages (after an optional ``[req_id=…]``
    tag) to a template id. Those lines — most of a busy server's log — are not yielded: they are
    counted (``stats.hot_counts``), the first is kept (``stats.hot_first``), and ``window`` keeps the
    raw block so that a rule can still look back at the one just before an incident.
    """
    hot_words = hot or {}
    store_id = hot_words.get(b"Stored")
    retrieve_id = hot_words.get(b"Retrieved")
    hot_counts = source.stats.hot_counts
    hot_first = source.stats.hot_first
    stats = source.stats
    path = source.display
    origins = OriginCache()
    peel = origins.peel
    peel_for = origins.peel_for
    open_recs: dict[str, _Open] = {}
    unwrapper = LineUnwrapper()
    unwrap = unwrapper.strip
    plain_starts = PLAIN_STARTS
    last_cut: _Open | None = None  # the LMCache record most recently left open (no suffix yet)
    held: Record | None = None  # a long vLLM record held for one line, in case a terminal wrapped it
    held_width = held_last = 0
    widths = set(TERMINAL_WIDTHS)
    year_hint: int | None = None
    last_month = 0
    lineno = 0
    last_y = b""
    recognized = 0
    skipped = 0
    formats = stats.formats
    lmc_levels = LMC_LEVELS
    vllm_levels = VLLM_LEVELS
    vllm_rest = VLLM_REST.match

    def close(key: str) -> Record | None:
        o = open_recs.pop(key, None)
        return o.rec if o else None

    for chunk in source.chunks():
        if not chunk.strip(b"\n"):  # a block of nothing but line breaks (a newline flood): no list of empties
            lineno += chunk.count(b"\n")
            continue
        lines = chunk.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        base = lineno
        if year_hint is None:  # vLLM lines print no year: take it from a line of this input that does
            year_hint = initial_year(chunk)
        if window is not None:
            window.set(lines, base + 1)
            window.year = year_hint
        if hot_words:
            # drop the high-volume lines before any per-line work: one `in` test each, in a comprehension
            kept = list(compress(enumerate(lines), map(operator.not_, map(HOT_LINE.search, lines))))
            nhot = len(lines) - len(kept)
            n_kept = len(kept)
            kept = [k for k in kept if not ACCESS_OK.search(k[1])]  # access lines: recognised, nothing to parse
            recognized += n_kept - len(kept)
            if n_kept != len(kept):
                formats.add("uvicorn")
            if nhot:
                recognized += nhot
                formats.add("lmcache")
                stored = chunk.count(b" Stored ")
                for tid, n in ((store_id, min(stored, nhot)), (retrieve_id, nhot - min(stored, nhot))):
                    if tid and n:
                        hot_counts[tid] = hot_counts.get(tid, 0) + n
                for tid, word in ((store_id, b" Stored "), (retrieve_id, b" Retrieved ")):
                    if tid and tid not in hot_first:
                        for i, ln in enumerate(lines):
                            if word in ln and HOT_LINE.search(ln):
                                origin, rest = split_line(ln, LineUnwrapper(), origins)
                                hot_first[tid] = (path, base + i + 1, origin, rest, year_hint)
                                break
        else:
            kept = enumerate(lines)
        # colours (also the residue left when a collector dropped the ESC byte) and CRs, per kept line;
        # line numbers stay those of '\n' (as grep -n and editors count)
        esc = b"\x1b" in chunk
        residue = not esc and (b"[0m" in chunk or b"[0;0m" in chunk or b";20m" in chunk or b"[1;36m" in chunk)
        cr = b"\r" in chunk
        # binary checks per line only when the block has NUL bytes or non-ASCII bytes at all
        suspicious = b"\x00" in chunk or not chunk.isascii()
        for i, line in kept:
            lineno = base + i + 1
            if not line:
                continue
            if esc and b"\x1b" in line:
                line = ANSI_ESC.sub(b"", line)
                if b"\x1b" in line:
                    line = line.replace(b"\x1b", b"")
            elif residue:
                line = ANSI_RESIDUE.sub(b"", line)
            if cr:
                line = line.replace(b"\r", b"")
                if not line:
                    continue
            if suspicious and (b"\x00" in line or not line.isascii() and _mostly_binary(line)):
                skipped += 1
                continue
            if len(line) > MAX_PARSE_LINE:
                if len(stats.errors) < 20:
                    stats.errors.append(f"line {lineno}: {len(line):,} bytes long, cut to {MAX_PARSE_LINE:,} for parsing")
                line = line[:MAX_PARSE_LINE]
            # collector / paste wrappers, per line; the first bytes of an unwrapped line prove it has none
            plen = len(line)
            c0 = line[:1]
            if c0 == b"(":
                origin, line = peel(line)
            elif (c0 == b"[" and line[1:5] != b"pod/") or line.startswith(plain_starts):
                origin = NO_ORIGIN
            else:
                line = unwrap(line)
                if unwrapper.year:
                    year_hint = unwrapper.year
                    last_month = 0  # the wrapper dated this line: no Dec→Jan inference on top of it
                if not line:
                    continue
                origin, line = peel_for(unwrapper.deployment, line)
            okey = origin.key
            if held is not None:
                # the long vLLM record on the line before may have been cut by a terminal: this row is its rest
                if (lineno == held_last + 1 and origin.pid is None
                        and (origin.deployment is None or origin.deployment == held.origin.deployment)
                        and _continues_row(line, held_width)):
                    held.raw += line
                    held._msg = None
                    held.end_line = held_last = lineno
                    recognized += 1
                    if len(line) < held_width:  # a short row is the last one
                        yield held
                        held = None
                    continue
                yield held
                held = None
            # ---- LMCache formatter: [YYYY-MM-DD HH:MM:SS,mmm] LMCache LEVEL: msg (file:line:logger)
            if line[:1] == b"[" and not line.startswith(b"] LMCache ", 24) and b"] LMCache " in line[:48]:
                line = _canonical_lmcache_ts(line)  # a patched formatter or collector changed the timestamp shape
            if line[:1] == b"[" and line.startswith(b"] LMCache ", 24):
                colon = line.find(b":", 34)
                level = lmc_levels.get(line[34:colon]) if colon > 0 else None
                if level is not None:
                    msg = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
                    ts = line[1:24]
                    y = ts[:4]
                    if y != last_y and y.isdigit():
                        last_y = y
                        year_hint, last_month = int(y), 0  # a dated line: no New Year wrap to infer across it
                    msg, file, src_line, logger = split_suffix(msg)
                    prev = open_recs.pop(okey, None) if open_recs else None
                    if prev is not None:
                        yield prev.rec
                    rec = Record(path, lineno, origin, "lmcache", level, ts, None, file, src_line, logger, msg)
                    recognized += 1
                    if "lmcache" not in formats:
                        formats.add("lmcache")
                    if file is not None:
                        yield rec
                    else:
                        rec.raw = msg.rstrip()
                        last_cut = open_recs[okey] = _Open(rec, "lmcache", line[-1:] == b" ", plen)
                    continue
            # ---- vLLM formatter: LEVEL MM-DD HH:MM:SS [file:line] msg
            sp = line.find(b" ", 3, 10)
            lvl = vllm_levels.get(line[:sp]) if sp > 0 else None
            if lvl is not None:
                m = vllm_rest(line, sp + 1)
                if m:
                    ts = m.group(1)
                    month = int(ts[:2])
                    if year_hint and last_month == 12 and month == 1:
                        year_hint += 1
                    last_month = month
                    prev = open_recs.pop(okey, None) if open_recs else None
                    if prev is not None:
                        yield prev.rec
                    msg = line[m.end() :]
                    rec = Record(path, lineno, origin, "vllm", lvl, ts, year_hint, m.group(2), to_int(m.group(3)), None, msg)
                    recognized += 1
                    if "vllm" not in formats:
                        formats.add("vllm")
                    if _opens_wrap(msg):
                        open_recs[okey] = _Open(rec, "wrap")
                    elif plen in widths:
                        held, held_width, held_last = rec, plen, lineno  # yielded with the next line
                    else:
                        yield rec
                    continue
            # ---- continuation of an open record ------------------------------------------------
            if open_recs:
                o = open_recs.get(okey)
                wrapped = False
                if o is None and last_cut is not None and origin.pid is None:
                    o = _wrapped_continuation(last_cut, open_recs, origin, line, lines, i, lineno)
                    if o is not None:
                        okey = o.rec.origin.key
                        wrapped = True
                if o is not None:
                    rec = o.rec
                    if o.mode == "lmcache":
                        if wrapped or _looks_wrapped(o.plen, line):
                            width = o.plen
                            file, src_line, logger = _concat(o, line, lineno)  # the suffix may have been cut too
                            if file is not None and len(widths) < 64:
                                widths.add(width)  # proven: this input was wrapped at that width
                        else:
                            body, file, src_line, logger = split_suffix(line)
                            _append(o, body, lineno)
                            o.space = line[-1:] == b" "
                        o.plen = plen
                        recognized += 1
                        if file is not None:
                            rec._file, rec.src_line, rec._logger = file, src_line, logger
                            yield close(okey)
                        elif o.chars > MAX_JOIN_CHARS or len(rec.cont or ()) > MAX_JOIN_LINES:
                            yield close(okey)
                        continue
                    if o.mode == "traceback":
                        if (not line.strip() or line.startswith((b" ", b"\t", b"Traceback", b"During handling",
                                                                 b"The above exception")) or EXC_LINE.match(line)):
                            _append(o, line, lineno)
                            recognized += 1
                            if len(rec.cont) > MAX_JOIN_LINES:
                                yield close(okey)
                            continue
                        yield close(okey)
                    elif o.mode == "wrap":
                        _append(o, line, lineno)
                        recognized += 1
                        if not _opens_wrap(rec.raw_text) or o.chars > MAX_JOIN_CHARS:
                            yield close(okey)
                        continue
            # ---- other recognisable lines ------------------------------------------------------
            # a frame line outside any open traceback: the excerpt starts below the "Traceback" header
            if line.startswith((b"Traceback (most recent call last)", b'  File "')):
                prev = open_recs.pop(okey, None)
                if prev is not None:
                    yield prev.rec
                rec = Record(path, lineno, origin, "traceback", "ERROR", None, year_hint, None, None, None, line)
                open_recs[okey] = _Open(rec, "traceback")
                recognized += 1
                continue
            if line.startswith((b"INFO:", b"WARNING:", b"ERROR:")):
                recognized += 1
                formats.add("uvicorn")
                if b'" 5' in line or line.startswith(b"ERROR:"):
                    yield Record(path, lineno, origin, "uvicorn", "INFO", None, year_hint, None, None, None, line)
                continue
            if b"LMCache:" in line[:16]:
                m = LMC_LEGACY.match(line)
                if m:
                    recognized += 1
                    formats.add("lmcache")
                    yield Record(path, lineno, origin, "lmcache", m.group(1).decode(), m.group(3), None,
                                 m.group(4).rsplit(b"/", 1)[-1], to_int(m.group(5)), None, m.group(2))
                    continue
            if origin.pid is not None:
                recognized += 1  # a vLLM process prefix: vLLM output even without a logger header
            # raw text: keep only what may matter (exceptions, banners, versions)
            if EXC_LINE.match(line) or b"Error" in line or b"LMCache v" in line or b"version" in line[:80]:
                yield Record(path, lineno, origin, "text", "", None, year_hint, None, None, None, line)
        lineno = base + len(lines)
    if held is not None:
        yield held
    for key in list(open_recs):
        rec = close(key)
        if rec is not None:
            yield rec
    stats.lines = lineno
    stats.recognized = recognized
    formats.update(unwrapper.seen)
    stats.skipped += skipped
    if skipped and len(stats.errors) < 21:
        stats.errors.append(f"{skipped} line(s) skipped: binary data or NUL bytes")
    if lineno == 0 and stats.bytes_read == 0 and not stats.errors:
        stats.errors.append("empty input")


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
    """Turn a line that ingest only counted (``stats.hot_first``, ``LineWindow``) into its Record."""
    path, lineno, origin, line, year = item
    colon = line.find(b":", 34)
    level = LMC_LEVELS.get(line[34:colon])
    msg = line[colon + 2 :]
    msg, file, src_line, logger = split_suffix(msg)
    return Record(path, lineno, origin, "lmcache", level or "INFO", line[1:24], None, file, src_line, logger, msg)


#: a physical line shorter than this was not cut by a terminal (80 columns is the narrowest common width)
WRAP_MIN_WIDTH = 80
#: terminal widths a vLLM line must fill exactly to be held back as possibly cut: the usual default sizes,
#: plus every width at which an LMCache record in the same input was proven cut (its suffix came on a
#: later row). Real logs are full of headerless lines after vLLM lines of arbitrary length (torch glog,
#: prints), so a vLLM record is only joined when its length is a terminal's.
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250})


def _wrapped_continuation(cut: _Open, open_recs: dict[str, _Open], origin: Origin, line: bytes,
                          block: list[bytes], index: int, lineno: int) -> _Open | None:
    """The cut LMCache record a headerless, prefixless line continues, if it is one.

    A terminal (or a chat box) that wraps a long line inserts a newline but none of the prefixes the
    writer put on each physical line, so the continuation cannot be found by its process key. It is
    joined only to the record on the line just before (blank lines aside), which must still be open (no
    ``(file:line:logger)`` suffix yet: LMCache prints it last, so its absence proves the record was cut),
    must have been long enough to wrap, and must come from the same deployment. ``block[index]`` is this
    line (number ``lineno``) in its block.
    """
    rec = cut.rec
    if cut.plen < WRAP_MIN_WIDTH or open_recs.get(rec.origin.key) is not cut:
        return None
    prev = index - 1
    while prev >= 0 and index - prev < 8 and not block[prev].strip():
        prev -= 1
    if rec.end_line != lineno - (index - prev):
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


def _looks_wrapped(plen: int, line: bytes) -> bool:
    """A continuation of the same process that is a cut line rather than the next line of a multi-line
    message: the record's last line filled a terminal row, and this one is not indented or an exception."""
    return plen >= WRAP_MIN_WIDTH and line[:1] not in (b" ", b"\t") and EXC_LINE.match(line) is None


def _concat(o: _Open, line: bytes, lineno: int) -> tuple[bytes | None, int | None, bytes | None]:
    """Join a terminal-wrapped piece to the record without a line break (a wrap inserted none), then look
    for LMCache's suffix on the joined text, since the cut may have fallen inside it."""
    rec = o.rec
    glue = b" " if o.space else b""
    tail = (rec.cont[-1] if rec.cont else rec.raw) + glue + line
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
