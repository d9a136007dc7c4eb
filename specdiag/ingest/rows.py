"""Terminal rows: how to tell that a physical line is a cut piece of a longer record, by the record's template.

A terminal (or a chat box, or ``fold``) that wraps a long line inserts newlines at a fixed width and nothing
else: no process prefix, no kubectl prefix, no grep number on the rows after the first. The joiner
(``joiner.py``, run by ``records.py``) must decide, from the rows alone, which lines are such pieces. A
width alone is weak evidence (a line of exactly 60 characters is not rare); what proves a cut is a row
that is *incomplete by its template*, something no writer ends a line with:

* a header cut before its message starts: ``(Worker_TP2 pid=76``, ``(Worker_TP2 pid=767) `` and nothing
  after it, ``[2026-05-06 15:5``, ``[2026-05-06 15:56:03,745] LMCache ERR``, ``INFO 05-04 01:06:43 [metr``;
* an LMCache record whose ``(file.py:NNN:logger)`` suffix is opened but not closed at the end of the row;
* an ANSI escape cut in the middle (``\\x1b[1;3`` at the end of a row, ``6m`` starting the next).

The width such a row has is then a proven terminal width of the input, and later rows of that width are
joined by the record joiner too. Every test here is a literal comparison or an anchored match from a known
position: nothing scans a line more than once.
"""

from __future__ import annotations

from specdiag.patterns import lazy

#: the narrowest terminal row considered (a 40-column chat box); shorter lines are never taken for cut rows
MIN_ROW = 40
_LMC_HEAD = b"[0000-00-00 00:00:00,000] LMCache "
_VLLM_TS = b"00-00 00:00:00"
_LEVELS = (b"INFO", b"WARNING", b"ERROR", b"DEBUG", b"CRITICAL", b"WARN")
#: what may follow a vLLM timestamp before the message starts, cut anywhere: ``.123 [file.py:45``
_VLLM_TAIL = lazy(rb"(?:\.\d{0,6})?(?: (?:\[[^\]:\s]{0,200}(?::\d{0,9})?)?)?")
#: the start of a process prefix cut before its ``) ``: ``(Worker_TP2``, ``(EngineCore_DP0 pid=8``, ``(VllmWorker rank=0 pid``
_PID_CUT = lazy(rb"\([A-Za-z_][\w./ =-]{0,80}?(?: pid(?:=\d{0,18}(?:, ip=[\w.:]{0,60})?\)?)?)?")
#: an LMCache suffix opened at the end of a row: `` (vllm_v1_adapter.py:88``, `` (cache_engine.py:985:lmcache.v1``
_SUFFIX_CUT = lazy(rb" \([\w.]{0,120}(?::\d{0,9}(?::[\w.]{0,200})?)?")
#: a collector's prefix cut before the record starts: a kubectl/docker ``--timestamps`` time, journald's
#: ``Dez 03 10:00:00 host ident[pid]`` without its ``: ``
_ISO_CUT = lazy(rb"\d{4}-\d\d-\d\dT[\d:]{0,8}(?:[.,]\d{0,9})?(?:Z|[+-][\d:]{0,5})?")
_JOURNALD_CUT = lazy(rb"[^\s\d\[\](){}]\S{0,11} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})? \S{1,200} [^:\s\[]{1,200}\[\d{1,10}(?:\]:?)?")
#: an ANSI escape cut at the end of a row, and the rest of it at the start of the next
ESC_CUT = lazy(rb"\x1b(?:\[[0-9;?]{0,16})?")
ESC_REST = lazy(rb"\[?[0-9;?]{0,16}[A-Za-z]")


def _fits(piece: bytes, template: bytes) -> bool:
    """``piece`` is a prefix of ``template`` where ``0`` in the template stands for any digit."""
    if len(piece) > len(template):
        return False
    for a, b in zip(piece, template):  # noqa: B905 - piece is the shorter
        if b == 48:
            if not 48 <= a <= 57:
                return False
        elif a != b:
            return False
    return True


def _cut_lmcache_head(rest: bytes) -> bool:
    n = len(_LMC_HEAD)
    if len(rest) <= n:
        return _fits(rest, _LMC_HEAD)
    if not _fits(rest[:n], _LMC_HEAD):
        return False
    level = rest[n:]
    return len(level) <= 9 and any(w.startswith(level.rstrip()) for w in _LEVELS) and b":" not in level


def _cut_vllm_head(rest: bytes) -> bool:
    sp = rest.find(b" ")
    if sp < 0:
        return len(rest) >= 3 and any(w.startswith(rest) for w in _LEVELS)
    if rest[:sp] not in _LEVELS:
        return False
    ts = rest[sp + 1 : sp + 1 + len(_VLLM_TS)]
    if not _fits(ts, _VLLM_TS):
        return False
    tail = rest[sp + 1 + len(_VLLM_TS) :]
    if len(ts) < len(_VLLM_TS):
        return True
    return _VLLM_TAIL.fullmatch(tail) is not None


def cut_head(rest: bytes, prefixed: bool) -> bool:
    """Whether ``rest`` (a line after its wrappers and process prefixes) ends inside a record's header: the
    row was cut before the message began. ``prefixed``: a process prefix was peeled (an empty rest is then
    a row cut right after it)."""
    if not rest:
        return prefixed
    c = rest[:1]
    if c == b"(":
        return b") " not in rest and _PID_CUT.fullmatch(rest) is not None
    if c == b"[":
        return _cut_lmcache_head(rest)
    if c in b"IWEDC" and _cut_vllm_head(rest):
        return True
    return cut_wrapper(rest)


def cut_wrapper(rest: bytes) -> bool:
    """Whether ``rest`` is a collector's prefix the row's end cut before the record began (the wrapper
    parser could not take it, so it is all that is left of the row)."""
    c = rest[:1]
    if c.isdigit():
        return _ISO_CUT.fullmatch(rest) is not None
    return c.isalpha() and b"[" in rest and _JOURNALD_CUT.fullmatch(rest) is not None


def cut_suffix(text: bytes) -> bool:
    """Whether an LMCache message ends inside its ``(file.py:NNN:logger)`` suffix (opened, not closed)."""
    i = text.rfind(b" (")
    if i < 0 or len(text) - i > 340:
        return False
    if _SUFFIX_CUT.fullmatch(text, i) is None:
        return False
    return text.find(b".py", i) > 0 or b"_" in text[i:]  # a module's file name: ``vllm_v1_adap``


def esc_cut_at_end(line: bytes) -> int:
    """Where an ANSI escape cut by the row's end begins (-1 when the row ends in none)."""
    i = line.rfind(b"\x1b", max(0, len(line) - 18))
    if i < 0:
        return -1
    return i if ESC_CUT.fullmatch(line, i) is not None else -1
