"""The scan contract: one block of whole lines in, hot-line counts and columns plus the rare lines out.

Most of a busy server's log is a handful of LMCache INFO (or DEBUG) templates (stores, retrieves, scheduler
lookups), uvicorn access lines and, on a metric-dense server, vLLM's periodic stats and SpecDecoding
lines. ``scan_block`` recognises exactly those, per line, and keeps them as counters per (process
prefix, template) and as compact numeric columns; every other line is handed back as
``(line number, start, end)`` for the Python records → events path. Nothing here decodes text.

Behind :func:`scan_block`: the pure-Python reference below (the definition), ``specdiag.ingest._scan``
(C, releases the GIL) and, where no compiler was available at install time, ``scan_fast`` (this
reference's decisions, taken once per line shape). ``tests/test_scan_differential.py`` requires identical results. The grammar both accept is written out
in ``docs/scanner.md``; it is deliberately narrow: a line it does not accept in full goes to ``rare``,
where the full Python path decides, so being conservative is never wrong, only slower.

Per line, in this order (every step is per line, never sniffed per file or per block):

1. a raw line longer than :data:`MAX_HOT_LINE` bytes is rare, and so is one with a CR anywhere but as its
   last byte (CRLF's): a bare CR inside a line may end a record there (a record after a progress bar's CR),
   which only the Python path splits (``cr_lines.cr_records``);
2. colour: a line holding ESC loses ``ESC [ [0-9;?]* letter`` sequences, then stray ESC bytes; a line
   without ESC loses the ESC-less residue ``[N(;N)*m`` (N of 1–3 digits) a collector leaves; then CRs;
3. the cleaned line must be printable ASCII (0x20–0x7f): control bytes, NULs, invalid UTF-8 and any
   non-ASCII text are rare (the Python path owns binary-junk and wrapper handling);
4. a chain of at most :data:`MAX_PREFIX_DEPTH` vLLM process prefixes ``(Name pid=N[, ip=X]) `` (Ray
   nests them) is the process key, as printed;
5. then either LMCache's envelope ``[YYYY-MM-DD HH:MM:SS,mmm] LMCache INFO: `` (or ``DEBUG: ``) with the
   ``(file.py:N:logger)`` suffix and a store (S1), retrieve (R4, every variant) or lookup (L1) message,
   or a uvicorn access line ``INFO:  client - "request" NNN `` (1xx–4xx counted, 5xx counted and flagged),
   or vLLM's ``INFO MM-DD HH:MM:SS [file:N] `` header and a stats (V_STATS) or SpecDecoding (V_SPEC) message
   in one of its canonical shapes, read key by key into numeric columns that mean exactly what
   ``metrics.parse.parse_stats_body`` / ``parse_spec_body`` read (:func:`parse_stats`, :func:`parse_spec`).

Numbers longer than :data:`MAX_DIGITS` digits make the line rare (never an overflow).
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from dataclasses import dataclass, field
from itertools import compress, repeat
from math import isnan
from operator import add, eq, itemgetter, or_
from typing import TYPE_CHECKING

from specdiag.catalog.wording import BYTES as _W
from specdiag.ingest.origin import Origin, OriginCache
from specdiag.metrics.parse import STATS_ORDER
from specdiag.patterns import lazy

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ingest.envelope import Record

#: template ids, in the order the compiled scanner numbers them (S1, R4, L1, V_STATS, V_SPEC as in ``specdiag.events``)
TEMPLATES: tuple[str, ...] = ("S1", "R4", "L1", "UACCESS", "U5XX", "V_STATS", "V_SPEC")
STORE, RETRIEVE, LOOKUP, ACCESS, ACCESS_5XX, STATS, SPEC = range(7)
#: raw lines longer than this are never hot (real store/retrieve/lookup lines are a few hundred bytes)
MAX_HOT_LINE = 16384
MAX_PREFIX_DEPTH = 4
#: distinct process prefixes per block; a hot line with a new prefix past this goes to ``rare``
MAX_PREFIXES = 256
#: a number with more digits than this sends its line to ``rare`` (fits int64 with room to spare)
MAX_DIGITS = 18
#: "no value" in an int64 column (a lookup without ``need to load``, ``hit tokens: None``)
NA = -(2**63)

#: column name → array typecode, per table; the compiled scanner writes the same layout
SCHEMA: dict[str, tuple[tuple[str, str], ...]] = {
    "lookups": (("line", "q"), ("start", "q"), ("end", "q"), ("proc", "I"), ("rid_hash", "Q"), ("total", "q"), ("computed", "q"),
                ("hit", "q"), ("need", "q"), ("below_min", "b")),
    "retrieves": (("line", "q"), ("start", "q"), ("end", "q"), ("proc", "I"), ("retrieved", "q"), ("required", "q"), ("total", "q")),
    "stores": (("line", "q"), ("start", "q"), ("end", "q"), ("proc", "I"), ("stored", "q"), ("total", "q")),
    "flagged": (("line", "q"), ("start", "q"), ("end", "q"), ("tid", "B")),
    "rare": (("line", "q"), ("start", "q"), ("end", "q")),
    "stats": (("line", "q"), ("start", "q"), ("end", "q"), ("proc", "I"), ("engine", "q"), ("n_engines", "q"),
              ("prompt_tps", "d"), ("gen_tps", "d"), ("running", "q"), ("waiting", "q"), ("preempt", "q"), ("kv", "d"),
              ("kv_dev", "B"), ("prefix", "d"), ("ext", "d"), ("stamp", "q")),
    "spec": (("line", "q"), ("start", "q"), ("end", "q"), ("proc", "I"), ("mal", "d"), ("accepted", "q"),
             ("drafted", "q"), ("rate", "d"), ("pos_off", "q"), ("pos_n", "q"), ("stamp", "q")),
    "positions": (("rate", "d"),),
}
#: ``kv_dev`` of a stats row: which KV cache the usage is of (``GPU KV cache usage`` / ``CPU KV cache usage``)
KV_DEVICES: tuple[str, ...] = (_W.KV_DEVICE_GPU.decode(), _W.KV_DEVICE_CPU.decode())
_KV_DEV = {d.encode(): i for i, d in enumerate(KV_DEVICES)}
#: at most this many per-position rates on a hot SpecDecoding line (one per draft position)
MAX_POSITIONS = 1024
#: a vLLM line exactly this long may be a terminal-cut row whose rest follows on the next line, which the
#: records path joins onto it (``joiner.TERMINAL_WIDTHS``, kept equal by a test): such lines stay rare
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250})
NAN = float("nan")

_ESC_SEQ = lazy(rb"\x1b\[[0-9;?]*[A-Za-z]")
_RESIDUE = lazy(rb"\[\d{1,3}(?:;\d{1,3})*m")
_NOT_PRINTABLE = lazy(rb"[^\x20-\x7f]")
#: LMCache's envelope at INFO or DEBUG: releases print the lookup (0.3.13's vllm_v1_adapter.py:1266, the post-0.5.6
#: tree's :1440) and the retrieve line (0.3.5's cache_engine.py:504) at DEBUG too; the message starts at the match's end
_ENVELOPE = lazy(rb"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] LMCache (?:INFO|DEBUG): ")
_DIGITS = lazy(rb"\d*")
_VLLM_HEAD = lazy(rb"INFO \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? \[")
_FILE = lazy(rb"[^:\] ]*")


class _Reject(Exception):
    """Raised inside the per-line parser: the line is not hot (it goes to ``rare``)."""


@dataclass(eq=False)
class ScanResult:
    """What one block scan found. Line numbers are absolute (``base_line`` + 1 is the block's first line).

    ``prefixes[i]`` is the process prefix (cleaned bytes, ``b""`` for none) that ``proc == i`` in the
    columns refers to; ``counts`` keys on the prefix bytes themselves so that blocks merge by key.
    Every table has ``line, start, end``: offsets into the block (``end`` excludes the newline).

    ``lookup_text`` is the lookup rows' lines concatenated in row order, where the scan had them at hand
    (the pure-Python scanner splits the block into lines anyway; None: ``pack_rows`` cuts them from the
    block). Not part of equality: it is the same bytes either way, made where it is cheaper.
    """

    lines: int
    prefixes: list[bytes]
    counts: dict[tuple[bytes, str], int]
    columns: dict[str, dict[str, array]] = field(default_factory=dict)
    lookup_text: bytes | None = None
    #: the prefilter's kinds of the rare rows decided on the scan thread (``prefilter.Ahead``), or None; not
    #: part of equality: the reader decides them itself wherever they may differ
    ahead: object = None
    #: where the first start-marker literal lies among the rare rows (``marks.first_among_rare``), searched on
    #: the scan thread; None where it was not searched
    marker: int | None = None

    def __eq__(self, other: object) -> bool:
        """Equal down to the bits of every column: NaN (a missing float) equals NaN, and ``-0.0`` is not ``0.0``
        (``array`` equality would say NaN != NaN, so two identical scans of a stats line would differ)."""
        if not isinstance(other, ScanResult):
            return NotImplemented
        return (self.lines, self.prefixes, self.counts) == (other.lines, other.prefixes, other.counts) and \
            _column_bits(self.columns) == _column_bits(other.columns)

    __hash__ = None  # type: ignore[assignment]

    @property
    def rare(self) -> dict[str, array]:
        return self.columns["rare"]

    def shifted(self, base: int) -> ScanResult:
        """The same scan with every line number ``base`` higher: a block scanned before the lines in front
        of it were counted (on a scan thread), numbered when it is handed on in file order."""
        if not base:
            return self
        compiled = compiled_in_use()  # once, not per column: it reads the environment
        columns = {}
        for name, cols in self.columns.items():
            if "line" in cols:
                cols = {**cols, "line": shift_column(cols["line"], base, compiled)}
            columns[name] = cols
        return ScanResult(self.lines, self.prefixes, self.counts, columns, self.lookup_text, self.ahead, self.marker)

    @property
    def flagged(self) -> dict[str, array]:
        return self.columns["flagged"]


def _column_bits(columns: dict[str, dict[str, array]]) -> dict[str, dict[str, tuple[str, bytes]]]:
    return {t: {c: (a.typecode, a.tobytes()) for c, a in cols.items()} for t, cols in columns.items()}


def rid_hash(rid: bytes) -> int:
    """64-bit request-id hash for joins: CRC-32 in the high half, Adler-32 in the low half.

    Both halves are exactly defined (zlib), cheap in Python and in C; not cryptographic, so a join on it
    may very rarely pair two distinct ids.
    """
    return (zlib.crc32(rid) << 32) | zlib.adler32(rid)


def clean_line(raw: bytes) -> bytes:
    """Step 2 of the grammar: colour codes (or their ESC-less residue), then CRs."""
    if b"\x1b" in raw:
        raw = _ESC_SEQ.sub(b"", raw)
        if b"\x1b" in raw:
            raw = raw.replace(b"\x1b", b"")
    elif b"[" in raw:
        raw = _RESIDUE.sub(b"", raw)
    if b"\r" in raw:
        raw = raw.replace(b"\r", b"")
    return raw


def _number(s: bytes, pos: int, end: int) -> tuple[int, int]:
    """The run of ASCII digits at ``pos`` (at least one, at most MAX_DIGITS, before ``end``)."""
    m = _DIGITS.match(s, pos, end)
    stop = m.end()
    if stop == pos or stop - pos > MAX_DIGITS:
        raise _Reject
    return int(s[pos:stop]), stop


def _expect(s: bytes, pos: int, end: int, lit: bytes) -> int:
    stop = pos + len(lit)
    if stop > end or not s.startswith(lit, pos):
        raise _Reject
    return stop


def peel_prefixes(s: bytes) -> int:
    """End of the ``(Name pid=N[, ip=X]) `` chain at the start of ``s`` (0 if none); raises _Reject.

    The first `` pid=`` inside the parentheses must be followed by digits and then ``)`` or ``, ip=``;
    anything else (a parenthesis inside, a second ``pid=``) is left to the Python origin parser.
    """
    pos = depth = 0
    while s[pos : pos + 1] == b"(":
        depth += 1
        close = s.find(b")", pos)
        if depth > MAX_PREFIX_DEPTH or close < 0 or s.find(b"(", pos + 1, close) >= 0:
            raise _Reject
        p = s.find(b" pid=", pos + 1, close)
        if p < 0:
            raise _Reject
        _, d = _number(s, p + 5, close)
        if d != close and not s.startswith(b", ip=", d):
            raise _Reject
        pos = close + 1
        if s[pos : pos + 1] == b" ":
            pos += 1
    return pos


def suffix_start(s: bytes, msg: int) -> int:
    """Where LMCache's ``(file.py:N:logger)`` suffix starts in ``s[msg:]`` (the `` (``), as
    ``envelope.split_suffix`` decides for a line ending in ``)``; raises _Reject when there is none."""
    n = len(s)
    if n <= msg or s[n - 1] != 0x29:  # ')'
        raise _Reject
    i = s.rfind(b" (", msg)
    if i < 0:
        raise _Reject
    a = s.find(b":", i)
    b = s.find(b":", a + 1) if a >= 0 else -1
    if b < 0 or a < i + 5 or s[a - 3 : a] != b".py" or not s[a + 1 : b].isdigit() or b >= n - 2:
        raise _Reject
    return i


def _req_tag(s: bytes, pos: int, end: int) -> int:
    """Skip an optional ``[req_id=…] `` tag (the id holds no ``]``)."""
    if not s.startswith(_W.TAG_OPEN, pos, end):
        return pos
    close = s.find(_W.TAG_CLOSE, pos + len(_W.TAG_OPEN), end)
    if close < 0:
        raise _Reject
    return _expect(s, close + 1, end, b" ")


def parse_store(s: bytes, pos: int, end: int) -> tuple[int, int]:
    """S1: ``[req_id=…] Stored N out of total M tokens`` → (stored, total)."""
    pos = _expect(s, _req_tag(s, pos, end), end, _W.STORED)
    stored, pos = _number(s, pos, end)
    total, pos = _number(s, _expect(s, pos, end, _W.OUT_OF_TOTAL), end)
    _expect(s, pos, end, _W.TOKENS)
    return stored, total


def parse_retrieve(s: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """R4, both shapes → (retrieved, required, total).

    0.3.9+: ``Retrieved R out of Q required tokens (from T total tokens)``; 0.3.3–0.3.5 and the layerwise
    line: ``Retrieved R out of [total ]Q out of total T tokens``.
    """
    pos = _expect(s, _req_tag(s, pos, end), end, _W.RETRIEVED)
    got, pos = _number(s, pos, end)
    pos = _expect(s, pos, end, _W.OUT_OF)
    legacy = s.startswith(_W.LEGACY_TOTAL, pos, end)
    if legacy:
        pos += len(_W.LEGACY_TOTAL)
    required, pos = _number(s, pos, end)
    if not legacy and s.startswith(_W.REQUIRED_FROM, pos, end):
        total, pos = _number(s, pos + len(_W.REQUIRED_FROM), end)
        _expect(s, pos, end, _W.TOTAL_TOKENS_CLOSE)
    elif s.startswith(_W.OUT_OF_TOTAL, pos, end):
        total, pos = _number(s, pos + len(_W.OUT_OF_TOTAL), end)
        _expect(s, pos, end, _W.TOKENS)
    else:
        raise _Reject
    return got, required, total


def parse_lookup(s: bytes, pos: int, end: int) -> tuple[bytes, int, int, int, int, int]:
    """L1: ``Reqid: ID, Total tokens N, [Inference Engine computed tokens: C, ]LMCache hit tokens: H|None
    [, [but ]need to load: [-]L]`` → (id, total, computed, hit, need, below_min)."""
    pos = _expect(s, pos, end, _W.REQID)
    sp = s.find(b" ", pos, end)
    if sp < pos + 2 or s[sp - 1] != 0x2C:  # the id is every non-space byte before ", Total"
        raise _Reject
    rid = s[pos : sp - 1]
    total, pos = _number(s, _expect(s, sp, end, _W.TOTAL_TOKENS), end)
    pos = _expect(s, pos, end, _W.SEP)
    computed = NA
    if s.startswith(_W.COMPUTED, pos, end):
        computed, pos = _number(s, pos + len(_W.COMPUTED), end)
        pos = _expect(s, pos, end, _W.SEP)
    pos = _expect(s, pos, end, _W.HIT)
    if s.startswith(_W.NO_HIT, pos, end):
        hit, pos = NA, pos + len(_W.NO_HIT)
    else:
        hit, pos = _number(s, pos, end)
    need, below = _need_to_load(s, pos, end)
    return rid, total, computed, hit, need, below


def message_values(tid: str, msg: bytes) -> tuple | None:
    """The scanner's numbers of one message the Python path read (a wrapped line): ``parse_lookup`` for
    ``L1``, ``parse_retrieve`` for ``R4``, ``parse_store`` for ``S1``; None where the grammar rejects it
    (the template decides then).
    ``msg`` is the message after the envelope, without LMCache's suffix."""
    parse = {"L1": parse_lookup, "R4": parse_retrieve, "S1": parse_store}[tid]
    try:
        return parse(msg, 0, len(msg))
    except _Reject:
        return None


def _need_to_load(s: bytes, pos: int, end: int) -> tuple[int, int]:
    """The optional ``, [but ]need to load: [-]N`` tail; absent (or malformed) → (NA, 0)."""
    if not s.startswith(_W.SEP, pos, end):
        return NA, 0
    q = pos + len(_W.SEP)
    below = 0
    if s.startswith(_W.BELOW_MIN, q, end):
        below, q = 1, q + len(_W.BELOW_MIN)
    if not s.startswith(_W.NEED, q, end):
        return NA, 0
    q += len(_W.NEED)
    neg = s.startswith(b"-", q, end)
    m = _DIGITS.match(s, q + neg, end)
    if m.end() == q + neg:
        return NA, 0
    if m.end() - q - neg > MAX_DIGITS:
        raise _Reject
    v = int(s[q + neg : m.end()])
    return (-v if neg else v), below


def parse_access(s: bytes, pos: int) -> int:
    """uvicorn ``INFO:  client - "request" NNN `` → the status code (100–599)."""
    end = len(s)
    pos = _expect(s, pos, end, b"INFO: ")
    while s[pos : pos + 1] == b" ":
        pos += 1
    sp = s.find(b" ", pos)
    if sp <= pos:
        raise _Reject
    pos = _expect(s, sp, end, b' - "')
    close = s.find(b'"', pos)
    if close < 0:
        raise _Reject
    pos = _expect(s, close, end, b'" ')
    status = s[pos : pos + 3]
    if len(status) != 3 or not status.isdigit() or s[pos + 3 : pos + 4] != b" " or not 0x31 <= status[0] <= 0x35:
        raise _Reject
    return int(status)


def vllm_head(s: bytes, pos: int) -> int:
    """Start of the message after vLLM's ``INFO MM-DD HH:MM:SS[.f] [file:N] `` header at ``pos``; raises _Reject.

    The header ``envelope.VLLM_REST`` reads (``vllm/logger.py``), narrowed: the level is INFO, the bracket and
    the space after it are present, a fraction has 1-9 digits and the file (``loggers.py``, or a relative path
    under ``VLLM_LOGGING_LEVEL=DEBUG``) holds no ``:``, ``]`` or space.
    """
    m = _VLLM_HEAD.match(s, pos)
    if m is None:
        raise _Reject
    stop = _FILE.match(s, m.end()).end()
    if stop == m.end() or s[stop : stop + 1] != b":":
        raise _Reject
    _, stop = _number(s, stop + 1, len(s))
    return _expect(s, stop, len(s), b"] ")


def stamp_value(stamp: bytes) -> int:
    """vLLM's ``MM-DD hh:mm:ss`` (digits where ``vllm_head`` checked them) as the number ``MMDDhhmmss``: a
    metric row's ``stamp`` column, from which its time is taken without the line (``timeutil.stamp_time``)."""
    return int(stamp[0:2] + stamp[3:5] + stamp[6:8] + stamp[9:11] + stamp[12:14])


#: a ``stamp_value`` divided by this is its month (``MMDDhhmmss`` → ``MM``)
STAMP_MONTH = 100000000


def stamp_month(stamp: int) -> int:
    """The month of a ``stamp_value`` (``MMDDhhmmss`` → ``MM``)."""
    return stamp // STAMP_MONTH


def _decimal(s: bytes, pos: int, end: int) -> tuple[float, int]:
    """``nan`` or ``D[.D]`` (1-MAX_DIGITS digits each) at ``pos`` → (``float(text)``, NaN for nan; end).

    ``float`` of the printed digits is what ``numbers.to_float`` gives for them (finite at these lengths);
    vLLM prints ``nan`` for "no data", which the Python path turns into None.
    """
    if s.startswith(b"nan", pos, end):
        return NAN, pos + 3
    stop = _DIGITS.match(s, pos, end).end()
    if stop == pos or stop - pos > MAX_DIGITS:
        raise _Reject
    if s[stop : stop + 1] == b"." and stop < end:
        frac = _DIGITS.match(s, stop + 1, end).end()
        if frac == stop + 1 or frac - stop - 1 > MAX_DIGITS:
            raise _Reject
        stop = frac
    return float(s[pos:stop]), stop


def _count(s: bytes, pos: int, end: int) -> tuple[int, int]:
    """A ``%d`` count as ``metrics.parse`` reads it: ``int(float(text))`` when below 10^18, else NA."""
    stop = _DIGITS.match(s, pos, end).end()
    if stop == pos or stop - pos > MAX_DIGITS:
        raise _Reject
    v = float(s[pos:stop])
    return (int(v) if v < 1e18 else NA), stop


def _percent(s: bytes, pos: int, end: int) -> tuple[float, int]:
    """``X%`` → the fraction exactly as ``parse_stats_body`` rounds it: ``round(X / 100, 6)`` (NaN stays)."""
    v, pos = _decimal(s, pos, end)
    pos = _expect(s, pos, end, b"%")
    return (v if v != v else round(v / 100.0, 6)), pos


#: the stats and SpecDecoding lines' literals as the scanners meet them, composed from the one wording
#: (``catalog/wording.py``; ``_scan.c`` composes the same from ``_wording.h``; ``scan_fast`` escapes these)
S_PROMPT = _W.KEY_END + _W.PROMPT_TPS + _W.KEY_END
S_GEN = _W.PER_SECOND + _W.SEP + _W.GEN_TPS + _W.KEY_END
S_RUNNING = _W.PER_SECOND + _W.SEP + _W.RUNNING + _W.KEY_END
S_WAITING = _W.REQS + _W.SEP + _W.WAITING + _W.KEY_END
S_AFTER_WAITING = _W.REQS + _W.SEP
S_PREEMPTIONS = _W.PREEMPTIONS + _W.KEY_END
S_KV_USAGE = _W.KV_USAGE + _W.KEY_END
S_PREFIX_HIT = _W.SEP + _W.PREFIX_HIT + _W.KEY_END
S_EXT_HIT = _W.SEP + _W.EXT_HIT + _W.KEY_END
S_SPEC = _W.SPEC + _W.KEY_END
S_SPEC_OLD = S_SPEC + _W.SPEC_RATE + _W.KEY_END
S_SPEC_NEW = S_SPEC + _W.SPEC_MEAN_LENGTH + _W.KEY_END
S_MEAN_LENGTH = _W.SEP + _W.SPEC_MEAN_LENGTH + _W.KEY_END
S_ACCEPTED_TPS = _W.SEP + _W.SPEC_ACCEPTED_TPS + _W.KEY_END
S_DRAFTED_TPS = _W.PER_SECOND + _W.SEP + _W.SPEC_DRAFTED_TPS + _W.KEY_END
S_ACCEPTED_AFTER_TPS = _W.PER_SECOND + _W.SEP + _W.SPEC_ACCEPTED + _W.KEY_END
S_ACCEPTED = _W.SEP + _W.SPEC_ACCEPTED + _W.KEY_END
S_DRAFTED = _W.TOKENS + _W.SEP + _W.SPEC_DRAFTED + _W.KEY_END
S_PER_POSITION = _W.TOKENS + _W.SEP + _W.SPEC_PER_POSITION + _W.KEY_END
S_AVG_RATE = _W.SEP + _W.SPEC_AVG_RATE + _W.KEY_END


def parse_stats(s: bytes, msg: int) -> tuple:
    """V_STATS, the modern shapes (``v1/metrics/loggers.py``, 0.8.5 :111 to 0.32.0 :335) → the stats row values
    (engine, n_engines, prompt_tps, gen_tps, running, waiting, preempt, kv, kv_dev, prefix, ext).

    ``Engine N: `` (n_engines NA) or ``N Engines Aggregated: `` (engine NA; the event's ``n_engines``), both
    throughputs, Running, Waiting, ``[Preemptions: N, ]`` (0.11.2+, only once > 0), ``GPU|CPU KV cache usage: X%`` (CPU backend 0.30+),
    ``[, Prefix cache hit rate: X%]`` (omitted without queries in 0.31+) and
    ``[, External prefix cache hit rate: X%]`` (a KV connector), then the end of the line. Any other key
    (Deferred, KV fetch, Corrupted, MM cache, the V0 line) leaves the line to the key/value parser.
    """
    end = len(s)
    n_engines = NA
    if s.startswith(_W.ENGINE, msg):
        engine, pos = _number(s, msg + len(_W.ENGINE), end)
    else:
        n_engines, pos = _number(s, msg, end)
        pos, engine = _expect(s, pos, end, _W.ENGINES_AGGREGATED), NA
    prompt, pos = _decimal(s, _expect(s, pos, end, S_PROMPT), end)
    gen, pos = _decimal(s, _expect(s, pos, end, S_GEN), end)
    running, pos = _count(s, _expect(s, pos, end, S_RUNNING), end)
    waiting, pos = _count(s, _expect(s, pos, end, S_WAITING), end)
    pos = _expect(s, pos, end, S_AFTER_WAITING)
    preempt = NA
    if s.startswith(S_PREEMPTIONS, pos):
        preempt, pos = _count(s, pos + len(S_PREEMPTIONS), end)
        pos = _expect(s, pos, end, _W.SEP)
    name = next((d for d in _KV_DEV if s.startswith(d, pos)), None)
    if name is None:
        raise _Reject
    dev = _KV_DEV[name]
    kv, pos = _percent(s, _expect(s, pos + len(name), end, S_KV_USAGE), end)
    prefix = ext = NAN
    if s.startswith(S_PREFIX_HIT, pos):
        prefix, pos = _percent(s, pos + len(S_PREFIX_HIT), end)
    if s.startswith(S_EXT_HIT, pos):
        ext, pos = _percent(s, pos + len(S_EXT_HIT), end)
    if pos != end:
        raise _Reject
    return engine, n_engines, prompt, gen, running, waiting, preempt, kv, dev, prefix, ext


def parse_spec(s: bytes, msg: int) -> tuple[float, int, int, float, list[float]]:
    """V_SPEC → (mal, accepted, drafted, rate, per-position rates), in the two shapes of
    ``v1/spec_decode/metrics.py`` (then the end of the line):

    * 0.10.2-0.32.0 (:96 to :120): ``Mean acceptance length: X, Accepted throughput: X tokens/s, Drafted
      throughput: X tokens/s, Accepted: N tokens, Drafted: N tokens, Per-position acceptance rate: X, X, ...,
      Avg Draft acceptance rate: X%``;
    * 0.8.5-0.10.1 (:82, :87): ``Draft acceptance rate: X%, Mean acceptance length: X, Accepted: N tokens,
      Drafted: N tokens, Per-position acceptance rate: X, X, ...``.

    The rate is ``parse_spec_body``'s: the printed percent as a fraction, or accepted / drafted when vLLM
    printed ``nan%`` and something was drafted. The 0.8.0-0.8.3 and V0 shapes stay rare.
    """
    end = len(s)
    if s.startswith(S_SPEC_OLD, msg):
        rate, pos = _percent(s, msg + len(S_SPEC_OLD), end)
        mal, pos = _decimal(s, _expect(s, pos, end, S_MEAN_LENGTH), end)
        accepted, pos = _count(s, _expect(s, pos, end, S_ACCEPTED), end)
        drafted, pos = _count(s, _expect(s, pos, end, S_DRAFTED), end)
        positions, pos = _positions(s, _expect(s, pos, end, S_PER_POSITION), False)
    else:
        mal, pos = _decimal(s, _expect(s, msg, end, S_SPEC_NEW), end)
        _, pos = _decimal(s, _expect(s, pos, end, S_ACCEPTED_TPS), end)
        _, pos = _decimal(s, _expect(s, pos, end, S_DRAFTED_TPS), end)
        accepted, pos = _count(s, _expect(s, pos, end, S_ACCEPTED_AFTER_TPS), end)
        drafted, pos = _count(s, _expect(s, pos, end, S_DRAFTED), end)
        positions, pos = _positions(s, _expect(s, pos, end, S_PER_POSITION), True)
        rate, pos = _percent(s, pos + len(S_AVG_RATE), end)
    if pos != end:
        raise _Reject
    if rate != rate and accepted != NA and drafted != NA and drafted:
        rate = accepted / drafted
    return mal, accepted, drafted, rate, positions


def _positions(s: bytes, pos: int, avg_follows: bool) -> tuple[list[float], int]:
    """``X, X, ...`` (1 to MAX_POSITIONS rates) up to ``, Avg Draft acceptance rate: `` or the end of the line."""
    end = len(s)
    positions: list[float] = []
    while True:
        v, pos = _decimal(s, pos, end)
        positions.append(v)
        if len(positions) > MAX_POSITIONS:
            raise _Reject
        if (s.startswith(S_AVG_RATE, pos) if avg_follows else pos == end):
            return positions, pos
        pos = _expect(s, pos, end, _W.SEP)


class _Acc:
    """Accumulates one block's result in plain arrays (the layout the C scanner fills)."""

    def __init__(self) -> None:
        self.prefixes: list[bytes] = []
        self.index: dict[bytes, int] = {}
        self.counts: dict[tuple[int, int], int] = {}
        self.cols = {t: [array(code) for _n, code in cols] for t, cols in SCHEMA.items()}

    def proc(self, prefix: bytes) -> int:
        i = self.index.get(prefix)
        if i is None:
            if len(self.prefixes) >= MAX_PREFIXES:
                raise _Reject
            i = self.index[prefix] = len(self.prefixes)
            self.prefixes.append(prefix)
        return i

    def count(self, proc: int, tid: int) -> None:
        key = (proc, tid)
        self.counts[key] = self.counts.get(key, 0) + 1

    def row(self, table: str, *values: int) -> None:
        for col, v in zip(self.cols[table], values, strict=True):
            col.append(v)


def _scan_hot(acc: _Acc, raw: bytes, lineno: int, start: int, end: int) -> bool:
    """Record ``raw`` if it is a hot line; False (nothing recorded) if it belongs to ``rare``."""
    if len(raw) > MAX_HOT_LINE or raw.find(b"\r", 0, len(raw) - 1) >= 0:
        return False
    s = clean_line(raw)
    if (b"INFO" not in s and b"LMCache DEBUG: " not in s) or _NOT_PRINTABLE.search(s):
        return False
    try:
        pos = peel_prefixes(s)
        env = _ENVELOPE.match(s, pos)
        if env:
            return _scan_lmcache(acc, s, pos, env.end(), lineno, start, end)
        if s.startswith(b"INFO ", pos):
            return _scan_vllm(acc, s, pos, len(raw), lineno, start, end)
        status = parse_access(s, pos)
    except _Reject:
        return False
    try:
        proc = acc.proc(s[:pos])
    except _Reject:
        return False
    if status >= 500:
        acc.count(proc, ACCESS_5XX)
        acc.row("flagged", lineno, start, end, ACCESS_5XX)
    else:
        acc.count(proc, ACCESS)
    return True


def _scan_lmcache(acc: _Acc, s: bytes, pos: int, msg: int, lineno: int, start: int, end: int) -> bool:
    """Step 5 after the envelope matched from ``pos`` to ``msg``: suffix, then lookup, store or retrieve (or _Reject)."""
    stop = suffix_start(s, msg)
    word = s[msg : msg + 1]
    if s.startswith(_W.REQID, msg):
        rid, total, computed, hit, need, below = parse_lookup(s, msg, stop)
        acc.row("lookups", lineno, start, end, acc.proc(s[:pos]), rid_hash(rid), total, computed, hit, need, below)
        acc.count(acc.index[s[:pos]], LOOKUP)
        return True
    tagged = _req_tag(s, msg, stop) if word == _W.TAG_OPEN[:1] else msg
    if s.startswith(_W.STORED, tagged):
        stored, total = parse_store(s, msg, stop)
        acc.row("stores", lineno, start, end, acc.proc(s[:pos]), stored, total)
        acc.count(acc.index[s[:pos]], STORE)
        return True
    got, required, total = parse_retrieve(s, msg, stop)
    acc.row("retrieves", lineno, start, end, acc.proc(s[:pos]), got, required, total)
    acc.count(acc.index[s[:pos]], RETRIEVE)
    if got < required:
        acc.row("flagged", lineno, start, end, RETRIEVE)
    return True


def _scan_vllm(acc: _Acc, s: bytes, pos: int, raw_len: int, lineno: int, start: int, end: int) -> bool:
    """A vLLM-formatted line after the prefixes at ``pos``: the stats or SpecDecoding line (or _Reject).

    A line as long as a common terminal is left rare (raw or cleaned): the records path may join the next
    physical row onto it as the rest of a terminal-cut line, and a hot row would lose that rest.
    """
    if raw_len in TERMINAL_WIDTHS or len(s) in TERMINAL_WIDTHS:
        raise _Reject
    msg = vllm_head(s, pos)
    stamp = stamp_value(s[pos + 5 : pos + 19])
    if s.startswith(S_SPEC, msg):
        mal, accepted, drafted, rate, positions = parse_spec(s, msg)
        proc = acc.proc(s[:pos])
        rates = acc.cols["positions"][0]
        acc.row("spec", lineno, start, end, proc, mal, accepted, drafted, rate, len(rates), len(positions), stamp)
        rates.extend(positions)
        acc.count(proc, SPEC)
        return True
    values = parse_stats(s, msg)
    proc = acc.proc(s[:pos])
    acc.row("stats", lineno, start, end, proc, *values, stamp)
    acc.count(proc, STATS)
    return True


def scan_block_py(block: bytes, base_line: int) -> ScanResult:
    """The pure-Python reference of :func:`scan_block`: the definition both other implementations must
    reproduce exactly (the fallback used without the extension is ``scan_fast.scan_block_fast``)."""
    acc = _Acc()
    rare_line, rare_start, rare_end = acc.cols["rare"]
    lineno = base_line
    pos = 0
    n = len(block)
    find = block.find
    while pos < n:
        nl = find(b"\n", pos)
        end = n if nl < 0 else nl
        lineno += 1
        if not _scan_hot(acc, block[pos:end], lineno, pos, end):
            rare_line.append(lineno)
            rare_start.append(pos)
            rare_end.append(end)
        pos = end + 1
    return finish(acc, lineno - base_line)


def finish(acc: _Acc, lines: int) -> ScanResult:
    """The ScanResult of a Python scan, through the same flat layout as the compiled one."""
    counts = bytearray(8 * len(acc.prefixes) * len(TEMPLATES))
    table = memoryview(counts).cast("q")
    for (proc, tid), k in acc.counts.items():
        table[proc * len(TEMPLATES) + tid] = k
    raw = [c.tobytes() for t in SCHEMA for c in acc.cols[t]]
    return assemble(lines, acc.prefixes, bytes(counts), raw)


def assemble(lines: int, prefixes: list[bytes], counts: bytes, raw_columns: list[bytes]) -> ScanResult:
    """Build the ScanResult from the flat layout both implementations produce.

    ``counts`` is a row-major int64 matrix (prefix × template); ``raw_columns`` the columns of
    :data:`SCHEMA` in order, each as native-endian bytes of its typecode.
    """
    table = memoryview(counts).cast("q")
    nt = len(TEMPLATES)
    tally = {(prefixes[i // nt], TEMPLATES[i % nt]): int(k) for i, k in enumerate(table) if k}
    columns: dict[str, dict[str, array]] = {}
    it = iter(raw_columns)
    for tname, cols in SCHEMA.items():
        columns[tname] = {}
        for cname, code in cols:
            a = array(code)
            a.frombytes(next(it))
            columns[tname][cname] = a
    return ScanResult(lines, list(prefixes), tally, columns)


def _opt(v: float | int) -> float | int | None:
    return None if v != v or v == NA else v


def stats_row(res: ScanResult, i: int) -> dict:
    """Row ``i`` of ``columns["stats"]`` as the dict ``metrics.parse.parse_stats_body`` makes of its body
    (NaN/NA → None; the same keys, except that a field the line did not print is None rather than absent),
    so an interval series can be filled from the columns with the code that reads events today."""
    c = res.columns["stats"]
    out = {key: c[col][i] for key, col in _STATS_COLUMNS}
    for key, v in out.items():
        if v != v or v == NA:
            out[key] = None
    out["kv_device"] = KV_DEVICES[out["kv_device"]]  # a code 0..n, never NA
    return out


#: ``stats_row``'s keys, in ``parse_stats_body``'s order, and the columns they come from (``kv_dev``: a code)
_STATS_COLUMNS = (("prompt_throughput", "prompt_tps"), ("generation_throughput", "gen_tps"), ("running_reqs", "running"),
               ("waiting_reqs", "waiting"), ("preemptions", "preempt"), ("kv_cache_usage", "kv"), ("kv_device", "kv_dev"),
               ("prefix_cache_hit_rate", "prefix"), ("external_prefix_cache_hit_rate", "ext"))


def spec_row(res: ScanResult, i: int) -> dict:
    """Row ``i`` of ``columns["spec"]`` as ``metrics.parse.parse_spec_body`` makes it (the throughputs
    aside), ``num_drafts`` derived as there: ``accepted / (mal - 1)`` when mal > 1.005."""
    c = res.columns["spec"]
    off, n = c["pos_off"][i], c["pos_n"][i]
    acc, mal = _opt(c["accepted"][i]), _opt(c["mal"][i])
    out = {"mean_acceptance_length": mal, "accepted_tokens": acc, "drafted_tokens": _opt(c["drafted"][i]),
           "draft_acceptance_rate": _opt(c["rate"][i]),
           "per_position": _na_none(res.columns["positions"]["rate"][off : off + n])}
    if (drafts := _num_drafts(acc, mal)) is not None:
        out["num_drafts"] = drafts
    return out


def _num_drafts(acc: int | None, mal: float | None) -> float | None:
    """``parse_spec_body``'s derivation: mean acceptance length = 1 + accepted / drafts (when above 1.005)."""
    return acc / (mal - 1.0) if acc is not None and mal is not None and mal > 1.005 else None


def _na_none(col) -> list:
    """A column as a list, its missing values (NaN, ``NA``) as None, by C-level passes (a field this vLLM
    does not print is missing on every row; one it prints now and then, on a few)."""
    if col.typecode == "d":
        missing = map(or_, map(isnan, col), map(eq, col, repeat(NA)))
    elif NA not in col:
        return col.tolist()
    else:
        missing = map(eq, col, repeat(NA))
    gone = list(compress(range(len(col)), missing))
    if len(gone) == len(col):
        return [None] * len(col)
    out = col.tolist()
    for i in gone:
        out[i] = None
    return out


def stats_columns(res: ScanResult) -> list[list]:
    """The stats table as ``metrics.parse.STATS_ORDER``'s columns (lists; a value not printed is None)."""
    c = res.columns["stats"]
    column = dict(_STATS_COLUMNS)
    return [[KV_DEVICES[d] for d in c["kv_dev"]] if key == "kv_device" else _na_none(c[column[key]])
            for key in STATS_ORDER]


def spec_columns(res: ScanResult) -> list[list]:
    """The SpecDecoding table as ``metrics.parse.SPEC_ORDER``'s columns (``num_drafts`` None where it has none)."""
    c = res.columns["spec"]
    rates = _na_none(res.columns["positions"]["rate"])
    accs, mals = _na_none(c["accepted"]), _na_none(c["mal"])
    positions = [rates[off : off + n] for off, n in zip(c["pos_off"], c["pos_n"], strict=True)]
    return [accs, _na_none(c["drafted"]), mals, _na_none(c["rate"]), positions, list(map(_num_drafts, accs, mals))]


def origin_of(prefix: bytes, origins: OriginCache) -> Origin:
    """The Origin a ``ScanResult.prefixes`` entry stands for (``b""``: no prefix), cached per prefix."""
    return origins.peel(prefix)[0] if prefix else origins.bare  # bare: a wrapper's deployment, or NO_ORIGIN


def hot_record(block: bytes, start: int, end: int, lineno: int, path: str, origins: OriginCache,
               year: int | None = None) -> Record:
    """The Record of one hot row (``block[start:end]``), built only on demand: for the first line of a
    template, a flagged line, or a rule's look-back. The row's process prefix becomes its Origin."""
    from specdiag.ingest.envelope import Record, record_from_hot

    line = clean_line(block[start:end])
    origin, rest = origins.peel(line) if line[:1] == b"(" else (origins.bare, line)
    if rest.startswith(b"INFO:"):
        return Record(path, lineno, origin, "uvicorn", "INFO", None, year, None, None, None, rest)
    if rest.startswith(b"INFO "):  # V_STATS / V_SPEC: the vLLM header as the records path reads it
        from specdiag.ingest.hot import metric_record

        return metric_record(path, lineno, origin, block[start:end], len(line) - len(rest), year)
    return record_from_hot((path, lineno, origin, rest, year))


try:  # the compiled scanner, when the optional extension was built at install time
    from specdiag.ingest import _scan as _compiled
except ImportError:  # pragma: no cover - exercised by the CC=false build test
    _compiled = None



def _python_forced() -> bool:
    """``SPECDIAG_SCANNER=python`` forces the pure-Python fallback even where the extension was built, so
    the benchmark (``scripts/bench.py --suite``) can measure the fallback path on the same install."""
    return os.environ.get("SPECDIAG_SCANNER", "").strip().lower() == "python"


#: "c" when the compiled scanner is in use, "python" for the pure-Python fallback (none built, or forced)
IMPLEMENTATION = "c" if _compiled is not None and not _python_forced() else "python"


def compiled_in_use() -> bool:
    """Whether blocks are scanned by the compiled scanner now (``IMPLEMENTATION`` is the same, at import)."""
    return _compiled is not None and not _python_forced()


def scan_block_c(block: bytes, base_line: int) -> ScanResult:
    """The compiled scanner (raises RuntimeError where it was not built)."""
    if _compiled is None:
        raise RuntimeError("specdiag.ingest._scan was not built (no C compiler at install time)")
    lines, prefixes, counts, raw = _compiled.scan(block, base_line)
    return assemble(lines, prefixes, counts, raw)


def gather(seq, idx: list[int]) -> tuple | list:
    """``[seq[i] for i in idx]`` by one ``itemgetter`` (C, no method call per item: half the time of a
    ``map`` of ``seq.__getitem__``); a tuple, or a list for fewer than two indices."""
    if len(idx) > 1:
        return itemgetter(*idx)(seq)
    return [seq[idx[0]]] if idx else []


def pack_rows_py(block: bytes, base: int, starts: array, ends: array, lo: int, hi: int) -> bytes:
    """``block[base + starts[i] : base + ends[i]]`` for rows ``lo .. hi-1``, concatenated (the reference of
    the compiled ``pack``)."""
    if len(starts) != len(ends):
        raise ValueError("starts and ends differ in length")
    first, last = starts[lo:hi], ends[lo:hi]
    if base:
        first, last = map(add, first, repeat(base)), map(add, last, repeat(base))
    return b"".join(map(block.__getitem__, map(slice, first, last)))  # C-level maps: no Python frame per row


def packed_array(code: str, values) -> array:
    """``array(code, values)`` through one ``struct.pack``: array's constructor converts every item with a
    ``PyArg_Parse`` call, about 190 instructions an item (4 % of the pure-Python scanner's instructions,
    callgrind), and struct's packer takes a third of the time. Anything struct refuses gets array's own
    conversion (and its error)."""
    items = values if isinstance(values, (list, tuple)) else list(values)
    if _STRUCT_FITS.get(code):
        try:
            out = array(code)
            out.frombytes(struct.pack(f"{len(items)}{code}", *items))
            return out
        except (struct.error, TypeError, OverflowError):
            pass
    return array(code, items)


#: the typecodes whose native struct size is the array's item size (both in native order: one layout)
_STRUCT_FITS = {code: struct.calcsize(code) == array(code).itemsize for code in "bBIqQd"}


def shift_column(column: array, base: int, compiled: bool | None = None) -> array:
    """A copy of the int64 ``column`` with ``base`` added to every value: one copy and one C loop where the
    scanner is compiled (``compiled``: whether it is in use, when the caller knows), a C-level ``map`` of
    ``add`` in the pure-Python fallback (packed by :func:`packed_array`)."""
    if compiled if compiled is not None else compiled_in_use():
        out = column[:]
        _compiled.shift(out, base)
        return out
    return packed_array("q", map(add, column, repeat(base)))


def pack_rows(block: bytes, base: int, starts: array, ends: array, lo: int, hi: int) -> bytes:
    """Rows' lines as one bytes object (``pack_rows_py``), by one copy loop where the scanner is compiled."""
    if compiled_in_use():
        return _compiled.pack(block, base, starts, ends, lo, hi)
    return pack_rows_py(block, base, starts, ends, lo, hi)


def scan_block(block: bytes, base_line: int) -> ScanResult:
    """Scan one block of whole lines (it should end on ``\\n``; a final partial line counts as a line).

    ``base_line`` is the number of lines before this block. Uses the compiled scanner when present,
    else the pure-Python fallback (``scan_fast``: this reference's decisions, once per line shape), which
    ``SPECDIAG_SCANNER=python`` also forces (read per block: one dict lookup per MiB-sized block).
    """
    if compiled_in_use():
        return scan_block_c(block, base_line)
    from specdiag.ingest.scan_fast import scan_block_fast

    return scan_block_fast(block, base_line)


def scan_range(data: bytes, start: int, end: int, base_line: int) -> ScanResult:
    """:func:`scan_block` of ``data[start:end]`` without copying it where the compiled scanner runs
    (it reads a buffer view); offsets in the result are relative to ``start``."""
    if start == 0 and end == len(data):
        return scan_block(data, base_line)
    if compiled_in_use():
        return scan_block_c(memoryview(data)[start:end], base_line)
    return scan_block(data[start:end], base_line)
