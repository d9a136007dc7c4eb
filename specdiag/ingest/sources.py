"""Open inputs: files, folders (recursive), globs and stdin, decompressed by magic bytes.

Yields ``Source`` objects whose ``chunks()`` produce decoded text blocks that always end on a line
boundary, so nothing downstream ever holds more than one block (plus one over-long line, truncated) of a
file in memory.
"""

from __future__ import annotations

import bz2
import codecs
import fnmatch
import glob
import io
import lzma
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from specdiag.ingest.hot import HotTally
from specdiag.patterns import lazy

#: bytes per read. 4 MiB was measured 5 % faster than 1 MiB on the TP=8 shape (whole process, median of
#: five alternating pairs) for 14 MiB more peak memory: not worth the margin below the 100 MiB target
BLOCK_SIZE = 1024 * 1024
#: the largest input read a second time as message texts pasted without their headers, when nothing in it was
#: recognised (``Sequence group 3 is preempted …`` alone, as users quote a message; ``engine.analyze_group``): a
#: stream (stdin) up to this size is kept as read for that; a file is simply opened again
BARE_PASTE_MAX = 256 * 1024
#: the first read of an input; each next one twice as long, up to ``BLOCK_SIZE``. The prefilter counts the
#: records of a place unread once the analysis has read one of them (``prefilter.QuietPlaces``), but a block's
#: kinds are decided before its records reach the analysis: every record of a new place in the first block
#: is read. Small first blocks teach the places in a few hundred lines instead of ten thousand.
FIRST_BLOCK = 64 * 1024
#: physical lines longer than this are cut; the rest of the line is skipped and reported
MAX_LINE = 1024 * 1024
#: how much of a line the per-line stages parse (the cleaner cuts there); defined beside MAX_LINE so that a
#: line the reader cut gets one message naming both limits
MAX_PARSE_LINE = 64 * 1024

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}

#: decompression limits (a 1 MB gzip of zeros is 1 GB): stop reading an input once its decompressed size
#: passes ``MAX_DECOMPRESSED`` bytes, or ``MAX_RATIO`` × its compressed size once past ``RATIO_AFTER`` bytes
#: (real logs compress 10-50×, even one line repeated with changing timestamps stays under 100×; a gzip bomb
#: reaches 1,000×, xz/zstd far more). Override with SPECDIAG_MAX_DECOMPRESSED (bytes, 0 = no limit) and
#: SPECDIAG_MAX_RATIO (0 = no limit).
MAX_DECOMPRESSED = 64 * 1024**3
MAX_RATIO = 200
RATIO_AFTER = 4 * 1024**2
#: an input that gives this many bytes without one line break is not a text log (``/dev/zero``): stop
MAX_NO_NEWLINE = 64 * 1024**2


def _limit(name: str, default: int) -> int:
    from specdiag.numbers import to_int

    v = to_int(os.environ.get(name), lo=0)
    return default if v is None else v


class LimitReached(Exception):
    """Reading an input stopped at a configured limit; the message says which and how to raise it."""


LOG_SUFFIX_SKIP = {".json", ".yaml", ".yml", ".md", ".py", ".sarif", ".html", ".parquet", ".csv", ".png"}


class InputError(Exception):
    """A problem with the inputs themselves (missing file, unreadable): exit code 2."""


@dataclass
class SourceStats:
    path: str
    lines: int = 0
    recognized: int = 0
    skipped: int = 0
    bytes_read: int = 0
    formats: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    compression: str | None = None
    #: the high-volume lines the scanner only counted, and the first of each (``hot.HotTally``)
    hot: HotTally = field(default_factory=HotTally)
    #: the year ingest settled on for this input's undated (vLLM) lines, None if no line carries one
    year: int | None = None
    #: how the input ends its lines (``LineEnds``): "LF", "CRLF" or "CR"; None before the first line break
    line_ends: str | None = None
    #: bare CRs that ended a line in an LF/CRLF input: reads without an LF whose CRs became line ends, and
    #: records the per-line stages found after a CR inside a line (``cr_lines.cr_records``)
    cr_splits: int = 0
    #: recognised lines the per-line stages read only in part (cut to ``cleaner.MAX_PARSE_LINE``)
    cut_recognized: int = 0
    #: uvicorn access lines below 500 the per-line stages read (no record: the scanner counts them)
    access_lines: int = 0
    #: quiet vLLM records the prefilter counted instead of reading (``prefilter.QUIET``): recognised, analysed
    quiet: int = 0
    #: per project, records nothing recognises that the prefilter counted instead of reading
    #: (``prefilter.UNKNOWN``, ``LMC_UNKNOWN``): recognised as that project's output, their messages unrecognised
    unknown: dict[str, int] = field(default_factory=dict)
    #: a line filter read this input (``linefilter.py``): ``{"applied": "--since 16:05", "excluded_lines": N}``
    filter: dict | None = None
    #: records (and scanned rows) of deployments beyond the input group's limit, not analysed:
    #: ``{"records": N, "first": [up to 3 names], "limit": L}`` (``deployments.MAX_DEPLOYMENTS``)
    beyond_limit: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {
            "path": self.path,
            "lines": self.lines,
            "recognized": self.recognized,
            "skipped": self.skipped,
            "formats": sorted(self.formats),
            "errors": list(self.errors),
            "line_ends": self.line_ends or "LF",
        }
        if self.cr_splits:
            out["cr_line_ends"] = self.cr_splits
        if self.cut_recognized:
            out["cut_lines"] = self.cut_recognized
        if self.filter is not None:
            out["filter"] = dict(self.filter)
        if self.beyond_limit:
            out["beyond_limit"] = {**self.beyond_limit, "first": list(self.beyond_limit.get("first", ()))}
        return out


def _detect(head: bytes) -> str | None:
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


#: byte-order marks of text saved by Windows tools: PowerShell 5's ``>`` writes UTF-16LE, Notepad UTF-8 with a BOM
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class _Utf16:
    """A UTF-16 text file (``kubectl logs … > x.log`` in Windows PowerShell 5) re-encoded as UTF-8 bytes, streaming."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._dec = codecs.getincrementaldecoder("utf-16")("replace")
        self._n = 0

    def close(self) -> None:
        self._raw.close()

    def consumed(self) -> int | None:
        return self._n

    def read(self, n: int = -1) -> bytes:
        while True:
            data = self._raw.read(256 * 1024)
            self._n += len(data)
            text = self._dec.decode(data, final=not data)
            if text or not data:
                return text.encode("utf-8", "replace")


class _GzipMembers:
    """Streams concatenated gzip members (as written by log rotation tools) with zlib directly.

    A stream that ends before its end-of-stream marker raises EOFError after everything that could be
    decompressed was returned, so a truncated archive still yields its good part.
    """

    def __init__(self, raw) -> None:
        self._raw = raw
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        self._eof = False
        self._pending = b""  # compressed input not yet decompressed (``max_length`` stopped early)

    def close(self) -> None:
        self._raw.close()

    def consumed(self) -> int | None:
        """Compressed bytes actually decompressed so far (read-ahead not counted): the ratio's denominator."""
        try:
            return self._raw.tell() - len(self._pending)
        except (OSError, ValueError, AttributeError):
            return None

    def read(self, n: int = -1) -> bytes:
        """At most ``n`` (default 1 MiB) decompressed bytes: ``max_length`` keeps a bomb from expanding at once."""
        limit = n if n and n > 0 else BLOCK_SIZE
        while not self._eof:
            data = self._pending or self._raw.read(256 * 1024)
            self._pending = b""
            if not data:
                if not self._d.eof:
                    raise EOFError("compressed stream ended before the end-of-stream marker")
                self._eof = True
                break
            out = self._d.decompress(data, limit)
            self._pending = self._d.unconsumed_tail
            if self._d.eof and self._d.unused_data:  # the next gzip member (concatenated rotation output)
                self._pending = self._d.unused_data + self._pending
                self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            if out:
                return out
        return b""


class LineEnds:
    """Where a bare CR ends a line, decided per read before anything splits the read into lines.

    Everything downstream splits lines at LF only, so a CR that ends a line becomes an LF here, with
    ``bytes.replace`` (C speed, linear):

    * the input's kind is sniffed on its first read holding a line break: bare CRs and no LF, or more bare
      CRs than LFs with most of them followed by a record's first bytes, make it a CR-ended file (classic
      Mac, ``tr '\\n' '\\r'``, a collector writing CR) and every bare CR of every later read ends a line,
      so line N is the N-th CR-ended line; otherwise it is an LF (or CRLF) file (a progress bar's redraws
      are many bare CRs, each followed by the bar, not by a record);
    * in an LF file a read with no LF at all but CRs (a stretch of CR-ended lines longer than a read) has
      its CRs made line ends too; a CR inside an LF line ends it only where a record follows, which the
      per-line stages decide (``cr_lines.cr_records``); CRLF is one line end everywhere (its CR is dropped).

    A read ending in a CR holds it until the next byte is known (``\\r`` then ``\\n`` across two reads is
    CRLF). An LF read that holds an LF costs two O(1) tests: nothing is searched or copied.
    """

    __slots__ = ("kind", "held", "translated", "done")

    def __init__(self) -> None:
        self.kind: str | None = None  # "LF", "CRLF" or "CR" once sniffed
        self.held = b""  # a CR at the end of the last read, whose line end is not known yet
        self.translated = 0  # CRs made LFs in reads of an LF/CRLF file
        self.done = False  # the input ended (or failed): nothing more is read

    def convert(self, block: bytes) -> bytes:
        """``block`` with the CRs that end a line made LFs (an LF read comes back as it is)."""
        if self.held:
            block, self.held = self.held + block, b""
        if self.kind is None:
            if block[-1:] == b"\r":
                block, self.held = block[:-1], b"\r"
            return self._sniff(block)
        if self.kind == "CR":
            if block[-1:] == b"\r":
                block, self.held = block[:-1], b"\r"
            return _cr_to_lf(block)
        if b"\n" in block or b"\r" not in block:
            return block
        if block[-1:] == b"\r":  # maybe the CR of a CRLF: held until the next read
            block, self.held = block[:-1], b"\r"
        self.translated += block.count(b"\r")
        return block.replace(b"\r", b"\n")

    def _sniff(self, block: bytes) -> bytes:
        """Decide the input's line ends on its first read with a line break (undecided: as it is)."""
        lf = block.count(b"\n")
        cr = block.count(b"\r")
        if not lf and not cr:
            return block
        crlf = block.count(b"\r\n") if cr else 0
        bare = cr - crlf
        if bare and (not lf or bare > lf and 2 * sum(map(block.count, _CR_RECORD_STARTS)) > bare):
            self.kind = "CR"
            return _cr_to_lf(block)
        self.kind = "CRLF" if crlf * 2 > lf else "LF"
        return block

    def flush(self) -> bytes:
        """What is held at the end of the input: a last CR, a line end unless the file's lines end in LF."""
        held, self.held = self.held, b""
        if not held:
            return b""
        if self.kind is None:
            self.kind = "CR"
        return b"\n" if self.kind == "CR" else held


#: what follows the CR that ends a line of a CR-ended log: a record's first bytes (counted on the sniffed
#: read only; ``cr_lines._starts_record`` is the exact test)
_CR_RECORD_STARTS = (b"\r(", b"\r[", b"\r\x1b", b"\rINFO", b"\rWARN", b"\rERROR", b"\rDEBUG", b"\rCRITICAL",
                     b"\rTraceback", b"\r ")


def _cr_to_lf(block: bytes) -> bytes:
    """Every bare CR an LF; a CRLF stays one line end (its CR dropped, as the cleaner drops it anyway). The
    two-byte search runs only where an LF is (a memchr): on a CR-only read it cost more than the replace."""
    if b"\n" in block and b"\r\n" in block:
        block = block.replace(b"\r\n", b"\n")
    return block.replace(b"\r", b"\n")


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty()) and hasattr(stream, "read1")
    except (AttributeError, ValueError, OSError):
        return False


class Source:
    """One input stream (a file or stdin)."""

    def __init__(self, path: str, display: str | None = None, stream=None, *, found: bool = False,
                 error: str | None = None) -> None:
        self.path = path
        self.display = display or path
        self._stream = stream
        self.stats = SourceStats(self.display)
        #: found by a folder or glob walk: an unreadable file is an error on this input, not on the run
        self.found = found
        self._raw = None
        self._reader: _GzipMembers | None = None
        #: what a stream gave so far while it is small (``BARE_PASTE_MAX``); None for a file or a larger stream
        self._kept: bytearray | None = bytearray() if stream is not None else None
        #: a terminal typed or pasted into: one Ctrl-D ends the input (``_read_block``)
        self._interactive = stream is not None and _is_terminal(stream)
        if error:
            self.stats.errors.append(error)
            self.found = True
            self._dead = True
        else:
            self._dead = False

    def probe(self) -> None:
        """Check that a regular file can be opened (a FIFO or ``<(cmd)`` is not opened here: it can be opened
        only once, when it is read). Raises InputError for an input named on the command line; a file found
        by a walk gets the error in its ``errors`` instead, so one unreadable file does not drop its folder.
        """
        if self._stream is not None or self._dead:
            return
        try:
            if not stat.S_ISREG(os.stat(self.path).st_mode):
                return
            self._open_file().close()
        except (InputError, OSError) as e:
            err = e if isinstance(e, InputError) else InputError(f"{self.display}: {_why(e, 'cannot read')}")
            if not self.found:
                raise err from None
            self.stats.errors.append(str(err).split(": ", 1)[-1])
            self._dead = True

    def _open_raw(self):
        if self._stream is not None:
            return self._stream
        return self._open_file()

    def _open_file(self):
        try:
            fh = open(self.path, "rb")
            return fh if isinstance(fh, io.BufferedReader) else io.BufferedReader(fh)
        except FileNotFoundError as e:
            raise InputError(f"{self.display}: no such file") from e
        except IsADirectoryError as e:
            raise InputError(f"{self.display}: is a directory") from e
        except PermissionError as e:
            raise InputError(f"{self.display}: permission denied") from e
        except OSError as e:
            raise InputError(f"{self.display}: cannot open ({e.strerror or e})") from e

    def _open(self):
        raw = self._raw = self._open_raw()
        self._reader = None
        # peek never consumes: pipes, FIFOs and process substitution cannot seek back
        head = raw.peek(8)[:8] if hasattr(raw, "peek") else b""
        if head[:2] in UTF16_BOMS:
            self._reader = _Utf16(raw)
            return self._reader
        if head.startswith(UTF8_BOM):
            raw.read(len(UTF8_BOM))  # the BOM would hide the first line's envelope
            return raw
        kind = _detect(head)
        self.stats.compression = kind
        if kind == "gzip":
            self._reader = _GzipMembers(raw)
            return self._reader
        if kind == "bz2":
            return bz2.BZ2File(raw)
        if kind == "xz":
            return lzma.LZMAFile(raw)
        if kind == "zstd":
            try:
                import zstandard  # optional extra
            except ImportError as e:
                raise InputError(
                    f"{self.display}: zstd-compressed; install the 'zstandard' package (pip install zstandard)"
                ) from e
            return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return raw

    def rereadable(self) -> bool:
        """Whether the input can be read again from its start: a file, or a stream read whole and kept
        (``BARE_PASTE_MAX``)."""
        return self._stream is None or self._kept is not None

    def kept(self) -> bytes | None:
        """A stream's bytes as read, when it was small enough to keep (for :meth:`replay`)."""
        return bytes(self._kept) if self._stream is not None and self._kept is not None else None

    def replay(self, data: bytes) -> None:
        """Read ``data`` (what this stream gave the first time, :meth:`kept`) instead of the exhausted stream."""
        self._stream = io.BufferedReader(io.BytesIO(data))
        self._interactive = False

    def chunks(self) -> Iterator[bytes]:
        """Raw byte blocks ending at a newline (decoded later, per record); over-long lines cut to MAX_LINE."""
        for data, start, end in self.blocks():
            yield data if start == 0 and end == len(data) else data[start:end]

    def blocks(self) -> Iterator[tuple[bytes, int, int]]:
        """``(data, start, end)``: ``data[start:end]`` is whole lines, in order; over-long lines cut to MAX_LINE.

        Without the copies a line-aligned ``bytes`` would cost: the bytes read are handed on as they are (at
        1 GB/s those copies were as costly as scanning the lines). The line a read cuts is read again by the
        next read where the input is a plain LF file (``_rewound``), else carried and joined into a small
        block of its own.
        """
        if self._dead:
            return
        try:
            fh = self._open()
        except InputError as e:
            if not self.found:
                raise
            self.stats.errors.append(str(e))
            return
        try:
            yield from self._blocks(fh)
        finally:
            if self._stream is None:
                fh.close()

    def _blocks(self, fh) -> Iterator[tuple[bytes, int, int]]:
        carry = b""
        skipping_long = False
        guard = _Guard(self)
        ends = LineEnds()
        rewind = self._can_rewind(fh)
        size = min(FIRST_BLOCK, BLOCK_SIZE)
        while True:
            block = self._read_block(fh, guard, ends, size)
            if block is None:
                break
            size = min(2 * size, BLOCK_SIZE)
            if skipping_long:
                nl = block.find(b"\n")
                if nl < 0:
                    continue
                block = block[nl + 1 :]
                skipping_long = False
            first = 0
            if carry:
                nl = block.find(b"\n")
                if nl < 0:
                    carry += block
                    if len(carry) > MAX_LINE:
                        yield self._cut_long(carry)
                        carry, skipping_long = b"", True
                    continue
                head = carry + block[: nl + 1]
                yield head, 0, len(head)
                carry, first = b"", nl + 1
            cut = block.rfind(b"\n")
            if cut < first:  # no line break in what is left of this read
                rest = block[first:] if first else block
                if len(rest) > MAX_LINE:
                    yield self._cut_long(rest)
                    skipping_long = True
                else:
                    carry = rest
                continue
            yield block, first, cut + 1
            if rewind and self._rewound(fh, block, cut, ends):
                continue
            carry = block[cut + 1 :]
            if len(carry) > MAX_LINE:
                yield self._cut_long(carry)
                carry, skipping_long = b"", True
        if carry:
            yield carry + b"\n", 0, len(carry) + 1

    def _can_rewind(self, fh) -> bool:
        """Whether the line a read cut can be read again by the next read instead of being carried: a
        regular file read as it is (not a stream, not decompressed or re-encoded)."""
        return (self._stream is None and self._reader is None and self.stats.compression is None
                and fh is self._raw and fh.seekable())

    def _rewound(self, fh, block: bytes, cut: int, ends: LineEnds) -> bool:
        """Seek back over what follows the read's last line break, so that the next read starts with that
        line: no carry, hence no one-line block after every read (each block costs the per-block work of
        the scan and the stages; joining the carry to the next read instead cost a 1 MiB copy, more).
        Only in an LF file whose tail holds no CR (what a later read sees of it is then what this one
        saw); False, having done nothing, otherwise."""
        back = len(block) - cut - 1
        if not back or ends.kind != "LF" or ends.held or block.find(b"\r", cut + 1) >= 0:
            return False
        fh.seek(-back, io.SEEK_CUR)
        self.stats.bytes_read -= back
        return True

    def _cut_long(self, line: bytes) -> tuple[bytes, int, int]:
        self._note_long_line()
        return line[:MAX_LINE] + b"\n", 0, MAX_LINE + 1

    def _read_block(self, fh, guard: _Guard, ends: LineEnds, size: int = BLOCK_SIZE) -> bytes | None:
        """The next read (at most ``size`` bytes) with its line-ending CRs made LFs (``LineEnds``); None at
        the end, after a read error, or at a limit: each noted in ``errors``."""
        if ends.done:
            return None
        try:
            # a terminal's read(n) goes on reading past a Ctrl-D until n bytes arrive (a second Ctrl-D):
            # read1 returns what one read gave, so one Ctrl-D on an empty line is the end
            block = fh.read1(size) if self._interactive and fh is self._raw else fh.read(size)
            if self._kept is not None:
                if len(self._kept) + len(block) <= BARE_PASTE_MAX:
                    self._kept += block
                else:
                    self._kept = None
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
            kind = self.stats.compression or "file"
            self.stats.errors.append(
                f"{kind} stream is damaged or truncated after {self.stats.bytes_read} bytes "
                f"({e}); analysed what could be read"
            )
            return self._last_of(ends)
        if not block:
            return self._last_of(ends)
        self.stats.bytes_read += len(block)
        block = ends.convert(block)
        self.stats.line_ends = ends.kind
        self.stats.cr_splits += ends.translated
        ends.translated = 0
        try:
            guard.check(block)
        except LimitReached as e:
            self.stats.errors.append(str(e))
            return None
        return block

    def _last_of(self, ends: LineEnds) -> bytes | None:
        """The end of the input: a CR ``ends`` still held (a line end in a CR file), else None."""
        last = ends.flush()
        ends.done = True
        self.stats.line_ends = ends.kind
        return last or None

    def compressed_bytes(self) -> int | None:
        """Compressed bytes consumed so far (None where the stream cannot tell, e.g. a pipe)."""
        if self._reader is not None:
            return self._reader.consumed()
        try:
            return self._raw.tell()
        except (OSError, ValueError, AttributeError):
            return None

    def _note_long_line(self) -> None:
        if len(self.stats.errors) < 20:
            self.stats.errors.append(f"a line longer than {MAX_LINE // 1024} KiB was cut at that length (and "
                                     f"parsed in its first {MAX_PARSE_LINE // 1024} KiB)")



class _Guard:
    """The limits of one input: decompressed size and ratio, and bytes without a line break."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.max_total = _limit("SPECDIAG_MAX_DECOMPRESSED", MAX_DECOMPRESSED)
        self.max_ratio = _limit("SPECDIAG_MAX_RATIO", MAX_RATIO)
        self.no_newline = 0

    def check(self, block: bytes) -> None:
        """Raise LimitReached when this block takes the input past a limit."""
        src, n = self.src, self.src.stats.bytes_read
        self.no_newline = self.no_newline + len(block) if b"\n" not in block else 0
        if self.no_newline > MAX_NO_NEWLINE:
            raise LimitReached(f"stopped after {n:,} bytes: {MAX_NO_NEWLINE // 1024**2} MiB without a line "
                               "break is not a text log")
        if src.stats.compression is None:
            return
        if self.max_total and n > self.max_total:
            raise LimitReached(f"stopped at the decompression limit ({self.max_total:,} bytes; raise it with "
                               "SPECDIAG_MAX_DECOMPRESSED=BYTES, 0 for none)")
        if self.max_ratio and n > RATIO_AFTER:
            packed = src.compressed_bytes()
            if packed and n > self.max_ratio * packed:
                raise LimitReached(f"stopped after {n:,} decompressed bytes from {packed:,} compressed: more "
                                   f"than {self.max_ratio}x looks like a decompression bomb (raise it with "
                                   "SPECDIAG_MAX_RATIO=N, 0 for none)")


def is_probably_log(path: str) -> bool:
    base = os.path.basename(path)
    if base.startswith("."):
        return False
    _, ext = os.path.splitext(base)
    return ext.lower() not in LOG_SUFFIX_SKIP


_ROTATED = lazy(r"^(?P<base>.+?)(?:[.-](?P<n>\d{1,3}))?(?P<z>\.(?:gz|bz2|xz|zst))?$")


def _chronological(sources: list[Source]) -> list[Source]:
    """Rotated siblings (``serve.log.2.gz``, ``serve.log.1``, ``serve.log``) oldest first, as logrotate numbers
    them (a higher number is older); everything else keeps its order."""
    def key(item: tuple[int, Source]):
        i, src = item
        if src.path == "-":
            return (src.path, 0, i)
        m = _ROTATED.match(src.path)
        base, n = (m.group("base"), int(m.group("n"))) if m and m.group("n") else (src.path, 0)
        return (base, -n, i)

    groups: dict[str, int] = {}
    for i, src in enumerate(sources):
        groups.setdefault(key((i, src))[0], i)  # a set keeps the position of its first member
    return [s for _, s in sorted(enumerate(sources), key=lambda it: (groups[key(it)[0]], key(it)[1], it[0]))]


class _Walk:
    """Folder and glob walks that follow symbolic links but never a loop, never give one file twice (by device
    and inode), and turn an unreadable folder or a broken link into an input with that error — not a lost
    folder, not a traceback."""

    def __init__(self) -> None:
        self.files: set[tuple[int, int]] = set()
        self.out: list[Source] = []
        self.matched = 0  # files matched, also those already listed

    def add_file(self, path: str, *, found: bool) -> None:
        try:
            st = os.stat(path)
        except OSError as e:
            self.out.append(Source(path, found=True, error=_why(e, "cannot read")))
            return
        self.matched += 1
        key = (st.st_dev, st.st_ino)
        if key in self.files:
            return
        self.files.add(key)
        self.out.append(Source(path, found=found))

    def _listdir(self, path: str) -> list[os.DirEntry] | None:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError as e:
            self.out.append(Source(path, found=True, error=_why(e, "cannot read this folder")))
            return None

    def folder(self, root: str, ancestors: frozenset = frozenset()) -> None:
        """Every probable log below ``root`` (sorted, hidden entries skipped)."""
        try:
            st = os.stat(root)
        except OSError as e:
            self.out.append(Source(root, found=True, error=_why(e, "cannot read this folder")))
            return
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            return  # a symbolic link back up the tree
        entries = self._listdir(root)
        if entries is None:
            return
        below = ancestors | {key}
        subdirs = []
        for e in entries:
            if e.name.startswith("."):
                continue
            full = os.path.join(root, e.name)
            if _is_dir(e):
                subdirs.append(full)
            elif e.is_symlink() and not os.path.exists(full):
                self.out.append(Source(full, found=True, error="broken symbolic link"))
            elif is_probably_log(full) and _is_file(e):
                self.add_file(full, found=True)
        for d in subdirs:
            self.folder(d, below)

    def glob(self, pattern: str) -> None:
        """``*``/``?``/``[]`` per path part and ``**`` for any depth (links followed, loops cut)."""
        parts = pattern.split(os.sep)
        base = ""
        if pattern.startswith(os.sep):
            base, parts = os.sep, parts[1:]
        while len(parts) > 1 and not glob.has_magic(parts[0]):
            base, parts = os.path.join(base, parts[0]) if base else parts[0], parts[1:]
        self._glob(base, parts, frozenset())

    def _glob(self, base: str, parts: list[str], ancestors: frozenset) -> None:
        here = base or "."
        if not parts:
            if os.path.isfile(here):
                self.add_file(base, found=True)
            return
        part, rest = parts[0], parts[1:]
        if not glob.has_magic(part):
            if part == "" or os.path.lexists(os.path.join(here, part)):
                self._glob(os.path.join(base, part) if base else part, rest, ancestors)
            return
        if part == "**":
            try:
                st = os.stat(here)
            except OSError:
                return
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                return  # a symbolic link back up the tree
            self._glob(base, rest, ancestors)  # zero folders
            for e in self._listdir(here) or []:
                if not e.name.startswith(".") and _is_dir(e):
                    self._glob(os.path.join(base, e.name) if base else e.name, parts, ancestors | {key})
            return
        if not os.path.isdir(here):
            return
        for e in self._listdir(here) or []:
            if e.name.startswith(".") and not part.startswith("."):
                continue
            if fnmatch.fnmatchcase(e.name, part) and (not rest or _is_dir(e)):
                self._glob(os.path.join(base, e.name) if base else e.name, rest, ancestors)


def _is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()  # follows a symbolic link; loops are cut by the caller
    except OSError:
        return False


def _is_file(e: os.DirEntry) -> bool:
    try:
        return e.is_file()
    except OSError:
        return False


def _why(e: OSError, what: str) -> str:
    return f"{what} ({e.strerror or e})"


def expand_inputs(paths: list[str], stdin_name: str = "-") -> list[Source]:
    """Files, folders (recursively, sorted), globs and ``-`` → Sources. Raises InputError.

    Folders and globs follow symbolic links without looping and give each file once; what they cannot
    read becomes an input with an error. A file named on the command line that is missing is an error.
    """
    walk = _Walk()
    for p in paths:
        if p == "-":
            walk.out.append(Source("-", stdin_name, stream=sys.stdin.buffer))
            continue
        if os.path.isdir(p):
            n, m = len(walk.out), walk.matched
            walk.folder(p)
            if len(walk.out) == n and walk.matched == m:
                raise InputError(f"{p}: folder contains no log files")
            continue
        if not os.path.exists(p) and glob.has_magic(p):
            n, m = len(walk.out), walk.matched
            walk.glob(p)
            if len(walk.out) == n and walk.matched == m:
                raise InputError(f"{p}: pattern matches no file")
            continue
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file or directory")
        walk.add_file(p, found=False)
    return _chronological(walk.out)
