"""One catalogued upstream message: where it lives in each release that has it."""

from __future__ import annotations

from array import array
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """A logging call of vLLM or LMCache, merged across the releases that print the same format.

    ``fmt`` is a canonical printf format (``%%`` a literal percent) or None when the source passes a
    variable the catalog cannot resolve; such an entry can only be recognised by its ``file:line``.
    Identity is the stable ``id`` (the project prefix and a hash of project, module, level and format).

    Where it prints is kept as ``runs``: flat ``(first, last, line)`` triples of indexes into ``names``
    (the project's releases, oldest first, one list shared by every entry), so ten thousand entries cost
    a few hundred KiB; ``releases`` and ``lines`` are built when asked (the fingerprint, the docs).
    """

    id: str
    project: str
    module: str
    level: str
    fmt: str | None
    family: str | None
    runs: array
    names: list[str]
    expr: str | None = None  # the unresolved message expression, when fmt is None

    @property
    def releases(self) -> tuple[str, ...]:
        """The releases that print it, oldest first."""
        r, names = self.runs, self.names
        return tuple(names[i] for k in range(0, len(r), 3) for i in range(r[k], r[k + 1] + 1))

    @property
    def lines(self) -> dict[str, int]:
        """Release → the line its logger prints."""
        r, names = self.runs, self.names
        return {names[i]: r[k + 2] for k in range(0, len(r), 3) for i in range(r[k], r[k + 1] + 1)}

    def printed_lines(self) -> set[int]:
        """Every line some release prints it from (the location index's keys)."""
        return {self.runs[k + 2] for k in range(0, len(self.runs), 3)}

    def prints_at(self, line: int) -> bool:
        r = self.runs
        return any(r[k + 2] == line for k in range(0, len(r), 3))

    def newest(self) -> int:
        """Index of the newest release that prints it (ranks equally specific formats)."""
        return self.runs[-2]

    def location(self) -> str:
        """``module:line`` in the newest release that has it (what a current log would print)."""
        return f"{self.module}:{self.runs[-1]}"

    def release_range(self) -> str:
        """First–last release that has it (``0.3.12–0.5.6``), or the one release."""
        first, last = self.names[self.runs[0]], self.names[self.runs[-2]]
        return first if first == last else f"{first}–{last}"

    def releases_at(self, line: int) -> str | None:
        """First–last release that prints it from ``line`` (a log names the line its release printed, which
        may be no newer release's), or None when none does."""
        r, names = self.runs, self.names
        runs = [(r[k], r[k + 1]) for k in range(0, len(r), 3) if r[k + 2] == line]
        if not runs:
            return None
        first, last = names[runs[0][0]], names[runs[-1][1]]
        return first if first == last else f"{first}–{last}"

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and other.id == self.id
