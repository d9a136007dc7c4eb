"""Each deployment's year, from its own dated lines.

vLLM's lines print no year: the reader gives them the year of the last line that printed one (an LMCache
record, a collector's timestamp) or, before any, the look-ahead of the input's first block
(``timeutil.initial_year``). One stream can hold several servers (kubectl ``--prefix`` pods interleaved,
journald hosts, concatenated runs), and one server's year is no evidence of another's: a pod that prints no
dated line would be given its neighbour's year, a date the log never showed. So the reader keeps the year
state (``year_hint``, ``last_month``, ``last_y``) of each deployment a wrapper names and swaps it in when
the lines turn to that deployment (:meth:`DeploymentYears.turn_to`); and after a server start in a stream
that names none, the new run's lines take the year the run itself prints further on
(:meth:`DeploymentYears.new_run`).

The input's first deployment keeps the state read before it (the first block's look-ahead: a single pod's
stream is dated as before). A later one takes the first year its own kubectl ``--prefix`` lines print in the
block being read (one pass over a block groups every pod's lines, :meth:`DeploymentYears._pod_years`: a
stream naming thousands of pods costs one pass per block, not one per pod), else its year is unknown
(``NOMINAL_YEAR``) until one of its own lines prints one.

The prefilter counts an LMCache record unread only when it prints the reader's year: a line behind a wrapper
that names a deployment is never counted so in a block of several (it is read, and its deployment's state
turns in), and a block whose every line names one deployment turns to that deployment's state before its
lines are decided (``blocks.scanned_block``), so the year they are compared with is their own.
"""

from __future__ import annotations

from typing import Protocol

from specdiag.ingest.wrappers import KUBECTL_PREFIX
from specdiag.timeutil import NOMINAL_YEAR, initial_year, is_nominal_year

#: deployments whose year state is kept (a hostile stream names thousands; the analysis reads 1,024)
MAX_STATES = 2048


class YearReader(Protocol):
    """The reader's year state, as :class:`DeploymentYears` swaps it."""

    year_hint: int | None
    last_month: int
    last_y: bytes


class DeploymentYears:
    """The year states of the deployments of one input other than the one being read."""

    __slots__ = ("current", "states", "block", "_pods", "_undated")

    def __init__(self) -> None:
        self.current: str | None = None  # the deployment whose state is the reader's (None: none named yet)
        self.states: dict[str | None, tuple[int | None, int, bytes]] = {}
        self.block: tuple[bytes, int, int] = (b"", 0, 0)  # the block being read, for a deployment's look-ahead
        #: the block ``_pod_years`` last read, and what it found
        self._pods: tuple[tuple | None, dict[bytes, int]] = (None, {})
        #: the block and the offset from which ``new_run`` found no dated line to its end (a later start neither)
        self._undated: tuple[tuple | None, int] = (None, 0)

    def turn_to(self, reader: YearReader, deployment: str) -> None:
        """The lines now read are ``deployment``'s: its year state becomes the reader's."""
        if deployment == self.current:
            return
        if self.current is None and not self.states:  # the input's first: what was read before is its
            self.current = deployment
            return
        if len(self.states) < MAX_STATES:  # beyond: a deployment turned to again looks ahead afresh
            self.states[self.current] = (reader.year_hint, reader.last_month, reader.last_y)
        state = self.states.pop(deployment, None)
        if state is None:
            state = (self._look_ahead(deployment), 0, b"")
        reader.year_hint, reader.last_month, reader.last_y = state
        self.current = deployment

    def new_run(self, reader: YearReader, data: bytes, start: int, end: int) -> None:
        """A server may start at ``data[start]`` in a stream that names no deployment: when a line of the
        new run up to ``end`` prints a year, the vLLM lines before it take that year, not the last run's.
        (A run that prints none keeps the year before it: a start marker may also be a line inside one run,
        and no line tells the two apart here.)"""
        if self.current is not None or self.states:
            return  # named deployments: each keeps its own state, whoever starts
        block, (seen, frm) = self.block, self._undated
        if seen is block and start >= frm:
            return  # a start after one with no dated line before the block's end: none either
        year = initial_year(data, start, end)
        if is_nominal_year(year):
            self._undated = (block, start)
        elif year != reader.year_hint:
            reader.year_hint, reader.last_month = year, 0

    def _look_ahead(self, deployment: str) -> int:
        """A new deployment's year before its first dated line: the first year its own kubectl ``--prefix``
        lines print in the block being read, else unknown."""
        name = deployment.removeprefix("k8s:")
        if not name.startswith("pod/"):
            return NOMINAL_YEAR
        return self._pod_years().get(name.encode("utf-8", "replace"), NOMINAL_YEAR)

    def _pod_years(self) -> dict[bytes, int]:
        """Per pod of the block being read, the first year its own lines print (``initial_year`` of them
        alone), found in one pass over the block and kept for the block."""
        block = self.block
        if self._pods[0] is block:
            return self._pods[1]
        data, start, end = block
        own: dict[bytes, list[bytes]] = {}
        for line in data[start:end].split(b"\n"):
            m = KUBECTL_PREFIX.match(line) if line[:5] == b"[pod/" else None
            if m is not None:
                own.setdefault(m.group(1), []).append(line[m.end() :])
        years = {pod: initial_year(b"\n".join(lines)) for pod, lines in own.items()}
        self._pods = (block, years)
        return years
