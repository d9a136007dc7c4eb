"""Server-start markers, and the blocks cut at them so counted lines can be split between runs exactly.

One log may hold several runs of a server (a node journal across redeploys, ``kubectl logs --previous``
followed by the current log, rotated files of different runs given together). The engine starts a new run
at a start marker (``specdiag.runs``), but the scanner only *counts* the high-volume lines of a block, and
a block is counted whole before its records reach the engine. So ingest cuts each block at every line that
holds a marker's literal (``split_at_markers``: ``bytes.find``, C speed) and, before a block that begins
with such a line, hands on a :class:`CountMark`: the input's counts as they stood before that line. The
engine gives a run that ends there exactly the counts up to its mark; the lines after it are counted in
the next blocks.

``START_MARKERS`` is the one definition of what starts a server: template ids of the events tables, the
kind of start each one is, and literals every line the template reads contains (a test checks each
template's sample holds its literal).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.hot import HotTally

#: template id → (kind of start, literals of which every line the template reads contains one)
START_MARKERS: dict[str, tuple[str, tuple[bytes, ...]]] = {
    "V_VERSION": ("api", (b"server version ",)),
    "V_LOGO": ("api", ("\u2588  version ".encode(),)),  # the logo's version row (0.15+)
    "V_ARGS": ("api", (b"non-default args: ",)),
    "V_ARGS_OLD": ("api", (b"args: Namespace(",)),
    "V_ENGINE_CFG": ("engine", (b"Initializing a V1 LLM engine (v",)),
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


def marker_cuts(data: bytes, start: int, end: int) -> list[int]:
    """Offsets of the starts of the lines in ``data[start:end]`` that hold a marker literal, sorted, at
    most ``MAX_CUTS``, ``start`` itself excluded."""
    cuts: set[int] = set()
    for lit in MARKER_LITERALS:
        i = data.find(lit, start, end)
        while i >= 0 and len(cuts) < MAX_CUTS:
            line_start = data.rfind(b"\n", start, i) + 1 or start
            if line_start > start:
                cuts.add(line_start)
            nl = data.find(b"\n", i, end)
            if nl < 0:
                break
            i = data.find(lit, nl + 1, end)
    return sorted(cuts)[:MAX_CUTS]


def split_at_markers(blocks: Iterable[tuple[bytes, int, int]],
                     whole: dict[tuple[int, int], int] | None = None) -> Iterator[tuple[bytes, int, int]]:
    """The blocks, each cut before every line that holds a marker literal (no copy: the same ``data``).

    ``whole`` gets ``(id(data), start) → end of the block as read`` for each part of a cut block, so that
    what is decided per block read (the year of an input's vLLM lines) is decided as without the cuts;
    the consumer pops each entry (``whole_end``)."""
    for data, start, end in blocks:
        pos = start
        for cut in marker_cuts(data, start, end):
            if whole is not None:
                whole[(id(data), pos)] = end
            yield data, pos, cut
            pos = cut
        if whole is not None and pos != start:
            whole[(id(data), pos)] = end
        yield data, pos, end


def whole_end(whole: dict[tuple[int, int], int], data: bytes, start: int, end: int) -> int:
    """The end of the block as read that ``data[start:end]`` is part of (``split_at_markers``)."""
    return whole.pop((id(data), start), end) if whole else end


def starts_marked(data: bytes, start: int, end: int) -> bool:
    """Whether the first line of ``data[start:end]`` holds a marker literal."""
    nl = data.find(b"\n", start, end)
    stop = end if nl < 0 else nl
    return any(data.find(lit, start, stop) >= 0 for lit in MARKER_LITERALS)


__all__ = ["MARKER_LITERALS", "START_MARKERS", "CountMark", "marker_cuts", "split_at_markers",
           "starts_marked", "take_mark", "whole_end"]
