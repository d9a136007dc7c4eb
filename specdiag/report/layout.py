"""One layout of a finding, shared by every renderer that shows a finding in full (terminal, HTML, markdown).

A reader needs the same parts whatever the channel: the head (severity, rule, title, how often), the
arithmetic (the summary), the numbers, the causes ranked with the evidence for and against each, the top
cause's fix and the experiment that would confirm it, the popular suspect the evidence argues against,
the log lines with their source and the next steps. They are picked here, once, from the ``Finding``:
which cause is the top one, which is the suspect, which evidence line is the primary location. A renderer
only decides how much of each its channel has room for and formats it with that channel's escaping
(``specdiag.sanitize``); nothing here parses a log or escapes text, so no channel's escaping can be
weakened by another's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specdiag.findings import Cause, Evidence, Finding

#: the cause users suspect first for a KV shortfall; every full layout says why the evidence rejects it
WHY_NOT_CAUSE = "decode-cache-not-saved"
#: the LMCache setting that suspect is about, as the layouts name it ("Why not save_decode_cache")
WHY_NOT_SETTING = "save_decode_cache"
#: how many of the evidence's reasons against that suspect every layout shows
WHY_NOT_REASONS = 3
#: severities a renderer has a style for; anything else is shown as the mildest
SEVERITY_NAMES = ("error", "warning", "info")


@dataclass(frozen=True)
class CauseView:
    """One ranked cause: its place (1 = most likely), confidence and the reasons both ways."""

    rank: int
    id: str
    confidence: float
    for_: tuple[str, ...]
    against: tuple[str, ...]
    fix: str
    confirm_with: str


@dataclass(frozen=True)
class EvidenceLine:
    """A log line and where it came from; ``primary`` marks the finding's location (the CI formats' one)."""

    path: str
    line: int
    text: str
    primary: bool

    @property
    def source(self) -> str:
        """``path:line`` as the finding recorded it (renderers that shorten paths use ``path`` and ``line``)."""
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class FindingView:
    """The parts of a finding every full layout shows, in the order they are shown."""

    rule: str
    severity: str
    title: str
    count: int
    first_seen: float | None
    summary: str
    measurements: Mapping[str, Any]
    causes: tuple[CauseView, ...]
    evidence: tuple[EvidenceLine, ...]
    next_steps: tuple[str, ...]
    fingerprint: str

    @property
    def top(self) -> CauseView | None:
        """The most likely cause (its fix and confirming experiment are the finding's)."""
        return self.causes[0] if self.causes else None

    @property
    def fix(self) -> str:
        return self.top.fix if self.top else ""

    @property
    def confirm_with(self) -> str:
        return self.top.confirm_with if self.top else ""

    @property
    def why_not(self) -> CauseView | None:
        """The popular suspect when the evidence did not put it first: shown with the reasons against it."""
        return next((c for c in self.causes[1:] if c.id == WHY_NOT_CAUSE), None)

    @property
    def primary(self) -> EvidenceLine | None:
        """The line that proves the finding (the rule puts it first)."""
        return self.evidence[0] if self.evidence else None

    def split_causes(self, limit: int | None) -> tuple[tuple[CauseView, ...], tuple[CauseView, ...]]:
        """The first ``limit`` causes (all for None) and the rest, which a layout only names."""
        if limit is None:
            return self.causes, ()
        return self.causes[:limit], self.causes[limit:]

    def evidence_in_log_order(self, limit: int) -> list[EvidenceLine]:
        """The first ``limit`` evidence lines (the primary one included) sorted by file and line."""
        return sorted(self.evidence[:limit], key=lambda e: (e.path, e.line))


def _cause_view(rank: int, c: Cause) -> CauseView:
    return CauseView(rank, c.id, c.confidence, tuple(c.for_), tuple(c.against), c.fix, c.confirm_with)


def _evidence_lines(evidence: list[Evidence]) -> tuple[EvidenceLine, ...]:
    return tuple(EvidenceLine(e.path, e.line, e.text, i == 0) for i, e in enumerate(evidence))


def finding_view(f: Finding) -> FindingView:
    """The layout's parts of ``f``; strings are the finding's own (unescaped: each renderer escapes)."""
    return FindingView(
        rule=f.rule,
        severity=f.severity if f.severity in SEVERITY_NAMES else "info",
        title=f.title,
        count=f.count,
        first_seen=getattr(f, "first_seen", None),
        summary=f.summary,
        measurements=f.measurements or {},
        causes=tuple(_cause_view(i, c) for i, c in enumerate(f.causes or [], 1)),
        evidence=_evidence_lines(f.evidence or []),
        next_steps=tuple(f.next_steps or ()),
        fingerprint=f.fingerprint,
    )


__all__ = ["WHY_NOT_CAUSE", "WHY_NOT_SETTING", "CauseView", "EvidenceLine", "FindingView", "finding_view"]
