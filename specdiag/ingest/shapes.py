"""Record headers other than vLLM's and LMCache's own formatters: Python logging's common formats with a
vLLM or LMCache logger name, and the bare shapes a paste leaves when the time was cut off.

Why apart from ``records.py``: these shapes are rare (a deployment that set ``VLLM_CONFIGURE_LOGGING=0``
or its own logging config, a user who pasted a line without its timestamp), so every test here starts
with a literal comparison a foreign line fails at once, and the per-line state machine only asks
:func:`read_head` for a line its own parsers did not take. Pure: no state, no I/O.

Accepted, and why each is safe:

* ``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` and ``%(levelname)s:%(name)s:%(message)s``
  (``logging.basicConfig``'s default): only when the logger name is ``vllm``/``lmcache`` or below it. The
  name says the project; an app's own logger (``myapp.db``) stays unrecognised;
* ``LMCache LEVEL: msg [(file.py:NNN:logger)]``: LMCache's formatter without its ``[time] `` — the
  project's name printed before the level is unmistakable;
* ``LEVEL [file.py:NNN] msg``: vLLM's formatter without its time — when the message is a known template's,
  the file is one the template tables name, or (at WARNING or worse) a catalogued vLLM release prints this
  message at this level from that file and line;
* ``LEVEL msg``: only when the message is a known vLLM or LMCache template's, by a template specific
  enough to tell (first word, literal and anchored pattern; the catch-all ones such as "any exception
  line" or "``.*Shutting down``" do not count).

A time the line does not print stays unknown (``ts`` None): none is invented.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from specdiag.ingest.envelope import LMC_LEVELS, VLLM_LEVELS, split_suffix
from specdiag.numbers import to_int
from specdiag.patterns import lazy

#: the logger name of vLLM's vendored copy of LMCache's adapter: LMCache's messages, under a vLLM name
VENDORED = b".lmcache_integration"
_NAME = rb"((?:vllm|lmcache)(?:\.[\w.]{1,200})?)"
_LEVEL = rb"(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
#: ``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` (asctime with ``,mmm``, ``.ffffff`` or none)
ASCTIME = lazy(rb"(\d{4})-(\d\d-\d\d) (\d\d:\d\d:\d\d)(?:[,.](\d{1,6}))? - " + _NAME + rb" - " + _LEVEL
               + rb" - ")
#: ``%(levelname)s:%(name)s:%(message)s``
BASIC = lazy(_LEVEL + rb":" + _NAME + rb":")
#: vLLM's ``[file.py:NNN] `` (0.31+ may print a path) right after the level, the time cut off
BARE_WHERE = lazy(rb"\[([\w./-]{1,200}\.py):(\d{1,9})\] ?")
_LEVEL_FIRST = frozenset(b"DIWEC")
#: the levels at which a bare ``LEVEL msg`` line is read by its message alone: what users paste from an incident
_ALERT = frozenset({"WARNING", "ERROR", "CRITICAL"})
#: the first bytes a header of these shapes can start with (a one-byte ``bytes`` each: ``line[:1] in``)
SHAPE_FIRST = frozenset(bytes([c]) for c in b"0123456789LDIWEC")
#: every shape's fixed start in one anchored pattern: the one test a line of another program pays (a third
#: of a microsecond) before :func:`read_head` reads it field by field
SHAPE_HEAD = lazy(rb"""
    \d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d[,.\d]{0,7}\ -\ (?:vllm|lmcache)[.\ ]
  | LMCache[ ]
  | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::(?:vllm|lmcache)[.:]|\ \[)
  | (?:WARNING|WARN|ERROR|CRITICAL)\ [A-Za-z\[]
""", re.X)  # every template's message starts with a letter or ``[`` (``[req_id=…]``, ``[shutdown]``)


class Head(NamedTuple):
    """A header read by :func:`read_head`: what :class:`~specdiag.ingest.envelope.Record` needs."""

    kind: str  # "vllm" | "lmcache"
    level: str
    ts: bytes | None  # in the kind's own shape: LMCache ``YYYY-MM-DD HH:MM:SS,mmm``, vLLM ``MM-DD HH:MM:SS``
    year: int | None
    file: bytes | None
    src_line: int | None
    logger: bytes | None
    msg: bytes
    style: str  # for the input's ``formats``: "python-logging", or the kind for a bare paste
    #: a bare LMCache line without its ``(file:line:logger)`` suffix: it may go on on the next rows
    open: bool = False


def logger_kind(name: bytes) -> str:
    """``vllm`` or ``lmcache`` from a logger name that starts with one (the vendored adapter is LMCache's)."""
    if name.startswith(b"lmcache") or VENDORED in name:
        return "lmcache"
    return "vllm"


def read_head(line: bytes) -> Head | None:
    """The header of ``line`` (its wrappers and process prefix peeled) in one of this module's shapes."""
    if not line:
        return None
    c = line[0]
    if 48 <= c <= 57:
        return _asctime(line) if line[4:5] == b"-" else None
    if c == 76:  # 'L'
        return _bare_lmcache(line) if line.startswith(b"LMCache ") else None
    if c not in _LEVEL_FIRST:
        return None
    sp = line.find(b" ", 3, 10)
    colon = line.find(b":", 3, 10)
    if colon > 0 and (sp < 0 or colon < sp):
        return _basic(line, colon)
    if sp < 0:
        return None
    level = VLLM_LEVELS.get(line[:sp])
    return None if level is None else _bare_level(line, sp, level)


def _asctime(line: bytes) -> Head | None:
    """``2026-05-06 15:56:03,745 - vllm.v1.engine.core_client - ERROR - msg``: the year is the line's own."""
    i = line.find(b" - ", 19, 31)
    if i < 0 or not line.startswith((b"vllm", b"lmcache"), i + 3):
        return None
    m = ASCTIME.match(line)
    if m is None:
        return None
    year, day, clock, frac, name, lvl = m.groups()
    kind = logger_kind(name)
    if kind == "lmcache":
        ts = year + b"-" + day + b" " + clock + (b"," + frac[:3].ljust(3, b"0") if frac else b"")
    else:
        ts = day + b" " + clock
    return Head(kind, VLLM_LEVELS[lvl], ts, int(year), None, None, name, line[m.end() :], "python-logging")


def _basic(line: bytes, colon: int) -> Head | None:
    """``ERROR:vllm.v1.engine.core_client:msg`` (``logging.basicConfig``): no time at all."""
    if not line.startswith((b"vllm", b"lmcache"), colon + 1):
        return None
    m = BASIC.match(line)
    if m is None:
        return None
    lvl, name = m.groups()
    return Head(logger_kind(name), VLLM_LEVELS[lvl], None, None, None, None, name, line[m.end() :],
                "python-logging")


def _bare_lmcache(line: bytes) -> Head | None:
    """``LMCache WARNING: msg (file.py:NNN:logger)``: LMCache's formatter with the time cut off."""
    colon = line.find(b":", 8, 20)
    level = LMC_LEVELS.get(line[8:colon]) if colon > 0 else None
    if level is None:
        return None
    msg = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
    msg, file, src_line, logger = split_suffix(msg)
    return Head("lmcache", level, None, None, file, src_line, logger, msg, "lmcache", file is None)


def _bare_level(line: bytes, sp: int, level: str) -> Head | None:
    """``LEVEL [file.py:NNN] msg`` or ``LEVEL msg``, the time cut off: only what the tables vouch for."""
    msg = line[sp + 1 :]
    m = BARE_WHERE.match(msg) if msg[:1] == b"[" else None
    if m is not None:
        text = msg[m.end() :]
        kind = template_kind(text, level)
        base = m.group(1).rsplit(b"/", 1)[-1]
        if kind is None and (base in _known_files() or level in _ALERT and _catalogued_at(base, m.group(2), level, text)):
            kind = "vllm"
        if kind is None:
            return None
        return Head(kind, level, None, None, m.group(1), to_int(m.group(2)), None, text, kind)
    if level not in _ALERT or not (msg[:1].isalpha() or msg[:1] == b"["):
        return None  # an INFO line without time or file is too common in other programs' logs
    text, file, src_line, logger = split_suffix(msg)
    kind = template_kind(text, level)
    if kind is None and (logger or b"").startswith(b"lmcache"):
        kind = "lmcache"  # LMCache's ``(file.py:NNN:lmcache.…)`` suffix kept: its own line
    if kind is None:
        return None
    return Head(kind, level, None, None, file, src_line, logger, text, kind)


# ---- what the template tables vouch for -----------------------------------------------------------------
class _Tables:
    """The specific templates of both projects, LMCache's first (built on first use: ingest needs no
    events module for the common shapes): by first word, and those without one behind one pattern of
    their literals, so that a message with neither (most lines of other programs) costs a dict lookup
    and one search."""

    def __init__(self) -> None:
        from specdiag.events import FieldError, default_matcher, first_word

        self.first_word, self.field_error = first_word, FieldError
        m = default_matcher()
        self.by_word: dict[bytes, list] = {}
        self.anywhere: list = []
        for src in ("lmcache", "vllm"):
            for (s, word), ts in m.by_first.items():
                if s == src and word:
                    self.by_word.setdefault(word, []).extend(_row(src, t) for t in ts if specific_template(t))
            self.anywhere.extend(_row(src, t) for t in m.anywhere.get(src, ()) if specific_template(t))
        needles = sorted({row[0] for row in self.anywhere}, key=len, reverse=True)
        self.needles = re.compile(b"|".join(re.escape(n) for n in needles))
        #: a found literal → the templates whose literal it holds (a longer one found hides one inside it)
        self.by_needle = {n: [row for row in self.anywhere if row[0] in n] for n in needles}
        self.files = frozenset(t.location.split(":")[0].split(" ")[0].rsplit("/", 1)[-1].encode()
                               for t in m.templates if t.source == "vllm")


_TABLES: _Tables | None = None


def specific_template(t) -> bool:
    """A template that tells a line apart on its own: not one that matches anywhere in a message (``.*``),
    from leading blanks, or any exception line (``V_EXC``); nor one whose message starts with neither a letter nor
    ``[`` (V0's ``# GPU blocks: N``), which the one pattern in front (``SHAPE_HEAD``) does not admit."""
    return not t.pattern.startswith((".*", "\\s", "(?P<exc>", "#"))


def _tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Tables()
    return _TABLES


def template_kind(msg: bytes, level: str) -> str | None:
    """``lmcache`` or ``vllm`` when a specific template of that project reads ``msg`` at ``level``."""
    tab = _tables()
    cands = tab.by_word.get(tab.first_word(msg))
    if cands:
        got = _first_match(cands, msg, level, tab.field_error)
        if got is not None:
            return got
    for needle in set(tab.needles.findall(msg, 0, 4096)):
        got = _first_match(tab.by_needle[needle], msg, level, tab.field_error)
        if got is not None:
            return got
    return None


def _row(src: str, t) -> tuple:
    """A template as the loop below reads it: plain tuple items cost less than a dataclass's attributes."""
    return t.bneedle, t.level, src, t


def _first_match(cands: list, msg: bytes, level: str, field_error: type) -> str | None:
    for needle, lvl, src, t in cands:
        if needle in msg and (lvl is None or lvl == level):
            try:
                if t.match(msg) is not None:
                    return src
            except field_error:
                return src  # the template's shape, with a number no rule can use: still its line
    return None


def _catalogued_at(base: bytes, line: bytes, level: str, text: bytes) -> bool:
    """Whether a vLLM release prints this message at this level from ``base:line`` (the catalog): a paste that cut
    the time off ``ERROR 08-20 13:11:35 [backend_xgrammar.py:167] Failed to advance FSM …`` still names where."""
    from specdiag.catalog import catalog

    cat = catalog()
    msg = text.decode("utf-8", "replace")
    return any(e.level == level and (e.fmt is None or cat.values(e, msg) is not None)
               for e in cat.at(base.decode("ascii", "replace"), int(line), "vllm"))


def _known_files() -> frozenset[bytes]:
    """The vLLM source files the template tables name (``core.py``, ``multiproc_executor.py``, …)."""
    return _tables().files


def uvicorn_line(line: bytes) -> bool:
    """Whether a ``LEVEL:`` line is uvicorn's: it pads the level to 8 characters and a space
    (``INFO:     ``, ``WARNING:  ``, ``ERROR:    ``), where pip's ``WARNING: x`` has one space; an access
    line (``" - "GET …"``, which the scanner counts whatever the padding) is one too."""
    colon = line.find(b":", 4, 9)
    if colon < 0:
        return False
    pad = 9 - colon
    return line.startswith(b" " * pad, colon + 1) or b' - "' in line


def starts_head(rest: bytes) -> bool:
    """Whether ``rest`` starts a header of this module's shapes (``wrappers.is_envelope`` asks, for a loose
    wrapper in front or a record after a bare CR)."""
    return rest[:1] in SHAPE_FIRST and SHAPE_HEAD.match(rest) is not None and read_head(rest) is not None
