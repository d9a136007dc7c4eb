"""A flood of blank lines (a newline decompression bomb) costs neither memory nor time."""

from __future__ import annotations

import gzip
import subprocess
import sys


def test_a_gzip_of_line_breaks_stays_small_and_fast(tmp_path):
    bomb = tmp_path / "nl.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        block = b"\n" * (1 << 22)
        for _ in range(64):  # 256 MiB of line breaks in ~250 KB
            fh.write(block)
    code = ("import sys; from specdiag.engine import analyze; rep = analyze([sys.argv[1]]);"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1];"
            "print(rep.inputs[0]['lines'], hwm)")
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, timeout=120)
    lines, hwm_kib = map(int, out.stdout.split())
    assert lines > 1_000_000  # the lines were counted (or the bomb limit stopped them), not parsed one by one
    assert hwm_kib < 120 * 1024, f"peak RSS {hwm_kib} KiB"  # was ~260 MiB: a list of a million empty lines a block
