"""Module-level regular expressions, compiled when first used.

Why: specdiag's modules hold about 170 patterns, and compiling them all took 20-28 ms of every start (the
2-vCPU machine) while a run uses 20 (a pasted line) to 47 (a 100 MB log) of them: each rule's patterns
only read the lines of its own messages. ``lazy`` keeps the text and compiles on the first attribute asked
(``.match``, ``.search``, ...); after that the compiled pattern's methods sit in the object's own dict, so a
hot loop pays what it paid for a compiled pattern.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, Generic

_COMPILED_ATTRS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split", "scanner",
                   "groups", "groupindex")


class LazyPattern(Generic[AnyStr]):
    """A :class:`re.Pattern` made on first use; ``pattern`` and ``flags`` are known before."""

    def __init__(self, pattern: AnyStr, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags_given = flags

    def compiled(self) -> re.Pattern[AnyStr]:
        """The compiled pattern (made now if it was not yet)."""
        rx = self.__dict__.get("_rx")
        if rx is None:
            rx = re.compile(self.pattern, self.flags_given)
            self.__dict__["_rx"] = rx
            for name in _COMPILED_ATTRS:
                self.__dict__[name] = getattr(rx, name)
            self.__dict__["flags"] = rx.flags
        return rx

    def __getattr__(self, name: str) -> Any:  # only reached before the first use, or for a name not copied
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __reduce__(self) -> tuple:
        return (LazyPattern, (self.pattern, self.flags_given))

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> LazyPattern[AnyStr]:
    """``re.compile(pattern, flags)``, compiled on first use (see the module's docstring)."""
    return LazyPattern(pattern, flags)
