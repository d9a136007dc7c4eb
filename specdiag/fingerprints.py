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
}
# files the key lines belong to (a line number only counts when the file matches)
KEY_FILES = {
    "R1": "vllm_v1_adapter.py", "R2": "vllm_v1_adapter.py", "R3": "vllm_v1_adapter.py", "L1": "vllm_v1_adapter.py",
    "R4": "cache_engine.py", "R7": "cache_engine.py", "S1": "cache_engine.py", "C13": "cache_engine.py",
    "C18": "vllm_v1_adapter.py", "L6": "lmcache_lookup_client.py", "M8": "pin_monitor.py",
}
VENDORED_LOGGER = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration"


class VersionFingerprint:
    """Collects (template, file, line) observations and intersects candidate versions."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.vendored = False
        self.inprocess = False
        self.text_hints: set[str] = set()

    def observe(self, tid: str, file: str | None, line: int | None, logger: str | None) -> None:
        """Called for the first record of each key template (the engine filters, so this stays off the hot path)."""
        if logger:
            if logger.startswith(VENDORED_LOGGER):
                self.vendored = True
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
            lo, hi = min(cands), max(cands)
            if lo == hi:
                return VERSIONS[lo], evidence, None
            return f"{VERSIONS[lo]}..{VERSIONS[hi]}", evidence, None
        # no inspected release matches: bracket by the versions whose numbers are nearest
        near = []
        for tid, line in self.seen.items():
            lines = KEY_LINES[tid]
            best = min((abs(v - line), i) for i, v in enumerate(lines) if v is not None)
            near.append(best[1])
        lo, hi = min(near), max(near)
        rng = VERSIONS[lo] if lo == hi else f"{VERSIONS[lo]}..{VERSIONS[hi]}"
        return (f"~{rng}", evidence,
                "line numbers match no inspected release (development, patched or uninspected build); nearest shown")


def version_tuple(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    import re

    m = re.match(r"~?>?(\d+)\.(\d+)(?:\.(\d+))?", v)
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))
