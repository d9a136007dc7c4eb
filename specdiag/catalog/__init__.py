"""The message catalog: every logging call vLLM and LMCache releases can print, generated from their sources.

``catalog()`` loads the shipped data on first call and caches it; importing this package (or specdiag)
reads nothing, so commands that never match messages pay nothing for it. The data is built by
``scripts/gen_catalog.py`` at development time; see ``store.py`` for the indexes and ``pattern.py`` for the
linear-time matcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specdiag.catalog.entry import Entry

if TYPE_CHECKING:
    from specdiag.catalog.store import Catalog

__all__ = ["Catalog", "Entry", "catalog", "loaded"]

_CATALOG: Catalog | None = None


def catalog() -> Catalog:
    """The catalog, read from the package data on the first call and shared after it."""
    global _CATALOG
    if _CATALOG is None:
        from specdiag.catalog.store import load

        _CATALOG = load()
    return _CATALOG


def loaded() -> bool:
    """Whether the data has been read in this process (tests check imports stay free of it)."""
    return _CATALOG is not None


def __getattr__(name: str) -> object:
    if name == "Catalog":
        from specdiag.catalog.store import Catalog

        return Catalog
    raise AttributeError(name)
