"""Findings, evidence, causes and the shared cause-ranking helper.

Every rule explains itself the same way: a finding carries the log lines that prove it, the numbers it
computed, and a ranked list of causes, each with evidence *for* and *against*, a fix and an experiment that
would confirm it. These objects are the only thing renderers see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdiag.digests import sha1_hex

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {name: i for i, name in enumerate(SEVERITIES)}


def severity_at_least(severity: str, threshold: str) -> bool:
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[threshold]


@dataclass(frozen=True)
class Evidence:
    """One log line that supports a finding (``path:line`` plus the cleaned text)."""

    path: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text}


def evidence_of(ev: Any, limit: int | None = 600) -> Evidence:
    """The evidence line of an event (anything with a ``rec``: its place and cleaned text, cut at ``limit``
    characters; None keeps it whole)."""
    rec = ev.rec
    text = rec.display()
    return Evidence(rec.path, rec.line, text if limit is None else text[:limit])


def with_primary(evidence: list[Evidence], primary: Evidence) -> list[Evidence]:
    """``evidence`` with ``primary`` first (moved, or inserted when it was not in the list).

    The first evidence line is the finding's *primary location*: SARIF's ``locations[0]``, the GitHub
    annotation's ``file``/``line``, the markdown link. A rule lists its evidence as a narrative (lookup,
    warnings before, the error), so it names the line a reader looks for — the ERROR — here.
    """
    key = (primary.path, primary.line)
    return [primary, *(e for e in evidence if (e.path, e.line) != key)]


@dataclass
class Cause:
    """A candidate explanation, with a confidence in [0, 1] and the reasoning both ways."""

    id: str
    confidence: float
    for_: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)
    fix: str = ""
    confirm_with: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "confidence": round(float(self.confidence), 3),
            "for": list(self.for_),
            "against": list(self.against),
            "fix": self.fix,
            "confirm_with": self.confirm_with,
        }


@dataclass
class Finding:
    rule: str
    severity: str
    title: str
    summary: str = ""
    count: int = 1
    evidence: list[Evidence] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    causes: list[Cause] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    #: what identifies the incident independently of line numbers (request ids, numbers, ranks)
    identity: str = ""
    #: optional time (epoch seconds) of the first occurrence, for timelines
    first_seen: float | None = None
    #: ordering among findings of equal severity: root causes (0) before pure impact reports (-1)
    priority: int = 0
    #: the finding in one clause for the verdict line (the number and the consequence); optional, the
    #: verdict falls back to the summary's first sentence (see ``specdiag.report.verdict``)
    headline: str = ""
    #: the deployment (server) the finding belongs to; set by the engine, which knows it (rules do not)
    deployment: str | None = None
    #: the run of the deployment it belongs to (``specdiag.runs``), set only when the deployment had several
    run: int | None = None

    @property
    def fingerprint(self) -> str:
        base = self.identity or "|".join(e.text for e in self.evidence[:3])
        return sha1_hex(f"{self.rule}|{base}")

    @property
    def top_cause(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "summary": self.summary,
            "count": self.count,
            "evidence": [e.to_dict() for e in self.evidence],
            "measurements": self.measurements,
            "causes": [c.to_dict() for c in self.causes],
            "next_steps": list(self.next_steps),
            "fingerprint": self.fingerprint,
        } | ({"run": self.run} if self.run is not None else {})


class CauseBoard:
    """Scores competing causes from a prior plus weighted evidence, then normalises.

    Each cause starts from a prior. ``support`` multiplies its weight (factor > 1) and records why;
    ``oppose`` divides it and records the counter-evidence; ``rule_out`` pins it near zero because the
    configuration or version makes it impossible. Confidences are normalised to sum to at most
    ``ceiling`` so that a log that lacks discriminating evidence never yields a confident answer.
    """

    def __init__(self) -> None:
        self._causes: dict[str, Cause] = {}
        self._weights: dict[str, float] = {}
        self._ruled_out: set[str] = set()
        #: absences that were not counted because the input could not have shown the line: (cause id, what)
        self.unobserved: list[tuple[str, str]] = []
        #: when False (a fragment or excerpt), ``absent`` records instead of opposing
        self.observable = True
        #: causes with a precondition (``require``); those whose precondition the input does not show
        self._preconditioned: set[str] = set()
        self._unverified: set[str] = set()

    def add(self, cause_id: str, prior: float, fix: str = "", confirm_with: str = "") -> None:
        self._causes[cause_id] = Cause(cause_id, 0.0, fix=fix, confirm_with=confirm_with)
        self._weights[cause_id] = prior

    def __contains__(self, cause_id: str) -> bool:
        return cause_id in self._causes

    def support(self, cause_id: str, factor: float, why: str) -> None:
        if cause_id in self._causes:
            self._weights[cause_id] *= factor
            self._causes[cause_id].for_.append(why)

    def oppose(self, cause_id: str, factor: float, why: str) -> None:
        if cause_id in self._causes:
            self._weights[cause_id] /= factor
            self._causes[cause_id].against.append(why)

    def absent(self, cause_id: str, factor: float, why: str, observable: bool | None = None) -> None:
        """Counter-evidence from a line that is *not* there: counted only if the input could have shown it.

        A pasted fragment without the minutes before the error cannot show a pin-timeout warning, so its
        absence says nothing; it is kept in ``unobserved`` (what to collect) instead of lowering the cause.
        """
        if cause_id not in self._causes:
            return
        if self.observable if observable is None else observable:
            self.oppose(cause_id, factor, why)
        else:
            self.unobserved.append((cause_id, why))

    def rule_out(self, cause_id: str, why: str) -> None:
        if cause_id in self._causes:
            self._ruled_out.add(cause_id)
            self._causes[cause_id].against.append(why)

    def require(self, cause_id: str, what: str, shown: bool | None, collect: str) -> None:
        """A cause that can only hold when ``what`` is true of the deployment (a KV connector, P2P on…).

        A mechanism whose precondition the input disproves is impossible, whatever else points at it, so it
        is ruled out with the reason. When the input cannot tell (a pasted fragment), ``ranked`` keeps it
        below every cause that needs no precondition — a guess about the setup must not outrank a cause the
        lines support unconditionally — and ``collect`` names the line that would decide.
        """
        if cause_id not in self._causes:
            return
        self._preconditioned.add(cause_id)
        if shown is True:
            self._causes[cause_id].for_.append(f"precondition met: {what}")
        elif shown is False:
            self.rule_out(cause_id, f"precondition not met: the input shows no {what}")
        else:
            self._unverified.add(cause_id)
            self._causes[cause_id].against.append(f"precondition not shown: needs {what}; collect {collect}")
            self.unobserved.append((cause_id, collect))

    def note_for(self, cause_id: str, why: str) -> None:
        if cause_id in self._causes:
            self._causes[cause_id].for_.append(why)

    def ranked(self, ceiling: float = 0.9, cap: dict[str, float] | None = None) -> list[Cause]:
        """Causes best first. ``ceiling`` bounds the share of belief given to the listed causes."""
        live = {k: w for k, w in self._weights.items() if k not in self._ruled_out}
        total = sum(live.values()) or 1.0
        for cid, cause in self._causes.items():
            if cid in self._ruled_out:
                cause.confidence = 0.01
            else:
                cause.confidence = min(ceiling * live[cid] / total, ceiling)
            if cap and cid in cap:
                cause.confidence = min(cause.confidence, cap[cid])
        self._below_unconditional()
        return sorted(self._causes.values(), key=lambda c: (-c.confidence, c.id))

    def _below_unconditional(self) -> None:
        """Cap each cause with an unverified precondition just below the best cause that needs none."""
        free = [c.confidence for cid, c in self._causes.items()
                if cid not in self._preconditioned and cid not in self._ruled_out]
        if not free or not self._unverified:
            return
        top = max(free)
        for cid in self._unverified - self._ruled_out:
            cause = self._causes[cid]
            if cause.confidence >= top:
                cause.confidence = round(top * 0.9, 3)
