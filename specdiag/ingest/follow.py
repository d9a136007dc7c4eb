"""Inputs that keep growing: a log file followed like ``tail -F``, or a pipe (``kubectl logs -f``).

A follower is a stream for :class:`~specdiag.ingest.sources.Source` (``Source(path, stream=follower)``):
its ``read(n)`` returns what has arrived (at most ``n`` bytes), waits while nothing has, and returns
``b""`` only once it is stopped (Ctrl-C, the watch is decided) or a pipe closes. While it waits it calls
``on_wait`` every ``poll`` seconds, and ``on_read`` before each read, so that the reader can report on what
was analysed so far; when ``read`` is called, every earlier byte has been handed on, so the caller's state
is whole at that moment.

A followed file is reopened by its path when it is renamed or removed and a new file appears there
(rotation by ``logrotate``, ``kubectl``'s container log files), or when it shrinks (``copytruncate``): the
rest of the old file is read first, then the new one from its start. A line cut by the writer at the end
of what has arrived is held until its line break comes, so the ingest never sees half a line (the
rotation hands on whatever the old file ended with as a line of its own).
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable

#: how often a follower looks for new data and calls ``on_wait`` while nothing arrives (seconds)
POLL_S = 0.1
#: a line the writer has not finished is held; past this size it is handed on anyway (a cut line)
MAX_HELD = 1024 * 1024


class _Follower:
    """What both followers share: stop flag, counters, the held partial line and the callbacks."""

    def __init__(self, poll: float = POLL_S) -> None:
        self.poll = poll
        self.stopped = False
        self.closed = False  # the input itself ended (a pipe closed)
        self.bytes_read = 0
        self.lines = 0
        self.rotations = 0
        self.on_wait: Callable[[], None] | None = None
        self.on_read: Callable[[], None] | None = None
        self._held = b""

    def stop(self) -> None:
        """End the stream at the next read (called from a signal handler or a callback: only sets a flag)."""
        self.stopped = True

    def _whole_lines(self, data: bytes) -> bytes:
        """``data`` up to its last line break (the rest held for the next read), counted."""
        data, self._held = self._held + data, b""
        cut = data.rfind(b"\n") + 1
        if cut < len(data) and len(data) - cut < MAX_HELD:
            data, self._held = data[:cut], data[cut:]
        self.lines += data.count(b"\n")
        self.bytes_read += len(data)
        return data

    def _flush(self) -> bytes:
        """What is held at the end, as a last line."""
        held, self._held = self._held, b""
        if held:
            self.lines += 1
            self.bytes_read += len(held)
        return held + b"\n" if held else b""

    def _waited(self) -> None:
        if self.on_wait is not None:
            self.on_wait()

    def read(self, n: int = -1) -> bytes:
        """Whole lines that have arrived (at most about ``n`` bytes); waits for some; ``b""`` at the end."""
        if self.on_read is not None:
            self.on_read()
        limit = n if n and n > 0 else 1024 * 1024
        while not self.stopped:
            data = self._next(limit)
            if data is None:  # the input ended
                break
            if data:
                out = self._whole_lines(data)
                if out:
                    return out
                continue
            self._waited()
        return self._flush()

    def _next(self, limit: int) -> bytes | None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class FollowFile(_Follower):
    """A log file read as it grows, reopened by path on rotation or truncation (``tail -F``).

    ``from_start``: read what the file holds already (the default; ``False`` starts at its end, as
    ``tail -f -n 0``). A path that does not exist yet is waited for."""

    def __init__(self, path: str, *, from_start: bool = True, poll: float = POLL_S) -> None:
        super().__init__(poll)
        self.path = path
        self._fh = None
        self._ino: tuple[int, int] | None = None
        self._pos = 0
        self._open(from_start)

    def _open(self, from_start: bool = True) -> bool:
        try:
            fh = open(self.path, "rb", buffering=0)  # noqa: SIM115 - kept open while followed
        except FileNotFoundError:
            return False
        st = os.fstat(fh.fileno())
        if self._fh is not None:
            self._fh.close()
        self._fh, self._ino = fh, (st.st_dev, st.st_ino)
        self._pos = 0 if from_start else st.st_size
        fh.seek(self._pos)
        return True

    def _next(self, limit: int) -> bytes | None:
        if self._fh is not None:
            data = self._fh.read(limit)
            if data:
                self._pos += len(data)
                return data
        if self._rotated():
            self.rotations += 1
            rest, self._held = self._held, b""  # the old file's last line, if it ended without a line break
            return rest + b"\n" if rest else b""
        time.sleep(self.poll)
        return b""

    def _rotated(self) -> bool:
        """Whether the path now names another file (renamed, removed and recreated) or the file shrank
        (truncated in place): then it is reopened from its start."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # removed, not yet recreated: keep waiting (the old file was read to its end)
        if self._ino != (st.st_dev, st.st_ino):
            if self._fh is not None and self._fh.read(1):  # the old file grew after all: read it out first
                self._fh.seek(-1, os.SEEK_CUR)
                return False
            return self._open()
        if st.st_size < self._pos:
            self._fh.seek(0)
            self._pos = 0
            return True
        return False

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class FollowPipe(_Follower):
    """A pipe or stdin (``kubectl logs -f … | specdiag watch -``): read as data comes, never waiting for a
    full block; it ends when the writer closes it."""

    def __init__(self, fd: int, *, poll: float = POLL_S) -> None:
        super().__init__(poll)
        self.fd = fd

    def _next(self, limit: int) -> bytes | None:
        try:
            ready, _, _ = select.select([self.fd], [], [], self.poll)
        except InterruptedError:  # a signal arrived: the handler ran; the loop looks at ``stopped``
            return b""
        if not ready:
            return b""
        data = os.read(self.fd, limit)
        return data if data else None

    def close(self) -> None:
        """The pipe belongs to the caller (stdin): nothing to close."""


def follower(path: str, stdin_fd: int, *, from_start: bool = True, poll: float = POLL_S) -> _Follower:
    """The follower for ``path``: a pipe, FIFO or ``-`` (stdin) is read as it comes, a regular file followed."""
    import stat

    if path == "-":
        return FollowPipe(stdin_fd, poll=poll)
    try:
        if stat.S_ISFIFO(os.stat(path).st_mode):
            return FollowPipe(os.open(path, os.O_RDONLY), poll=poll)
    except FileNotFoundError:
        pass
    return FollowFile(path, from_start=from_start, poll=poll)


__all__ = ["POLL_S", "FollowFile", "FollowPipe", "follower"]
