"""Typed events from records, via one table of message templates per upstream project.

A template row is: an id (the one used in ``docs/`` and the shared reference), the message's first word
(for O(1) dispatch), a cheap literal that must occur in the message, a regex run only on candidates,
the version range and upstream ``file:line``, and a synthetic sample that a test parses. Adding a version
or a message is adding a row. Unknown records are counted by the engine, never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from specdiag.ingest.records import Record


@dataclass(frozen=True)
class Template:
    id: str
    source: str  # "lmcache" | "vllm" | "text"
    first: str | None  # first word of the message ("Reqid:"), None = check on every record of the source
    needle: str  # literal that must occur in the message
    pattern: str  # regex (search from the start of the message)
    versions: str
    location: str
    sample: str
    ints: tuple[str, ...] = ()
    floats: tuple[str, ...] = ()
    level: str | None = None  # restrict to a level (e.g. ERROR) when the text alone is ambiguous
    compiled: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = re.M if self.source == "text" else re.S
        object.__setattr__(self, "compiled", re.compile(self.pattern, flags))

    def match(self, msg: str) -> dict | None:
        m = self.compiled.search(msg) if self.source == "text" else self.compiled.match(msg)
        if m is None:
            return None
        d = m.groupdict()
        for k in self.ints:
            v = d.get(k)
            if v is not None:
                d[k] = int(v)
        for k in self.floats:
            v = d.get(k)
            if v is not None:
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = None
        return d


class Event:
    """A recognised message: template id, the record it came from, and its parsed fields."""

    __slots__ = ("id", "rec", "f")

    def __init__(self, tid: str, rec: Record, fields: dict) -> None:
        self.id = tid
        self.rec = rec
        self.f = fields

    def __repr__(self) -> str:  # pragma: no cover
        return f"Event({self.id} {self.rec.path}:{self.rec.line} {self.f})"


def first_word(msg: str) -> str:
    """The dispatch key: first word, skipping a leading ``[req_id=...]`` tag."""
    if msg.startswith("[req_id="):
        end = msg.find("] ")
        if end > 0:
            msg = msg[end + 2 :]
    sp = msg.find(" ")
    return msg if sp < 0 else msg[:sp]


class Matcher:
    """Dispatches records to templates: first-word index, then literal needle, then regex."""

    def __init__(self, templates: Iterable[Template]) -> None:
        self.templates = list(templates)
        self.by_first: dict[tuple[str, str], list[Template]] = {}
        self.anywhere: dict[str, list[Template]] = {}
        for t in self.templates:
            if t.first is None:
                self.anywhere.setdefault(t.source, []).append(t)
            else:
                self.by_first.setdefault((t.source, t.first), []).append(t)

    def match(self, rec: Record) -> Event | None:
        src = "text" if rec.kind in ("text", "traceback") else rec.kind
        msg = rec.msg
        cands = self.by_first.get((src, first_word(msg)))
        if cands:
            for t in cands:
                if t.needle in msg and (t.level is None or t.level == rec.level):
                    d = t.match(msg if not rec.cont or t.source == "text" else rec.text)
                    if d is not None:
                        return Event(t.id, rec, d)
        extra = self.anywhere.get(src)
        if extra:
            text = rec.text if rec.cont else msg
            for t in extra:
                if t.needle in text and (t.level is None or t.level == rec.level):
                    d = t.match(text)
                    if d is not None:
                        return Event(t.id, rec, d)
        return None


_MATCHER: Matcher | None = None


def default_matcher() -> Matcher:
    global _MATCHER
    if _MATCHER is None:
        from specdiag.events.lmcache import LMCACHE_TEMPLATES
        from specdiag.events.text import TEXT_TEMPLATES
        from specdiag.events.vllm import VLLM_TEMPLATES

        _MATCHER = Matcher([*LMCACHE_TEMPLATES, *VLLM_TEMPLATES, *TEXT_TEMPLATES])
    return _MATCHER
