"""``vllm bench serve`` result blocks → one dict per block.

The client prints (vLLM ``benchmarks/serve.py``) a block framed by ``=== Serving Benchmark Result ===`` and a
line of ``=``; inside, ``"{:<40} {:<10}"`` key/value rows and ``---- Section ----`` headers
(``Time to First Token``, ``Speculative Decoding`` with ``Acceptance rate (%)``, ``Acceptance length``,
``Drafts``, ``Draft tokens``, ``Accepted tokens``, ``Per-position acceptance (%):`` + ``  Position i:`` rows).
These lines carry no logger header, so ``analyze``'s ingest does not keep them; this module scans the raw
inputs itself (``specdiag metrics --bench``). Keys become snake_case: ``Mean TTFT (ms)`` → ``mean_ttft_ms``,
``Acceptance rate (%)`` → ``acceptance_rate_pct``, ``Position 2`` → ``per_position_acceptance_pct_2``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from specdiag.numbers import to_float, to_int
from specdiag.patterns import lazy

#: the title first (a literal the engine skips to), the ``=`` before it by look-behind: a line of ``=`` is no
#: longer scanned once per position (``=+ ?Serving…`` was quadratic: a 2 KB line took 41 s)
_START = lazy(r"Serving Benchmark Result(?:(?<==Serving Benchmark Result)|(?<== Serving Benchmark Result)) ?=")
_END = lazy(r"^=+\s*$")
_KV = lazy(r"^\s*([A-Za-z][^:]{0,200}?):\s+(-?\d{1,40}(?:\.\d{1,40})?|nan|inf)\s*$")
_ANSI = lazy(r"\x1b\[[0-9;]*m")
_UNITS = (("(%)", "pct"), ("(ms)", "ms"), ("(s)", "s"), ("(req/s)", "req_per_s"), ("(tok/s)", "tok_per_s"))


def norm_key(key: str, section: str | None = None) -> str:
    k = key.strip()
    m = re.match(r"Position (\d+)$", k)
    if m:
        return f"per_position_acceptance_pct_{m.group(1)}"
    for unit, word in _UNITS:
        k = k.replace(unit, f" {word}")
    k = re.sub(r"[^A-Za-z0-9]+", "_", k).strip("_").lower()
    return k


def _num(v: str) -> float | int | None:
    """A printed value; ``nan``/``inf`` or one too long to be a real figure is unknown (None)."""
    i = to_int(v)
    return i if i is not None else to_float(v)


def _section(line: str) -> str | None:
    """``---- Time to First Token ----`` → its title (plain string tests: a regex here was cubic on dashes)."""
    s = line.strip()
    if len(s) < 6 or not s.startswith("---") or not s.endswith("---"):
        return None
    return s.strip("-").strip()


def parse_bench_lines(lines: Iterable[str]) -> Iterator[dict]:
    """Yield one dict per result block: ``{"line": first line number, "section_keys"...}``."""
    cur: dict | None = None
    section = None
    for n, raw in enumerate(lines, 1):
        line = _ANSI.sub("", raw.rstrip("\r\n"))
        if cur is None:
            if _START.search(line):
                cur, section = {"line": n}, None
            continue
        if _END.match(line):
            yield cur
            cur = None
            continue
        title = _section(line)
        if title is not None:
            section = title
            continue
        m = _KV.match(line)
        if m:
            cur[norm_key(m.group(1), section)] = _num(m.group(2))
    if cur is not None and len(cur) > 1:
        yield cur  # truncated block


def parse_bench_sources(paths: list[str], stdin_name: str = "-") -> list[dict]:
    from specdiag.ingest import expand_inputs

    out = []
    for src in expand_inputs(paths, stdin_name=stdin_name):
        def lines(src=src):
            for chunk in src.chunks():
                parts = chunk.decode("utf-8", "replace").split("\n")
                if parts and parts[-1] == "":
                    parts.pop()
                yield from parts
        for block in parse_bench_lines(lines()):
            out.append({"source": src.display, **block})
    return out
