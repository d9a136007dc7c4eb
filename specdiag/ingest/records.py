"""Physical lines → logical records.

For every line: strip the collector wrapper, ANSI colour (also the ESC-less residue) and CR; peel the
vLLM process prefixes into an Origin; recognise the logger envelope (LMCache's formatter, its legacy
form, vLLM's formatter of every era, uvicorn); and join continuation lines (multi-line LMCache messages,
raw Python tracebacks, hard-wrapped dumps) into one record. Knows nothing about KV caches.

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
from specdiag.ingest.wrappers import Unwrapper
from specdiag.numbers import to_int

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
HOT_LINE = re.compile(rb"\] LMCache INFO:\S* (?:\[req_id=[^\]]*\] )?(?:Stored|Retrieved) \d")
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

    __slots__ = ("rec", "mode", "chars")

    def __init__(self, rec: Record, mode: str) -> None:
        self.rec = rec
        self.mode = mode  # 'lmcache' (until suffix) | 'traceback' | 'wrap' (hard-wrapped dump)
        self.chars = len(rec.raw)


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
        self.unwrap: Unwrapper | None = None

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
            clean = _clean_chunk(line)
            if self.unwrap:
                clean = _clean_chunk(self.unwrap.strip(clean.decode("utf-8", "replace"))[0].encode("utf-8"))
            origin, rest = self.origins.peel(clean) if clean[:1] == b"(" else (NO_ORIGIN, clean)
            if origin.key != origin_key or not rest.startswith(b"] LMCache ", 24):
                continue
            return record_from_hot((self.path, n, origin, rest, self.year))
        return None


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
    open_recs: dict[str, _Open] = {}
    unwrap: Unwrapper | None = None
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
        lines = chunk.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        base = lineno
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
                                first = _clean_chunk(ln)
                                origin, rest = peel(first) if first[:1] == b"(" else (NO_ORIGIN, first)
                                hot_first[tid] = (path, base + i + 1, origin, rest, year_hint)
                                break
        else:
            kept = enumerate(lines)
        # colours (also the residue left when a collector dropped the ESC byte) and CRs, per kept line;
        # line numbers stay those of '\n' (as grep -n and editors count)
        esc = b"\x1b" in chunk
        residue = not esc and (b"[0m" in chunk or b"[0;0m" in chunk or b";20m" in chunk or b"[1;36m" in chunk)
        cr = b"\r" in chunk
        if unwrap is None:
            unwrap = Unwrapper([_clean_chunk(ln).decode("utf-8", "replace") for ln in lines[:400]])
            if unwrap:
                formats.update(unwrap.names)
                if window is not None:
                    window.unwrap = unwrap
        unwrapping = bool(unwrap)
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
            if unwrapping:
                text, y = unwrap.strip(line.decode("utf-8", "replace"))
                line = _clean_chunk(text.encode("utf-8"))
                if y:
                    year_hint = y
            if line[:1] == b"(":
                origin, line = peel(line)
            else:
                origin = NO_ORIGIN
            okey = origin.key
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
                        year_hint = int(y)
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
                        open_recs[okey] = _Open(rec, "lmcache")
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
                    else:
                        yield rec
                    continue
            # ---- continuation of an open record ------------------------------------------------
            if open_recs:
                o = open_recs.get(okey)
                if o is not None:
                    rec = o.rec
                    if o.mode == "lmcache":
                        body, file, src_line, logger = split_suffix(line)
                        _append(o, body, lineno)
                        recognized += 1
                        if file is not None:
                            rec._file, rec.src_line, rec._logger = file, src_line, logger
                            yield close(okey)
                        elif o.chars > MAX_JOIN_CHARS or len(rec.cont) > MAX_JOIN_LINES:
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
            if line.startswith(b"Traceback (most recent call last)"):
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
            if origin is not NO_ORIGIN:
                recognized += 1  # a vLLM process prefix: vLLM output even without a logger header
            # raw text: keep only what may matter (exceptions, banners, versions)
            if EXC_LINE.match(line) or b"Error" in line or b"LMCache v" in line or b"version" in line[:80]:
                yield Record(path, lineno, origin, "text", "", None, year_hint, None, None, None, line)
        lineno = base + len(lines)
    for key in list(open_recs):
        rec = close(key)
        if rec is not None:
            yield rec
    stats.lines = lineno
    stats.recognized = recognized
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
