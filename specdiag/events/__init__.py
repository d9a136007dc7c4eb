"""Typed events from records, via one table of message templates per upstream project.

A template row is: an id (the one used in ``docs/`` and the shared reference), the message's first word
(for O(1) dispatch), a cheap literal that must occur in the message, a regex run only on candidates,
the version range and upstream ``file:line``, and a synthetic sample that a test parses. Adding a version
or a message is adding a row. Unknown records are counted by the engine, never dropped silently.

Matching runs on the record's raw bytes. Rows marked ``lazy`` (the few templates that make up most of a
busy log: lookups, stores, retrieves) are recognised by first word and literal alone; their fields are
parsed only when an analyzer reads ``event.f``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from specdiag.ingest.envelope import Record, split_suffix
from specdiag.numbers import to_float, to_int
from specdiag.patterns import lazy


class FieldError(ValueError):
    """A numeric field of a recognised message holds no usable number (``inf``, 5,000 digits, junk).

    Raised by ``Template.match`` so the engine skips that one line and names it in ``inputs[].errors``;
    a template with an unusable count would otherwise feed a wrong value (or an exception) to every rule.
    """


#: the most of a message a template regex reads (ingest already cuts lines to 64 KiB; joined records are
#: longer): bounded work per record whatever a hostile log holds
MAX_MATCH = 64 * 1024


@dataclass(frozen=True)
class Template:
    id: str
    source: str  # "lmcache" | "vllm" | "text" | "uvicorn" | "ray": the kind of record it is tried on
    #: first word of the message ("Reqid:"), or words that each begin one of its forms ("SpecDecoding|Speculative");
    #: None = check on every record of the source (its needle then makes every record holding it read)
    first: str | None
    needle: str  # literal that must occur in the message
    pattern: str  # regex (matched at the start of the message; searched anywhere for "text")
    versions: str
    location: str
    sample: str
    ints: tuple[str, ...] = ()
    floats: tuple[str, ...] = ()
    level: str | None = None  # restrict to a level (e.g. ERROR) when the text alone is ambiguous
    lazy: bool = False  # recognise by first word + needle; parse fields on first access
    #: "count": a high-volume INFO line that ingest only counts per process (keeping the latest), never dispatches
    volume: str | None = None
    #: searched ("text") patterns only: the needle is the pattern's literal start, and a match is tried only at
    #: its first 64 occurrences, each within ``near`` bytes. For patterns whose tail must scan to a far
    #: terminator (``'…', please check``), which a line repeating their prefix would make quadratic.
    near: int = 0
    #: why this vLLM/LMCache row is no message of the generated catalog (a traceback line, a plugin's
    #: message, a line built at run time from parts); empty for every row that is one: a test checks that
    #: each such row's sample is recognised by the catalog at its location, so no row describes a line
    #: upstream never printed
    outside: str = ""
    bneedle: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bneedle", self.needle.encode("utf-8"))

    @cached_property
    def compiled(self) -> re.Pattern:
        """The pattern, compiled when a record first gets past the template's first word and needle: most
        of the 120-odd templates never do in a given log, and compiling them all cost ≈ 35 ms of every
        start."""
        return re.compile(self.pattern.encode("utf-8"), re.M if self.source == "text" else re.S)

    def match(self, data: bytes | str) -> dict | None:
        if isinstance(data, str):
            data = data.encode("utf-8", "replace")
        if self.source != "text":
            m = self.compiled.match(data[:MAX_MATCH])
        elif self.near:
            m = self._match_at_needle(data)
        elif len(data) <= 2 * MAX_MATCH:
            m = self.compiled.search(data)
        else:  # a huge joined record: its head and its tail (where a traceback's exception line is)
            m = self.compiled.search(data[:MAX_MATCH]) or self.compiled.search(data[-MAX_MATCH:])
        if m is None:
            return None
        groups = m.groupdict()
        d = {k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in groups.items()}
        for k in self.ints:
            v = groups.get(k)
            if v is not None:
                n = to_int(v)  # from the bytes: digits convert without a decode
                if n is None:
                    raise FieldError(f"{self.id}: field {k!r} is not a usable integer ({d[k][:24]!r})")
                d[k] = n
        for k in self.floats:
            v = d.get(k)
            if v is not None:
                d[k] = to_float(v)  # nan/inf/junk: unknown, as vLLM itself prints nan for "no data"
        return d


    def _match_at_needle(self, data: bytes) -> re.Match | None:
        """Anchored tries at the needle's first occurrences: bounded work whatever the line length."""
        needle, pos = self.bneedle, 0
        for _ in range(64):
            i = data.find(needle, pos)
            if i < 0:
                return None
            m = self.compiled.match(data, i, i + self.near)
            if m is not None:
                return m
            pos = i + len(needle)
        return None


class Event:
    """A recognised message: template id, the record it came from, and its parsed fields ``f``."""

    __slots__ = ("id", "rec", "_f", "_t")

    def __init__(self, tid: str, rec: Record, fields: dict | None, template: Template | None = None) -> None:
        self.id = tid
        self.rec = rec
        self._f = fields
        self._t = template

    @property
    def f(self) -> dict:
        if self._f is None:
            self._f = (self._t.match(self.rec.raw_text) if self._t is not None else None) or {}
        return self._f

    def __repr__(self) -> str:  # pragma: no cover
        return f"Event({self.id} {self.rec.path}:{self.rec.line} {self.f})"


#: the id of an event whose record no hand-written template knows but the generated message catalog does
#: (``specdiag.catalog``): its one field, ``entry``, is the catalog entry
CATALOG_EVENT = "LOG"
#: the id of a warning or error record (``UNMATCHED_KINDS``) that neither a template nor the catalog knows;
#: handed only to the observers of every problem line (``Observer.levels``), never counted as recognised
UNKNOWN_EVENT = "UNK"
#: record kinds whose messages the catalog holds (the envelope said which project printed the line)
CATALOG_KINDS = frozenset({"vllm", "lmcache"})
#: record kinds whose warnings and errors are named (``UNKNOWN_EVENT``) even when nothing knows their message:
#: the catalog's, Ray's C++ core under a worker's prefix, a raw exception line
UNMATCHED_KINDS = CATALOG_KINDS | {"ray", "text", "glog"}


def _keeps(t: Template, read: frozenset[str] | None, levels: tuple[str, ...] | None) -> bool:
    """Whether template ``t`` is among those asked for: read by the analysis, and able to match a record of
    one of ``levels`` (a template bound to ERROR never matches a DEBUG record: ``Matcher.match``)."""
    return (read is None or t.id in read) and (levels is None or t.level is None or t.level in levels)


def first_word(msg: bytes) -> bytes:
    """The dispatch key: first word, skipping a leading ``[req_id=...]`` tag."""
    if msg[:8] == b"[req_id=":
        end = msg.find(b"] ")
        if end > 0:
            sp = msg.find(b" ", end + 2)
            return msg[end + 2 :] if sp < 0 else msg[end + 2 : sp]
    sp = msg.find(b" ")
    return msg if sp < 0 else msg[:sp]


class Recognising(NamedTuple):
    """What ``Matcher.match`` looks a DEBUG/INFO message of one source up by (``Matcher.recognising``):
    ``dispatch`` every template's first words with their needles, ``needles`` those of the templates tried on
    every record, ``candidates`` the catalog's text-search formats under ``store.candidate_key(level, index,
    word)``, each as its simple pattern's ASCII literals and kinds, or None where the compiled copy cannot
    check it (a text that reaches it is taken as recognised)."""

    dispatch: dict[bytes, tuple[bytes, ...]]
    needles: tuple[bytes, ...]
    candidates: dict[bytes, tuple[tuple[tuple[bytes, ...], str] | None, ...]]


class Matcher:
    """Dispatches records to templates: first-word index, then literal needle, then regex."""

    def __init__(self, templates: Iterable[Template]) -> None:
        self.templates = list(templates)
        self.by_first: dict[tuple[str, bytes], list[Template]] = {}
        self.anywhere: dict[str, list[Template]] = {}
        self._recognising: dict[str, Recognising] = {}
        for t in self.templates:
            if t.first is None:
                self.anywhere.setdefault(t.source, []).append(t)
            else:
                for word in t.first.split("|"):
                    self.by_first.setdefault((t.source, word.encode()), []).append(t)

    def dispatch(self, source: str, read: frozenset[str] | None = None,
                 levels: tuple[str, ...] | None = None) -> dict[bytes, list[bytes]]:
        """The first words on which templates of ``source`` are dispatched, each with the needles of those
        templates (a record starting with the word and holding one of them may be theirs); only the
        templates in ``read``, and those that can match a record of one of ``levels``, when given."""
        out = {word: [t.bneedle for t in ts if _keeps(t, read, levels)]
               for (src, word), ts in self.by_first.items() if src == source}
        return {word: ns for word, ns in out.items() if ns}

    def needles(self, source: str, read: frozenset[str] | None = None,
                levels: tuple[str, ...] | None = None) -> list[bytes]:
        """The needles of the templates of ``source`` that are tried on every record of it (of those in
        ``read``, and those that can match a record of one of ``levels``, when given)."""
        return [t.bneedle for t in self.anywhere.get(source, ()) if _keeps(t, read, levels)]

    def recognising(self, source: str) -> Recognising:
        """What can make a DEBUG or INFO record of ``source`` recognised, in the form the prefilter checks a
        text against (``prefilter.unrecognisable``): every template's dispatch words with their needles, the
        needles of those tried on every record, and the catalog's text-search candidates
        (``Catalog.text_candidate_lines``) keyed by level, index and word. Made once per matcher and source."""
        got = self._recognising.get(source)
        if got is None:
            from specdiag.catalog import catalog
            from specdiag.catalog.store import (
                TEXT_CANDIDATE_LEVELS as levels,  # a template bound to ERROR reads none
            )

            dispatch: dict[bytes, list[bytes]] = {}
            for (src, word), ts in self.by_first.items():
                if src == source:
                    dispatch.setdefault(word, []).extend(t.bneedle for t in ts if _keeps(t, None, levels))
            candidates: dict[bytes, list[tuple[tuple[bytes, ...], str] | None]] = {}
            for line in catalog().text_candidate_lines(source):
                key, *spec = line.encode().split(b"\x1f")
                candidates.setdefault(key, []).append((tuple(spec[1:]), spec[0].decode()) if spec else None)
            got = self._recognising[source] = Recognising(
                {w: tuple(ns) for w, ns in dispatch.items() if ns},
                tuple(t.bneedle for t in self.anywhere.get(source, ()) if _keeps(t, None, levels)),
                {k: tuple(v) for k, v in candidates.items()})
        return got

    def match(self, rec: Record) -> Event | None:
        kind = rec.kind
        if kind == "bare":
            return self._bare(rec)
        src = "text" if kind == "text" or kind == "traceback" else kind
        raw = rec.raw
        word = first_word(raw)
        cands = self.by_first.get((src, word))
        if cands:
            data = rec.raw_text if rec.cont else raw
            for t in cands:
                if t.bneedle in data and (t.level is None or t.level == rec.level):
                    if t.lazy:
                        return Event(t.id, rec, None, t)
                    d = t.match(data)
                    if d is not None:
                        return Event(t.id, rec, d)
        extra = self.anywhere.get(src)
        if extra:
            data = rec.raw_text if rec.cont else raw
            for t in extra:
                if t.bneedle in data and (t.level is None or t.level == rec.level):
                    d = t.match(data)
                    if d is not None:
                        return Event(t.id, rec, d)
        if kind in CATALOG_KINDS:
            entry = catalog_entry(rec)
            if entry is not None:
                return Event(CATALOG_EVENT, rec, {"entry": entry})
        return None


    def _bare(self, rec: Record) -> Event | None:
        """A line pasted without any header (``sources.BARE_PASTE_MAX``): a vLLM or LMCache message by its text
        alone. A template dispatched on its first word reads it as that project's record; an error text a
        specific raw-text template knows (``The model's max seq len … KV cache``, raised, not logged) as an
        ERROR line of raw text; else the catalog's text search, for a format with enough literal text that
        another program's line does not fit it by chance. The record is remade as the project's (or raw
        text), at the level the catalog gives the message, with no time and no place."""
        from specdiag.catalog import catalog

        raw = rec.raw
        body, file, line, logger = split_suffix(raw)  # LMCache's ``(file.py:N:logger)``: its record, headless
        place = (file, line, logger) if file is not None else None
        for src in ("lmcache", "vllm") if place else ("vllm", "lmcache"):
            data = body if src == "lmcache" else raw
            word = first_word(data)
            for t in (*self.by_first.get((src, word), ()), *self._specific_anywhere(src)):
                if t.bneedle in data and (d := t.match(data)) is not None:
                    entry = catalog().match(data.decode("utf-8", "replace")[:MAX_MATCH], project=src)
                    level = t.level or (entry.level if entry is not None else "INFO")
                    return Event(t.id, _as_message(rec, src, level, place if src == "lmcache" else None), d, t)
        for t in self.anywhere.get("text", ()):
            if t.id not in GENERIC_TEXT and t.bneedle in raw and (d := t.match(raw)) is not None:
                return Event(t.id, _as_message(rec, "text", "ERROR"), d, t)
        text = body.decode("utf-8", "replace")[:MAX_MATCH]
        entry = catalog().match(text, project="lmcache", file=file.decode("utf-8", "replace"), line=line) if place else None
        entry = entry or catalog().match(text, project=None)
        if entry is None or entry.project not in ("vllm", "lmcache") or _literal_chars(entry.fmt) < MIN_BARE_LITERAL:
            return None
        return Event(CATALOG_EVENT, _as_message(rec, entry.project, entry.level,
                                                place if entry.project == "lmcache" else None), {"entry": entry})

    def _specific_anywhere(self, source: str) -> tuple[Template, ...]:
        """The templates of ``source`` tried on every record that tell a line apart on their own
        (``shapes.specific_template``: not ``V_EXC``, which reads any exception: no proof that the line is vLLM's)."""
        from specdiag.ingest.shapes import specific_template

        return tuple(t for t in self.anywhere.get(source, ()) if specific_template(t))


#: raw-text templates that take any exception or frame: no proof that a bare pasted line is vLLM's
GENERIC_TEXT = frozenset({"E_GENERIC", "E_TB_FRAMES", "E_BANNER"})
#: the literal characters a catalogued format needs before a bare pasted line is taken for its message
MIN_BARE_LITERAL = 24


#: a placeholder of a logging call's format (``%s``, ``%d``, ``%.2f``, ``{}``, ``{name}``)
PLACEHOLDER = lazy(r"%[-#0-9.]{0,8}[sdirfgxe]|\{[^{}]{0,40}\}")


def _literal_chars(fmt: str | None) -> int:
    """The characters of ``fmt`` outside its placeholders."""
    return len(PLACEHOLDER.sub("", fmt)) if fmt else 0


def _as_message(rec: Record, project: str, level: str, place: tuple | None = None) -> Record:
    """A bare pasted line as the record of ``project`` the catalog says it is: no time, and no place unless the
    line kept LMCache's ``(file.py:N:logger)`` suffix (``place``: file, line, logger; the text without it)."""
    if place is None:
        return Record(rec.path, rec.line, rec.origin, project, level, None, rec.year, None, None, None, rec.raw)
    file, line, logger = place
    return Record(rec.path, rec.line, rec.origin, project, level, None, rec.year, file, line, logger,
                  split_suffix(rec.raw)[0])


def catalog_entry(rec: Record) -> Any:
    """The catalog entry of a record's message, found by where the envelope says it was printed (LMCache's
    ``(file:line:logger)`` suffix, vLLM's ``[file:line]``) and checked against its text; by the text alone
    when the envelope names no location (a paste without it)."""
    from specdiag.catalog import catalog

    text = rec.text if rec.cont else rec.msg
    return catalog().match(text[:MAX_MATCH], project=rec.kind, file=_printed_path(rec), line=rec.src_line,
                           level=rec.level)


def recognised_anywhere_at(rec: Record) -> bool:
    """Whether the catalog recognises every text a record of this level prints at this place (one message
    was ever printed there: ``Store.match`` then returns it whatever the text), so a later record of the
    place needs no reading to be counted as recognised."""
    from specdiag.catalog import catalog

    file = _printed_path(rec)
    return bool(file) and rec.src_line is not None and catalog().one_message_at(
        file, rec.src_line, project=rec.kind, level=rec.level)


def nothing_printed_at(rec: Record) -> bool:
    """Whether no catalogued release prints a message of the record's project and level where its envelope
    says it was printed (``Catalog.nothing_printed_at``); False for a record whose envelope names no place."""
    from specdiag.catalog import catalog

    file = _printed_path(rec)
    return bool(file) and rec.src_line is not None and catalog().nothing_printed_at(
        file, rec.src_line, project=rec.kind, level=rec.level)


def recognised_fits_at(rec: Record, entry: Any) -> tuple[tuple[str, ...], str] | None:
    """``entry``'s literals and placeholder kinds when any text it fits at this record's place is recognised
    (``Store.simple_pattern_here``); None otherwise."""
    from specdiag.catalog import catalog

    file = _printed_path(rec)
    if not file or rec.src_line is None:
        return None
    return catalog().simple_pattern_here(entry, file, rec.src_line, project=rec.kind, level=rec.level)


def _printed_path(rec: Record) -> str | None:
    """The file the envelope names, as precise as it says: LMCache prints its logger beside the bare file
    name, and the module that logger names (``Record.module``: ``v1/cache_engine.py``) tells apart the
    dozens of ``utils.py`` and ``__main__.py`` files."""
    file, module = rec.file, rec.module
    if file and module and module.rsplit("/", 1)[-1] == file:
        return module
    return file


_DIGITS = lazy(r"\d+")
_HEX = lazy(r"0x[0-9a-fA-F]+|[0-9a-f]{8,}")


#: where a traceback frame's path stops being the host's and becomes the package's
_PACKAGE_ROOTS = ("site-packages/", "dist-packages/")


def frame_path(path: str) -> str:
    """A frame's file from its package on (``lmcache/v1/…``): the path before it is the host's. A source checkout
    (``/home/u/vllm/vllm/entrypoints/…``, no site-packages) is cut at its last ``/vllm/`` or ``/lmcache/``."""
    for mark in _PACKAGE_ROOTS:
        if mark in path:
            return path.split(mark, 1)[1]
    cut = max(path.rfind("/vllm/"), path.rfind("/lmcache/"))
    return path[cut + 1 :] if cut >= 0 else path


def frame_place(file: str, line: object, func: str | None) -> str:
    """How a frame is named in findings: ``lmcache/integration/vllm/vllm_v1_adapter.py:1324 in wait_for_save``."""
    return f"{frame_path(file)}:{line} in {func}"


def line_label(ev: Event) -> str:
    """What a line no catalog entry names says: a traceback's exception (``redis.exceptions.ConnectionError:
    Error 111 …``, the line a reader looks for, not its ``Traceback (most recent call last):`` head), else
    its message. LOG001 lists a line by it, and a rule claims a line by its shape (``shape_claim``)."""
    f = ev.f or {}
    exc = f.get("exc")
    if exc and ev.rec.kind == "traceback":
        detail = f.get("detail")
        return f"{exc}: {detail}" if detail else str(exc)
    return ev.rec.msg


def prints_format(fmt: str, msg: str) -> bool:
    """Whether ``msg`` starts as ``fmt`` prints (its text up to the first placeholder): a line that does not is
    another line of that call's output (an exception's text or traceback under ``logger.exception`` or
    ``exc_info``), printed under the same header."""
    m = PLACEHOLDER.search(fmt)
    head = (fmt[: m.start()] if m else fmt)[:24]
    return msg.startswith(head)


def innermost_frame(raw: bytes) -> str | None:
    """Where a raw traceback raised: its last frame (the frames template's pattern, ``E_TB_FRAMES``), the path
    shortened to the package (``redis/connection.py:390 in <lambda>``); when that frame is outside vLLM and
    LMCache (the standard library, a client library), the innermost frame of theirs first, which says what
    they were doing; None without a frame."""
    from collections import deque

    frames = deque(template("E_TB_FRAMES").compiled.finditer(raw), maxlen=64)
    if not frames:
        return None
    last = _frame_text(frames[-1])
    if _ours(last):
        return last
    own = next((f for f in map(_frame_text, reversed(frames)) if _ours(f)), None)
    return f"{own} (the innermost vLLM/LMCache frame; it raised in {last})" if own else last


#: a native frame as apache-tvm-ffi's crash handler prints it (``  File "<unknown>", line 0, in swap_blocks(…)``)
_SIGNATURE = lazy(r"[(<]")  # where a C++ symbol's arguments or template arguments start
_NATIVE_FRAME = lazy(rb'^[ \t]{0,8}File "<unknown>", line \d{1,9}, in ([^\n]{1,200})', re.M)


def native_stack(raw: bytes, frames: int = 3) -> str | None:
    """Where a native crash happened: the first ``frames`` frames of a stack printed innermost first (the
    handler's own order, unlike Python's), each cut at its arguments; None without one."""
    names = []
    for m in _NATIVE_FRAME.finditer(raw):
        names.append(_SIGNATURE.split(m.group(1).decode("utf-8", "replace"), 1)[0].strip()[:120])
        if len(names) == frames:
            break
    return f"native code: {' <- '.join(names)}" if names else None


def _ours(frame: str) -> bool:
    return frame.startswith(("vllm/", "lmcache/"))


def _frame_text(frame: re.Match) -> str:
    d = lambda k: frame.group(k).decode("utf-8", "replace")  # noqa: E731
    return frame_place(d("file"), d("line"), d("func"))


def message_shape(msg: str, limit: int = 100) -> str:
    """A message with its numbers and addresses blanked (first ``limit`` characters): one message printed
    with different values is one shape, for grouping lines no template or catalog entry knows."""
    return _HEX.sub("…", _DIGITS.sub("N", msg[:limit]))


def family_description(family: str) -> str:
    """What a signal family is, in a few words (the catalog's family table; the family name itself for a
    family the table does not describe)."""
    from specdiag.catalog.families import FAMILIES

    if family == "unrecognised":
        return "messages no catalogued vLLM or LMCache release prints"
    return FAMILIES.get(family, family)


def entry_of(ev: Event) -> Any:
    """The catalog entry behind an event: its own for a catalog event, else the entry the record's text and
    location match (a hand-written template's line is one of the catalog's messages too); None when the
    catalog does not know it (a record of an unknown message, a pre-catalog release)."""
    if ev.id == CATALOG_EVENT:
        return ev.f.get("entry")
    if ev.id == UNKNOWN_EVENT or ev.rec.kind not in CATALOG_KINDS:
        return None
    return catalog_entry(ev.rec)


def template(tid: str) -> Template:
    """The template with id ``tid`` (StopIteration for an unknown id, as callers expect)."""
    global _BY_ID
    if _BY_ID is None:
        _BY_ID = {}
        for t in default_matcher().templates:
            _BY_ID.setdefault(t.id, t)
    t = _BY_ID.get(tid)
    if t is None:
        raise StopIteration(tid)
    return t


_BY_ID: dict[str, Template] | None = None


_MATCHER: Matcher | None = None


def default_matcher() -> Matcher:
    global _MATCHER
    if _MATCHER is None:
        from specdiag.events.lmcache import LMCACHE_TEMPLATES
        from specdiag.events.ray import RAY_TEMPLATES
        from specdiag.events.text import TEXT_TEMPLATES
        from specdiag.events.torch import TORCH_TEMPLATES
        from specdiag.events.vllm import VLLM_TEMPLATES

        # Ray's and torch's templates before the generic exception ones of raw text (E_GENERIC, E_TB_FRAMES): a
        # traceback whose text says a Ray actor's process died is that death, not just an exception
        _MATCHER = Matcher([*LMCACHE_TEMPLATES, *VLLM_TEMPLATES, *RAY_TEMPLATES, *TORCH_TEMPLATES, *TEXT_TEMPLATES])
    return _MATCHER
