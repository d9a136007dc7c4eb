"""How much of each release's message space the catalog recognises: every message rendered with sample
values, matched back at the line that release prints it from.

Used by ``scripts/gen_format_docs.py`` (the coverage table of ``docs/log-formats.md``) and by the tests,
so the published figure and the tested one are the same computation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from specdiag.catalog.entry import Entry
from specdiag.catalog.store import Catalog

PROBLEM = frozenset({"WARNING", "ERROR", "CRITICAL"})


@dataclass
class ReleaseCoverage:
    """One release's messages by level, and how many of them were recognised as themselves."""

    release: str
    total: Counter = field(default_factory=Counter)
    recognised: Counter = field(default_factory=Counter)

    def rate(self, levels: frozenset[str] | None = None) -> float:
        keys = [k for k in self.total if levels is None or k in levels]
        n = sum(self.total[k] for k in keys)
        return sum(self.recognised[k] for k in keys) / n if n else 1.0


def indistinguishable(got: Entry | None, want: Entry, line: int) -> bool:
    """``got`` is ``want``, or a message no log line can tell from it: the same format, or one of the same
    level printed at the same file name and line (a copy in a moved module, the same call twice in a file)."""
    if got is None:
        return False
    if got.id == want.id or (got.fmt is not None and got.fmt == want.fmt):
        return True
    same_file = got.module.rsplit("/", 1)[-1] == want.module.rsplit("/", 1)[-1]
    return same_file and got.level == want.level and line in got.lines.values()


def release_coverage(cat: Catalog) -> dict[tuple[str, str], ReleaseCoverage]:
    """(project, release) → its coverage: each entry's sample matched at that release's line, with the
    module path the LMCache envelope's logger gives and the bare file name vLLM prints."""
    out: dict[tuple[str, str], ReleaseCoverage] = {}
    for e in cat.entries:
        sample = cat.sample(e) if e.fmt else "x1"
        path = ("lmcache/" + e.module) if e.project == "lmcache" else e.module.rsplit("/", 1)[-1]
        for release, line in e.lines.items():
            cov = out.setdefault((e.project, release), ReleaseCoverage(release))
            cov.total[e.level] += 1
            got = cat.match(sample, project=e.project, file=path, line=line, level=e.level)
            if indistinguishable(got, e, line):
                cov.recognised[e.level] += 1
    return out
