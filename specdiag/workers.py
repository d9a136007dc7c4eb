"""The lifetime of this tool's worker processes (scan workers, ``-j`` pools, ``fleet``).

A scan worker ignores Ctrl-C: the analysing process gets it too, handles it (exit code 130) and shuts
its pools down, and a block scan is a few milliseconds (a ``-j`` worker analysing a whole deployment is
left to die of it, as before: shutting a pool down waits for the tasks running). Every worker also exits
by itself when that process is gone (SIGKILL, out-of-memory killer):
``ProcessPoolExecutor`` workers block on a task queue whose write end every worker also holds, so they
never see end-of-file and would outlive it for good (measured: still there ten minutes later).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time


def start_worker(owner: int, scan_only: bool = False) -> None:
    """A pool's ``initializer`` (``initargs=(os.getpid(),)``): the owner watched; for a scan worker
    (``scan_only``) also Ctrl-C ignored, the collector tuned as the CLI does (a scan makes many
    short-lived lists and no cycles) and freed memory kept for the next block (:func:`keep_freed_memory`)."""
    if scan_only:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
        keep_freed_memory()
    threading.Thread(target=watch_owner, args=(owner,), name="specdiag-owner-watch", daemon=True).start()


#: glibc's ``mallopt`` parameters (malloc.h) and what a scan worker sets them to
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_KEEP = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 64 << 20), (_M_TOP_PAD, 16 << 20))


def keep_freed_memory() -> bool:
    """Where the C library is glibc: serve every allocation under 32 MiB from the heap and keep up to 64 MiB
    of freed heap instead of handing it back to the system at once. Whether it was set.

    A block scan allocates and frees a few buffers of about a block's size (the line keys, a pickled
    result). glibc's defaults returned that memory after each block and faulted it in again for the next:
    measured ~100k page faults and 0.16-0.31 s of system time per worker per 525 MB of the TP=1 shape,
    against ~5k and 0.02 s with these settings, and 244k / 16k faults (0.63 / 0.13 s) for the whole
    analysis in one process (``docs/benchmark.md``). Only the return of memory to the system is deferred,
    but the peak grew by 1-6 MiB, for nothing measurable where the scanner is compiled: the engine sets
    it only where the Python scanner runs in its process (``engine.analyze_group``), and scan workers.
    """
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, Windows): its own allocator decides
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return all(mallopt(param, value) == 1 for param, value in _KEEP)


def watch_owner(owner: int, every_s: float = 0.5) -> None:
    """Exit this process once process ``owner`` is gone (polled: one ``kill(pid, 0)`` per interval)."""
    while True:
        time.sleep(every_s)
        try:
            os.kill(owner, 0)
        except (ProcessLookupError, PermissionError):  # gone, or its pid reused by another user's process
            os._exit(0)


__all__ = ["keep_freed_memory", "start_worker", "watch_owner"]
