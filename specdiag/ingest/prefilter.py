"""The prefilter: which of the lines the scanner left can never make a record, so the per-line stages may
count them instead of reading them.

Real logs are mostly other programs' lines: NCCL's ``NCCL INFO`` flood, an application's own logger,
torch's glog warnings, Python's ``warnings`` lines. The per-line stages (``records.py``) read each one
through the cleaner, the wrapper parser, every envelope parser and the joiner, ≈ 20 µs of Python, only to
find that it is nobody's record. A line is *inert* when, read by those stages with no record open (nothing
held for a terminal's next row, no cut header, no open multi-line record, no wrapper carried over from
the line before), it yields no record and changes no state; all it may do is count as vLLM output (a
process prefix) — :data:`PREFIXED`.

A vLLM or LMCache record is *quiet* (:data:`QUIET`) when reading it could only count it: a DEBUG or INFO
record, single-line (LMCache's closed by its suffix), of a place the analysis registered
(:class:`QuietPlaces`: one where the catalog knows every text, or a format seen there among several), whose
first word no template this analysis reads dispatches on with its needle in it and which holds no needle of
those that look anywhere; a vLLM record's month is not December or January (the reader's year roll), an
LMCache record's year is the reader's, and the next line cannot be its terminal-cut rest. Its text may go
beyond ASCII when it is printable UTF-8 and its place one where every text is known (:func:`printable_utf8`). The analysis still counts it as recognised and
sees its process (:class:`QuietOrigin`): the first quiet record of each process prefix in a block is
:data:`QUIET_FIRST`, so that only those are looked at again.

The test is conservative by construction: it looks for any byte or word that could start something (an
envelope's first letters, a wrapper, a traceback, an exception name, a vLLM or LMCache name anywhere),
at every place a wrapper could end, and keeps the line when in doubt. So it may keep an inert line (only
slower), never drop a record. ``tests/test_prefilter.py`` checks that against the per-line stages
themselves, over generated lines of every catalogued message and adversarial ones, and that the
compiled copy (``_scan.prefilter``) gives the same answer byte for byte as this reference.

Whether a line is inert also depends on facts of its block, passed in as ``flags``: two the cleaner decides
per block (``Cleaner.begin_block``) — whether the block holds an ESC (colour is then removed per sequence)
or only the ESC-less residue of colour codes (which is then removed) — and whether the input has shown no
wrapper yet (``PLAIN_BLOCK``: a line's first bytes are then what the joiner reads).
"""

from __future__ import annotations

import functools
from array import array
from itertools import repeat
from typing import NamedTuple

from specdiag.catalog.store import TEXT_CANDIDATE_LEVELS, candidate_key
from specdiag.catalog.wording import BYTES
from specdiag.ingest.cleaner import ANSI_RESIDUE
from specdiag.ingest.envelope import FATAL_PYTHON
from specdiag.ingest.wrappers import ANSI_BYTES, JSON_FIRST_KEYS, JSON_KEYS, bracket_time
from specdiag.patterns import lazy

#: kinds, one byte per line (``*_FIRST``: the block's first of a process prefix, one more than its kind)
KEEP, INERT, PREFIXED, QUIET, QUIET_FIRST, UNKNOWN, UNKNOWN_FIRST, LMC_UNKNOWN, LMC_UNKNOWN_FIRST = range(9)
#: the kind of a record nothing recognises, per project
UNKNOWN_OF = {"vllm": UNKNOWN, "lmcache": LMC_UNKNOWN}
#: a block's distinct process prefixes of quiet records told apart (more: every later one is QUIET_FIRST)
MAX_QUIET_HEADS = 64
MAX_QUIET_HEAD = 256
#: placeholders of a simple pattern the compiled copy checks (a longer format is never quiet)
MAX_PLACEHOLDERS = 64
#: block flags (``Cleaner.esc`` / ``Cleaner.residue``; ``PLAIN_BLOCK``: no wrapper seen in the input so far, so
#: a line's first bytes are what the joiner will read; ``DOCKER_TEXT``: the lines are a docker json-file copy's
#: texts, which the reader sees as ``wrappers.json_line`` leaves them: colour removed, ``ANSI_BYTES``)
ESC_BLOCK, RESIDUE_BLOCK, PLAIN_BLOCK, DOCKER_TEXT = 1, 2, 4, 8


def colour_flags(esc: bool, residue: bool) -> int:
    """The block flags of its colour (``cleaner.colour_of``)."""
    return (ESC_BLOCK if esc else 0) | (RESIDUE_BLOCK if residue else 0)


#: longer lines are read unless they are quiet records: the cleaner cuts and announces over-long ones
MAX_INERT_LINE = 4096
#: a quiet record may be as long as the per-line stages parse a line (``sources.MAX_PARSE_LINE``, beyond
#: which the cleaner cuts it and says so): vLLM's request logger prints a prompt and its token ids on one
#: line, often 5–50 KiB, and reading each cost ~120 µs only to count it
MAX_QUIET_LINE = 64 * 1024
#: literals that, anywhere in a line, may make it something: a vLLM / LMCache envelope, logger name or banner,
#: a process prefix, a traceback's lines, an exception (``StopIteration`` and ``StopAsyncIteration`` by their
#: ``Iteration``), a version line, a JSON or kubectl or journald wrapper
ANCHORS: tuple[bytes, ...] = BYTES.PREFILTER_ANCHORS  # one tuple for both copies (``catalog/wording.py``)
#: the whole header of another program's line: NCCL's ``host:pid:tid [rank] NCCL INFO``, Python logging's
#: default ``2026-05-06 08:01:35,123 - name - LEVEL - ``, glog's ``I0506 08:01:35.123456  77 file.cc:12]``,
#: a ``warnings`` line ``/path/x.py:128: UserWarning:``. A terminal's cut rest of a vLLM message that starts
#: with one of these whole is not a thing that happens; a line of such a program right after a vLLM line of a
#: terminal's width is (NCCL and an app's logger interleave with vLLM), and joining it would corrupt the
#: record and, at a width first seen then, "prove" a terminal width that never was. Bounded quantifiers
#: between distinct separators: linear time.
FOREIGN_HEADER = lazy(
    rb"[\w.-]{1,128}:\d{1,10}:\d{1,10} \[\d{1,5}\] NCCL (?:INFO|WARN|TRACE|ERROR) "
    rb"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{1,9} - [\w.-]{1,128} - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    rb"|[IWEF](?:\d{4})?\d{4} \d\d:\d\d:\d\d\.\d{6} {1,8}\d{1,10} [\w.-]{1,128}:\d{1,8}\] "
    rb"|/[^\s:]{1,512}\.py:\d{1,8}: [A-Z]\w{0,64}Warning: ")
#: the first three letters of every level word (a vLLM header, uvicorn's ``INFO:``, a header cut short)
LEVEL_HEADS: tuple[bytes, ...] = (b"INF", b"WAR", b"ERR", b"DEB", b"CRI")
#: LMCache's header up to its level (``0``: any digit): a row cut inside it is held for the next row
LMC_HEAD = b"[0000-00-00 00:00:00,000] LMCache "
#: how many places a wrapper could end at that are followed before the line is kept unread
MAX_PLACES = 24
_MAX_DEPTH = 6

_ESC_SEQ = lazy(rb"\x1b\[[0-9;?]*[A-Za-z]")
_RESIDUE = ANSI_RESIDUE  # the reader's own (``Cleaner.clean``)
_ESC_CUT = lazy(rb"\x1b(?:\[[0-9;?]{0,16})?")
_PREFIX = lazy(rb"\((?P<proc>[^()]*?) pid=(?P<pid>\d{1,18})(?:, ip=(?P<ip>[^)]*))?\)\s?")
_PRINTABLE = lazy(rb"[\x20-\x7e]*")
_TOKEN = frozenset(range(0x21, 0x7F)) - frozenset(b":()[]{}|")
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGITS = frozenset(b"0123456789")
#: the letters after a stern name's first (a lowercase letter): a pod's DNS subdomain, a container's DNS label
_POD_REST = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789.-")
_CONTAINER_REST = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")


def inert_kind(raw: bytes, flags: int, quiet: QuietPlaces | None = None, after: bytes | None = None,
               widths: frozenset[int] = frozenset(), year: bytes = b"", wrap: tuple[int, int] = (0, 0)) -> int:
    """KEEP, INERT, PREFIXED (inert, counted as vLLM output), QUIET or a record nothing recognises (UNKNOWN,
    LMC_UNKNOWN) for one raw line of a block;
    ``after``: the raw line after it (None at the block's end), ``quiet`` the places registered so far,
    ``widths`` the terminal widths the reader knows (``LineReader.widths``), ``year`` the year of the last
    dated line (``LineReader.last_y``: an LMCache record of another year moves the reader's year), ``wrap``
    the widths of the wrappers a block's copy took off this line and the next (``ahead.unwrapped``), which
    the reader counts in a row's width (``LineReader._continue_held``)."""
    raw = _without_line_end_cr(raw)
    if not raw:
        return INERT  # an empty line: the per-line stages return before reading it
    if len(raw) > 4 * MAX_QUIET_LINE:
        return KEEP  # too long even without its colour: not worth cleaning
    line = _cleaned(raw, flags)
    if line is None or len(line) > MAX_QUIET_LINE:
        return KEEP
    ascii_line = _PRINTABLE.fullmatch(line) is not None
    if not ascii_line and (quiet is None or not printable_utf8(line)):
        return KEEP
    prefixed = line[:1] == b"("
    rest = peeled(line) if prefixed else line
    whole = not ascii_line  # text beyond ASCII: quiet only at a place where the catalog knows every text
    if quiet is not None and rest[:1] in b"DI[":
        kind = _quiet_lmcache(rest, quiet, year, whole) if rest[:1] == b"[" \
            else _quiet(raw, rest, flags, quiet, after, widths, whole, wrap)
        if kind != KEEP:
            return kind
    if not ascii_line or len(line) > MAX_INERT_LINE:
        return KEEP  # beyond printable ASCII, or long: never inert, only a quiet record is counted unread
    if not rest or any(a in rest for a in ANCHORS) or _bar_then_more(rest):
        return KEEP
    if prefixed or rest[:1] == b"[":
        places = [0]  # a process prefix or a bracket: no wrapper is looked for
    else:
        places = _places(rest)
        if places is None:
            return KEEP
    if any(_may_start(rest, p) for p in places):
        return KEEP
    if _warning_name(rest):  # a wrapper is only stripped before a record: with none, the line is read whole
        return KEEP
    return PREFIXED if prefixed else INERT


def _bar_then_more(line: bytes) -> bool:
    """A progress bar (``N%|``) with text after one of its ``]``: ``records.after_bar`` may start a record there
    (the CR between them lost); a bar alone ends at its ``]``, and a flood of redraws stays inert."""
    bar = line.find(b"%|")
    if bar < 0:
        return False
    pos = line.find(b"]", bar + 2)
    while 0 <= pos < len(line) - 1:
        if line[pos + 1] not in b" \t\r":
            return True
        pos = line.find(b"]", pos + 1)
    return False


def _cleaned(raw: bytes, flags: int) -> bytes | None:
    """The line as the cleaner leaves it, or None where the cleaner would carry state to the next line (an
    escape cut at the line's end) or the line holds a CR (the bare-CR splitter reads those)."""
    raw = _without_line_end_cr(raw)
    if b"\r" in raw:
        return None
    if flags & ESC_BLOCK and b"\x1b" in raw:
        tail = raw.rfind(b"\x1b", max(0, len(raw) - 18))
        if tail >= 0 and _ESC_CUT.fullmatch(raw, tail) is not None:
            return None
        return _ESC_SEQ.sub(b"", raw).replace(b"\x1b", b"")
    if flags & RESIDUE_BLOCK:
        raw = _RESIDUE.sub(b"", raw)
    if flags & DOCKER_TEXT and (b"\x1b" in raw or b"[0m" in raw):  # as ``wrappers._inner`` takes it off
        raw = ANSI_BYTES.sub(b"", raw)
    return raw


def row_width(raw: bytes, flags: int) -> int:
    """A row's width as the reader measures it (``LineReader._feed_one``'s ``plen``): with its escapes in a
    block of them (a terminal's fold counts them), without its colour residue in a residue block, else as
    it is. A docker copy's text is measured so too: the rest of its colour comes off inside the JSON, after
    the reader measured the line (``DOCKER_TEXT`` changes what is read, not the width)."""
    if flags & RESIDUE_BLOCK and not flags & ESC_BLOCK and b"m" in raw:
        return len(_RESIDUE.sub(b"", raw))
    return len(raw)


def _without_line_end_cr(raw: bytes) -> bytes:
    """The line without the CR of a CRLF line end (Windows, some collectors): the cleaner removes it, the
    reader does not count it in a row's width, and a bare-CR split only happens at a CR before the last
    byte. A line with any other CR is left as it is (it is always read)."""
    if raw[-1:] == b"\r" and raw.find(b"\r") == len(raw) - 1:
        return raw[:-1]
    return raw


def cleaned_line(raw: bytes, flags: int) -> bytes:
    """The line as the cleaner leaves it (colour and CRs removed), for reading a counted line's prefix."""
    line = _cleaned(raw, flags)
    return raw if line is None else line


def peeled(line: bytes) -> bytes:
    """The line after its chain of vLLM process prefixes (as ``OriginCache.peel`` takes it); the line itself
    when the first prefix does not parse (then kept: it starts with ``(``)."""
    pos = 0
    while True:
        m = _PREFIX.match(line, pos)
        if m is None:
            return line[pos:]
        pos = m.end()


def _places(line: bytes) -> list[int] | None:
    """Every place at which a wrapper the per-line stages strip could end (0 included), following wrappers
    inside wrappers; None when there are more than :data:`MAX_PLACES` (the line is then kept)."""
    seen, depth = [0], [0]
    i = 0
    while i < len(seen):  # breadth first: a place is followed at the depth it is first reached
        pos, d = seen[i], depth[i]
        i += 1
        if d >= _MAX_DEPTH:
            continue
        for nxt in _wrapper_ends(line, pos):
            if nxt not in seen:
                if len(seen) >= MAX_PLACES:
                    return None
                seen.append(nxt)
                depth.append(d + 1)
    return seen


def _wrapper_ends(line: bytes, pos: int) -> list[int]:
    """Where each loose wrapper starting at ``pos`` ends (a ``grep -n`` number, an indentation or quote, a
    compose name, a ``grep -H`` file name, stern's pod and container); strict wrappers are ``_may_start``'s
    business."""
    n = len(line)
    if pos >= n:
        return []
    c = line[pos]
    if c in _DIGITS:
        end = _grep_n_end(line, pos)
        return [] if end is None else [end]
    if c == 0x20 or c == 0x3E or (c in b"-*+|" and line[pos + 1 : pos + 2] == b" "):
        return [_indent_end(line, pos)]
    if c == 0x60:  # a markdown code span's opening backticks (``wrappers.code_span``), and its one space of padding
        k = pos
        while k < n and k - pos < 3 and line[k] == 0x60:
            k += 1
        return [k, k + 1] if line[k : k + 1] == b" " else [k]
    if c == 0x5B:  # '[': torchrun's ``[rankN]: `` (``wrappers.RANK_PREFIX``)
        end = _rank_end(line, pos)
        return [] if end is None else [end]
    if c in b"({":
        return []
    ends = []
    for find in (_compose_end, _grep_h_end, _stern_end):
        end = find(line, pos)
        if end is not None:
            ends.append(end)
    return ends


def _rank_end(line: bytes, pos: int) -> int | None:
    """``\\[rank\\d{1,6}\\]: `` at ``pos``: where torchrun's rank prefix ends."""
    if line[pos : pos + 5] != b"[rank":
        return None
    j = pos + 5
    while j < len(line) and j - pos - 5 < 6 and line[j] in _DIGITS:
        j += 1
    return j + 3 if j > pos + 5 and line[j : j + 3] == b"]: " else None


def _stern_end(line: bytes, pos: int) -> int | None:
    """``wrappers.STERN`` at ``pos``: stern's pod and container names, each followed by a space."""
    k = pos
    for rest, most in ((_POD_REST, 253), (_CONTAINER_REST, 63)):
        if k >= len(line) or not 0x61 <= line[k] <= 0x7A:
            return None
        j = k + 1
        while j < len(line) and j - k < most and line[j] in rest:
            j += 1
        if j >= len(line) or line[j] != 0x20:
            return None
        k = j + 1
    return k


def _grep_n_end(line: bytes, pos: int) -> int | None:
    """``(\\d{1,9})([:-]|\\t| {1,4}|[.)] {1,3})`` at ``pos`` (tabs never reach here)."""
    j = pos
    while j < len(line) and line[j] in _DIGITS:
        j += 1
    if j - pos > 9 or j >= len(line):
        return None
    c = line[j]
    if c in b":-":
        return j + 1
    if c == 0x20:
        return _spaces_end(line, j, 4)
    if c in b".)" and line[j + 1 : j + 2] == b" ":
        return _spaces_end(line, j + 1, 3)
    return None


def _spaces_end(line: bytes, j: int, most: int) -> int:
    k = j
    while k < len(line) and k - j < most and line[k] == 0x20:
        k += 1
    return k


def _indent_end(line: bytes, pos: int) -> int:
    """``(?:[ \\t]|>|[-*+|](?=[ \\t]))+`` at ``pos``."""
    k = pos
    while k < len(line):
        c = line[k]
        if c == 0x20 or c == 0x3E or (c in b"-*+|" and line[k + 1 : k + 2] == b" "):
            k += 1
        else:
            break
    return k


def _compose_end(line: bytes, pos: int) -> int | None:
    """``[A-Za-z0-9][\\w.-]*\\s*\\| ?`` at ``pos``."""
    if line[pos] not in _WORD or line[pos] == 0x5F:
        return None
    k = pos + 1
    while k < len(line) and (line[k] in _WORD or line[k] in b".-"):
        k += 1
    while k < len(line) and line[k] == 0x20:
        k += 1
    if k >= len(line) or line[k] != 0x7C:
        return None
    k += 1
    return k + 1 if line[k : k + 1] == b" " else k


def _grep_h_end(line: bytes, pos: int) -> int | None:
    """``([^\\s:()\\[\\]{}|]+?)(?:([:-])(\\d{1,9})\\2|:)`` at ``pos``: the shortest file name before a
    ``:N:`` / ``-N-`` / ``:``."""
    n = len(line)
    i = pos + 1
    if line[pos] not in _TOKEN:
        return None
    while i < n:
        c = line[i]
        if c in b":-":
            j = i + 1
            while j < n and j - i <= 9 and line[j] in _DIGITS:
                j += 1
            if i + 1 < j <= i + 10 and j < n and line[j] == c:
                return j + 1
            if c == 0x3A:
                return i + 1
        if c not in _TOKEN:
            return None
        i += 1
    return None


def _may_start(line: bytes, pos: int) -> bool:
    """Whether something that makes a record (or a strict wrapper, which changes the reader's state) may
    start at ``pos``: a superset of the envelope, shape, cut-header, wrapper and exception tests."""
    rest = line[pos:]
    if not rest:
        return True
    c = rest[0]
    if c in b"(<":  # a process prefix, a syslog priority (RFC 5424's ``<14>1 …``)
        return True
    if c == 0x7B:  # '{'
        return _json_start(rest)
    if c == 0x5B:  # '[': an LMCache header cut short (a longer one holds the anchor ``LMCache``), or Ray's
        return len(rest) <= len(LMC_HEAD) and all(t == r or t == 0x30 and r in _DIGITS for t, r in zip(LMC_HEAD, rest, strict=False)) \
            or _ray_head(rest) or bracket_time(rest) or _torch_head(rest)  # a CI runner's time, torch's C++ log
    if c == 0x2A:  # '*': a fatal signal Ray's core reports (``envelope.FATAL_SIGNAL``)
        return rest.startswith(b"*** SIG")
    if c == 0x46 and rest.startswith(FATAL_PYTHON):  # 'F': CPython's faulthandler after a fatal signal
        return True
    if c == 0x50 and rest.startswith(b"Process "):  # 'P': multiprocessing's banner (``records.MP_BANNER``)
        return True
    if c in b"WEF" and _glog_head(rest):  # a native library's glog line (``envelope.GLOG``)
        return True
    if rest[:3] in LEVEL_HEADS:
        return not _foreign_basic(rest)
    if c in _DIGITS:
        return rest[4:5] == b"-" and rest[10:11] == b"T"  # an RFC 3339 time: kubectl / docker / journald
    return _journald_head(rest)


def _glog_head(rest: bytes) -> bool:
    """Whether ``rest`` may start a glog line at WARNING or worse: the level letter, four digits (month and day;
    eight with glog 0.7's year) and a space before the time's first colon."""
    return (len(rest) > 8 and all(d in _DIGITS for d in rest[1:5]) and rest[5] == 0x20 and rest[8] == 0x3A) or \
        (len(rest) > 12 and all(d in _DIGITS for d in rest[1:9]) and rest[9] == 0x20 and rest[12] == 0x3A)


def _torch_head(rest: bytes) -> bool:
    """Whether ``rest`` may start torch's C++ header at ERROR or worse (``envelope.TORCH_C10``): ``[rankN]:`` or
    nothing, then ``[E`` or ``[F`` and a space or a digit (a warning, ``[W``, stays inert: torch prints many)."""
    i = 0
    if rest.startswith(b"[rank"):
        i = 5
        while i < len(rest) and rest[i] in _DIGITS:
            i += 1
        if rest[i : i + 2] != b"]:":
            return False
        i += 2
    return len(rest) > i + 2 and rest[i] == 0x5B and rest[i + 1] in b"EF" and (rest[i + 2] == 0x20 or rest[i + 2] in _DIGITS)


def _ray_head(rest: bytes) -> bool:
    """Whether ``rest`` may start Ray's C++ header at WARNING or worse (``envelope.RAY_CPP``): a digit after the
    bracket, and a level letter of ``RAY_LEVELS`` between spaces where the header puts it."""
    return len(rest) > 27 and rest[1] in _DIGITS and rest[24] == 0x20 and rest[26] == 0x20 and rest[25] in b"WEFC"


def _json_start(rest: bytes) -> bool:
    """Whether a line that starts with ``{`` may be something the per-line stages read: JSON of a collector or
    a logging format (one of ``wrappers.JSON_KEYS`` anywhere in it, or a first key that validates a loose
    wrapper), or Loki's labels (``{name="…"} ``). An application's own JSON logger (``{"level":"debug",
    "msg":…}``) is neither."""
    second = rest[1:2]
    if not second or second == b"_" or second.isalpha():
        return True
    return rest.startswith(JSON_FIRST_KEYS) or any(k in rest for k in JSON_KEYS)


def _foreign_basic(rest: bytes) -> bool:
    """``WARNING:root:…``: Python logging's default format, whose logger name starts right after the colon.
    The stages read it only for a vLLM or LMCache logger (``shapes.BASIC``), whose names are anchors; uvicorn
    puts a space after its ``INFO:``, and a vLLM header a space after its level."""
    for word in _BASIC_LEVELS:
        if rest.startswith(word):
            after = rest[len(word) : len(word) + 1]
            return after == b"_" or after.isalpha()
    return False


def _journald_head(rest: bytes) -> bool:
    """journald's ``Dez 03 10:00:00`` start, whole or cut: a word of at most 12, spaces, a day, a time."""
    if rest[0] in _DIGITS or rest[0] in b"[](){} ":
        return False
    k = 1
    while k < len(rest) and k < 12 and rest[k] != 0x20:
        k += 1
    if k >= len(rest) or rest[k] != 0x20:
        return False
    while k < len(rest) and rest[k] == 0x20:
        k += 1
    j = k
    while j < len(rest) and j - k < 2 and rest[j] in _DIGITS:
        j += 1
    return j > k and rest[j : j + 1] == b" " and rest[j + 1 : j + 2] in (b"0", b"1", b"2", b"3", b"4", b"5", b"6",
                                                                         b"7", b"8", b"9")


def _warning_name(rest: bytes) -> bool:
    """An exception line's name ending in ``Warning`` (``FutureWarning:``); the other endings are anchors."""
    k = 0
    while k < len(rest) and (rest[k] in _WORD or rest[k] == 0x2E):
        k += 1
    return rest[:k].endswith(b"Warning") and (k == len(rest) or rest[k] == 0x3A)

#: vLLM's header after its level word: ``MM-DD HH:MM:SS[.f] [file:N] `` (``envelope.VLLM_REST``)
_VLLM_REST = lazy(rb"(\d\d)-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?([^\]:\s]+?):(\d+)\] ?")
#: the levels of the records that may be quiet (counted unread): the catalog's text candidates are of these
QUIET_LEVELS = TEXT_CANDIDATE_LEVELS
_QUIET_LEVELS = tuple(f"{level} ".encode() for level in QUIET_LEVELS)
#: the reader holds a vLLM record this wide for one line, in case a terminal cut it (``rows.MIN_ROW``)
HELD_WIDTH = 40
#: vLLM's level words with the space after them: a line starting so is an envelope, never a cut row's rest
_LEVEL_WORDS = (b"INFO ", b"WARNING ", b"ERROR ", b"DEBUG ", b"CRITICAL ", b"WARN ")
#: ``LEVEL:`` of Python logging's default format, ``%(levelname)s:%(name)s:%(message)s``
_BASIC_LEVELS = tuple(w.rstrip() + b":" for w in _LEVEL_WORDS)


class QuietOrigin:
    """A process first seen on a quiet record the prefilter counted: what reading the record would have told
    the analysis (its origin), in line order, and nothing else."""

    __slots__ = ("path", "line", "origin")

    def __init__(self, path: str, line: int, origin) -> None:
        self.path, self.line, self.origin = path, line, origin


class QuietPlaces:
    """The places (``LEVEL file:line`` as vLLM prints them, ``LEVEL file.py:N:logger`` from LMCache's suffix)
    whose records the analysis registered as quiet, and per project what the hand-written templates read
    (set once by the analysis: the prefilter must never count a record a template would read): each
    dispatch word with its templates' needles, and the needles of the templates tried on every record."""

    PROJECTS = ("vllm", "lmcache")

    def __init__(self, dispatch: dict[str, dict[bytes, list[bytes]]], needles: dict[str, list[bytes]]) -> None:
        self.keys: set[bytes] = set()  # places where every text is recognised
        #: places where no catalogued release prints: a text there that nothing of its project's
        #: ``recognising`` fits is recognised by nothing (:data:`UNKNOWN`, :data:`LMC_UNKNOWN`)
        self.unknown: set[bytes] = set()
        #: per project, ``events.Recognising``: every template's dispatch words and needles, the needles tried
        #: on every record, the catalog's text-search candidates (``store.candidate_key`` -> simple patterns or None)
        self.recognising: dict[str, tuple] = {p: ({}, (), {}) for p in self.PROJECTS}
        self._recognising_blobs: tuple[bytes, ...] = (b"",) * 6  # made once per ``recognising`` (≈ 4,000 lines)
        #: places where several messages were printed: the simple patterns (literals, kinds) of those seen
        self.patterns: dict[bytes, list[tuple[tuple[bytes, ...], str]]] = {}
        self.dispatch = {p: {w: tuple(ns) for w, ns in dispatch.get(p, {}).items()} for p in self.PROJECTS}
        self.needles = {p: tuple(needles.get(p, ())) for p in self.PROJECTS}
        self._blobs: tuple[bytes, ...] | None = None

    def add(self, key: bytes) -> None:
        if key not in self.keys and len(self.keys) < 4096:
            self.keys.add(key)
            self._blobs = None

    def add_pattern(self, key: bytes, lits: tuple[str, ...], kinds: str) -> None:
        """A message printed at a place that printed others too: its texts are quiet there (literals that a
        line of printable ASCII could not hold, or a separator of the compiled copy's tables, never are)."""
        blits = tuple(x.encode("utf-8") for x in lits)
        if len(kinds) > MAX_PLACEHOLDERS or any(not b.isascii() or b"\x1f" in b or b"\n" in b or b"\t" in b
                                                for b in blits):
            return
        pats = self.patterns.setdefault(key, [])
        if (blits, kinds) not in pats and len(pats) < 8 and len(self.patterns) < 4096:
            pats.append((blits, kinds))
            self._blobs = None

    def add_unknown(self, key: bytes, project: str, recognising: tuple) -> None:
        """A place of ``project`` (vLLM, LMCache) where no catalogued release prints at this level, and what
        could make a text there recognised (``events.Matcher.recognising``, the same for every place)."""
        if key not in self.unknown and len(self.unknown) < 4096:
            self.unknown.add(key)
            if recognising is not self.recognising[project]:
                self.recognising = {**self.recognising, project: recognising}
                self._recognising_blobs = tuple(blob for p in self.PROJECTS
                                                for blob in _recognising_blobs(self.recognising[p]))
            self._blobs = None

    def unknown_at(self, key: bytes, body: bytes, project: str) -> bool:
        """Whether a record of this text at this place (``LEVEL file:line``, ``LEVEL file.py:N:logger``) is
        recognised by nothing: the place is unknown and the text :func:`unrecognisable` at its level."""
        return key in self.unknown and unrecognisable(body, key[:1], *self.recognising[project])

    def accepts(self, key: bytes, body: bytes, whole: bool = False) -> bool:
        """Whether every record with this text at this place is recognised (``whole``: only at a place
        where every text is)."""
        if key in self.keys:
            return True
        return not whole and any(simple_fits(lits, kinds, body) for lits, kinds in self.patterns.get(key, ()))

    def use_templates(self, other: QuietPlaces) -> None:
        """Take ``other``'s words and needles (what the templates of this analysis read); the places learnt
        so far are forgotten, as they were learnt under the words before."""
        self.dispatch, self.needles = other.dispatch, other.needles
        self.forget()

    def forget(self) -> None:
        """No place is quiet until read again (a new run or another deployment: its observers have not seen it)."""
        if self.keys or self.patterns or self.unknown:
            self.keys.clear()
            self.patterns.clear()
            self.unknown.clear()
            self._blobs = None

    def blobs(self) -> tuple[bytes, ...]:
        """For the compiled copy, one line per item, sorted where looked up: the keys (a place's simple
        patterns as ``key US kinds US literal…``, US the unit separator 0x1f; an unknown place as
        ``key US ?``); then per project (vLLM, LMCache) the dispatch words, each followed by its needles
        (tab-separated), and the needles; then, without an unknown place empty, per project
        ``recognising``'s dispatch words and needles as those, and its candidates as keys (a simple pattern
        ``key US kinds US literal…``, the bare key for one the compiled copy cannot check)."""
        if self._blobs is None:
            lines = [*self.keys, *(b"\x1f".join((k, kinds.encode(), *lits)) for k, pats in self.patterns.items()
                                   for lits, kinds in pats), *(k + UNKNOWN_MARK for k in self.unknown)]
            out = [b"\n".join(sorted(lines))]
            for p in self.PROJECTS:
                out.append(b"\n".join(b"\t".join((w, *ns)) for w, ns in sorted(self.dispatch[p].items())))
                out.append(b"\n".join(self.needles[p]))
            out += self._recognising_blobs if self.unknown else (b"",) * 6
            self._blobs = tuple(out)
        return self._blobs


def _recognising_blobs(recognising: tuple) -> tuple[bytes, ...]:
    """``QuietPlaces.recognising`` for the compiled copy: its dispatch words and needles as the templates'
    are given, its candidates as sorted keys (a simple pattern as ``key US kinds US literal…``, the bare key
    for one the compiled copy cannot check)."""
    dispatch, needles, candidates = recognising
    return (b"\n".join(b"\t".join((w, *ns)) for w, ns in sorted(dispatch.items())), b"\n".join(needles),
            b"\n".join(sorted(k if spec is None else b"\x1f".join((k, spec[1].encode(), *spec[0]))
                              for k, specs in candidates.items() for spec in specs)))


#: what follows an unknown place's key in the keys blob
UNKNOWN_MARK = b"\x1f?"
#: the longest message an unknown place's record may have: the catalog's text search reads its first 4,096
#: characters (``catalog.store.Catalog._text``), and a longer one could hold a word cut there
MAX_UNKNOWN_TEXT = 4096


def unrecognisable(body: bytes, level: bytes, dispatch: dict[bytes, tuple[bytes, ...]], needles: tuple[bytes, ...],
                   candidates: dict[bytes, tuple]) -> bool:
    """Whether ``events.Matcher.match`` finds nothing for a message of printable ASCII at ``level`` (its
    initial is enough) printed where no catalogued release prints (``QuietPlaces.unknown``): no template at
    all could read it (``_unremarkable_by`` with every template's words and needles), and no format the
    catalog's text search can reach (``Catalog._text``: by the stripped text's first word, its first 1-4
    characters, its first 16 words) fits it (``simple_fits``; a candidate without a simple pattern is taken to fit)."""
    if len(body) > MAX_UNKNOWN_TEXT or not _unremarkable_by(body, dispatch, needles):
        return False
    msg = body.strip(b" ")
    head = msg.split(None, 16)[:16]
    if not head:
        return False
    keys = [candidate_key(level, "first", head[0]), *(candidate_key(level, "prefix", msg[:k]) for k in range(1, 5)),
            *(candidate_key(level, "inner", w) for w in head)]
    return not any(spec is None or simple_fits(*spec, msg) for key in keys for spec in candidates.get(key, ()))


#: characters a line of printable text never holds: C0 and C1 controls, DEL, the Unicode line and paragraph
#: separators (``str.splitlines`` would split there)
_UNPRINTABLE_TEXT = lazy("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable_utf8(line: bytes) -> bool:
    """Valid UTF-8 (strict: no overlong forms, no surrogates) holding no :data:`_UNPRINTABLE_TEXT` character:
    a vLLM or LMCache record with text beyond ASCII (``🔵[GET]Send to …``, ``Mapped GGUF x → HF y``) that
    the per-line stages read exactly as an ASCII one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _UNPRINTABLE_TEXT.search(text) is None


def quiet_month(raw: bytes, flags: int) -> int | None:
    """The month a quiet vLLM record's header prints (the reader's ``last_month`` after it); None for an
    LMCache record, which prints a year and leaves the month alone."""
    line = _cleaned(raw, flags) or b""
    rest = peeled(line) if line[:1] == b"(" else line
    if rest[:1] == b"[":
        return None
    m = _VLLM_REST.match(rest, rest.find(b" ") + 1)
    return int(m.group(1)) if m is not None else None


def _quiet_lmcache(rest: bytes, quiet: QuietPlaces, year: bytes, whole: bool = False) -> int:
    """QUIET for an LMCache DEBUG/INFO record, whole (its ``(file.py:N:logger)`` suffix closes it), of a
    registered place (``LEVEL file.py:N:logger``; with ``whole``, one where every text is recognised) and of
    the year the reader is in; LMC_UNKNOWN for such a record nothing recognises (printable ASCII at an
    unknown place); else KEEP."""
    if len(year) != 4 or not rest.startswith(b"] LMCache ", 24) or rest[1:5] != year:
        return KEEP
    colon = rest.find(b":", 34)
    level = rest[34:colon] if colon > 0 else b""
    if level not in (b"DEBUG", b"INFO"):
        return KEEP
    msg = colon + 2 if rest[colon + 1 : colon + 2] == b" " else colon + 1
    place = _suffix_place(rest, msg)
    if place is None:
        return KEEP
    inner, body_end = place
    body, key = rest[msg:body_end], level + b" " + inner
    if quiet.accepts(key, body, whole) and _unremarkable(body, quiet, "lmcache"):
        return QUIET
    return LMC_UNKNOWN if not whole and quiet.unknown_at(key, body, "lmcache") else KEEP


def _suffix_place(rest: bytes, msg: int) -> tuple[bytes, int] | None:
    """``envelope.split_suffix`` of ``rest[msg:]``: the suffix's ``file.py:N:logger`` and where the message
    ends; None without a suffix (the record stays open for its next rows)."""
    end = len(rest)
    if rest[end - 1 : end] != b")":
        while end > msg and rest[end - 1] == 0x20:
            end -= 1
        if end <= msg or rest[end - 1] != 0x29:
            return None
    i = rest.rfind(b" (", msg, end)
    if i < 0:
        return None
    a = rest.find(b":", i, end)
    b = rest.find(b":", a + 1, end) if a > 0 else -1
    if b < 0 or rest[a - 3 : a] != b".py" or not rest[a + 1 : b].isdigit() or b >= end - 2:
        return None
    return rest[i + 2 : end - 1], i


def simple_fits(lits: tuple[bytes, ...], kinds: str, body: bytes) -> bool:
    """``catalog.pattern.values`` for a pattern of ``s`` and ``d`` placeholders, on bytes: the first literal
    starts the stripped message, the last ends it, the others are found left to right, and each ``%d`` that
    has a literal on both sides holds an optional sign and ASCII digits."""
    msg = body.strip(b" ")
    first = lits[0]
    if not msg.startswith(first):
        return False
    n = len(kinds)
    if n == 0:
        return len(msg) == len(first)
    last = lits[-1]
    pos, end = len(first), len(msg) - len(last)
    if end < pos or not msg.endswith(last):
        return False
    out, glued = [], set()
    for i in range(1, n):
        lit = lits[i]
        j = msg.find(lit, pos, end) if lit else pos
        if j < 0:
            return False
        if not lit:
            glued.add(i)
        out.append(msg[pos:j])
        pos = j + len(lit)
    out.append(msg[pos:end])
    return all(kinds[i] != "d" or i in glued or i + 1 in glued or _decimal(v) for i, v in enumerate(out))


def _decimal(v: bytes) -> bool:
    v = v.strip(b" ")
    if v[:1] in (b"+", b"-"):
        v = v[1:]
    return v.isdigit()


def _unremarkable(body: bytes, quiet: QuietPlaces, project: str) -> bool:
    """No hand-written template of ``project`` that the analysis reads could read this message."""
    return _unremarkable_by(body, quiet.dispatch[project], quiet.needles[project])


def _unremarkable_by(body: bytes, dispatch: dict[bytes, tuple[bytes, ...]], needles: tuple[bytes, ...]) -> bool:
    """No template of ``dispatch`` (first word -> its templates' needles) and ``needles`` (those tried on every
    record) could read this message: none dispatched on its first word finds its needle in it
    (``events.Matcher.match``), it holds no needle of those tried on every record; a ``[req_id=…]`` tag is
    kept (the matcher looks past it)."""
    if body[:8] == b"[req_id=":
        return False
    sp = body.find(b" ")
    found = dispatch.get(body if sp < 0 else body[:sp])
    if found is not None and any(n in body for n in found):
        return False
    return not any(n in body for n in needles)


def _quiet(raw: bytes, rest: bytes, flags: int, quiet: QuietPlaces, after: bytes | None,
           widths: frozenset[int], whole: bool = False, wrap: tuple[int, int] = (0, 0)) -> int:
    """QUIET when ``rest`` (the cleaned line of ``raw`` after its process prefixes) is a quiet record (with
    ``whole``: of a place where every text is recognised, not one of the simple patterns), UNKNOWN when it
    is a record nothing recognises (printable ASCII at an unknown place), else KEEP."""
    word = next((w for w in _QUIET_LEVELS if rest.startswith(w)), None)
    if word is None:
        return KEEP
    level = word[:-1]
    m = _VLLM_REST.match(rest, len(word))
    if m is None or not b"02" <= m.group(1) <= b"11":
        return KEEP  # December and January: the reader's Dec→Jan year roll reads the month
    body = rest[m.end() :]
    key = level + b" " + m.group(2) + b":" + m.group(3)
    if quiet.accepts(key, body, whole) and _unremarkable(body, quiet, "vllm"):
        kind = QUIET
    elif not whole and quiet.unknown_at(key, body, "vllm"):
        kind = UNKNOWN
    else:
        return KEEP
    plen = row_width(raw, flags) + wrap[0]
    return kind if plen < HELD_WIDTH or (after is not None and _ends_held(after, plen, flags, widths, wrap[1])) else KEEP


def _ends_held(after: bytes, plen: int, flags: int, widths: frozenset[int], after_wrap: int = 0) -> bool:
    """Whether the line after a held record cannot be its rest (``LineReader._continue_held``): empty, with a
    process prefix, wider than the record, not as wide when the record's width is no terminal's, an
    envelope of its own, or (no wrapper seen) another program's line with its whole header."""
    after = _without_line_end_cr(after)
    if not after:
        return not after_wrap  # a wrapper with nothing behind it: left to the reader
    wide = plen in widths if plen <= MAX_QUIET_LINE else True  # past the compiled copy's mask: maybe a terminal's
    width = row_width(after, flags) + after_wrap
    if b"\r" not in after and (width > plen or not wide and width != plen):
        return True
    return _not_a_rest(after, flags)


def _not_a_rest(after: bytes, flags: int) -> bool:
    """Whether the line after a held record cannot be its rest whatever its width: a process prefix, an
    envelope of its own, or (no wrapper seen) another program's line with its whole header."""
    head = _cleaned(after[:600], flags)
    if head is None:
        return False
    if head[:1] == b"(":
        return len(peeled(head)) < len(head)
    if head.startswith(_LEVEL_WORDS):
        sp = head.find(b" ")
        return head[sp + 1 : sp + 3].isdigit() and head[sp + 3 : sp + 4] == b"-"
    return bool(flags & PLAIN_BLOCK) and FOREIGN_HEADER.match(head) is not None  # never a cut rest (joiner)


def kinds(data: bytes, off: int, starts, ends, flags: int, quiet: QuietPlaces | None = None,
          stop: int | None = None, widths: frozenset[int] = frozenset(), year: bytes = b"",
          wraps: tuple | None = None) -> bytes:
    """One kind byte per line ``data[off + starts[i] : off + ends[i]]``: the reference of ``_scan.prefilter``.
    ``stop``: where the block ends in ``data`` (the line after a rare line is read up to it); ``wraps``: two
    columns, the width of the wrapper a block's copy took off each row and off the line after it."""
    stop = len(data) if stop is None else stop
    out = bytearray()
    heads: list[bytes] = []
    row_wraps, after_wraps = wraps if wraps is not None and len(wraps[0]) else (repeat(0), repeat(0))
    if wraps is not None and len(wraps[0]) and not len(wraps[0]) == len(wraps[1]) == len(starts):
        raise ValueError("prefilter: a wrapper width per row")
    for s, e, wrap, after_wrap in zip(starts, ends, row_wraps, after_wraps, strict=False):  # repeat(0): none
        nxt = off + e + 1
        # the next line matters only to a quiet vLLM record; None: the next block's
        after = None if quiet is None or nxt >= stop else data[nxt : _line_end(data, nxt, stop)]
        raw = data[off + s : off + e]
        kind = inert_kind(raw, flags, quiet, after, widths, year, (max(wrap, 0), max(after_wrap, 0)))
        if kind in (QUIET, UNKNOWN, LMC_UNKNOWN) and _first_of_head(quiet_head(raw, flags), heads):
            kind += 1  # QUIET_FIRST, UNKNOWN_FIRST, LMC_UNKNOWN_FIRST
        out.append(kind)
    return bytes(out)


def quiet_head(raw: bytes, flags: int) -> bytes:
    """A quiet record's process prefixes, cleaned (empty without one): what tells its process."""
    line = cleaned_line(raw, flags)
    return line[: len(line) - len(peeled(line))] if line[:1] == b"(" else b""


def _first_of_head(head: bytes, heads: list[bytes]) -> bool:
    """Whether ``head`` is new among the block's (kept up to :data:`MAX_QUIET_HEADS`, each up to
    :data:`MAX_QUIET_HEAD` bytes; past either every one counts as new)."""
    if head in heads:
        return False
    if len(head) <= MAX_QUIET_HEAD and len(heads) < MAX_QUIET_HEADS:
        heads.append(head)
    return True


def _line_end(data: bytes, at: int, stop: int) -> int:
    nl = data.find(b"\n", at, stop)
    return stop if nl < 0 else nl


try:  # the compiled copy, built with the scanner (``_prefilter.c``)
    from specdiag.ingest._scan import prefilter as _compiled_kinds
except ImportError:  # pragma: no cover - exercised by the build without a compiler
    _compiled_kinds = None


_NO_BLOBS = (b"",) * 11
#: no wrapper widths: a block read as it is (``kinds``' ``wraps``)
NO_WRAPS = (array("q"), array("q"))


class Ahead(NamedTuple):
    """A block's kinds decided on a scan thread (``ahead.py``) from the reader's state as it was when the
    block was handed over: ``args`` are what the compiled copy was called with besides the block (flags,
    the eleven :meth:`QuietPlaces.blobs`, the width mask, the year, the two wrapper-width columns). Used only where the reader's state is
    still the same when the block comes back (:func:`block_kinds`), so the kinds are those it would decide."""

    start: int
    stop: int
    args: tuple
    kinds: bytes


def compiled_args(flags: int, blobs: tuple[bytes, ...], mask: bytes, year: bytes,
                  wraps: tuple = NO_WRAPS) -> tuple:
    """The compiled copy's arguments besides the block, in the order it takes them after ``stop``."""
    return (flags, *blobs, mask, year, *wraps)


def blobs_of(quiet: QuietPlaces | None) -> tuple[bytes, ...]:
    """``quiet.blobs()``, or eleven empty blobs without quiet places (no record is then quiet)."""
    return quiet.blobs() if quiet is not None else _NO_BLOBS


def kinds_ahead(data: bytes, start: int, stop: int, rare: dict, args: tuple) -> Ahead | None:
    """The kinds of a block's rare rows by the compiled copy, for a scan thread (None where it was not built)."""
    if _compiled_kinds is None:
        return None
    flags, *rest = args
    return Ahead(start, stop, args, _compiled_kinds(data, start, rare["start"], rare["end"], flags, stop, *rest))


def block_kinds(data: bytes, off: int, starts, ends, flags: int, quiet: QuietPlaces | None, stop: int,
                widths: frozenset[int], year: bytes, ahead: Ahead | None = None, wraps: tuple = NO_WRAPS) -> bytes:
    """:func:`kinds` by the compiled copy where it was built (and the scanner is not forced to Python); the
    kinds decided ``ahead`` on a scan thread where they were decided for this block and this state."""
    from specdiag.ingest.scan import compiled_in_use

    if _compiled_kinds is not None and compiled_in_use():
        args = compiled_args(flags, blobs_of(quiet), width_mask(widths), year, wraps)
        if ahead is not None and ahead.start == off and ahead.stop == stop and ahead.args == args:
            return ahead.kinds
        return _compiled_kinds(data, off, starts, ends, flags, stop, *args[1:])
    return kinds(data, off, starts, ends, flags, quiet, stop, widths, year, wraps)


def width_mask(widths) -> bytes:
    """``widths`` as the compiled copy reads them: byte ``w`` set for each width up to the longest quiet
    line (a longer record is taken to be at a terminal's width, as :func:`_ends_held` takes it)."""
    return _width_mask(frozenset(widths))


@functools.lru_cache(maxsize=8)
def _width_mask(widths: frozenset[int]) -> bytes:
    """Cached: an input's widths rarely change, and the mask (64 KiB) is asked for once per block."""
    mask = bytearray(MAX_QUIET_LINE + 1)
    for w in widths:
        if 0 <= w <= MAX_QUIET_LINE:
            mask[w] = 1
    return bytes(mask)
