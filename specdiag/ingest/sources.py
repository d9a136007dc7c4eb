"""Open inputs: files, folders (recursive), globs and stdin, decompressed by magic bytes.

Yields ``Source`` objects whose ``chunks()`` produce decoded text blocks that always end on a line
boundary, so nothing downstream ever holds more than one block (plus one over-long line, truncated) of a
file in memory.
"""

from __future__ import annotations

import bz2
import glob
import lzma
import os
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

BLOCK_SIZE = 1024 * 1024
#: physical lines longer than this are cut; the rest of the line is skipped and reported
MAX_LINE = 1024 * 1024

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}

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
    #: high-volume records that were only counted: {template id: n}
    hot_counts: dict = field(default_factory=dict)
    #: the first such record of each template id
    hot_first: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "lines": self.lines,
            "recognized": self.recognized,
            "skipped": self.skipped,
            "formats": sorted(self.formats),
            "errors": list(self.errors),
        }


def _detect(head: bytes) -> str | None:
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


class _GzipMembers:
    """Streams concatenated gzip members (as written by log rotation tools) with zlib directly.

    A stream that ends before its end-of-stream marker raises EOFError after everything that could be
    decompressed was returned, so a truncated archive still yields its good part.
    """

    def __init__(self, raw) -> None:
        self._raw = raw
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        self._eof = False

    def close(self) -> None:
        self._raw.close()

    def read(self, n: int = -1) -> bytes:
        while not self._eof:
            data = self._raw.read(256 * 1024)
            if not data:
                if not self._d.eof:
                    raise EOFError("compressed stream ended before the end-of-stream marker")
                self._eof = True
                break
            out = self._d.decompress(data)
            while self._d.eof and self._d.unused_data:
                rest = self._d.unused_data
                self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)
                out += self._d.decompress(rest)
            if out:
                return out
        return b""


class Source:
    """One input stream (a file or stdin)."""

    def __init__(self, path: str, display: str | None = None, stream=None) -> None:
        self.path = path
        self.display = display or path
        self._stream = stream
        self.stats = SourceStats(self.display)

    def _open_raw(self):
        if self._stream is not None:
            return self._stream
        try:
            return open(self.path, "rb")
        except FileNotFoundError as e:
            raise InputError(f"{self.display}: no such file") from e
        except IsADirectoryError as e:
            raise InputError(f"{self.display}: is a directory") from e
        except PermissionError as e:
            raise InputError(f"{self.display}: permission denied") from e
        except OSError as e:
            raise InputError(f"{self.display}: cannot open ({e.strerror or e})") from e

    def _open(self):
        raw = self._open_raw()
        head = raw.peek(8)[:8] if hasattr(raw, "peek") else b""
        if not head and self._stream is None:
            head = raw.read(8)
            raw.seek(0)
        kind = _detect(head)
        self.stats.compression = kind
        if kind == "gzip":
            return _GzipMembers(raw)
        if kind == "bz2":
            return bz2.BZ2File(raw)
        if kind == "xz":
            return lzma.LZMAFile(raw)
        if kind == "zstd":
            try:
                import zstandard  # optional extra
            except ImportError as e:
                raise InputError(
                    f"{self.display}: zstd-compressed; install the 'zstandard' package (pip install 'specdiag-vllm[zstd]')"
                ) from e
            return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return raw

    def chunks(self) -> Iterator[bytes]:
        """Raw byte blocks ending at a newline (decoded later, per record); over-long lines cut to MAX_LINE."""
        fh = self._open()
        carry = b""
        skipping_long = False
        try:
            while True:
                try:
                    block = fh.read(BLOCK_SIZE)
                except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
                    kind = self.stats.compression or "file"
                    self.stats.errors.append(
                        f"{kind} stream is damaged or truncated after {self.stats.bytes_read} bytes "
                        f"({e}); analysed what could be read"
                    )
                    break
                if not block:
                    break
                self.stats.bytes_read += len(block)
                if skipping_long:
                    nl = block.find(b"\n")
                    if nl < 0:
                        continue
                    block = block[nl + 1 :]
                    skipping_long = False
                data = carry + block if carry else block
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) > MAX_LINE:
                        yield data[:MAX_LINE] + b"\n"
                        self._note_long_line()
                        carry = b""
                        skipping_long = True
                    else:
                        carry = data
                    continue
                carry = data[cut + 1 :]
                if len(carry) > MAX_LINE:
                    yield data[: cut + 1]
                    yield carry[:MAX_LINE] + b"\n"
                    self._note_long_line()
                    carry = b""
                    skipping_long = True
                    continue
                yield data[: cut + 1]
            if carry:
                yield carry + b"\n"
        finally:
            if self._stream is None:
                fh.close()

    def _note_long_line(self) -> None:
        if len(self.stats.errors) < 20:
            self.stats.errors.append(f"a line longer than {MAX_LINE // 1024} KiB was cut at that length")



def _is_probably_log(path: str) -> bool:
    base = os.path.basename(path)
    if base.startswith("."):
        return False
    _, ext = os.path.splitext(base)
    return ext.lower() not in LOG_SUFFIX_SKIP


_ROTATED = re.compile(r"^(?P<base>.+?)(?:[.-](?P<n>\d{1,3}))?(?P<z>\.(?:gz|bz2|xz|zst))?$")


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


def expand_inputs(paths: list[str], stdin_name: str = "-") -> list[Source]:
    """Files, folders (recursively, sorted), globs and ``-`` → Sources. Raises InputError."""
    sources: list[Source] = []
    for p in paths:
        if p == "-":
            sources.append(Source("-", stdin_name, stream=sys.stdin.buffer))
            continue
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for f in sorted(files):
                    full = os.path.join(root, f)
                    if _is_probably_log(full) and os.path.isfile(full):
                        found.append(full)
            if not found:
                raise InputError(f"{p}: folder contains no log files")
            sources.extend(Source(f) for f in found)
            continue
        if not os.path.exists(p) and any(ch in p for ch in "*?["):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError(f"{p}: pattern matches no file")
            sources.extend(Source(m) for m in matches)
            continue
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file or directory")
        sources.append(Source(p))
    return _chronological(sources)
