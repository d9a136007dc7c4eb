"""One catalogued upstream message: where it lives in each release that has it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """A logging call of vLLM or LMCache, merged across the releases that print the same format.

    ``fmt`` is a canonical printf format (``%%`` a literal percent) or None when the source passes a
    variable the catalog cannot resolve; such an entry can only be recognised by its ``file:line``.
    Identity is the stable ``id`` (the project prefix and a hash of project, module, level and format).
    """

    id: str
    project: str
    module: str
    level: str
    fmt: str | None
    family: str | None
    releases: tuple[str, ...]
    lines: dict[str, int]
    expr: str | None = None  # the unresolved message expression, when fmt is None

    def location(self) -> str:
        """``module:line`` in the newest release that has it (what a current log would print)."""
        return f"{self.module}:{self.lines[self.releases[-1]]}"

    def release_range(self) -> str:
        """First–last release that has it (``0.3.12–0.5.6``), or the one release."""
        if len(self.releases) == 1:
            return self.releases[0]
        return f"{self.releases[0]}–{self.releases[-1]}"

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and other.id == self.id
