"""The pure-Python fallback of ``scan_block``: the reference's decisions, made once per line *shape*.

The reference (``scan.scan_block_py``) spends a dozen Python calls on every line, and even one regex
match per line runs at ~100 MB/s. Canonical hot lines, however, repeat a handful of shapes: the same
process prefix, envelope, template and suffix, differing only in digits and in the request id. So the
block is turned into one *key* per line with three whole-block C passes -- every digit becomes ``1``
(``bytes.translate``, length-preserving), the content of a ``[req_id=…]`` tag and of a lookup's
``Reqid: …`` id is emptied (``re.sub`` with literal-led patterns) -- and the reference is asked once per
distinct key, on the key itself (a key is itself a line of its class). A module-level cache maps key →
decision plus the offsets of the fields, and the columns are then built with ``map``/``compress`` over
the lines (``int(line[slice])``), with no per-line Python statement on the common path.

Why one decision per key is exact (the argument behind every shortcut, ``docs/scanner.md``):
* the reference looks at digits only as "a digit is here" (envelope, pid, 1–18-digit numbers, suffix
  line number, colour codes and residue ``[N;Nm``) -- except the uvicorn status, whose first digit must
  be 1–5: that one is checked per line from its slice, as are every value and ``retrieved < required``;
* an emptied id holds only printable bytes other than space, ``"``, ``(``, ``)``, ``:``, ``]`` (and ``[``
  for a lookup id): no colour, CR or control byte, nothing that moves the suffix (`` (``, ``:``), the
  access line's client/request/quote parse, the tag's ``]`` or the prefix's ``(``/``)``/`` pid=``; so every
  line of one key is cleaned, checked and parsed the same way, at the same offsets from the line's start
  (before the first emptied id) and from its end (after the last one);
* what the key cannot see is checked apart: a raw line over ``MAX_HOT_LINE`` bytes is rare, and a block
  with more than ``MAX_PREFIXES`` process prefixes is scanned by the reference itself.
Fields are located once per key with the regex below (a strict subset of the grammar, whose groups are
what the reference parses); a key the reference accepts but the regex does not, or whose fields straddle
an emptied id, is "slow": its lines go through the reference's own per-line code, as today.

vLLM's stats and SpecDecoding lines have a decision of their own (``metric_decision``): no request id, so
the key fixes the raw offset of every field; per line the fields are sliced and converted through a
bounded text → value cache filled by the reference's readers (decimals by ``float``, the same value), and
a probe line with varied digits must give the reference's own row before a decision is trusted
(``docs/scanner.md``, "The pure-Python fallback", step 4).
``tests/test_scan_differential.py`` and the fuzz target compare the result with the reference.
"""

from __future__ import annotations

import re
import zlib
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate, compress, count, cycle, repeat
from json import loads as _json_ints
from operator import add, eq, getitem, is_, itemgetter, lshift, lt, or_, sub

from specdiag.catalog.wording import BYTES as _W
from specdiag.catalog.wording import BYTES_REGEX as _WR
from specdiag.ingest import scan
from specdiag.ingest.scan import (
    _ESC_SEQ,
    _KV_DEV,
    _RESIDUE,
    ACCESS,
    ACCESS_5XX,
    LOOKUP,
    MAX_HOT_LINE,
    MAX_PREFIXES,
    NA,
    NAN,
    RETRIEVE,
    SCHEMA,
    SPEC,
    STATS,
    STORE,
    TEMPLATES,
    _count,
    _decimal,
    _number,
    _percent,
    _Reject,
    _scan_hot,
    clean_line,
    gather,
    packed_array,
    peel_prefixes,
    stamp_value,
    vllm_head,
)
from specdiag.patterns import lazy

_NUM = rb"(\d{1,18})(?![0-9])"
_REST = rb"[\x20-\x27\x2a-\x5a\x5c-\x7f]*"  # printable, no parentheses, no '['
_TAG = rb"(?:" + _WR.TAG_OPEN + rb"[\x20-\x5a\x5c\x5e-\x7f]*" + _WR.TAG_CLOSE + rb" )?"  # no '[' or ']' inside


def _pattern(code: bytes) -> re.Pattern:
    """The fast-path regex with ``code`` as the (optional) colour token."""
    c = rb"(?:" + code + rb")?"
    prefix = rb"((?:" + c + rb"\([A-Za-z0-9_]+ pid=\d{1,18}(?:, ip=[0-9.]+)?\)" + c + rb" ){0,4})"
    env = c + rb"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] LMCache (?:INFO|DEBUG):" + c + rb" "
    store = _TAG + _WR.STORED + _NUM + _WR.OUT_OF_TOTAL + _NUM + _WR.TOKENS + _REST
    new_retrieve = (_TAG + _WR.RETRIEVED + _NUM + _WR.OUT_OF + _NUM + _WR.REQUIRED_FROM + _NUM
                    + _WR.TOTAL_TOKENS_CLOSE + _REST)
    old_retrieve = (_TAG + _WR.RETRIEVED + _NUM + _WR.OUT_OF + rb"(?:" + _WR.LEGACY_TOTAL + rb")?" + _NUM
                    + _WR.OUT_OF_TOTAL + _NUM + _WR.TOKENS + _REST)
    lookup = (_WR.REQID + rb"([\x21-\x2b\x2d-\x5a\x5c\x5e-\x7f]+)," + _WR.TOTAL_TOKENS + _NUM
              + _WR.SEP + rb"(?:" + _WR.COMPUTED + _NUM + _WR.SEP + rb")?" + _WR.HIT + rb"(?:" + _NUM
              + rb"|(" + _WR.NO_HIT + rb"))(?:" + _WR.SEP + rb"(" + _WR.BELOW_MIN + rb")?" + _WR.NEED
              + rb"(-?\d{1,18}))?")
    suffix = rb" " + c + rb"\([A-Za-z0-9_.\-]*\.py:\d+:[A-Za-z0-9_.]+\)" + c
    access = rb'INFO: +[\x21-\x5a\x5c-\x7f]+ - "[\x20\x21\x23-\x5a\x5c-\x7f]*" ([1-5][0-9][0-9]) [\x20-\x7f]*'
    body = rb"(?:" + env + rb"(?:" + rb"|".join((store, new_retrieve, old_retrieve, lookup)) + rb")" + suffix + rb")"
    return re.compile(prefix + rb"(?:" + body + rb"|" + access + rb")\r?")


_FAST_ESC = _pattern(rb"\x1b\[[0-9;]*m")
_FAST_PLAIN = _pattern(rb"\[\d{1,3}(?:;\d{1,3})*m")


#: every digit becomes "1": the key keeps where digits are (all the reference checks), not their values
_ONES = bytes.maketrans(b"0123456789", b"1111111111")
#: what an emptied id may hold: printable, no space, '"', '(', ')', ':' or ']' (see the module docstring)
_ID = rb"[\x21\x23-\x27\x2a-\x39\x3b-\x5c\x5e-\x7f]"
_TAG_ID = lazy(_WR.TAG_OPEN + _ID + rb"+" + _WR.TAG_CLOSE)
_RID_ID = lazy(_WR.REQID + _ID.replace(rb"\x3b-\x5c", rb"\x3b-\x5a\x5c") + rb"+(?=, )")  # and no '['
_NOT_NUMBER = bytes(c for c in range(256) if c not in b"0123456789- ")
_TAG_HOLE, _RID_HOLE = _W.TAG_OPEN + _W.TAG_CLOSE, _W.REQID + b"~"
#: pseudo template ids of a key's decision: every line of the key is rare / goes to the reference per line
_RARE, _SLOW = len(TEMPLATES), len(TEMPLATES) + 1
_REJECT_INFO, _SLOW_INFO = (_RARE,), (_SLOW,)
#: key → decision, shared by every block; bounded in entries and in key length (a log of unique shapes
#: only refills it: at most 8,192 keys of ≤ 1 KiB, ~10 MB; canonical hot keys are ~300 bytes, ~30 a block)
_CACHE: dict[bytes, tuple] = {}
_CACHE_MAX = 1 << 13
_CACHE_KEY_MAX = 1024
_PREFIX_CLEAN: dict[bytes, bytes] = {}


def line_keys(block: bytes, n: int) -> list[bytes]:
    """One key per line of ``block`` (``n`` lines): digits → ``1``, tag and lookup-id contents emptied."""
    k = block.translate(_ONES)
    if _W.TAG_OPEN in k:
        k = _TAG_ID.sub(_TAG_HOLE, k)
    if _W.REQID in k:
        k = _RID_ID.sub(_RID_HOLE, k)
    keys = k.split(b"\n")
    del keys[n:]
    return keys


def _holes(key: bytes) -> tuple[int, int]:
    """(start of the first, end of the last) emptied id in ``key``; (len, 0) when there is none."""
    first, last = len(key), 0
    for hole, at in ((_TAG_HOLE, 8), (_RID_HOLE, 7)):
        i = key.find(hole)
        if i >= 0:
            first = min(first, i + at)
            last = max(last, key.rfind(hole) + len(hole))
    return first, last


def _place(span: tuple[int, int], first: int, last: int, n: int) -> slice:
    """The slice of a field at ``span`` in a key, valid on every raw line of that key (or ValueError)."""
    a, b = span
    if b <= first:
        return slice(a, b)
    if a >= last:
        return slice(a - n, b - n or None)
    if a <= first and b >= last:  # the lookup id: its start from the line's start, its end from the end
        return slice(a, b - n or None)
    raise ValueError(span)


def _fields(m: re.Match, key: bytes) -> tuple:
    """The decision of an accepted key: template id, prefix slice, and the *region* from the template's
    first number to its last (only literal text without digits between them), plus for a lookup the id
    slice, which optional numbers are present (computed, hit, need) and ``below_min``."""
    first, last = _holes(key)
    n = len(key)

    def region(*groups: int) -> slice:
        spans = [m.span(g) for g in groups if m.group(g) is not None]
        return _place((spans[0][0], spans[-1][1]), first, last, n)

    prefix = _place(m.span(1), first, last, n)
    if m.group(2) is not None:
        return STORE, prefix, region(2, 3)
    if m.group(4) is not None:
        return RETRIEVE, prefix, region(4, 6)
    if m.group(7) is not None:
        return RETRIEVE, prefix, region(7, 9)
    if m.group(10) is not None:
        shape = (m.group(12) is not None, m.group(13) is not None, m.group(16) is not None)
        below = 1 if m.group(15) is not None and m.group(16) is not None else 0
        return LOOKUP, prefix, region(11, 12, 13, 16), _place(m.span(10), first, last, n), shape, below
    return ACCESS, prefix, _place(m.span(17), first, last, n)


class _One:
    """What ``_scan_hot`` records for one line (its prefix, template and rows), without the block-wide
    tables of ``scan._Acc``: the fallback asks the reference about single lines, and building a full
    accumulator per question cost more than the question."""

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.prefix = b""
        self.tid = -1
        self.rows: list[tuple[str, tuple[int, ...]]] = []
        self.cols = {"positions": [array("d")]}  # a SpecDecoding line's per-position rates land here

    def proc(self, prefix: bytes) -> int:
        self.index[prefix] = 0
        self.prefix = prefix
        return 0

    def count(self, proc: int, tid: int) -> None:
        self.tid = tid

    def row(self, table: str, *values: int) -> None:
        self.rows.append((table, values))


def key_decision(key: bytes) -> tuple:
    """What the reference decides for every line of ``key`` (the key is a line of its own class).

    The reference runs first: most keys it sees are rare lines, which it rejects in a few steps, before
    the field regex (slower on a line it does not match) is tried. A metric key too long to be cached
    (a SpecDecoding line with 100+ rates) is slow: its decision would be made again for every line, and
    it costs several times the reference's per-line read.
    """
    one = _One()
    if not _scan_hot(one, key, 1, 0, len(key)):  # type: ignore[arg-type]
        return _REJECT_INFO
    if one.tid in (STATS, SPEC):
        return metric_decision(key, one.tid) if len(key) <= _CACHE_KEY_MAX else _SLOW_INFO
    m = (_FAST_ESC if b"\x1b" in key else _FAST_PLAIN).fullmatch(key)
    if m is None:
        return _SLOW_INFO
    try:
        return _fields(m, key)
    except ValueError:  # a field between two emptied ids: no offset holds for every line of the key
        return _SLOW_INFO


# --- vLLM stats / SpecDecoding lines: one decision per key, the fields sliced per line ---------------------
#
# A metric line holds no request id, so all lines of its key are byte for byte the key except for digit
# *values*: the reference cleans, peels, heads and parses them at the same offsets. The regexes below only
# *locate* the fields the reference reads (group = field text); the reference has accepted the key first,
# and a probe line checks the located slices against the reference's own row (``_probe_agrees``).
_DEC = rb"(?:nan|\d+(?:\.\d+)?)"
_D = rb"(" + _DEC + rb")"
_P = rb"(nan%|\d+(?:\.\d+)?%)"  # a percent field's text keeps its '%': ``scan._percent`` reads it whole
_RATES = rb"(" + _DEC + rb"(?:, " + _DEC + rb")*)"
_E = re.escape
_STATS_MSG = lazy(
    rb"(?:" + _WR.ENGINE + rb"(\d+)|(\d+)" + _WR.ENGINES_AGGREGATED + rb")" + _E(scan.S_PROMPT) + _D
    + _E(scan.S_GEN) + _D + _E(scan.S_RUNNING) + rb"(\d+)" + _E(scan.S_WAITING) + rb"(\d+)" + _E(scan.S_AFTER_WAITING)
    + rb"(?:" + _E(scan.S_PREEMPTIONS) + rb"(\d+)" + _WR.SEP + rb")?(" + _WR.KV_DEVICE_GPU + rb"|"
    + _WR.KV_DEVICE_CPU + rb")" + _E(scan.S_KV_USAGE) + _P + rb"(?:" + _E(scan.S_PREFIX_HIT) + _P + rb")?"
    + rb"(?:" + _E(scan.S_EXT_HIT) + _P + rb")?")
_SPEC_MSG = lazy(
    _E(scan.S_SPEC_NEW) + _D + _E(scan.S_ACCEPTED_TPS) + _DEC + _E(scan.S_DRAFTED_TPS) + _DEC
    + _E(scan.S_ACCEPTED_AFTER_TPS) + rb"(\d+)" + _E(scan.S_DRAFTED) + rb"(\d+)" + _E(scan.S_PER_POSITION) + _RATES
    + _E(scan.S_AVG_RATE) + _P)
_SPEC_OLD_MSG = lazy(
    _E(scan.S_SPEC_OLD) + _P + _E(scan.S_MEAN_LENGTH) + _D + _E(scan.S_ACCEPTED) + rb"(\d+)" + _E(scan.S_DRAFTED)
    + rb"(\d+)" + _E(scan.S_PER_POSITION) + _RATES)
#: the converter kinds of the metric fields: the reference's own readers, and the value of an absent field
_NUMBER_F, _DECIMAL_F, _COUNT_F, _PERCENT_F = range(4)
_CONVERTERS = ((_number, NA), (_decimal, NAN), (_count, NA), (_percent, NAN))
#: which converter reads which field of a stats / SpecDecoding decision (info[2:], positions aside)
_STATS_KINDS = (_NUMBER_F, _NUMBER_F, _DECIMAL_F, _DECIMAL_F, _COUNT_F, _COUNT_F, _COUNT_F, _PERCENT_F, _PERCENT_F,
                _PERCENT_F)
_SPEC_KINDS = (_DECIMAL_F, _COUNT_F, _COUNT_F, _PERCENT_F)
#: an optional field the line does not print: its slice is empty, and the empty text is the column's "no value"
_ABSENT = slice(0, 0)
#: the stamp of vLLM's header at the position after the prefixes (``vllm_head`` checked its digits)
_STAMP = lazy(rb"INFO (\d\d-\d\d \d\d:\d\d:\d\d)")
#: field text → value, per converter kind (bounded like ``_CACHE``): a count or percent repeats across lines
_VALUES: tuple[dict[bytes, float | int], ...] = ({}, {}, {}, {})
_VALUES_MAX = 1 << 14
#: digits for a probe line: any digits make a line of the same key; varied ones tell the fields apart
_PROBE_DIGITS = str(7**600).encode()


def _kept(raw: bytes) -> list[int] | None:
    """The index in ``raw`` of every byte ``clean_line`` keeps, in order (None if that is not its result).

    The same matches of the same patterns, as positions: which bytes go depends on where digits are, never
    on their values, so the map of a key holds for every line of the key."""
    drop = bytearray(len(raw))
    if b"\x1b" in raw:
        spans = [m.span() for m in _ESC_SEQ.finditer(raw)]
        for a, b in spans:
            drop[a:b] = b"\x01" * (b - a)
        for i in (i for i, c in enumerate(raw) if c == 0x1B):
            drop[i] = 1
    elif b"[" in raw:
        for m in _RESIDUE.finditer(raw):
            drop[m.start():m.end()] = b"\x01" * (m.end() - m.start())
    for i in (i for i, c in enumerate(raw) if c == 0x0D):
        drop[i] = 1
    kept = [i for i, d in enumerate(drop) if not d]
    return kept if bytes(map(raw.__getitem__, kept)) == clean_line(raw) else None


def _raw_field(m: re.Match, group: int, kept: list[int]) -> slice | None:
    """The slice of the raw line holding field ``group`` of a match on the cleaned line (``_ABSENT`` when the
    line does not print it); None when cleaning removed something inside it (a colour code in a number)."""
    a, b = m.span(group)
    if a < 0:
        return _ABSENT
    ra, rb_ = kept[a], kept[b - 1] + 1
    return slice(ra, rb_) if rb_ - ra == b - a else None


def metric_decision(key: bytes, tid: int) -> tuple:
    """The decision of a key the reference reads as a stats (``tid == STATS``) or SpecDecoding line:
    ``(tid, prefix slice, kv_dev, 10 field slices)`` or ``(tid, prefix slice, 4 field slices, rates slice,
    rate count)``, every slice from the line's start; ``_SLOW_INFO`` where no such decision is exact: an
    emptied id (lines of the key differ in length), a field cut by a colour code, a prefix that cleans
    differently on its own, a SpecDecoding rate of ``nan%`` (the rate is then derived per line from the
    counts), or a probe line on which the slices disagree with the reference.
    """
    if _holes(key)[1] or (kept := _kept(key)) is None:
        return _SLOW_INFO
    s = clean_line(key)
    try:
        pos = peel_prefixes(s)
        msg = vllm_head(s, pos)
    except _Reject:  # pragma: no cover - the reference accepted this key through the same calls
        return _SLOW_INFO
    prefix = slice(0, kept[pos])
    if _kept(key[prefix]) != kept[:pos]:  # the prefix alone must clean as it does inside the line
        return _SLOW_INFO
    if tid == STATS:
        m, groups = _STATS_MSG.fullmatch(s, msg), (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)
    elif (m := _SPEC_MSG.fullmatch(s, msg)) is not None:
        groups = (1, 2, 3, 5, 4)  # mal, accepted, drafted, rate, the rates
    else:
        m, groups = _SPEC_OLD_MSG.fullmatch(s, msg), (2, 3, 4, 1, 5)
    if m is None:
        return _SLOW_INFO
    fields = tuple(_raw_field(m, g, kept) for g in groups)
    stamp = _raw_field(_STAMP.match(s, pos), 1, kept)
    if None in fields or stamp is None or (tid == SPEC and m.group(groups[3]) == b"nan%"):
        return _SLOW_INFO
    if tid == STATS:
        info = (tid, prefix, _KV_DEV[m.group(8)], *fields, stamp)
    else:
        info = (tid, prefix, *fields, m.group(groups[4]).count(b", ") + 1, stamp)
    return info if _probe_agrees(key, info) else _SLOW_INFO


def _convert(kind: int, text: bytes) -> float | int | None:
    """The value of one field text by the reference's own reader (None: it rejects the text), cached."""
    cache = _VALUES[kind]
    fn, absent = _CONVERTERS[kind]
    if not text:
        value = absent
    else:
        try:
            value, stop = fn(text, 0, len(text))
        except _Reject:
            return None
        if stop != len(text):
            return None
    if len(cache) >= _VALUES_MAX:
        cache.clear()
    cache[text] = value
    return value


def _metric_row(info: tuple, line: bytes) -> tuple:
    """One line's values under a metric decision, one field at a time (the probe's check)."""
    if info[0] == STATS:
        values = [_convert(k, line[f]) for k, f in zip(_STATS_KINDS, info[3:13], strict=True)]
        return (*values[:7], values[7], info[2], *values[8:], stamp_value(line[info[13]]))
    values = [_convert(k, line[f]) for k, f in zip(_SPEC_KINDS, info[2:6], strict=True)]
    rates = [_convert(_DECIMAL_F, t) for t in line[info[6]].split(b", ")]
    return (*values, len(rates), rates, stamp_value(line[info[8]]))


def _probe_agrees(key: bytes, info: tuple) -> bool:
    """Does the decision read a line of ``key`` with varied digits exactly as the reference does?"""
    digits = cycle(_PROBE_DIGITS)
    probe = bytes(next(digits) if c == 0x31 else c for c in key)
    one = _One()
    if not _scan_hot(one, probe, 1, 0, len(probe)) or one.tid != info[0] or len(one.rows) != 1:  # type: ignore[arg-type]
        return False
    if one.prefix != clean_line(probe[info[1]]):
        return False
    ref = one.rows[0][1][4:]
    if info[0] == SPEC:  # (mal, accepted, drafted, rate, pos_off, pos_n, stamp) and the line's own rates
        ref = (*ref[:4], ref[5], list(one.cols["positions"][0]), ref[6])
    return repr(ref) == repr(_metric_row(info, probe)) and (info[0] == STATS or ref[4] == info[7])


def _decide(keys: list[bytes]) -> list[tuple]:
    """The cached decision of every key, asking the reference for the keys not seen before."""
    infos = list(map(_CACHE.get, keys))
    if None in infos:
        for i in list(compress(range(len(infos)), map(is_, infos, repeat(None)))):
            key = keys[i]
            info = _CACHE.get(key)
            if info is None:
                info = _remember(_CACHE, key, key_decision(key))
            infos[i] = info
    return infos


class _Mismatch(Exception):
    """A shortcut's premise failed on this block (it should not happen): the reference scans it instead."""


def _clean_prefix(raw: bytes) -> bytes:
    """``clean_line`` of a raw process prefix, cached (prefixes over 1 KiB are cleaned, not kept)."""
    clean = _PREFIX_CLEAN.get(raw)
    return clean if clean is not None else _remember(_PREFIX_CLEAN, raw, clean_line(raw))


def _remember(cache: dict, key: bytes, value):
    """``value``, kept in ``cache`` when the key is short (bounded: emptied when full, so junk only refills it)."""
    if len(key) <= _CACHE_KEY_MAX:
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[key] = value
    return value


def _groups(tids: list[int]) -> dict[int, list[int]]:
    """The line indices of each decision, in line order (a plain loop: faster here than a stable sort
    by decision, and than one ``compress`` pass per decision)."""
    groups: dict[int, list[int]] = {}
    get = groups.get
    for i, tid in enumerate(tids):
        group = get(tid)
        if group is None:
            groups[tid] = group = []
        group.append(i)
    return groups


class _Block:
    """One block's lines with their decisions; builds the columns table by table with C-level maps."""

    def __init__(self, block: bytes, base_line: int) -> None:
        lines = block.split(b"\n") if block else []
        if block.endswith(b"\n"):
            lines.pop()
        self.lines = lines
        self.n = n = len(lines)
        self.base1 = base_line + 1
        self.infos = _decide(line_keys(block, n))
        self.lens = lens = list(map(len, lines))
        if n and max(lens) > MAX_HOT_LINE:  # the key cannot see the raw length
            for i in compress(range(n), map(lt, repeat(MAX_HOT_LINE), lens)):
                self.infos[i] = _REJECT_INFO
        # line i ends at the lengths of lines 0..i plus the i line breaks before it; the next starts 1 later
        self.ends = list(map(add, accumulate(lens), count()))
        self.starts = [0, *map(add, self.ends, repeat(1))]
        self.tids = tids = list(map(itemgetter(0), self.infos))
        self.groups: dict[int, list[int]] = _groups(tids)
        self.first: dict[bytes, int] = {}  # process prefix → first hot line index
        self.counts: Counter = Counter()
        self.rare: list[int] = []
        self.flagged: list[tuple[int, int]] = []  # (line index, template id)

    def select(self, tid: int) -> list[int]:
        return self.groups.get(tid, [])

    def field(self, sel_lines: Sequence[bytes], sel_infos: Sequence[tuple], k: int):
        return map(getitem, sel_lines, map(itemgetter(k), sel_infos))

    def numbers(self, sel_lines: Sequence[bytes], sel_infos: Sequence[tuple], count: int) -> array:
        """The ``count`` numbers of every selected line's region, in order, as one int64 array.

        The regions are joined and everything but digits, ``-`` and spaces is deleted in one C pass: what
        is left splits into exactly the template's numbers (the text between them holds no digit).
        """
        texts = b" ".join(self.field(sel_lines, sel_infos, 2)).translate(None, _NOT_NUMBER).split()
        try:  # one C parse of all of them; it refuses what ``int`` reads otherwise (a leading 0, a lone '-')
            values = packed_array("q", _json_ints(b"[" + b",".join(texts) + b"]"))
        except (ValueError, TypeError, OverflowError):
            values = array("q", map(int, texts))
        if len(values) != count * len(sel_lines):  # cannot happen for a verified key; never guess
            raise _Mismatch
        return values

    def prefixes(self, sel_lines: Sequence[bytes], sel_infos: Sequence[tuple]) -> list[bytes]:
        """The cleaned process prefix of each selected line (cleaned once per distinct raw prefix)."""
        raw = list(self.field(sel_lines, sel_infos, 1))
        if raw and raw.count(raw[0]) == len(raw):  # one process prefix, as in most blocks: cleaned once
            return [_clean_prefix(raw[0])] * len(raw)
        table = {r: _clean_prefix(r) for r in set(raw)}  # local: another thread may empty the cache
        return list(map(table.__getitem__, raw))

    def note(self, clean: list[bytes], sel: list[int], tids: int | list[int]) -> None:
        """Count the lines per (prefix, template) and note each prefix's first line; ``tids`` is the
        template of every line, or one per line (a list)."""
        counts, first = self.counts, self.first
        if isinstance(tids, int) and clean and clean.count(clean[0]) == len(clean):  # one prefix (one object)
            p = clean[0]
            counts[p, tids] += len(clean)
            if sel[0] < first.get(p, self.n):
                first[p] = sel[0]
            return
        if isinstance(tids, int):  # one template: count the prefixes alone (no tuple per line)
            for p, c in Counter(clean).items():
                counts[p, tids] += c
        else:
            for key, c in Counter(zip(clean, tids, strict=True)).items():
                counts[key] += c
        for p, i in dict(zip(reversed(clean), reversed(sel), strict=True)).items():  # each prefix's first line
            if i < first.get(p, self.n):
                first[p] = i

    def positions(self, sel: list[int]) -> tuple[array, array, array]:
        """The line numbers, start and end offsets of the selected lines."""
        return (packed_array("q", map(add, sel, repeat(self.base1))), packed_array("q", gather(self.starts, sel)),
                packed_array("q", gather(self.ends, sel)))

    def take(self, tid: int) -> tuple[list[int], Sequence[bytes], Sequence[tuple]]:
        """The line indices, lines and decisions of one template's lines."""
        sel = self.select(tid)
        return sel, gather(self.lines, sel), gather(self.infos, sel)


def _stores(b: _Block) -> list:
    sel, lines, infos = b.take(STORE)
    proc = b.prefixes(lines, infos)
    b.note(proc, sel, STORE)
    values = b.numbers(lines, infos, 2)
    return [*b.positions(sel), proc, values[0::2], values[1::2]]


def _retrieves(b: _Block) -> list:
    sel, lines, infos = b.take(RETRIEVE)
    proc = b.prefixes(lines, infos)
    b.note(proc, sel, RETRIEVE)
    values = b.numbers(lines, infos, 3)
    got, required = values[0::3], values[1::3]
    b.flagged.extend(zip(compress(sel, map(lt, got, required)), repeat(RETRIEVE)))
    return [*b.positions(sel), proc, got, required, values[2::3]]


def _lookups(b: _Block) -> list:
    sel, lines, infos = b.take(LOOKUP)
    proc = b.prefixes(lines, infos)
    b.note(proc, sel, LOOKUP)
    rids = list(b.field(lines, infos, 3))
    hashes = packed_array("Q", map(or_, map(lshift, map(zlib.crc32, rids), repeat(32)), map(zlib.adler32, rids)))
    shapes = list(map(itemgetter(4), infos))
    kinds = set(shapes)
    if len(kinds) == 1:  # one shape (one set of optional fields) per block is the common case
        present = [0, *(k + 1 for k, on in enumerate(next(iter(kinds))) if on)]
        values = b.numbers(lines, infos, len(present))
        absent = array("q", [NA]) * len(sel)
        columns = [values[present.index(k)::len(present)] if k in present else absent for k in range(4)]
        return [*b.positions(sel), proc, hashes, *columns, array("b", map(itemgetter(5), infos))]
    columns = [array("q", [NA]) * len(sel) for _ in range(4)]  # total, computed, hit, need
    for shape in kinds:
        present = [0, *(k + 1 for k, on in enumerate(shape) if on)]
        rows = list(compress(range(len(sel)), map(eq, shapes, repeat(shape))))
        values = b.numbers(gather(lines, rows), gather(infos, rows), len(present))
        for j, k in enumerate(present):
            col = columns[k]
            for row, v in zip(rows, values[j::len(present)], strict=True):
                col[row] = v
    return [*b.positions(sel), proc, hashes, *columns, array("b", map(itemgetter(5), infos))]


def _access(b: _Block) -> None:
    """uvicorn lines are only counted (5xx also flagged); a status outside 100–599 makes the line rare."""
    sel, lines, infos = b.take(ACCESS)
    texts = list(b.field(lines, infos, 2))
    if not b"".join(texts)[::3].translate(None, b"1234"):  # every status 1xx-4xx (3 digits each, keyed)
        b.note(b.prefixes(lines, infos), sel, ACCESS)
        return
    status = array("q", map(int, texts))
    if status and (min(status) < 100 or max(status) > 599):
        keep = [100 <= s <= 599 for s in status]
        b.rare.extend(compress(sel, map(is_, keep, repeat(False))))
        sel, lines, infos, status = (list(compress(x, keep)) for x in (sel, lines, infos, status))
    if not status or max(status) < 500:  # the common block: no 5xx, one template for every line
        b.note(b.prefixes(lines, infos), sel, ACCESS)
        return
    tids = [ACCESS_5XX if s >= 500 else ACCESS for s in status]
    b.note(b.prefixes(lines, infos), sel, tids)
    b.flagged.extend((i, ACCESS_5XX) for i, t in zip(sel, tids, strict=True) if t == ACCESS_5XX)


def _field_values(b: _Block, lines: list[bytes], infos: list[tuple], k: int, kind: int, bad: set[int]) -> list:
    """Field ``k`` of every selected metric line as its value, through the text → value cache; a row whose
    text the reader rejects is added to ``bad`` (it cannot happen for a verified key; never guess)."""
    texts = list(b.field(lines, infos, k))
    return _values_of(texts, kind, bad, range(len(texts)))


def _values_of(texts: list[bytes], kind: int, bad: set[int], rows) -> list:
    """``texts`` as values of converter ``kind``; ``rows[i]`` (the row of text ``i``) goes to ``bad`` when
    the reader rejects the text.

    A decimal field is ``float(text)`` in one C-level map: on the texts a verified key lets through
    (``nan`` or ``D[.D]``, as the locator matched) that is what ``scan._decimal`` returns, bit for bit
    (its last line; ``float(b"nan")`` is the NaN it returns for ``nan``), and throughputs are nearly all
    distinct, so a cache would miss. Anything ``float`` refuses takes the reader's path below.
    """
    if kind == _DECIMAL_F:
        try:
            return list(map(float, texts))
        except ValueError:
            pass
    values = list(map(_VALUES[kind].get, texts))
    if None in values:
        for i in compress(range(len(values)), map(is_, values, repeat(None))):
            values[i] = _convert(kind, texts[i])
            if values[i] is None:
                bad.add(rows[i])
    return values


def _drop(b: _Block, bad: set[int], sel: list[int], *columns: list) -> list[list]:
    """Leave the rows in ``bad`` to the reference's per-line code (``_slow``); the other rows of every column."""
    b.groups[_SLOW] = sorted([*b.select(_SLOW), *(sel[i] for i in bad)])
    keep = [i not in bad for i in range(len(sel))]
    return [list(compress(c, keep)) for c in (sel, *columns)]


def _stamps(b: _Block, lines: list[bytes], infos: list[tuple], k: int) -> list[int]:
    """The ``stamp`` column (``scan.stamp_value``) of the selected metric lines, from their decision's slice
    (a verified key puts two digits at each of its places), one conversion per distinct second."""
    texts = list(b.field(lines, infos, k))
    table = {t: stamp_value(t) for t in set(texts)}
    return list(map(table.__getitem__, texts))


def _stats(b: _Block) -> list:
    """The stats table of the lines whose key has a stats decision, in line order."""
    sel, lines, infos = b.take(STATS)
    bad: set[int] = set()
    cols = [_field_values(b, lines, infos, 3 + j, kind, bad) for j, kind in enumerate(_STATS_KINDS)]
    if bad:
        sel, lines, infos, *cols = _drop(b, bad, sel, lines, infos, *cols)
    proc = b.prefixes(lines, infos)
    b.note(proc, sel, STATS)
    return [*b.positions(sel), proc, *cols[:8], list(map(itemgetter(2), infos)), *cols[8:], _stamps(b, lines, infos, 13)]


def _spec(b: _Block) -> tuple[list, array]:
    """The SpecDecoding table of the lines whose key has a SpecDecoding decision, and their per-position
    rates (one flat table in line order: a row's ``pos_off`` is the rates of the rows before it)."""
    sel, lines, infos = b.take(SPEC)
    bad: set[int] = set()
    cols = [_field_values(b, lines, infos, 2 + j, kind, bad) for j, kind in enumerate(_SPEC_KINDS)]
    counts = list(map(itemgetter(7), infos))
    offsets = list(accumulate(counts, initial=0))
    texts = b", ".join(b.field(lines, infos, 6)).split(b", ") if sel else []
    if len(texts) != offsets[-1]:  # the key fixes every line's rate count; never guess
        raise _Mismatch
    rates = _values_of(texts, _DECIMAL_F, bad, _RowOf(offsets))
    if bad:
        rates = [r for i in range(len(sel)) if i not in bad for r in rates[offsets[i]:offsets[i + 1]]]
        sel, lines, infos, counts, *cols = _drop(b, bad, sel, lines, infos, counts, *cols)
        offsets = list(accumulate(counts, initial=0))
    proc = b.prefixes(lines, infos)
    b.note(proc, sel, SPEC)
    return [*b.positions(sel), proc, *cols, offsets[:-1], counts, _stamps(b, lines, infos, 8)], packed_array("d", rates)


class _RowOf:
    """Maps an index into the flat rates to the row that owns it (``offsets``: each row's first rate)."""

    def __init__(self, offsets: list[int]) -> None:
        self.offsets = offsets

    def __getitem__(self, j: int) -> int:
        return bisect_right(self.offsets, j) - 1


def _merge_spec(cols: list[list], positions: array, rows: list[list], rates: list[array]) -> tuple[list, array]:
    """The SpecDecoding rows of both paths in line order, their rates re-laid in that order (``pos_off``)."""
    fast = [(row, positions[row[8]:row[8] + row[9]]) for row in zip(*cols, strict=True)]
    out = array("d")
    merged = []
    for row, own in sorted([*fast, *zip(rows, rates, strict=True)], key=lambda r: r[0][0]):
        merged.append((*row[:8], len(out), len(own), row[10]))
        out.extend(own)
    return [list(c) for c in zip(*merged, strict=True)], out


def _slow(b: _Block, tables: dict[str, list], positions: array) -> array:
    """Lines whose key the fast decision cannot place: the reference's per-line code, merged in line order;
    returns the block's per-position rates with those of the SpecDecoding rows read here laid in."""
    slow_rows: dict[str, list] = {}
    slow_rates: list[array] = []
    for i in b.select(_SLOW):
        one = _One()
        start = b.starts[i]
        if not _scan_hot(one, b.lines[i], b.base1 + i, start, start + b.lens[i]):  # type: ignore[arg-type]
            b.rare.append(i)
            continue
        b.note([one.prefix], [i], [one.tid])
        for table, values in one.rows:
            if table == "flagged":
                b.flagged.append((i, values[3]))
                continue
            if table == "spec":  # pos_off is into this line's own rates: re-based when merged
                slow_rates.append(one.cols["positions"][0])
            slow_rows.setdefault(table, []).append([*values[:3], one.prefix, *values[4:]])
    for name, rows in slow_rows.items():
        if name == "spec":
            tables[name], positions = _merge_spec(tables[name], positions, rows, slow_rates)
            continue
        merged = sorted([*zip(*tables[name], strict=True), *rows], key=itemgetter(0))
        tables[name] = [list(c) for c in zip(*merged, strict=True)]
    return positions


def scan_block_fast(block: bytes, base_line: int) -> scan.ScanResult:
    """``scan_block`` in pure Python: exactly ``scan.scan_block_py``'s result, decided once per line shape."""
    b = _Block(block, base_line)
    present = set(b.tids)
    try:
        tables = {"lookups": _lookups(b), "retrieves": _retrieves(b), "stores": _stores(b),
                  "stats": _stats(b) if STATS in present else [[] for _ in SCHEMA["stats"]]}
        tables["spec"], positions = _spec(b) if SPEC in present else ([[] for _ in SCHEMA["spec"]], array("d"))
    except _Mismatch:
        return scan.scan_block_py(block, base_line)
    if ACCESS in present:
        _access(b)
    if b.select(_SLOW):  # after the metric tables: a row they could not read is left here
        positions = _slow(b, tables, positions)
    if len(b.first) > MAX_PREFIXES:  # the reference drops the lines of the 257th prefix on: let it decide
        return scan.scan_block_py(block, base_line)
    prefixes = sorted(b.first, key=b.first.__getitem__)
    index = {p: i for i, p in enumerate(prefixes)}
    columns: dict[str, dict[str, array]] = {}
    for name, cols in tables.items():
        proc = cols[3]
        if proc and proc.count(proc[0]) == len(proc):  # one process (the same object): one index, repeated
            cols[3] = [index[proc[0]]] * len(proc)
        else:
            cols[3] = list(map(index.__getitem__, proc))
        columns[name] = {c: array(code, v) if isinstance(v, array) else packed_array(code, v)
                         for (c, code), v in zip(SCHEMA[name], cols, strict=True)}
    flagged = sorted(b.flagged)
    rows = [i for i, _t in flagged]
    columns["flagged"] = dict(zip(("line", "start", "end"), b.positions(rows), strict=True))
    columns["flagged"]["tid"] = array("B", map(itemgetter(1), flagged))
    rare = sorted([*b.rare, *b.select(_RARE)])
    columns["rare"] = dict(zip(("line", "start", "end"), b.positions(rare), strict=True))
    columns["positions"] = {"rate": positions}
    columns = {name: columns[name] for name in SCHEMA}  # the reference's table order
    counts = {(p, TEMPLATES[t]): c for (p, t), c in b.counts.items()}
    # the lookup rows' lines, joined from the split lines (cheaper here than cutting them from the block later)
    lookup_lines = list(map(sub, columns["lookups"]["line"], repeat(b.base1)))
    return scan.ScanResult(b.n, prefixes, counts, columns, b"".join(gather(b.lines, lookup_lines)))
