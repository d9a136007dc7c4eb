"""Server-start markers, and the blocks cut at them so counted lines can be split between runs exactly.

One log may hold several runs of a server (a node journal across redeploys, ``kubectl logs --previous``
followed by the current log, rotated files of different runs given together). The engine starts a new run
at a start marker (``specdiag.runs``), but the scanner only *counts* the high-volume lines of a block, and
a block is counted whole before its records reach the engine. So ingest cuts each scanned block at every
line the scanner left that holds a marker's literal (``cut_at_markers``; the parts scanned again) and,
before a block that begins with such a line, hands on a :class:`CountMark`: the input's counts as they stood before that line. The
engine gives a run that ends there exactly the counts up to its mark; the lines after it are counted in
the next blocks.

``START_MARKERS`` is the one definition of what starts a server: template ids of the events tables, the
kind of start each one is, and literals every line the template reads contains (a test checks each
template's sample holds its literal).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specdiag.ingest.literals import first_literal, first_of

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ingest.ahead import Item
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.hot import HotTally
    from specdiag.ingest.scan import ScanResult

#: template id → (kind of start, literals of which every line the template reads contains one)
START_MARKERS: dict[str, tuple[str, tuple[bytes, ...]]] = {
    "V_VERSION": ("api", (b"server version ",)),
    "V_LOGO": ("api", ("\u2588  version ".encode(),)),  # the logo's version row (0.15+)
    "V_ARGS": ("api", (b"non-default args: ",)),
    "V_ARGS_OLD": ("api", (b"args: Namespace(",)),
    # V1, V0 (0.8–0.10 with VLLM_USE_V1=0), and V0 before it was named (0.6–0.7)
    "V_ENGINE_CFG": ("engine", (b"Initializing a V1 LLM engine (v", b"Initializing a V0 LLM engine (v",
                                b"Initializing an LLM engine (v")),
    "C13": ("lmcache", (b"Creating LMCacheEngine with config: ", b"LMCache Configuration: ")),
}
#: every literal, for the block scan
MARKER_LITERALS: tuple[bytes, ...] = tuple(lit for _, lits in START_MARKERS.values() for lit in lits)
#: cuts per block at most: a start prints a handful of marker lines (one per rank for LMCache); a block
#: holding more (a hostile input) is cut at the first ones and the rest counted with it — the engine notes
#: a run boundary it cannot place exactly
MAX_CUTS = 64


@dataclass
class CountMark:
    """The input's counted lines before ``line`` (a line holding a start marker's literal).

    ``counts``/``named`` are cumulative over the input (``HotTally.counts`` / ``.named``); ``first`` and
    ``named_first`` hold the first counted row of each template since the previous mark only."""

    line: int
    counts: dict[str, int]
    named: dict[str | None, dict[str, int]]
    first: dict[str, Record] = field(default_factory=dict)
    named_first: dict[str | None, dict[str, Record]] = field(default_factory=dict)


def take_mark(tally: HotTally, line: int) -> CountMark:
    """Snapshot ``tally`` before ``line`` and start a new span of first rows (the next run's evidence)."""
    mark = CountMark(line, dict(tally.counts), {k: dict(v) for k, v in tally.named.items()},
                     tally.first, tally.named_first)
    tally.first, tally.named_first = {}, {}
    return mark


def first_marker(buf: bytes, lo: int, hi: int) -> int:
    """Where the first marker literal starts in ``buf[lo:hi]``, or -1 (one pass for all of them)."""
    return first_of(buf, lo, hi, MARKER_LITERALS)


def first_among_rare(res: ScanResult, buf: bytes, off: int) -> int:
    """Where the first marker literal starts from the first to the last line the scanner left, or -1: the
    search ``marked_lines`` starts with (a whole block read; a scan thread makes it ahead, ``ahead.py``)."""
    rare = res.columns["rare"]
    return first_marker(buf, off + rare["start"][0], off + rare["end"][-1]) if rare["line"] else -1


def marked_lines(res: ScanResult, buf: bytes, off: int) -> list[tuple[int, int]]:
    """``(line, start)`` of the lines the scanner left (a start line is never a counted one) that hold a
    marker literal, at most ``MAX_CUTS``; ``start`` relative to ``off`` in ``buf`` (what ``res`` scanned)."""
    rare = res.columns["rare"]
    out: list[tuple[int, int]] = []
    if not rare["line"]:
        return out
    starts, ends, hi = rare["start"], rare["end"], off + rare["end"][-1]
    # most blocks hold no start line at all: one search, -1, made on the scan thread where it ran
    at = res.marker if res.marker is not None else first_among_rare(res, buf, off)
    while at >= 0 and len(out) < MAX_CUTS:
        # the rare line the hit starts in (the search starts at the first one), unless it lies in a counted line
        i = bisect_right(starts, at - off) - 1
        s, e = starts[i], ends[i]
        if at - off < e and any(map(buf[off + s : off + e].__contains__, MARKER_LITERALS)):
            out.append((rare["line"][i], s))
        else:  # a hit in a counted line, which lies before the last rare line (the search ends at its end)
            e = starts[i + 1]
        at = first_marker(buf, off + e, hi)
    return out


def cut_at_markers(item: Item, base: int) -> list[Item]:
    """A scanned block (``ahead.Item``, its first line numbered ``base + 1``) as parts cut before each
    line that holds a marker literal, each part scanned again on its own; the block as it is when it holds
    none. Only the lines the scanner left are searched (a few percent of a busy log's bytes) and only a
    block with a start line is scanned twice, so the cuts cost nearly nothing."""
    data, start, end, res, copy = item
    if res is None:
        return [item]
    marked = marked_lines(res, copy if copy is not None else data, 0 if copy is not None else start)
    cuts = [_offset(data, start, base, n, s, copy is None) for n, s in marked]
    cuts = sorted({c for c in cuts if start < c < end})
    if not cuts:
        return [item]
    from specdiag.ingest.ahead import scan_unwrapped  # ahead imports this module

    parts: list[Item] = []
    for lo, hi in zip([start, *cuts], [*cuts, end], strict=True):
        part_res, part_copy = scan_unwrapped(data, lo, hi, base)
        base += part_res.lines
        parts.append((data, lo, hi, part_res, part_copy))
    return parts


def _offset(data: bytes, start: int, base: int, line: int, rel: int, direct: bool) -> int:
    """Where ``line`` starts in ``data``: ``start + rel`` when the scan read ``data`` itself, else (a copy
    without kubectl timestamps: other offsets) found by counting line breaks from the block's start."""
    if direct:
        return start + rel
    pos = start
    for _ in range(line - base - 1):
        pos = data.find(b"\n", pos) + 1
    return pos


def starts_marked(data: bytes, start: int, end: int) -> bool:
    """Whether the first line of ``data[start:end]`` holds a marker literal."""
    nl = data.find(b"\n", start, end)
    stop = end if nl < 0 else nl
    return first_marker(data, start, stop) >= 0


__all__ = ["MARKER_LITERALS", "START_MARKERS", "CountMark", "cut_at_markers", "first_literal", "first_marker",
           "marked_lines", "starts_marked", "take_mark"]
