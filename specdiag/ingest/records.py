"""Physical lines → logical records.

For every line: strip the collector wrapper, ANSI colour (also the ESC-less residue) and CR; peel the
vLLM process prefixes into an Origin; recognise the logger envelope (LMCache's formatter, its legacy
form, vLLM's formatter of every era, uvicorn); and join continuation lines (multi-line LMCache messages,
raw Python tracebacks, hard-wrapped dumps) into one record. Knows nothing about KV caches.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from specdiag.ingest.origin import NO_ORIGIN, Origin, OriginCache
from specdiag.ingest.sources import Source
from specdiag.ingest.wrappers import ANSI_RE, Unwrapper

VLLM_LEVELS = {"INFO": "INFO", "WARNING": "WARNING", "ERROR": "ERROR", "DEBUG": "DEBUG", "CRITICAL": "CRITICAL", "WARN": "WARNING"}
VLLM_REST = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?([^\]:\s]+?):(\d+)\] ?(.*)", re.S)
LMC_SUFFIX = re.compile(r" \(([\w.\-]+\.py):(\d+):([\w.]+)\)\s*$")
LMC_LEGACY = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) LMCache: (.*) \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] -- (\S+\.py):(\d+)$"
)
EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)")
MAX_JOIN_LINES = 400
#: a logical line longer than this is cut before parsing (no vLLM/LMCache record is anywhere near it)
MAX_PARSE_LINE = 64 * 1024
MAX_JOIN_CHARS = 256 * 1024


class Record:
    """One logical log record. ``ts`` is the raw timestamp text; ``year`` the inferred year for vLLM."""

    __slots__ = (
        "path", "line", "end_line", "origin", "kind", "level", "ts", "year",
        "file", "src_line", "logger", "msg", "cont",
    )

    def __init__(self, path: str, line: int, origin: Origin, kind: str, level: str, ts: str | None,
                 year: int | None, file: str | None, src_line: int | None, logger: str | None, msg: str) -> None:
        self.path = path
        self.line = line
        self.end_line = line
        self.origin = origin
        self.kind = kind
        self.level = level
        self.ts = ts
        self.year = year
        self.file = file
        self.src_line = src_line
        self.logger = logger
        self.msg = msg
        self.cont: list[str] | None = None

    @property
    def location(self) -> str | None:
        return f"{self.file}:{self.src_line}" if self.file else None

    @property
    def text(self) -> str:
        """Message plus continuation lines."""
        if self.cont:
            return self.msg + "\n" + "\n".join(self.cont)
        return self.msg

    def display(self) -> str:
        """A one-line rendering for evidence: prefix, level and message (no colour)."""
        who = f"({self.origin.proc} pid={self.origin.pid}) " if self.origin.pid is not None else ""
        if self.kind == "lmcache":
            loc = f" ({self.file}:{self.src_line}:{self.logger})" if self.file else ""
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
        self.chars = len(rec.msg)


def iter_records(source: Source) -> Iterator[Record]:
    """Yield the records of one input, updating ``source.stats``. Never raises on bad content."""
    stats = source.stats
    path = source.display
    origins = OriginCache()
    open_recs: dict[str, _Open] = {}
    unwrap: Unwrapper | None = None
    year_hint: int | None = None
    last_month = 0
    lineno = 0
    recognized = 0
    skipped = 0
    formats = stats.formats

    def close(key: str) -> Record | None:
        o = open_recs.pop(key, None)
        return o.rec if o else None

    for chunk in source.chunks():
        # colour codes (also the residue left when a collector dropped the ESC byte) and CRs go first,
        # on the whole block, at C speed; line numbers stay those of '\n' (as grep -n and editors count)
        if "\x1b" in chunk:
            chunk = chunk.replace("\x1b", "")
        chunk = ANSI_RE.sub("", chunk)
        if "\r" in chunk:
            chunk = chunk.replace("\r", "")
        lines = chunk.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if unwrap is None:
            unwrap = Unwrapper(lines[:400])
            if unwrap:
                formats.update(unwrap.names)
        for raw in lines:
            lineno += 1
            if not raw:
                continue
            if "\x00" in raw or "\ufffd" in raw and _mostly_binary(raw):
                skipped += 1
                continue
            if len(raw) > MAX_PARSE_LINE:
                if len(stats.errors) < 20:
                    stats.errors.append(f"line {lineno}: {len(raw):,} characters long, cut to {MAX_PARSE_LINE:,} for parsing")
                raw = raw[:MAX_PARSE_LINE]
            line = raw
            if unwrap:
                line, y = unwrap.strip(line)
                if y:
                    year_hint = y
            if line.startswith("("):
                origin, line = origins.peel(line)
            else:
                origin = NO_ORIGIN
            okey = origin.key
            # ---- LMCache formatter -------------------------------------------------------------
            if line.startswith("[") and line.startswith("] LMCache ", 24):
                colon = line.find(":", 34)
                if colon > 0:
                    level = line[34:colon].strip()
                    msg = line[colon + 2 :] if line.startswith(" ", colon + 1) else line[colon + 1 :]
                    ts = line[1:24]
                    try:
                        year_hint = int(ts[:4])
                    except ValueError:
                        pass
                    file = src_line = logger = None
                    complete = True
                    if msg.endswith(")"):
                        m = LMC_SUFFIX.search(msg)
                        if m:
                            file, src_line, logger = m.group(1), int(m.group(2)), m.group(3)
                            msg = msg[: m.start()]
                        else:
                            complete = False
                    else:
                        msg = msg.rstrip()
                        if msg.endswith(")"):
                            m = LMC_SUFFIX.search(msg)
                            if m:
                                file, src_line, logger = m.group(1), int(m.group(2)), m.group(3)
                                msg = msg[: m.start()]
                            else:
                                complete = False
                        else:
                            complete = False
                    if level == "WARN":
                        level = "WARNING"
                    prev = close(okey)
                    if prev is not None:
                        yield prev
                    rec = Record(path, lineno, origin, "lmcache", level, ts, None, file, src_line, logger, msg)
                    recognized += 1
                    formats.add("lmcache")
                    if complete:
                        yield rec
                    else:
                        open_recs[okey] = _Open(rec, "lmcache")
                    continue
            # ---- vLLM formatter ----------------------------------------------------------------
            sp = line.find(" ")
            lvl = VLLM_LEVELS.get(line[:sp]) if 3 < sp < 9 else None
            if lvl is not None:
                m = VLLM_REST.match(line, sp + 1)
                if m:
                    ts = m.group(1)
                    month = int(ts[:2])
                    if year_hint and last_month == 12 and month == 1:
                        year_hint += 1
                    last_month = month
                    prev = close(okey)
                    if prev is not None:
                        yield prev
                    msg = m.group(4)
                    rec = Record(path, lineno, origin, "vllm", lvl, ts, year_hint, m.group(2), int(m.group(3)), None, msg)
                    recognized += 1
                    formats.add("vllm")
                    if _opens_wrap(msg):
                        open_recs[okey] = _Open(rec, "wrap")
                    else:
                        yield rec
                    continue
            # ---- continuation of an open record ------------------------------------------------
            o = open_recs.get(okey)
            if o is not None:
                rec = o.rec
                if o.mode == "lmcache":
                    m = LMC_SUFFIX.search(line) if line.rstrip().endswith(")") else None
                    _append(o, line if m is None else line[: m.start()], lineno)
                    recognized += 1
                    if m:
                        rec.file, rec.src_line, rec.logger = m.group(1), int(m.group(2)), m.group(3)
                        yield close(okey)
                    elif o.chars > MAX_JOIN_CHARS or len(rec.cont) > MAX_JOIN_LINES:
                        yield close(okey)
                    continue
                if o.mode == "traceback":
                    if (not line.strip() or line.startswith((" ", "\t", "Traceback", "During handling",
                                                             "The above exception")) or EXC_LINE.match(line)):
                        _append(o, line, lineno)
                        recognized += 1
                        continue
                    yield close(okey)
                elif o.mode == "wrap":
                    _append(o, line, lineno)
                    recognized += 1
                    if not _opens_wrap(rec.text) or o.chars > MAX_JOIN_CHARS:
                        yield close(okey)
                    continue
            # ---- other recognisable lines ------------------------------------------------------
            if line.startswith("Traceback (most recent call last)"):
                prev = close(okey)
                if prev is not None:
                    yield prev
                rec = Record(path, lineno, origin, "traceback", "ERROR", None, year_hint, None, None, None, line)
                open_recs[okey] = _Open(rec, "traceback")
                recognized += 1
                continue
            if line.startswith("INFO:") or line.startswith(("WARNING:", "ERROR:")) and "HTTP/" in line:
                recognized += 1
                formats.add("uvicorn")
                if '" 5' in line or line.startswith("ERROR:"):
                    yield Record(path, lineno, origin, "uvicorn", "INFO", None, year_hint, None, None, None, line)
                continue
            if line.startswith("[") and " LMCache" in line[:40] or "LMCache:" in line[:16]:
                m = LMC_LEGACY.match(line)
                if m:
                    recognized += 1
                    formats.add("lmcache")
                    yield Record(path, lineno, origin, "lmcache", m.group(1), m.group(3), None,
                                 m.group(4).rsplit("/", 1)[-1], int(m.group(5)), None, m.group(2))
                    continue
            if origin is not NO_ORIGIN:
                recognized += 1  # a vLLM process prefix: vLLM output even without a logger header
            # raw text: keep only what may matter (exceptions, banners)
            if EXC_LINE.match(line) or "Error" in line or "LMCache v" in line or "version" in line[:60]:
                yield Record(path, lineno, origin, "text", "", None, year_hint, None, None, None, line)
    for key in list(open_recs):
        rec = close(key)
        if rec is not None:
            yield rec
    stats.lines = lineno
    stats.recognized = recognized
    stats.skipped += skipped
    if skipped and len(stats.errors) < 21:
        stats.errors.append(f"{skipped} line(s) skipped: binary data or NUL bytes")


def _append(o: _Open, text: str, lineno: int) -> None:
    rec = o.rec
    if rec.cont is None:
        rec.cont = []
    rec.cont.append(text)
    rec.end_line = lineno
    o.chars += len(text)


def _opens_wrap(msg: str) -> bool:
    """A config dump hard-wrapped by a paste: brackets still open at the end of the line."""
    if len(msg) < 20 or not (msg.startswith("Initializing a V1 LLM engine") or msg.startswith("non-default args")):
        return False
    return msg.count("{") > msg.count("}") or msg.count("(") > msg.count(")")


def _mostly_binary(s: str) -> bool:
    bad = s.count("\ufffd")
    return bad > 8 and bad * 4 > len(s)
