"""The accounting of upstream problem lines: every vLLM or LMCache warning and error lands in a finding.

The specific rules diagnose what they know; a line they read for a finding they reported is theirs. Every
other line at WARNING or worse — a message of one of the hundreds of backends, connectors and servers no
rule reads, or one no catalog holds — is grouped here by signal family (the family the generated message
catalog gives its upstream message), with its count, first and last line, ranks, and where upstream prints
it, so that no error goes unexplained and a report never calls a log with error lines clean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from specdiag.analyzers.base import Rule, register
from specdiag.context import Context
from specdiag.events import UNKNOWN_EVENT, Event, entry_of, family_description
from specdiag.findings import Evidence, Finding
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: distinct messages kept per family (the rest are counted as "more messages")
MAX_MESSAGES = 40
#: ranks named per message and per family
MAX_RANKS = 64
#: messages a finding shows evidence for (first and last line of each)
SHOWN = 3
#: the family of a line no template and no catalog entry knows
UNRECOGNISED = "unrecognised"
_DIGITS = re.compile(r"\d+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


@dataclass
class _Message:
    """One upstream message's lines in this run: bounded, whatever their number."""

    label: str
    project: str
    level: str
    location: str | None
    releases: str | None
    first: Evidence
    #: the latest record (kept, not rendered: a flood of one warning costs a reference per line)
    last_rec: Any
    first_seen: float | None
    count: int = 0
    ranks: set[str] = field(default_factory=set)

    def evidence(self) -> tuple[Evidence, ...]:
        if self.count < 2:
            return (self.first,)
        r = self.last_rec
        return self.first, Evidence(r.path, r.line, r.display()[:600])

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.label, "project": self.project, "level": self.level, "count": self.count,
                "location": self.location, "releases": self.releases, "ranks": sorted(self.ranks)}


def _evidence(ev: Event) -> Evidence:
    return Evidence(ev.rec.path, ev.rec.line, ev.rec.display()[:600])


class _UpstreamLines(Rule):
    """Shared by the error and the warning accounting: what differs is the levels and the severity."""

    family = "LOG"
    late = True
    project_names: ClassVar[dict[str, str]] = {"vllm": "vLLM", "lmcache": "LMCache"}

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        #: (family, template id, message key) -> message; the key is the format, so one message's copies in
        #: moved modules (and the traceback lines vLLM prints under its header) are one message
        self.messages: dict[tuple[str, str, str], _Message] = {}
        self.more: dict[str, int] = {}
        self._entries: dict[tuple[str, str | None, int | None], Any] = {}

    def observe(self, ev: Event) -> None:
        entry = self._entry(ev)
        family = (entry.family if entry is not None else None) or (UNRECOGNISED if ev.id == UNKNOWN_EVENT
                                                                    else "other")
        key = (family, ev.id, (entry.fmt or entry.id) if entry is not None else _shape(ev.rec.msg))
        msg = self.messages.get(key)
        if msg is None:
            if sum(1 for k in self.messages if k[0] == family) >= MAX_MESSAGES:
                self.more[family] = self.more.get(family, 0) + 1
                return
            msg = self.messages[key] = _new_message(ev, entry)
        msg.count += 1
        msg.last_rec = ev.rec
        rank = ev.rec.origin.rank_label
        if rank and len(msg.ranks) < MAX_RANKS:
            msg.ranks.add(rank)

    def _entry(self, ev: Event) -> Any:
        """The catalog entry, asked once per template and printed location (the catalog's text match is
        the expensive part, and one location prints one message)."""
        if ev.id == UNKNOWN_EVENT:
            return None
        rec = ev.rec
        key = (ev.id, rec.file, rec.src_line)
        if rec.file is None or ev.id == "LOG":
            return entry_of(ev)
        if key not in self._entries:
            self._entries[key] = entry_of(ev)
        return self._entries[key]

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        by_family: dict[str, list[_Message]] = {}
        for (family, tid, _), msg in self.messages.items():
            if tid not in run.explained:
                by_family.setdefault(family, []).append(msg)
        return [self._finding(family, sorted(msgs, key=lambda m: -m.count))
                for family, msgs in sorted(by_family.items(), key=lambda kv: -sum(m.count for m in kv[1]))]

    def _finding(self, family: str, msgs: list[_Message]) -> Finding:
        lines = sum(m.count for m in msgs) + self.more.get(family, 0)
        top = msgs[0]
        projects = sorted({self.project_names.get(m.project, m.project) for m in msgs})
        level = "ERROR" if any(m.level in ("ERROR", "CRITICAL") for m in msgs) else "WARNING"
        what = f"{lines} {'/'.join(projects)} {level} line{'s' if lines != 1 else ''}"
        where = f" at {top.location}" if top.location else ""
        head = f"{what} no rule explains — {family}: '{_short(top.label)}' ×{top.count}{where}"
        evidence = [e for m in msgs[:SHOWN] for e in m.evidence()]
        ranks = sorted({r for m in msgs for r in m.ranks})
        return Finding(
            rule=self.code, severity=self.severity, title=self.title, headline=head,
            summary=_summary(family, what, msgs, self.more.get(family, 0)), count=lines, evidence=evidence,
            measurements={"family": family, "lines": lines, "ranks": ranks,
                          "messages": [m.to_dict() for m in msgs[:MAX_MESSAGES]]},
            next_steps=_next_steps(family, top), identity=f"{self.code}|{family}|{top.label}",
            first_seen=min((m.first_seen for m in msgs if m.first_seen is not None), default=None), priority=-1,
        )


def _new_message(ev: Event, entry: Any) -> _Message:
    first = _evidence(ev)
    rec = ev.rec
    if entry is not None:
        return _Message(entry.fmt or rec.msg[:160], entry.project, rec.level, f"{entry.project} {entry.location()}",
                        entry.release_range(), first, rec, rec_time(rec))
    loc = f"{rec.kind} {rec.file}:{rec.src_line}" if rec.file else None
    return _Message(rec.msg[:160], rec.kind, rec.level, loc, None, first, rec, rec_time(rec))


def _shape(msg: str) -> str:
    """An unknown message's key: its first 100 characters with numbers and addresses blanked, so one
    message with different values is one group."""
    return _DIGITS.sub("N", _HEX.sub("0x…", msg[:100]))


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(family: str, what: str, msgs: list[_Message], more: int) -> str:
    desc = family_description(family)
    parts = [f"'{_short(m.label, 100)}' ×{m.count}" + (f" ({m.location}, {m.releases})" if m.location else "")
             for m in msgs[:5]]
    rest = len(msgs) - 5
    tail = (f"; {rest} more message(s)" if rest > 0 else "") + (f"; {more} more line(s) of other messages"
                                                               if more else "")
    return (f"{what} of the {family} family ({desc}) that no specific rule read for a diagnosis: "
            f"{'; '.join(parts)}{tail}.")


def _next_steps(family: str, top: _Message) -> list[str]:
    if family == UNRECOGNISED:
        return [f"'{_short(top.label, 60)}' is in no catalogued vLLM/LMCache release: note the versions in use "
                "(pip show vllm lmcache) and look the message up in that release's source"]
    where = f" ({top.location}, releases {top.releases})" if top.location else ""
    return [f"read where upstream prints '{_short(top.label, 60)}'{where} for the condition it reports, and the "
            "lines of the same rank just before it"]


@register
class UpstreamErrors(_UpstreamLines):
    """vLLM or LMCache ERROR lines that no specific rule explains.

    Detects: every record at ERROR or CRITICAL printed by vLLM or LMCache that no rule read for a finding it
    reported — the messages of the storage backends, KV connectors, servers and adapters no specific rule
    diagnoses, and messages no catalogued release prints (family ``unrecognised``). Lines are grouped by
    the signal family the message catalog gives their upstream message, with counts, the first and last
    line, the ranks and the upstream location and releases.

    Why it matters: an error the tool cannot diagnose is still an error; a report that called such a log
    clean would hide it. This finding names it and where upstream prints it, so it can be read.

    Causes weighed: none — this is an account of lines, not a diagnosis; the specific rules diagnose.

    Fix: read the named upstream location for the condition it reports.

    References: the message catalog generated from the vLLM and LMCache releases' own source
    (``specdiag/catalog``, ``docs/log-formats.md``).
    """

    code = "LOG001"
    name = "upstream-errors-unexplained"
    title = "vLLM/LMCache ERROR lines that no specific rule explains"
    severity = "warning"
    levels = frozenset({"ERROR", "CRITICAL"})


@register
class UpstreamWarnings(_UpstreamLines):
    """vLLM or LMCache WARNING lines that no specific rule explains.

    Detects: every WARNING record printed by vLLM or LMCache that no rule read for a finding it reported,
    grouped by signal family as for LOG001.

    Why it matters: warnings are often the precursor of the incident someone is looking for (memory
    pressure, a backend retrying, a connection lost); listing them by family shows what else the servers
    said.

    Causes weighed: none — an account of lines, not a diagnosis.

    Fix: read the named upstream location for the condition it reports.

    References: the message catalog (``specdiag/catalog``, ``docs/log-formats.md``).
    """

    code = "LOG002"
    name = "upstream-warnings-unexplained"
    title = "vLLM/LMCache WARNING lines that no specific rule explains"
    severity = "info"
    levels = frozenset({"WARNING"})
