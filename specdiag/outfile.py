"""Writing the files a user asked for (reports, baselines, exports) safely.

A report path can be a symlink someone planted, a directory that does not exist yet, or a disk that fills
up half-way. Writes go to a temporary file in the target's folder and are renamed over the target, so a
reader never sees half a report and a symlink at the target is replaced, not followed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(Exception):
    """The output could not be written (exit code 2); the message is one line for the user."""


def write_output(path: str | os.PathLike[str], data: str | bytes, *, make_parents: bool = True) -> Path:
    """Atomically write ``data`` to ``path`` (text as UTF-8); returns the path written.

    Never follows a symlink at ``path`` (the link itself is replaced). Raises OutputError with a one-line
    reason (missing folder, permission, disk full) instead of an OSError traceback.
    """
    target = Path(path)
    payload = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if target.is_dir() and not target.is_symlink():
        raise OutputError(f"cannot write {target}: it is a directory")
    parent = target.parent
    try:
        if make_parents:
            parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from e
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
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from e
    return target
