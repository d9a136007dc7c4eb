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
    (``scan_only``) also Ctrl-C ignored and the collector tuned as the CLI does (a scan makes many
    short-lived lists and no cycles)."""
    if scan_only:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    threading.Thread(target=watch_owner, args=(owner,), name="specdiag-owner-watch", daemon=True).start()


def watch_owner(owner: int, every_s: float = 0.5) -> None:
    """Exit this process once process ``owner`` is gone (polled: one ``kill(pid, 0)`` per interval)."""
    while True:
        time.sleep(every_s)
        try:
            os.kill(owner, 0)
        except (ProcessLookupError, PermissionError):  # gone, or its pid reused by another user's process
            os._exit(0)


__all__ = ["start_worker", "watch_owner"]
