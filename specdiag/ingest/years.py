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
stream is dated as before). A later one looks ahead over its own kubectl ``--prefix`` lines in the block
being read, else its year is unknown (``NOMINAL_YEAR``) until one of its own lines prints one.

The prefilter counts an LMCache record unread only when it prints the reader's year: a line behind a wrapper
that names a deployment is never counted so in a block of several (it is read, and its deployment's state
turns in), and a block whose every line names one deployment turns to that deployment's state before its
lines are decided (``blocks.scanned_block``), so the year they are compared with is their own.
"""

from __future__ import annotations

from typing import Protocol

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

    __slots__ = ("current", "states", "block")

    def __init__(self) -> None:
        self.current: str | None = None  # the deployment whose state is the reader's (None: none named yet)
        self.states: dict[str | None, tuple[int | None, int, bytes]] = {}
        self.block: tuple[bytes, int, int] = (b"", 0, 0)  # the block being read, for a deployment's look-ahead

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
        year = initial_year(data[start:end])
        if not is_nominal_year(year) and year != reader.year_hint:
            reader.year_hint, reader.last_month = year, 0

    def _look_ahead(self, deployment: str) -> int:
        """A new deployment's year before its first dated line: the first year its own kubectl ``--prefix``
        lines print in the block being read (``initial_year``), else unknown."""
        data, start, end = self.block
        name = deployment.removeprefix("k8s:")
        if not name.startswith("pod/") or not data:
            return NOMINAL_YEAR
        wrapper = b"[" + name.encode("utf-8", "replace") + b"] "
        own = []
        i = data.find(wrapper, start, end)
        while i >= 0 and len(own) < 4096:
            nl = data.find(b"\n", i, end)
            stop = end if nl < 0 else nl
            own.append(data[i + len(wrapper) : stop])
            i = data.find(wrapper, stop, end)
        return initial_year(b"\n".join(own)) if own else NOMINAL_YEAR
