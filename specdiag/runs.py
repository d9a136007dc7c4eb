"""Runs: the server starts inside one deployment's logs, and what changed between them.

A node journal across redeploys, ``kubectl logs --previous`` followed by the current log, or rotated files
of different runs hold several runs of one server. Facts of different runs must never be joined (one run's
draft-layer count against another's draft model), so each run gets its own observers (context builder,
rules, metrics) and its findings carry the run's index.

**The run rule.** A start marker (``ingest.marks.START_MARKERS``: the API server's banner, version or
``non-default args`` line — kind ``api``; vLLM's ``Initializing a V1 LLM engine`` — ``engine``; LMCache's
``Creating LMCacheEngine with config`` — ``lmcache``) of process P at time T, read from input I, starts a
new run when the current run already holds records and:

* I already fed the current run (one stream), and any of: P already printed this start line (the same
  template) in this run, in I (a restart; P known by its pid — an unnamed process, such as an LMCache-only
  log's, counts only after a gap); the run already served in I (lookups, stats, stores, retrieves or access lines); T is
  more than ``SLACK`` earlier than the run's last time and the run already saw a start marker of this kind
  (another server's log follows; a first start of another kind is this start's other half, whose
  formatter's clock need not agree); T is more than ``GAP`` after it and the run already saw a start
  marker of this kind;
* or I is a further input of the group (per-rank files of one server are one run; each may repeat the
  engine-init lines of its rank): T lies outside the run's span by more than ``SLACK`` (a file of another
  run);
* or, whichever input, P (known by its pid) printed this start line in another input of the run and T is
  after the run's end or unknown (``kubectl logs --previous`` and the current log as two files).

The banner (logo or version line), ``non-default args`` and engine-init lines of one start are different
templates or come from different processes (one per rank), so they stay one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdiag.ingest.marks import START_MARKERS

#: out-of-order lines of a merged stream, and ranks starting apart, stay within this (seconds)
SLACK = 60.0
#: a quiet stretch after which a repeated start marker is a new start (seconds)
GAP = 600.0
#: context facts compared between runs (``run_changes``), with ``lmcache_config``; mappings key by key
COMPARED = ("vllm_version", "lmcache_version", "model", "tensor_parallel_size", "pipeline_parallel_size",
            "data_parallel_size", "speculative", "prefix_caching", "kv_role", "kv_connector", "chunk_size")


@dataclass
class RunInfo:
    """One run of a deployment, for the report (``deployments[].runs``)."""

    index: int
    first_line: dict[str, Any] | None = None
    last_line: dict[str, Any] | None = None
    start: float | None = None
    end: float | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    marker: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from specdiag.timeutil import fmt_time

        return {"index": self.index, "first_line": self.first_line, "last_line": self.last_line,
                "start": fmt_time(self.start) if self.start is not None else None,
                "end": fmt_time(self.end) if self.end is not None else None,
                "versions": dict(self.versions), "marker": self.marker}


@dataclass
class RunStart:
    """What the current run has seen that the run rule asks about."""

    #: (template id, process key) of the start lines read → the inputs they were read from
    started: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)
    inputs: set[str] = field(default_factory=set)
    #: inputs in which the run served (lookups, stats, stores, retrieves or access lines reached it)
    served_in: set[str] = field(default_factory=set)
    held: bool = False

    def note_marker(self, tid: str, proc: str, src: str) -> None:
        self.started.setdefault((tid, proc), set()).add(src)
        self.kinds.add(START_MARKERS[tid][0])


def marker_kind(tid: str) -> str | None:
    """The kind of start a template id marks (``api``, ``engine``, ``lmcache``), or None."""
    entry = START_MARKERS.get(tid)
    return entry[0] if entry else None


def starts_new_run(st: RunStart, tid: str, proc: str | None, t: float | None, src: str,
                   times: tuple[float | None, float | None, float | None]) -> str | None:
    """Why a start marker begins a new run (the module's rule), or None when it belongs to the current one.

    ``proc`` is the process key when its pid is known (None otherwise); ``times`` the run's first time,
    its last time in ``src`` (None when ``src`` has not fed it) and its last time in the inputs before."""
    if not st.held:
        return None
    first, last, end = times
    kind = START_MARKERS[tid][0]
    printed = st.started.get((tid, proc), set()) if proc is not None else set()
    if src in st.inputs:
        if src in printed:
            return "restart"
        if src in st.served_in:
            return "after serving"
        if t is not None and last is not None:
            if t < last - SLACK and kind in st.kinds:  # a first LMCache start after vLLM's is the same start
                return "time went back"
            if t > last + GAP and kind in st.kinds:
                return "gap"
    elif t is not None and first is not None and end is not None and not first - SLACK <= t <= end + SLACK:
        return "outside the run's time"
    if printed and (t is None or end is None or t > end):
        return "restart"  # printed in another input, before this one: the previous log, then the current
    return None


def run_changes(contexts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What differs between consecutive runs' contexts (JSON views): ``{"key", "from", "to", "runs"}``,
    one LMCache config key at a time (``lmcache_config.max_local_cpu_size``). A fact one run does not show
    (None) is not a change: a run whose start the log lacks knows less, it did not run differently."""
    out: list[dict[str, Any]] = []
    for i in range(1, len(contexts)):
        a, b = contexts[i - 1], contexts[i]
        for key, x, y in _facts(a, b):
            if x is not None and y is not None and x != y:
                out.append({"key": key, "from": x, "to": y, "runs": [i, i + 1]})
    return out


def _facts(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The compared facts of two contexts; a mapping both show (the speculative and LMCache configs) key
    by key, so a change reads ``speculative.method ngram → eagle3``, not two whole dicts."""
    pairs: list[tuple[str, Any, Any]] = []
    for key in (*COMPARED, "lmcache_config"):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            pairs += [(f"{key}.{k}", x.get(k), y.get(k)) for k in sorted(set(x) | set(y), key=str)]
        else:
            pairs.append((key, x, y))
    return pairs


def change_text(ch: dict[str, Any]) -> str:
    """``max_local_cpu_size 16 → 32 between run 1 and run 2``."""
    key = ch["key"].removeprefix("lmcache_config.")
    r1, r2 = ch["runs"]
    return f"{key} {_short(ch['from'])} → {_short(ch['to'])} between run {r1} and run {r2}"


def _short(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    text = str(v)
    return text if len(text) <= 80 else text[:77] + "…"


__all__ = ["GAP", "SLACK", "RunInfo", "RunStart", "change_text", "marker_kind", "run_changes", "starts_new_run"]
