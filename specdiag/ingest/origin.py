"""Process prefixes such as ``(Worker_TP2 pid=767)`` peeled into an Origin (role, ranks, pid, host)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specdiag.numbers import to_int

#: a process prefix is short (``(RayWorkerWrapper pid=1234, ip=10.0.0.1)``); bounded lengths keep a hostile
#: line of ``(`` or a 5,000-digit pid from costing more than a few hundred bytes of scanning
PREFIX_RE = re.compile(rb"\((?P<proc>[^()]{0,200}?) pid=(?P<pid>\d{1,12})(?:, ip=(?P<ip>[^)]{0,200}))?\)\s?")
_TP = re.compile(r"_TP(\d{1,6})|\bTP(\d{1,6})\b")
_PP = re.compile(r"_PP(\d{1,6})|\bPP(\d{1,6})")
_DP = re.compile(r"_DP(\d{1,6})|^EngineCore_(\d{1,6})$")
_EP = re.compile(r"_EP(\d{1,6})")
_RANK = re.compile(r"rank=(\d{1,6})")


@dataclass(frozen=True)
class Origin:
    """Who printed a line. ``key`` distinguishes processes (name + pid) within one input.

    Instances are cached per distinct prefix, so ``key`` and ``rank_label`` are computed once.
    """

    proc: str = ""
    pid: int | None = None
    host: str | None = None
    role: str = ""  # APIServer | EngineCore | Worker | MainProcess | Other | ""
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    key: str = field(init=False, compare=False)
    rank_label: str | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.proc}:{self.pid}:{self.host or ''}")
        label = None
        if self.tp is not None or self.pp is not None:
            parts = []
            if self.dp is not None:
                parts.append(f"DP{self.dp}")
            if self.pp is not None:
                parts.append(f"PP{self.pp}")
            parts.append(f"TP{self.tp if self.tp is not None else 0}")
            label = "_".join(parts)
        # ``TP2``, ``PP1_TP0`` or ``DP1_TP0``: how ranks are named in reports
        object.__setattr__(self, "rank_label", label)


NO_ORIGIN = Origin()


def _role(name: str) -> str:
    if name.startswith(("Worker", "VllmWorker")):
        return "Worker"
    if name.startswith("EngineCore"):
        return "EngineCore"
    if name.startswith(("APIServer", "ApiServer")):
        return "APIServer"
    if name.startswith("RayWorkerWrapper"):
        return "Worker"
    if name == "MainProcess":
        return "MainProcess"
    return "Other"


def parse_origin(names: list[tuple[str, str, str | None]]) -> Origin:
    """Build an Origin from the peeled prefixes, innermost last (Ray nests a worker inside an engine)."""
    proc, pid, ip = names[-1]
    role = _role(proc)
    tp = pp = dp = ep = None
    for name, _pid, _ip in names:
        if m := _TP.search(name):
            tp = int(m.group(1) or m.group(2))
        if m := _PP.search(name):
            pp = int(m.group(1) or m.group(2))
        if m := _DP.search(name):
            dp = int(m.group(1) or m.group(2))
        if m := _EP.search(name):
            ep = int(m.group(1))
        if m := _RANK.search(name):
            tp = int(m.group(1))  # VllmWorker rank=N (vLLM 0.8.5-0.9.x): global rank, = TP rank when PP=1
    if role == "Worker" and tp is None:
        if proc in ("Worker", "VllmWorker"):
            tp = 0  # a single worker: TP=1
        elif proc.startswith("VllmWorker-") and proc[11:].isascii() and proc[11:].isdigit():
            tp = to_int(proc[11:])  # multiprocessing name before the worker renamed itself (0.31+)
    host = ip or next((i for _n, _p, i in names if i), None)
    if len(names) > 1 and proc.startswith("RayWorkerWrapper"):
        proc = f"{names[0][0]}/{proc}"
    return Origin(proc=proc, pid=to_int(pid), host=host, role=role, tp=tp, pp=pp, dp=dp, ep=ep)


class OriginCache:
    """Peels all leading ``(name pid=N[, ip=..])`` prefixes; caches the Origin per distinct prefix bytes."""

    def __init__(self) -> None:
        self._cache: dict[bytes, Origin] = {}

    def peel(self, line: bytes) -> tuple[Origin, bytes]:
        # fast path: one prefix, seen before
        end = line.find(b") ")
        if end > 0:
            o = self._cache.get(line[: end + 2])
            if o is not None:
                rest = line[end + 2 :]
                if not rest.startswith(b"("):
                    return o, rest
        names = []
        pos = 0
        while True:
            m = PREFIX_RE.match(line, pos)
            if not m:
                break
            ip = m.group("ip")
            names.append((m.group("proc").decode("utf-8", "replace").strip(), m.group("pid").decode(),
                          ip.decode("utf-8", "replace") if ip else None))
            pos = m.end()
        if not names:
            return NO_ORIGIN, line
        prefix = line[:pos]
        o = self._cache.get(prefix)
        if o is None:
            o = parse_origin(names)
            if len(self._cache) < 10000:
                self._cache[prefix] = o
        return o, line[pos:]
