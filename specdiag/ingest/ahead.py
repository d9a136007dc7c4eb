"""Read and scan ahead: the blocks of one input with their scan results, optionally from a second thread.

Reading (``os.read``, decompression) and the compiled scanner release the GIL, so a thread that reads
and scans block N+1 while the main thread runs the per-line stages and the observers on block N uses a
second core for the byte work. The queue between them is bounded (``DEPTH`` blocks), so memory stays that
of a few blocks; results arrive in file order. The Python scanner holds the GIL, so without the compiled
one the thread would only add switching: ``scan_ahead`` then runs inline.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from specdiag.ingest import scan
from specdiag.ingest.scan import ScanResult, scan_range

#: blocks read and scanned ahead of the consumer
DEPTH = 2
Item = tuple[bytes, int, int, "ScanResult | None"]


def is_flood(data: bytes, start: int, end: int) -> bool:
    """A block of nothing but line breaks (a newline flood): counted, never split into empty lines."""
    return data[start] == 10 and data.count(b"\n", start, end) == end - start


def scanned(blocks: Iterator[tuple[bytes, int, int]], hot: bool) -> Iterator[Item]:
    """``(data, start, end, result)`` per block; ``result`` is None for a flood, or when not ``hot``."""
    base = 0
    for data, start, end in blocks:
        if not hot or is_flood(data, start, end):
            yield data, start, end, None
            base += data.count(b"\n", start, end)
            continue
        res = scan_range(data, start, end, base)
        base += res.lines
        yield data, start, end, res


def scan_ahead(blocks: Iterator[tuple[bytes, int, int]], hot: bool, threaded: bool) -> Iterator[Item]:
    """:func:`scanned`, on a reader thread when ``threaded`` and the compiled scanner is in use."""
    if not (threaded and hot and scan.IMPLEMENTATION == "c"):
        return scanned(blocks, hot)
    return _on_thread(scanned(blocks, hot))


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


def _on_thread(items: Iterator[Item]) -> Iterator[Item]:
    """Run ``items`` on a daemon thread; its exceptions re-raise here; closing this generator stops it."""
    q: queue.Queue = queue.Queue(maxsize=DEPTH)
    stop = threading.Event()

    def put(x: object) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_END)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
            put(_Failed(e))
        finally:
            items.close()  # the source's file is closed by the thread that read it

    worker = threading.Thread(target=work, name="specdiag-scan-ahead", daemon=True)
    worker.start()
    try:
        while True:
            x = q.get()
            if x is _END:
                return
            if isinstance(x, _Failed):
                raise x.error
            yield x
    finally:
        stop.set()
        worker.join(timeout=5)


__all__ = ["DEPTH", "is_flood", "scan_ahead", "scanned"]
