"""A log pasted into a terminal: a hint on stderr says how to end it, and one Ctrl-D does."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

USER_R2 = ("(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected "
           "tokens: 55808 (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)")


def test_one_ctrl_d_ends_a_paste_into_a_terminal() -> None:
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "specdiag", "analyze", "-", "-q", "--fail-on", "never"],
                            stdin=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(child)
    try:
        os.write(main, (USER_R2 + "\n").encode())
        time.sleep(0.5)
        os.write(main, b"\x04")  # one Ctrl-D on an empty line
        out, err = proc.communicate(timeout=20)  # a second Ctrl-D would be needed: timeout
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert proc.returncode == 0, err
    assert b"paste it, then press Ctrl-D" in err
    assert b"KV001" in out


def test_no_hint_when_the_log_comes_through_a_pipe() -> None:
    res = subprocess.run([sys.executable, "-m", "specdiag", "analyze", "-", "-q", "--fail-on", "never"],
                         input=(USER_R2 + "\n").encode(), capture_output=True, timeout=60)
    assert res.returncode == 0 and b"Ctrl-D" not in res.stderr and b"KV001" in res.stdout
