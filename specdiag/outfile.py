"""Writing the files a user asked for (reports, baselines, exports) safely.

A report path can be a symlink someone planted, a directory that does not exist yet, or a disk that fills
up half-way. Writes go to a temporary file in the target's folder and are renamed over the target, so a
reader never sees half a report and a symlink at the target is replaced, not followed.

A target that is a stream rather than a file -- ``/dev/null``, ``/dev/stdout``, a named pipe, a terminal
-- is written through instead: renaming over it would replace the device node itself (as root,
``-o /dev/null`` left a regular file at ``/dev/null`` and broke every other program that writes there).
A symlink counts as a stream only when it points at one, so a planted link to a file is still replaced.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class OutputError(Exception):
    """The output could not be written (exit code 2); the message is one line for the user, ``reason``
    the part after the path (for callers that name the file their own way)."""

    def __init__(self, target: Path, reason: str) -> None:
        super().__init__(f"cannot write {target}: {reason}")
        self.reason = reason


def write_output(path: str | os.PathLike[str], data: str | bytes, *, make_parents: bool = True) -> Path:
    """Atomically write ``data`` to ``path`` (text as UTF-8); returns the path written.

    Never follows a symlink at ``path`` (the link itself is replaced). Raises OutputError with a one-line
    reason (missing folder, permission, disk full) instead of an OSError traceback.
    """
    target = Path(path)
    payload = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if target.is_dir() and not target.is_symlink():
        raise OutputError(target, "it is a directory")
    if is_stream(target):
        return _write_through(target, payload)
    parent = target.parent
    try:
        if make_parents:
            parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise OutputError(target, str(e.strerror or e)) from e
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a report gets the usual permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OutputError(target, str(e.strerror or e)) from e
    return target


def is_stream(path: str | os.PathLike[str]) -> bool:
    """The path (or what a symlink there points at) is a device, FIFO or socket: written through, never
    renamed over. A missing path, a regular file or a directory is not."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_through(target: Path, payload: bytes) -> Path:
    """Write to a stream target in place (no temporary file, no rename, no fsync: a device may refuse it)."""
    try:
        with open(target, "wb") as fh:
            fh.write(payload)
    except OSError as e:
        raise OutputError(target, str(e.strerror or e)) from e
    return target
