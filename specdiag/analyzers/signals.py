"""Per-process windows of recent warning signals, shared vocabulary for cause ranking.

A shortfall is explained by what happened on *that rank* shortly before it: memory pressure, pin
warnings, backend read errors. Each process keeps a short deque of such events (bounded), so a rule can
ask "what did TP2 say in the 60 s before line 8812?" without holding the log.
"""

from __future__ import annotations

from collections import deque

from specdiag.events import Event
from specdiag.timeutil import rec_time

# signal template ids → family
SIGNAL_FAMILY = {
    "M1": "pressure", "M3": "pressure", "M14": "pressure", "M4": "pressure", "S4": "pressure", "S5": "pressure", "S5b": "pressure",
    "M5": "pin-negative", "M6": "ref-negative", "M7": "gc-leak",
    "M8": "pin-timeout", "M9": "pin-timeout",
    "R7": "read-miss", "X8": "redis-evicted",
    "X1": "remote-error", "X2": "remote-timeout", "X3": "remote-error", "X4": "remote-put-error",
    "X5": "remote-error", "X6": "backend-api-error", "X9": "remote-put-error",
    "D4": "disk-error", "D6": "disk-error", "D3": "disk-pressure",
    "D5": "staging-exhausted", "X7": "staging-exhausted",
    "Z1": "lookup-timeout", "L7": "lookup-timeout", "M13": "invalidated-object", "R8": "unhealthy", "C34": "unhealthy",
    "L8": "async-lookup",
}

#: local CPU tier pressure (full tier: allocations fail, stores cut or dropped, nothing evictable)
PRESSURE_IDS = frozenset(tid for tid, fam in SIGNAL_FAMILY.items() if fam == "pressure")


class SignalWindow:
    """Recent signal events per process key (deque of (time, event)), plus whole-log counts per family."""

    def __init__(self, per_process: int = 32) -> None:
        self.recent: dict[str, deque] = {}
        self.per_process = per_process
        self.totals: dict[str, int] = {}

    def add(self, ev: Event) -> None:
        fam = SIGNAL_FAMILY.get(ev.id)
        if fam is None:
            return
        key = (ev.rec.origin.key, fam)  # one deque per family, so frequent pressure lines never push out a rare pin warning
        dq = self.recent.get(key)
        if dq is None:
            dq = self.recent[key] = deque(maxlen=self.per_process)
        dq.append((rec_time(ev.rec), ev))
        self.totals[fam] = self.totals.get(fam, 0) + 1

    def before(self, key: str, t_end: float | None, line: int, path: str, window_s: float) -> list[Event]:
        """Signals of process ``key`` in ``[t_end - window_s, t_end]`` that precede ``path:line``."""
        out = []
        for (k, _fam), dq in self.recent.items():
            if k != key:
                continue
            for t, ev in dq:
                if ev.rec.path == path and ev.rec.line > line:
                    continue
                if t is not None and t_end is not None and not (t_end - window_s <= t <= t_end + 0.5):
                    continue
                out.append(ev)
        out.sort(key=lambda e: (e.rec.path, e.rec.line))
        return out
