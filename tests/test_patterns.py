"""specdiag.patterns.lazy: module-level patterns compiled on first use, the same answers as re.compile."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys

from specdiag.patterns import LazyPattern, lazy


def test_a_lazy_pattern_compiles_on_first_use_and_answers_as_the_compiled_one() -> None:
    p = lazy(rb"Retrieved (\d+) out of (?P<total>\d+)", re.I)
    assert "_rx" not in vars(p) and p.pattern == rb"Retrieved (\d+) out of (?P<total>\d+)"
    line = b"x retrieved 12 out of 40 tokens"
    assert p.search(line).groups() == re.compile(p.pattern, re.I).search(line).groups() == (b"12", b"40")
    assert vars(p)["_rx"] is p.compiled() and p.groupindex == {"total": 2} and p.flags & re.I
    assert p.sub(b"-", b"Retrieved 1 out of 2") == b"-" and p.match(b"no") is None


def test_a_lazy_pattern_survives_pickling_for_worker_processes() -> None:
    p = lazy(r"a+b")
    p.search("aab")
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, LazyPattern) and q.fullmatch("aaab") and not q.fullmatch("b")


def test_importing_the_analysis_compiles_none_of_the_modules_patterns() -> None:
    code = ("import sys, specdiag.config, specdiag.cli.analyze\n"
            "from specdiag.patterns import LazyPattern\n"
            "made = [f'{m.__name__}.{k}' for m in list(sys.modules.values()) if m.__name__.startswith('specdiag')\n"
            "        for k, v in vars(m).items() if isinstance(v, LazyPattern) and '_rx' in vars(v)]\n"
            "n = sum(isinstance(v, LazyPattern) for m in list(sys.modules.values())\n"
            "        if m.__name__.startswith('specdiag') for v in vars(m).values())\n"
            "print(n, made)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    count, made = out.stdout.split(" ", 1)
    assert int(count) > 100 and made.strip() == "[]"
