"""Scan ahead: the blocks of one input with their scan results, optionally scanned on other threads.

The compiled scanner releases the GIL, so threads that scan blocks N+1… while this thread reads and runs
the per-line stages and the observers on block N can use other cores for the byte work. At most
``DEPTH + threads`` blocks are in flight, so memory stays that of a few blocks; results arrive in file
order. The Python scanner holds the GIL, so without the compiled one threads would only add switching:
``scan_ahead`` then runs inline. Opt-in (``--scan-threads``): on the 2-vCPU machines measured here two
threads in parallel each ran at ~60 % of one alone, and the pipeline got slower (``docs/benchmark.md``).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

from specdiag.ingest import scan
from specdiag.ingest.scan import ScanResult, scan_range

#: blocks scanned ahead of the consumer, beyond one per thread
DEPTH = 2
#: ``(data, start, end, result, unwrapped)``: ``unwrapped`` is the copy of ``data[start:end]`` the result's
#: offsets refer to when the block's timestamps were taken off for the scanner (else None: ``data`` itself)
Item = tuple[bytes, int, int, "ScanResult | None", "bytes | None"]
#: kubectl / docker ``--timestamps`` in front of a line the scanner could take (a process prefix, colour or
#: an LMCache timestamp follows): ``wrappers.ISO_TS``, anchored at each line start
_ISO_FRONT = re.compile(rb"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? (?=\(|\x1b|\[\d)")


def unwrapped(data: bytes, start: int, end: int) -> bytes | None:
    """``data[start:end]`` without the kubectl ``--timestamps`` of its lines, for the scanner; None when the
    block's first line carries none (a block is taken as it starts: a wrapper that begins mid-block leaves
    that block to the per-line stages, which unwrap every line).

    Each line keeps its place (only a prefix of it goes), so line numbers stay; the per-line stages still
    read the original lines (the wrapper's year and format are theirs to note)."""
    if not (48 <= data[start] <= 57 and data[start + 4 : start + 5] == b"-" and data[start + 10 : start + 11] == b"T"):
        return None
    copy = _ISO_FRONT.sub(b"", data[start:end])
    return copy if len(copy) != end - start else None


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


def scan_ahead(blocks: Iterator[tuple[bytes, int, int]], hot: bool, threads: int = 0) -> Iterator[Item]:
    """:func:`scanned`, with the scans on ``threads`` pool threads when the compiled scanner is in use."""
    if not (threads > 0 and hot and scan.IMPLEMENTATION == "c"):
        return scanned(blocks, hot)
    return _pooled(blocks, threads)


def _pooled(blocks: Iterator[tuple[bytes, int, int]], threads: int) -> Iterator[Item]:
    """Scans on a thread pool, results in file order.

    Line numbers need the lines before a block: a block is scanned with base 0 and its rows are shifted
    when it is handed on (``ScanResult.shifted``), so blocks can be scanned in any order. Reading stays on
    this thread, so an input error surfaces here as without threads; closing the generator cancels the
    scans not started and waits for the running ones.
    """
    from concurrent.futures import ThreadPoolExecutor

    pending: deque = deque()
    base = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="specdiag-scan") as pool:
        try:
            for data, start, end in blocks:
                fut = None if is_flood(data, start, end) else pool.submit(scan_unwrapped, data, start, end, 0)
                pending.append((data, start, end, fut))
                if len(pending) > DEPTH + threads:
                    base = yield from _hand_on(pending.popleft(), base)
            while pending:
                base = yield from _hand_on(pending.popleft(), base)
        finally:
            for *_rest, fut in pending:
                if fut is not None:
                    fut.cancel()


def _hand_on(item: tuple, base: int):
    data, start, end, fut = item
    if fut is None:
        yield data, start, end, None, None
        return base + data.count(b"\n", start, end)
    res, copy = fut.result()
    res = res.shifted(base)
    yield data, start, end, res, copy
    return base + res.lines


__all__ = ["DEPTH", "is_flood", "scan_ahead", "scanned", "unwrapped"]
