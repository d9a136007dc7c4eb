"""Process prefixes such as ``(Worker_TP2 pid=767)`` peeled into an Origin (role, ranks, pid, host)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specdiag.numbers import to_int
from specdiag.patterns import lazy

#: a process prefix is short (``(RayWorkerWrapper pid=1234, ip=10.0.0.1)``); bounded lengths keep a hostile
#: line of ``(`` or a 5,000-digit pid from costing more than a few hundred bytes of scanning
#: the same prefix grammar as the compiled scanner (``scan.py``): a pid of at most 18 digits (a longer one is no
#: pid: the line keeps no process origin), names of any length (no nested quantifier: linear)
PREFIX_RE = lazy(rb"\((?P<proc>[^()]*?) pid=(?P<pid>\d{1,18})(?:, ip=(?P<ip>[^)]*))?\)\s?")
_TP = lazy(r"_TP(\d{1,6})|\bTP(\d{1,6})\b")
_PP = lazy(r"_PP(\d{1,6})|\bPP(\d{1,6})")
_DP = lazy(r"_DP(\d{1,6})|^EngineCore_(\d{1,6})$")
_EP = lazy(r"_EP(\d{1,6})")
_RANK = lazy(r"rank=(\d{1,6})")


@dataclass(frozen=True)
class Origin:
    """Who printed a line. ``key`` distinguishes processes (name + pid) within one input.

    ``deployment`` is the collector's name for the source of the line (``k8s:pod/<pod>/<container>``
    from ``kubectl logs --prefix``, ``host:<host>`` from journald, ``compose:<container>`` from docker
    compose), None when no wrapper named one. It is part of ``key``: pid 1 in two pods, or the same
    worker name on two hosts, are different processes. Instances are cached per distinct prefix, so
    ``key`` and ``rank_label`` are computed once.
    """

    proc: str = ""
    pid: int | None = None
    host: str | None = None
    role: str = ""  # APIServer | EngineCore | Worker | MainProcess | Other | ""
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    deployment: str | None = None
    #: the process outside vLLM's own that printed it (``vLLMHttpServer pid=27084``: a Ray actor hosting a whole
    #: server, as an RL trainer runs several), when the line nests vLLM's prefix in another; None otherwise
    host_process: str | None = None
    key: str = field(init=False, compare=False)
    rank_label: str | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        key = f"{self.proc}:{self.pid}:{self.host or ''}"
        object.__setattr__(self, "key", key if self.deployment is None else f"{key}@{self.deployment}")
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


    @property
    def source_key(self) -> str | None:
        """Which server a line belongs to, as far as the line says: the collector's deployment name, else the
        Ray node (``ray:<ip>``), else None (one input file = one server)."""
        if self.deployment is not None:
            return self.deployment
        return f"ray:{self.host}" if self.host else None


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


def parse_origin(names: list[tuple[str, str, str | None]], deployment: str | None = None) -> Origin:
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
    outer = None
    if len(names) > 1 and proc.startswith("RayWorkerWrapper"):
        proc = f"{names[0][0]}/{proc}"
    elif len(names) > 1 and _role(names[0][0]) == "Other":
        outer = f"{names[0][0]} pid={names[0][1]}"
    return Origin(proc=proc, pid=to_int(pid), host=host, role=role, tp=tp, pp=pp, dp=dp, ep=ep, deployment=deployment,
                  host_process=outer)


class OriginCache:
    """Peels all leading ``(name pid=N[, ip=..])`` prefixes; caches the Origin per distinct prefix bytes."""

    def __init__(self, deployment: str | None = None) -> None:
        self._cache: dict[bytes, Origin] = {}
        self.deployment = deployment
        self.bare = NO_ORIGIN if deployment is None else Origin(deployment=deployment)
        self._children: dict[str, OriginCache] = {}

    def for_deployment(self, deployment: str | None) -> OriginCache:
        """The cache of the lines a wrapper attributed to ``deployment`` (None: no wrapper name: this one)."""
        if deployment is None or deployment == self.deployment:
            return self
        cache = self._children.get(deployment)
        if cache is None:
            cache = OriginCache(deployment)
            if len(self._children) < 4096:
                self._children[deployment] = cache
        return cache

    def peel_for(self, deployment: str | None, line: bytes) -> tuple[Origin, bytes]:
        """Like :meth:`peel` for a line a wrapper attributed to ``deployment`` (None: no wrapper name)."""
        cache = self.for_deployment(deployment)
        if line[:1] == b"(":
            return cache.peel(line)
        return cache.bare, line

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
            return self.bare, line
        prefix = line[:pos]
        o = self._cache.get(prefix)
        if o is None:
            o = parse_origin(names, self.deployment)
            if len(self._cache) < 10000:
                self._cache[prefix] = o
        return o, line[pos:]
