"""Process tuning shared by the CLI and every worker process (``specdiag/workers.py``)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

#: a block's worth of buffers made and dropped 50 times, as a block scan does; prints the page faults taken
_CHURN = """
import resource, sys
if sys.argv[1] == "keep":
    from specdiag.workers import keep_freed_memory
    assert keep_freed_memory()
block = b"(Worker pid=7) [req_id=abc-123] Stored 256 out of total 256 tokens\\n" * 16000
ones = bytes.maketrans(b"0123456789", b"1111111111")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    keys = block.translate(ones).replace(b"abc", b"").upper()
    del keys
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout)


@pytest.mark.skipif(not _glibc(), reason="mallopt is glibc's")
def test_freed_block_buffers_are_reused_instead_of_faulted_in_again() -> None:
    default, kept = _faults("default"), _faults("keep")
    assert default > 5_000, "the default allocator no longer hands such buffers back: the tuning is moot"
    assert kept * 10 < default


def test_keeping_freed_memory_is_a_quiet_no_op_where_the_c_library_is_not_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from specdiag import workers

    def no_libc(_name):
        raise OSError("no C library to open")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert workers.keep_freed_memory() is False
