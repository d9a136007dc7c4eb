"""Scan ahead: the blocks of one input with their scan results, optionally scanned on other threads.

The compiled scanner releases the GIL, so threads that scan blocks N+1… while this thread reads and runs
the per-line stages and the observers on block N can use other cores for the byte work. At most
``DEPTH + threads`` blocks are in flight, so memory stays that of a few blocks; results arrive in file
order. The Python scanner holds the GIL, so without the compiled one threads would only add switching:
``scan_ahead`` then runs inline. The engine asks for one thread when ``-j`` leaves a core to spare
(``engine.scan_threads``): on the 2-vCPU machines measured here the TP=8 shape then runs 1.15–1.6× faster
than on one thread (``docs/benchmark.md``, 2026-12-04 evening).

Without the compiled scanner the scan is three quarters of the run, so there it goes to worker
*processes* instead (``processes``; the engine asks for one per ``-j`` job; ``scan_workers.py``): the blocks
travel to them through shared memory and their results come back in file order, so the records are the
same. An input of fewer than ``PROCESS_AFTER`` blocks never starts them; a pool that breaks (a worker
killed) leaves the rest of the input to this process.
"""

from __future__ import annotations

import functools
import os
import re
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol

from specdiag.ingest import prefilter, scan
from specdiag.ingest.cleaner import colour_of
from specdiag.ingest.marks import first_among_rare
from specdiag.ingest.scan import ScanResult, scan_range
from specdiag.ingest.wrappers import (
    CRI_TAGS,
    ISO_TS,
    JOURNALD_SHORT,
    KUBECTL_PREFIX,
    STERN,
    is_envelope,
    json_line,
)
from specdiag.patterns import lazy

#: blocks scanned ahead of the consumer, beyond one per thread
DEPTH = 2
#: blocks scanned in this process before worker processes start: a small input never pays their start
PROCESS_AFTER = 4
#: go on scanning here while the workers start (False: wait for them; what tests use to be sure they work)
SCAN_WHILE_STARTING = True
#: ``(data, start, end, result, unwrapped)``: ``unwrapped`` is the copy of ``data[start:end]`` the result's
#: offsets refer to when the block's timestamps were taken off for the scanner (else None: ``data`` itself)
Item = tuple[bytes, int, int, "ScanResult | None", "bytes | None"]
#: kubectl / docker ``--timestamps`` at a line's start: ``wrappers.ISO_TS``, anchored at each line start, and
#: the CRI format's stream and tag after it (``wrappers.CRI_TAGS``)
_ISO_TIME = rb"(?m)^" + ISO_TS.pattern
_CRI_TAG = rb"(?:" + b"|".join(re.escape(tag) for tag in CRI_TAGS) + rb")"
_ISO_FRONT = lazy(_ISO_TIME + _CRI_TAG + rb"?")
_CRI_FRONT = lazy(_ISO_TIME + _CRI_TAG)
#: the same at one line's start (``iso_fronts_reference`` measures each line with it)
_ISO_ONE = lazy(ISO_TS.pattern + _CRI_TAG + rb"?")

try:  # the compiled copies: each line read once, no regex
    from specdiag.ingest._scan import docker_texts as _compiled_docker_texts
    from specdiag.ingest._scan import iso_fronts as _compiled_iso_fronts
except ImportError:  # pragma: no cover - exercised by the build without a compiler
    _compiled_docker_texts = _compiled_iso_fronts = None


def iso_fronts_reference(data: bytes, start: int, end: int) -> tuple[bytes, array]:
    """``data[start:end]`` without the timestamp (and CRI stream and tag) at each line's start, and the width
    taken off each line: the reference of ``_scan.iso_fronts``."""
    block = data[start:end]
    lines = block.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the block's last line end, or an empty block
    widths = array("q", [m.end() if (m := _ISO_ONE.match(x)) is not None else 0 for x in lines])
    return _ISO_FRONT.sub(b"", block), widths


def iso_fronts(data: bytes, start: int, end: int) -> tuple[bytes, array]:
    """:func:`iso_fronts_reference`, by the compiled copy where it was built."""
    if _compiled_iso_fronts is None:
        return iso_fronts_reference(data, start, end)
    copy, raw = _compiled_iso_fronts(data, start, end)
    widths = array("q")
    widths.frombytes(raw)
    return copy, widths


def holds_cri(data: bytes, start: int, end: int) -> bool:
    """Whether a line of ``data[start:end]`` (``start`` a line's start) carries the CRI format's stream and tag
    after its time (the per-line stages note the format when they take one off)."""
    if data.find(b" stdout ", start, end) < 0 and data.find(b" stderr ", start, end) < 0:
        return False
    return _CRI_FRONT.search(data, start, end) is not None


class Pending(Protocol):
    """A scan under way: a thread pool's ``Future`` or a worker pool's ``scan_workers.Ticket``."""

    def result(self) -> tuple[ScanResult, bytes | None]: ...

    def cancel(self) -> bool: ...


#: ``SPECDIAG_SCAN_WRAPPED=off`` leaves blocks of kubectl ``--prefix``, journald and docker json-file lines to the
#: per-line stages (the differential tests compare whole analyses both ways)
SCAN_WRAPPED = os.environ.get("SPECDIAG_SCAN_WRAPPED", "on").strip().lower() != "off"


def unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """``data[start:end]`` without the wrapper every one of its lines carries, for the scanner; None when the
    block's first line carries none (a block is taken as it starts: a wrapper that begins mid-block leaves
    that block to the per-line stages, which unwrap every line). Wrappers taken off:

    * kubectl / docker ``--timestamps``, on the lines that carry them (what follows is read as the rest of
      the line, as ``LineUnwrapper`` reads it: a journald ``short-iso`` host is a wrapper of its own there,
      and no line starting with one is hot);
    * docker's json-file lines (``{"log":"…\\n","stream":"stdout","time":"…"}``), only where every line of the
      block is one whose text holds no JSON escape but the few :data:`_DOCKER_ESCAPES` (the text is then
      exactly the copy's line; its colour is the scanner's to take off, as in any log);
    * kubectl ``--prefix`` (``[pod/name/container] ``) and journald ``short`` (``Mmm dd HH:MM:SS host
      ident[pid]: ``, C locale), only where every line of the block carries the same one: such a wrapper
      names a deployment (``wrappers.LineUnwrapper``), and a block's scanned rows must be of one
      (``blocks.scanned_block`` tells the analysis which before them).

    Each line keeps its place (only a prefix of it goes), so line numbers stay; the per-line stages still
    read the original lines (the wrapper's year, format and name are theirs to note)."""
    c = data[start]
    if 48 <= c <= 57:
        if not (data[start + 4 : start + 5] == b"-" and data[start + 10 : start + 11] == b"T"):
            return None
        copy = iso_fronts(data, start, end)[0]
        return copy if len(copy) != end - start else None
    if not SCAN_WRAPPED:
        return None
    if c == 91:
        return _pod_unwrapped(data, start, end)
    if 65 <= c <= 90:
        return _journald_unwrapped(data, start, end)
    if c == 123:
        return _docker_unwrapped(data, start, end) or _export_unwrapped(data, start, end)
    if 97 <= c <= 122:
        return _stern_unwrapped(data, start, end)
    return None


#: journald ``short`` / ``short-precise`` in the C locale: the part of its wrapper that changes line by line
_JOURNALD_TIME = rb"[A-Z][a-z][a-z] [ 0-3]\d [0-2]\d:[0-5]\d:[0-5]\d"
_JOURNALD_TIME_RE = lazy(_JOURNALD_TIME + rb"(?:\.\d{1,9})?")
_JOURNALD_SECONDS = len(b"Jan  1 00:00:00")  # the time up to its seconds: then ``.`` and the fraction's digits


def _lines_in(block: bytes) -> int:
    return block.count(b"\n") + (block[-1:] != b"\n")


def _pod_unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """The block without its ``[pod/…] `` prefix, when every line carries the first line's."""
    m = KUBECTL_PREFIX.match(data, start, min(end, start + 300))
    return None if m is None else _without_front(data, start, end, m.group(0))


def _stern_unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """The block without stern's ``pod container `` names, when every line carries the first line's and the
    first line's rest is an envelope (so that reading it names the deployment the rows are of). A row whose
    rest is no envelope would keep its names when read, but such a row is never counted: it is read as it
    is, from the lines as read."""
    m = STERN.match(data, start, min(end, start + 320))
    if m is None or not is_envelope(data[m.end() : min(end, m.end() + 200)]):
        return None
    return _without_front(data, start, end, m.group(0))


def _without_front(data: bytes, start: int, end: int, front: bytes) -> bytes | None:
    """``data[start:end]`` without ``front`` at each line's start, when every line starts with it; else None."""
    block = data[start:end]
    if block.count(b"\n" + front) + 1 != _lines_in(block):
        return None
    return block.replace(b"\n" + front, b"\n")[len(front) :]


def _journald_unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """The block without its journald ``short`` wrapper, when every line carries the first line's host,
    ident and pid (``LineUnwrapper._named`` reads it only within a line's first 160 bytes)."""
    m = JOURNALD_SHORT.match(data, start, min(end, start + 160))
    if m is None or _JOURNALD_TIME_RE.fullmatch(data, start, m.start(1) - 1) is None:
        return None
    block = data[start:end]
    fraction = max(0, m.start(1) - 1 - start - _JOURNALD_SECONDS - 1)  # digits after the seconds' point
    copy, n = _journald_front(data[m.start(1) - 1 : m.end()], fraction).subn(b"", block)
    return copy if n == _lines_in(block) else None


#: the JSON escapes docker's json-file writes in a log line's text that the copy undoes: a quote, a tab, a
#: backslash, ESC and the three Go escapes for HTML (``<``, ``>``, ``&``); a text with any other escape is not
#: copied (its block is read line by line)
_DOCKER_ESCAPES = {b'\\"': b'"', b"\\t": b"\t", b"\\\\": b"\\", b"\\u001b": b"\x1b", b"\\u003c": b"<",
                   b"\\u003e": b">", b"\\u0026": b"&"}
_DOCKER_ESCAPE = lazy(rb'\\(?:["t\\]|u00(?:1b|3c|3e|26))')
#: one json-file line as docker writes it: the text (group 1), the line break it keeps, the stream, the time;
#: the text as runs without a backslash, each after one escape (so a line is matched one way)
_DOCKER_LINE = lazy(rb'\{"log":"([^"\\\n]*(?:(?:\\["t\\]|\\u00(?:1b|3c|3e|26))[^"\\\n]*)*)(?:\\r)?\\n",'
                    rb'"stream":"std(?:out|err)","time":"\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d)"\}')
#: the longest json-file line the copy reads: docker splits a message at 16 KiB of text, and JSON escaping
#: makes a text at most 6 times longer (``\u001b``); a longer line is not docker's, and its block is read
#: line by line. It bounds what one failed match may read back (``tests/regex_budget.py``)
DOCKER_MAX_LINE = 128 * 1024


def _docker_unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """The texts of a block of docker json-file lines, one per line, when every line is one: by the compiled
    copy where it was built (each line read once, in C, beside the reading thread)."""
    if data[start : start + 8] != b'{"log":"':
        return None
    if _compiled_docker_texts is not None:
        return _compiled_docker_texts(data, start, end, DOCKER_MAX_LINE)
    return docker_unwrapped_reference(data, start, end)


def docker_unwrapped_reference(data: bytes, start: int, end: int) -> bytes | None:
    """:func:`_docker_unwrapped` by :data:`_DOCKER_LINE`: the reference of ``_scan.docker_texts``."""
    if data[start : start + 8] != b'{"log":"':
        return None
    lines = _lines_of(data, start, end, DOCKER_MAX_LINE)
    if lines is None:
        return None
    match, texts = _DOCKER_LINE.fullmatch, []
    for line in lines:
        m = match(line)
        if m is None:
            return None
        texts.append(m[1])
    copy = _joined(texts, data, end)
    if b"\\" in copy:
        copy = _DOCKER_ESCAPE.sub(_undo_escape, copy)
    return copy


#: the longest collector's or export's JSON line the copy reads (a longer one: the block is read line by line)
EXPORT_MAX_LINE = 256 * 1024


def _export_unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """The texts of a block of a collector's or an export's JSON lines (journald ``-o json``, Cloud Logging,
    Loki ``--output=jsonl``, Fluent Bit, Vector and Filebeat documents), one per line, when every line is one
    of the same style naming the same source (the deployment its rows are of) or none, and each text is one
    line.
    Each line is taken as the per-line stages take it (``wrappers.json_line``: JSON decoded, colour and CRs
    removed), so the copy holds exactly the lines they would read first (≈ 5 µs a line, against ≈ 13 µs to
    read it). A text that starts with a wrapper of its own (a timestamp, a kubectl prefix) is never hot and
    never counted unread (the prefilter keeps what may start one), so the stages read it, as they read a
    docker json-file copy's."""
    lines = _lines_of(data, start, end, EXPORT_MAX_LINE)
    if lines is None:
        return None
    first = json_line(lines[0])
    if first is None or first[3] is None and (first[2] == "docker-json" or lines[0].startswith(b'{"log":"')):
        return None  # docker's own lines are the docker copy's (``blocks`` tells the two apart by that start)
    style, source = first[2], first[3]
    texts = []
    for line in lines:
        if line[:1] != b"{":  # the reader unwraps only a line that starts as JSON (a JSON after a space is text)
            return None
        got = first if not texts else json_line(line)
        if got is None or got[2] != style or got[3] != source:
            return None
        if b"\n" in got[0]:  # a text of several lines: the copy would number lines apart from the input's
            return None
        texts.append(got[0])
    return _joined(texts, data, end)


def _lines_of(data: bytes, start: int, end: int, longest: int) -> list[bytes] | None:
    """The lines of ``data[start:end]`` without their line breaks; None when one is longer than ``longest``."""
    lines = data[start:end].split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return None if max(map(len, lines)) > longest else lines


def _joined(texts: list[bytes], data: bytes, end: int) -> bytes:
    """A copy's lines, one per line of the block, ending as the block ends."""
    return b"\n".join(texts) + b"\n" if data[end - 1 : end] == b"\n" else b"\n".join(texts)


def _undo_escape(m: re.Match[bytes]) -> bytes:
    return _DOCKER_ESCAPES[m[0]]


@functools.lru_cache(maxsize=16)
def _journald_front(named: bytes, fraction: int) -> re.Pattern[bytes]:
    """The wrapper of one host's ident[pid], at each line's start (``named``: `` host ident[pid]: ``), its
    time with ``fraction`` digits after the seconds: the same width on every line (the prefilter counts it
    in a row's width, ``blocks._wrap_width``)."""
    digits = rb"\.\d{%d}" % fraction if fraction else b""
    return re.compile(rb"(?m)^" + _JOURNALD_TIME + digits + re.escape(named))


def is_flood(data: bytes, start: int, end: int) -> bool:
    """A block of nothing but line breaks (a newline flood): counted, never split into empty lines."""
    return data[start] == 10 and data.count(b"\n", start, end) == end - start


def scan_unwrapped(data: bytes, start: int, end: int, base: int) -> tuple[ScanResult, bytes | None]:
    """The scan of a block, of its copy without kubectl timestamps where its lines carry them."""
    copy = unwrapped(data, start, end)
    if copy is None:
        return scan_range(data, start, end, base), None
    return scan_range(copy, 0, len(copy), base), copy


def scanned(blocks: Iterator[tuple[bytes, int, int]], hot: bool) -> Iterator[Item]:
    """``(data, start, end, result, unwrapped)`` per block; ``result`` is None for a flood, or when not ``hot``."""
    base = 0
    for data, start, end in blocks:
        if not hot or is_flood(data, start, end):
            yield data, start, end, None, None
            base += data.count(b"\n", start, end)
            continue
        res, copy = scan_unwrapped(data, start, end, base)
        base += res.lines
        yield data, start, end, res, copy


def scan_and_decide(data: bytes, start: int, end: int, state: tuple | None) -> tuple[ScanResult, bytes | None]:
    """:func:`scan_unwrapped` from line 1, and with the reader's prefilter ``state`` as it was when the block
    was handed over (``blocks.prefilter_state``: plain flag, quiet blobs, width mask, year) the prefilter's
    kinds of the block's rare rows too (``ScanResult.ahead``): the prefilter is the main cost of a noisy
    block, and here it runs beside the reading thread. The reader uses them only if its state is still the
    same when the block comes back (``prefilter.block_kinds``). The search for a server-start marker among the
    rare rows, a function of the bytes alone and a read of the whole block, is made here too
    (``ScanResult.marker``: 45 ms of the reading thread's time on the 190 MB mixed log)."""
    res, copy = scan_unwrapped(data, start, end, 0)
    res.marker = first_among_rare(res, data if copy is None else copy, start if copy is None else 0)
    if state is not None and copy is None and len(res.rare["line"]):
        plain, blobs, mask, year = state
        flags = prefilter.colour_flags(*colour_of(data, start, end)) | plain
        res.ahead = prefilter.kinds_ahead(data, start, end, res.rare, prefilter.compiled_args(flags, blobs, mask, year))
    return res, copy


def scan_ahead(blocks: Iterator[tuple[bytes, int, int]], hot: bool, threads: int = 0,
               processes: int = 0, state: Callable[[], tuple | None] | None = None) -> Iterator[Item]:
    """:func:`scanned`, with the scans on ``threads`` pool threads when the compiled scanner is in use (and
    the prefilter's kinds decided there from ``state()``, read when a block is handed over), or on
    ``processes`` (more than one) worker processes when only the Python scanner is."""
    if hot and processes > 1 and not scan.compiled_in_use():
        return _in_processes(blocks, processes)
    if not (threads > 0 and hot and scan.compiled_in_use()):
        return scanned(blocks, hot)
    return _pooled(blocks, threads, state)


def _pooled(blocks: Iterator[tuple[bytes, int, int]], threads: int,
            state: Callable[[], tuple | None] | None = None) -> Iterator[Item]:
    """Scans on a thread pool, results in file order.

    Each block is scanned from line 1 and renumbered when it is handed on (``_pipelined``), so blocks can
    be scanned in any order. Reading stays on this thread, so an input error surfaces here as without
    threads; closing the generator cancels the scans not started and waits for the running ones.
    """
    from concurrent.futures import ThreadPoolExecutor

    balance = _Balance()

    def submit(data: bytes, start: int, end: int) -> Pending:
        ahead = state() if state is not None and not balance.behind else None
        return pool.submit(scan_and_decide, data, start, end, ahead)

    with ThreadPoolExecutor(threads, thread_name_prefix="specdiag-scan") as pool:
        yield from _pipelined(blocks, submit, DEPTH + threads, waited=balance.note)


class _Balance:
    """Whether the scan threads fall behind the reading thread: a block handed on whose scan was not done
    yet. The next block is then scanned only, and its prefilter kinds are left to the reading thread, so
    the byte work is shared between the two cores by what each has left to do (on a noisy log the
    prefilter is about as long as the reading thread's own work)."""

    __slots__ = ("behind",)

    def __init__(self) -> None:
        self.behind = False

    def note(self, waited: bool) -> None:
        self.behind = waited


def _in_processes(blocks: Iterator[tuple[bytes, int, int]], processes: int) -> Iterator[Item]:
    """Blocks scanned here until ``processes`` worker processes (``scan_workers``), started after the
    ``PROCESS_AFTER``-th block, are up (~0.2 s, spent scanning on here); then the rest is theirs."""
    from specdiag.ingest import scan_workers

    base = here = 0
    pool = None
    try:
        while pool is None or not (pool.started() or pool.broken):
            item = next(blocks, None)
            if item is None:
                return
            base = yield from _hand_on((*item, base, None), base)
            here += 1
            if pool is None and here >= PROCESS_AFTER:
                pool = scan_workers.process_pool(processes, DEPTH + processes + 2)
                if pool is None:  # no shared memory or no process here: the rest of the input too
                    for item in blocks:
                        base = yield from _hand_on((*item, base, None), base)
                    return
                while not SCAN_WHILE_STARTING and not (pool.started() or pool.broken):
                    pool.wait()
        yield from _pipelined(blocks, lambda d, s, e: scan_workers.submit(pool, d, s, e), DEPTH + processes, base)
    finally:
        if pool is not None:
            pool.close()  # no worker reads the ring after this


def _pipelined(blocks: Iterator[tuple[bytes, int, int]], submit: Callable[[bytes, int, int], Pending | None],
               depth: int, base: int = 0, waited: Callable[[bool], None] | None = None) -> Iterator[Item]:
    """Blocks submitted as they are read, at most ``depth`` in flight, handed on in file order.

    Each block is scanned as if it were the input's first (line numbers from 1) and its rows are shifted
    by the lines before it when it is handed on (``ScanResult.shifted``, one C loop per column where the
    scanner is compiled). Numbering blocks before their scan meant counting their line breaks here, and
    ``bytes.count`` of one byte reads ~2 GB/s: on the TP=8 shape that count alone took this thread as long
    as the scan it was to hand off (``docs/benchmark.md``). ``waited(True)`` is told of each block whose
    scan was not done when it was to be handed on, ``waited(False)`` of each that was."""
    pending: deque = deque()
    try:
        for data, start, end in blocks:
            flood = is_flood(data, start, end)
            pending.append((data, start, end, 0, None if flood else submit(data, start, end)))
            if len(pending) > depth:
                base = yield from _hand_on(_told(pending.popleft(), waited), base)
        while pending:
            base = yield from _hand_on(_told(pending.popleft(), waited), base)
    finally:
        for *_rest, fut in pending:
            if fut is not None:
                fut.cancel()


def _told(item: tuple, waited: Callable[[bool], None] | None) -> tuple:
    """``item``, after telling ``waited`` whether its scan is still under way."""
    fut = item[4]
    if waited is not None and fut is not None:
        waited(not fut.done())
    return item


def _hand_on(item: tuple, base: int):
    """One block in file order: a flood as it is, else its scan (made here when it had none or its pool
    broke), numbered from ``base``; returns the base of the next block. ``item`` is ``(data, start, end,
    the line number its scan was asked to start at, the scan's future or None)``."""
    data, start, end, asked, fut = item
    if is_flood(data, start, end):
        yield data, start, end, None, None
        return base + data.count(b"\n", start, end)
    if fut is None:  # scanned here, already numbered
        res, copy = scan_unwrapped(data, start, end, base)
    else:
        from concurrent.futures import BrokenExecutor  # loaded with the pool that made ``fut``

        try:
            res, copy = fut.result()
        except BrokenExecutor:  # a worker died (killed, out of memory): this block, and the next ones, here
            res, copy = scan_unwrapped(data, start, end, base)
        else:
            res = res.shifted(base - asked)
    yield data, start, end, res, copy
    return base + res.lines


__all__ = ["DEPTH", "PROCESS_AFTER", "is_flood", "scan_ahead", "scanned", "unwrapped"]
