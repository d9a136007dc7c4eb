"""Report files: written atomically over files and planted symlinks, written through to streams
(/dev/null, /dev/stdout, a named pipe) instead of replacing the device node or the pipe."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from specdiag.outfile import is_stream, write_output


def test_a_file_is_replaced_atomically_and_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "report.json"
    os.symlink(victim, link)
    write_output(link, "{}\n")
    assert victim.read_text() == "keep me\n"
    assert not link.is_symlink() and link.read_text() == "{}\n"


def test_dev_null_stays_a_device() -> None:
    before = os.stat("/dev/null")
    write_output("/dev/null", "report\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_written_through_and_stays_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_symlink_to_a_stream_is_a_stream_and_one_to_a_file_is_not(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    os.symlink(tmp_path / "f", tmp_path / "to-file")
    os.symlink("/dev/null", tmp_path / "to-null")
    assert is_stream(tmp_path / "to-null") and not is_stream(tmp_path / "to-file")
    assert not is_stream(tmp_path / "missing") and not is_stream(tmp_path)
