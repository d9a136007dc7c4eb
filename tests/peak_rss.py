"""Run ``specdiag`` in a child interpreter that reports the peak RSS of its own process image.

VmHWM belongs to the address space that exec creates; ``ru_maxrss`` would carry over the high-water mark of
the forking pytest process. The child writes ``MAXRSS_KB=<n>`` as the last line of its stderr, from an ``atexit``
callback: ``python -m specdiag`` leaves through ``os._exit`` after running those (``specdiag.cli.entry``).
"""

from __future__ import annotations

import os
import subprocess
import sys

_CODE = ("def _peak_kb():\n"
         "    for ln in open('/proc/self/status'):\n"
         "        if ln.startswith('VmHWM:'):\n"
         "            return ln.split()[1]\n"
         "    import resource\n"
         "    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
         "import atexit, runpy, sys; sys.argv = ['specdiag'] + sys.argv[1:]\n"
         "atexit.register(lambda: sys.stderr.write('MAXRSS_KB=%s\\n' % _peak_kb()))\n"
         "runpy.run_module('specdiag', run_name='__main__')\n")


def run_cli(args: list[str], env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """``specdiag ARGS`` with NO_COLOR; extra keywords go to ``subprocess.run``."""
    e = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-c", _CODE, *args], capture_output=True, env=e, timeout=timeout, **kw)
