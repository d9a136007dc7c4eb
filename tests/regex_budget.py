"""Adversarial lines for every per-line regex, generated from the pattern's own structure, and a timer.

A backtracking engine goes quadratic (or worse) when a line offers many places to start and each start
scans far before failing: runs of a pattern's separators, its literals repeated, its character classes
interleaved with its literals, or a real sample line repeated or cut. This module builds those lines from
the parsed pattern (``re._parser``) so a new template is covered the day it is added.

``python tests/regex_budget.py`` prints the worst time per pattern (the table in the issue note).
"""

from __future__ import annotations

import importlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from specdiag.patterns import LazyPattern

try:  # Python 3.11+
    import re._constants as sre_c
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

SIZE = 1024 * 1024
#: the budget on the machine it was set on (an AMD EPYC vCPU); ``budget()`` scales it to the machine running now
BUDGET_S = 0.050
#: a fixed linear workload's CPU time on that machine (``_reference_s``): a linear pattern that tries a match at
#: half the positions of a 1 MB line, about what the slowest linear patterns here take
REFERENCE_S = 0.033
_SCALE: list[float] = []


def _reference_s() -> float:
    """The fastest of five runs of the reference workload here, in CPU seconds of this thread."""
    rx, line = re.compile(rb"\[\d{1,3}(?:;\d{1,3})*m"), b"7[" * (SIZE // 2)
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        rx.search(line)
        best = min(best, time.thread_time() - t)
    return best


def budget() -> float:
    """``BUDGET_S`` times how much slower this machine runs the reference workload (1 to 4 times): a slower CI
    machine gets a proportionally longer budget, which a quadratic pattern (seconds on these lines) still blows."""
    if not _SCALE:
        _SCALE.append(min(4.0, max(1.0, _reference_s() / REFERENCE_S)))
    return BUDGET_S * _SCALE[0]

#: modules whose module-level compiled patterns run per line (or per record / per config dump)
MODULES = ["specdiag.ingest.envelope", "specdiag.ingest.prefilter", "specdiag.ingest.cleaner", "specdiag.ingest.rows", "specdiag.ingest.origin", "specdiag.ingest.wrappers", "specdiag.ingest.sources", "specdiag.ingest.ahead",
           "specdiag.metrics.parse", "specdiag.metrics.bench", "specdiag.context", "specdiag.pyrepr",
           "specdiag.events.lmcache", "specdiag.events.vllm", "specdiag.events.text", "specdiag.events"]
#: how a module-level pattern is applied where it is used (default: scanned from every position)
#: patterns the code only ever applies to a bounded part of a line: name → the bound (bytes), from the code.
#: Ingest cuts a line to ``cleaner.MAX_PARSE_LINE`` before peeling prefixes and parsing envelopes; process
#: names are at most 200 bytes (``origin.PREFIX_RE``); config/stats bodies are template groups, which
#: ``events.MAX_MATCH`` bounds; file names are at most PATH_MAX.
def _limits() -> dict[str, int]:
    from specdiag.events import MAX_MATCH
    from specdiag.ingest.cleaner import MAX_PARSE_LINE

    after_cut = {f"envelope.{n}" for n in ("VLLM_REST", "LMC_LEGACY", "EXC_LINE", "_TS_PARTS")} | {
        f"wrappers.{n}" for n in ("ANSI_RE", "ISO_TS", "KUBECTL_PREFIX", "JOURNALD_ISO", "JOURNALD_SHORT",
                                  "COMPOSE", "_ASCTIME", "GREP_N", "GREP_H", "INDENT", "ANSI_BYTES",
                                  "LOKI_LABELS", "_LOKI_LABEL", "STERN", "SYSLOG_5424")} | {"origin.PREFIX_RE"}
    after_cut |= {f"rows.{n}" for n in ("_VLLM_TAIL", "_PID_CUT", "_SUFFIX_CUT", "ESC_CUT", "ESC_REST", "_ISO_CUT",
                                        "_JOURNALD_CUT")}
    out = dict.fromkeys(after_cut, MAX_PARSE_LINE)
    out.update(dict.fromkeys((f"origin.{n}" for n in ("_TP", "_PP", "_DP", "_EP", "_RANK")), 200))
    out["sources._ROTATED"] = 4096
    from specdiag.ingest.ahead import DOCKER_MAX_LINE

    out["ahead._DOCKER_LINE"] = DOCKER_MAX_LINE  # longer lines are never matched (``ahead._docker_unwrapped``)
    from specdiag.ingest.prefilter import MAX_QUIET_LINE

    # wrappers.ANSI_BYTES, first seen under prefilter's name: ``prefilter._cleaned`` takes colour off a docker
    # copy's line only below 4 × MAX_QUIET_LINE (``inert_kind`` keeps a longer one uncleaned, and the counted
    # lines that ``cleaned_line`` and ``quiet_month`` read again are lines it decided); ``wrappers._inner``
    # reads a line cut to MAX_PARSE_LINE
    out["prefilter.ANSI_BYTES"] = 4 * MAX_QUIET_LINE
    for mod in ("context", "pyrepr", "parse"):
        out[mod] = MAX_MATCH
    return out


ANCHORED = {"VLLM_REST", "LMC_LEGACY", "EXC_LINE", "PREFIX_RE", "_TS_PARTS", "KUBECTL_PREFIX", "LOKI_LABELS", "STERN", "SYSLOG_5424", "JOURNALD_ISO",
            "ISO_TS", "JOURNALD_SHORT", "COMPOSE", "_END", "_SECTION", "_KV", "_ROTATED",
            "GREP_N", "GREP_H", "INDENT", "_JOURNALD_TIME_RE", "_DOCKER_LINE",  # the per-line wrappers are applied with .match at the line start
            "TORCH_C10", "GLOG", "RANK_PREFIX", "RANK_PREFIX_TIGHT", "_LOST_PAREN", "_LOST_CSI",  # records.LineReader._torch and _other: .match at a line's start
            "FOREIGN_HEADER",  # another program's header: .match at the start of a row (prefilter, joiner, blocks)
            # terminal rows (ingest/rows.py): fullmatch from a found position, or match at the row start
            "_VLLM_TAIL", "_PID_CUT", "_SUFFIX_CUT", "ESC_CUT", "ESC_REST", "_ISO_CUT", "_JOURNALD_CUT",
            "_ISO_ONE",  # ahead.iso_fronts_reference: .match at each line's start
            "RAY_CPP", "FATAL_SIGNAL",  # records.LineReader._ray: .match at the start of a line's rest
            "_PREFIX", "_VLLM_REST"}  # prefilter.peeled and _quiet / quiet_month: .match at a found position


@dataclass
class Case:
    name: str
    rx: re.Pattern
    anchored: bool
    sample: str
    #: how the code applies it (a template: ``Template.match``, which may confine its search)
    fn: Callable | None = None
    #: the most of a line the code ever hands this pattern
    limit: int = SIZE


def per_line_patterns() -> list[Case]:
    """Every template regex (anchored unless a ``text`` template) and every module-level pattern."""
    from specdiag.events import default_matcher

    cases = [Case(f"template {t.id}", t.compiled, t.source != "text", t.sample, t.match)
             for t in default_matcher().templates]
    seen = {id(c.rx) for c in cases}
    limits = _limits()
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for attr, val in sorted(vars(mod).items()):
            if isinstance(val, LazyPattern):  # specdiag.patterns.lazy: the pattern it compiles to
                val = val.compiled()
            if isinstance(val, re.Pattern) and id(val) not in seen:
                seen.add(id(val))
                name = f"{modname.rsplit('.', 1)[-1]}.{attr}"
                limit = limits.get(name, limits.get(name.split(".")[0], SIZE))
                cases.append(Case(name, val, attr in ANCHORED, "", limit=limit))
    return cases


def _class_chars(items) -> list[str]:
    out: list[str] = []
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.RANGE:
            out.extend({chr(av[0]), chr(av[1])})
        elif op is sre_c.CATEGORY:
            out.append({sre_c.CATEGORY_DIGIT: "7", sre_c.CATEGORY_SPACE: " ", sre_c.CATEGORY_WORD: "a"}.get(av, "a"))
    if negate:
        return [c for c in "a7 .:-=_/,x" if c not in out][:3]
    return out


def _walk(parsed, runs: list[str], chars: list[str]) -> None:
    run = ""
    for op, av in parsed:
        if op is sre_c.LITERAL:
            run += chr(av)
            chars.append(chr(av))
            continue
        if run:
            runs.append(run)
            run = ""
        if op is sre_c.IN:
            chars.extend(_class_chars(av))
        elif op is sre_c.ANY:
            chars.append("x")
        elif op is sre_c.SUBPATTERN:
            _walk(av[-1], runs, chars)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) or op is getattr(sre_c, "POSSESSIVE_REPEAT", None):
            _walk(av[2], runs, chars)
        elif op is sre_c.BRANCH:
            for p in av[1]:
                _walk(p, runs, chars)
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            _walk(av[1], runs, chars)
    if run:
        runs.append(run)


def _uniq(items, limit: int) -> list:
    out: list = []
    for x in items:
        if x and x not in out:
            out.append(x)
        if len(out) >= limit:
            break
    return out


def adversarial_lines(case: Case, size: int = SIZE) -> Iterator[tuple[str, str]]:
    """(label, line) pairs of about ``size`` characters shaped after the pattern and its sample."""
    pattern = case.rx.pattern
    src = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    runs: list[str] = []
    chars: list[str] = []
    _walk(sre_parse.parse(src, case.rx.flags & ~re.UNICODE if isinstance(pattern, bytes) else case.rx.flags),
          runs, chars)
    sample = case.sample
    chars = _uniq(chars + list(sample), 24)
    runs = _uniq(sorted(runs, key=len, reverse=True), 10)
    seps = _uniq([c for c in chars if not c.isalnum()], 8)
    words = _uniq([c for c in chars if c.isalnum()], 4) or ["a"]
    for c in chars:
        yield f"run of {c!r}", c * size
    for r in runs:
        yield f"{r[:20]!r} repeated", r * (size // len(r) + 1)
        yield f"{r[:20]!r} + run", r + words[0] * size
        for s in seps[:3]:
            yield f"({r[:20]!r}+{s!r}) repeated", (r + s) * (size // (len(r) + 1) + 1)
    for w in words:
        for s in seps:
            yield f"({w!r}{s!r}) repeated", (w + s) * (size // 2)
    if sample:
        yield "sample repeated", (sample + " ") * (size // (len(sample) + 1) + 1)
        cuts = _uniq([i for i, ch in enumerate(sample) if not ch.isalnum()], 8)
        for i in cuts:
            head = sample[: i + 1]
            yield f"sample[:{i + 1}] repeated", head * (size // len(head) + 1)
        yield "sample + run", sample + words[0] * size
        yield "junk + sample", "a" * size + sample


def _apply(case: Case, line) -> None:
    if case.fn is not None:
        try:
            case.fn(line)
        except ValueError:  # FieldError: a number too long to use, which is the point of some lines
            pass
    elif case.anchored:
        case.rx.match(line)
    else:
        for _ in zip(range(10000), case.rx.finditer(line), strict=False):
            pass


def _timed(case: Case, data) -> float:
    """CPU seconds of this thread: other jobs on a busy CI machine do not count against the pattern."""
    t = time.thread_time()
    _apply(case, data)
    return time.thread_time() - t


def worst(case: Case, size: int = SIZE, stop_at: float = 2.0) -> tuple[float, str]:
    """The slowest adversarial line for this pattern: (seconds, label); stops at a line over ``stop_at``."""
    is_bytes = isinstance(case.rx.pattern, bytes)
    slowest = (0.0, "")
    for label, line in adversarial_lines(case, size):
        data = line[: min(size, case.limit)]
        if is_bytes:
            data = data.encode("utf-8", "replace")
        dt = _timed(case, data)
        if dt > budget():  # a busy machine can stall one run; a real offender is slow every time
            dt = min(dt, _timed(case, data), _timed(case, data))
        if dt > slowest[0]:
            slowest = (dt, label)
        if dt > stop_at:  # over budget: no need to see the rest
            break
    return slowest


if __name__ == "__main__":  # pragma: no cover - prints the table for the issue note
    size = int(sys.argv[1]) if len(sys.argv) > 1 else SIZE
    rows = []
    for case in per_line_patterns():
        dt, label = worst(case, size)
        rows.append((dt, case.name, label))
        print(f"{dt * 1000:9.1f} ms  {case.name:32s} {min(size, case.limit):>8} B  {label}", flush=True)
    print(f"worst: {max(rows)[0] * 1000:.1f} ms ({max(rows)[1]})")
