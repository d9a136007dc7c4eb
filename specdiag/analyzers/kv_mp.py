"""KV009/KV010 — LMCache multi-process adapter failures and lookup timeouts."""

from __future__ import annotations

from specdiag.analyzers.base import WARNING_OR_WORSE, Rule, register, shape_claim
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of
from specdiag.findings import CauseBoard, Evidence, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: LMCache's lookup clients (``v1/lookup_client/``): the scheduler's side sends each lookup to the workers' servers
LOOKUP_CLIENT_FILES = frozenset({"lmcache_async_lookup_client.py", "lmcache_lookup_client.py"})


#: the lmcache server holding no KV registration for the worker a request names: its lookup's log line (catalogued,
#: ``v1/multiprocess/``: ``No GPU context found for model %s with world size %d during lookup!``, CacheBlend's ``No CB
#: GPU context …``, ``No registered GPU context found for instance ID %d``) and the exceptions its store and retrieve
#: raise (``server.py``: ``assert instance_id in self.gpu_contexts, f"KV cache not registered for GPU ID …"``; 0.5's
#: ``No GPU context registered for instance ID``)
UNREGISTERED_LOGGED = ("No GPU context found for model ", "No CB GPU context ", "No registered GPU context found for ",
                       "No registered non-GPU context found for ")
UNREGISTERED_RAISED = ("KV cache not registered for GPU ID ", "No GPU context registered for instance ID ")


#: the connector's own templates (``events/lmcache.py``)
_CONNECTOR_LINES = frozenset({"P1", "P2", "P3", "P4", "P5", "P6"})


def _unregistered(ev: Event) -> bool:
    """Whether ``ev`` is the lmcache server finding no KV registration for the worker a request names."""
    if ev.id == CATALOG_EVENT:
        entry = entry_of(ev)
        return (entry is not None and entry.project == "lmcache" and "multiprocess/" in entry.module
                and (entry.fmt or "").startswith(UNREGISTERED_LOGGED))
    detail = ev.f.get("detail") or ""
    return ev.id in ("E_GENERIC", "V_EXC") and detail.startswith(UNREGISTERED_RAISED)


def _evidence(events: list[Event], n: int = 4) -> list[Evidence]:
    return [evidence_of(e) for e in events[:n]]


@register
class MultiProcessFailures(Rule):
    """LMCache's multi-process connector reported failed retrieves/stores or an unhealthy server.

    Detects: ``Something went wrong when processing the retrieve|store request for request_id=…``,
    ``Bypassing LMCache for request … after a failed async KV load`` (a failed load, recomputed),
    ``[req=…] LMCache hit mismatch across servers``, ``LOOKUP to … timed out … Marking server as unhealthy``
    and ``LMCache server is unhealthy — entering degraded mode``, the server's ``Store task N to adapter M failed
    for keys: …`` (an L2 adapter failed to persist chunks: they stay only in L1, so a later lookup misses them
    once L1 evicts; ``v1/distributed/storage_controllers/store_controller.py:791``, 0.5.6) (``LMCacheMPConnector`` with a separate ``lmcache server``; this mode never prints the
    in-process ``Num retrieved tokens`` error, so KV001 cannot see its losses), and the server holding no KV
    registration for the worker a request names: its ``No GPU context found for model … during lookup!`` (and the
    catalog's other such lines of ``v1/multiprocess/``), the store's ``AssertionError: KV cache not registered for GPU
    ID N``, ``ValueError: No GPU context registered for instance ID N``.

    Why it matters: a failed retrieve is recomputed (or fails the request under vLLM's ``fail`` policy);
    an unhealthy server means LMCache is bypassed entirely.

    Causes weighed: ``mp-server-unhealthy`` (the LMCache server is down or timing out),
    ``mp-retrieve-failure`` (the server answered but the transfer failed), ``mp-hit-mismatch`` (servers
    disagree on hits, the minimum is taken), ``mp-kv-unregistered`` (the server restarted after the workers
    registered, or dropped their registration), ``mp-l2-store-failure`` (an L2 adapter of the server failed to store
    chunks: Redis/Valkey, disk, a remote tier).

    Fix: check the ``lmcache server`` process log and its health; compare with the in-process connector.

    References: LMCache 0.5.6 ``integration/vllm/vllm_multi_process_adapter.py`` (:614, :1060, :1306, :2139),
    0.4.3 ``v1/multiprocess/server.py`` (``register_kv_cache``, ``lookup``, ``store``), issue #4038,
    ``integration/vllm/lmcache_mp_connector.py:1280``;
    LMCache issue #3388 (retrieve failures on EAGLE-3 hosts).
    """

    code = "KV009"
    name = "lmcache-mp-connector-failures"
    title = "LMCache multi-process connector: failed retrieves/stores or unhealthy server"
    severity = "warning"
    family = "KV"
    cause_ids = ("mp-server-unhealthy", "mp-retrieve-failure", "mp-hit-mismatch", "mp-kv-unregistered",
                 "mp-l2-store-failure")
    events = _CONNECTOR_LINES | {"E_GENERIC", "V_EXC"}
    #: the server's own lines about a worker it holds no registration for come as every ERROR line does
    levels = WARNING_OR_WORSE

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.by_kind: dict[str, list[Event]] = {"retrieve": [], "store": [], "mismatch": [], "unhealthy": [],
                                                "unregistered": [], "adapter": []}
        self.counts = {"retrieve": 0, "store": 0, "mismatch": 0, "unhealthy": 0, "unregistered": 0, "adapter": 0}
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id in (CATALOG_EVENT, "E_GENERIC", "V_EXC"):
            if not _unregistered(ev):
                return
            kind = "unregistered"
            if ev.id == CATALOG_EVENT and (fmt := entry_of(ev).fmt) not in self.claims and len(self.claims) < 8:
                self.claims = (*self.claims, fmt)
        elif ev.id not in _CONNECTOR_LINES:
            return  # another line at WARNING or worse (``levels``)
        else:
            kind = {"P2": "mismatch", "P3": "unhealthy", "P4": "unhealthy", "P5": "retrieve", "P6": "adapter"}.get(ev.id) \
                or ev.f.get("op") or "retrieve"
        self.counts[kind] += 1
        if len(self.by_kind[kind]) < 3:
            self.by_kind[kind].append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not any(self.counts.values()):
            return []
        c = self.counts
        b = CauseBoard()
        b.add("mp-server-unhealthy", 0.3, **fix_and_confirm("mp-server-unhealthy"))
        b.add("mp-retrieve-failure", 0.5, **fix_and_confirm("mp-retrieve-failure"))
        b.add("mp-hit-mismatch", 0.2, **fix_and_confirm("mp-hit-mismatch"))
        if c["unregistered"]:
            b.add("mp-kv-unregistered", 0.3, **fix_and_confirm("mp-kv-unregistered"))
            b.support("mp-kv-unregistered", 10, f"{c['unregistered']} line(s) of the server holding no KV registration "
                                                "for the worker a request named")
        if c["unhealthy"]:
            b.support("mp-server-unhealthy", 10, f"{c['unhealthy']} 'server is unhealthy' / lookup-timeout line(s)")
        else:
            b.oppose("mp-server-unhealthy", 3, "no 'server is unhealthy' line")
        if c["retrieve"] or c["store"]:
            b.support("mp-retrieve-failure", 4, f"{c['retrieve']} failed retrieve(s), {c['store']} failed store(s)")
        else:
            b.oppose("mp-retrieve-failure", 3, "no failed retrieve or store request of the connector")
        if c["adapter"]:
            b.add("mp-l2-store-failure", 0.3, **fix_and_confirm("mp-l2-store-failure"))
            b.support("mp-l2-store-failure", 10, f"{c['adapter']} 'Store task … to adapter … failed' line(s) of the server")
        if c["mismatch"]:
            b.support("mp-hit-mismatch", 5, f"{c['mismatch']} hit mismatch(es) across servers")
        else:
            b.oppose("mp-hit-mismatch", 3, "no hit-mismatch line")
        events = [e for k in ("unregistered", "unhealthy", "retrieve", "store", "mismatch", "adapter") for e in self.by_kind[k]]
        spec = ctx.speculative or {}
        connector = c["retrieve"] + c["store"] + c["mismatch"] + c["unhealthy"]
        summary = (f"{c['retrieve']} failed retrieve(s), {c['store']} failed store(s), {c['mismatch']} hit mismatch(es), "
                   f"{c['unhealthy']} unhealthy-server line(s) from the multi-process connector.") if connector else ""
        if c["adapter"]:
            adapter = (f"The lmcache server's L2 adapter failed {c['adapter']} store task(s) ('Store task … to adapter … "
                       "failed for keys'): those chunks stay only in its L1 (CPU) tier, so a lookup misses them once L1 "
                       "evicts them; no request failed for it.")
            summary = f"{summary} {adapter}".strip()
        if c["unregistered"]:
            said = (f"The lmcache server held no KV registration for the worker a request named ({c['unregistered']} "
                    "line(s): 'No GPU context …', 'KV cache not registered for GPU ID …'): its lookups for that worker "
                    "return no hit and its stores fail until the worker registers its KV cache again.")
            summary = f"{said} {summary}".strip()
        if spec.get("method") in ("eagle", "eagle3") and c["retrieve"]:
            summary += " Retrieve failures with EAGLE-3 match LMCache issue #3388."
        return [Finding(rule=self.code, severity="warning", title=self.title, summary=summary,
                        count=sum(c.values()), evidence=_evidence(events, 5), measurements=dict(c),
                        causes=b.ranked(ceiling=0.8), identity=f"mp|{sorted(k for k, v in c.items() if v)}",
                        first_seen=rec_time(events[0].rec) if events else None)]


@register
class LookupTimeouts(Rule):
    """LMCache lookups timed out and reported 0 hits.

    Detects: ``Timeout occurred for rank N, recreating all sockets`` (the scheduler's lookup RPC to a
    worker timed out) and ``Request … is still waiting for async lookup after N seconds, returning 0 lmcache
    cached tokens`` (async lookups past ``lookup_timeout_ms``), when LMCache is not in degraded mode (KV004
    covers that case): two or more in a log with its startup lines, one in an excerpt without them. An ERROR
    line of the lookup client before them (``Error processing request from scheduler: …``: the worker's handler
    raised) is evidence that the lookup failed rather than ran slow, against raising the timeout.

    Why it matters: each timeout costs the request the whole timeout (seconds) and then recomputes a prefix
    LMCache may have held.

    Causes weighed: ``worker-lookup-server-slow`` (a worker's lookup server is blocked or overloaded),
    ``async-lookup-timeout-too-low`` (``lookup_timeout_ms`` shorter than a busy lookup takes).

    Fix: find the slow rank (the rank number is in the line); raise ``lookup_timeout_ms`` for async lookups.

    References: LMCache 0.5.6 ``v1/rpc/zmq_transport.py:121``, ``v1/lookup_client/lmcache_async_lookup_client.py:177``.
    """

    code = "KV010"
    name = "lmcache-lookup-timeouts"
    title = "LMCache lookups timed out and reported 0 hits"
    severity = "warning"
    family = "KV"
    cause_ids = ("worker-lookup-server-slow", "async-lookup-timeout-too-low")
    defaults = {"min_timeouts": 2}
    events = frozenset({"Z1", "L7", "C32", "C33", "E_NO_CONNECTOR"})
    #: the lookup client's own errors come as every ERROR line does (a worker whose lookup handler raised)
    levels = frozenset({"ERROR", "CRITICAL"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.z1: list[Event] = []
        self.l7: list[Event] = []
        self.n_z1 = self.n_l7 = 0
        self.degraded = False
        self.client_error: Event | None = None  # the lookup client's first ERROR line
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id not in self.events:
            self._client_error(ev)
        elif ev.id == "Z1":
            self.n_z1 += 1
            if len(self.z1) < 3:
                self.z1.append(ev)
        elif ev.id == "L7":
            self.n_l7 += 1
            if len(self.l7) < 3:
                self.l7.append(ev)
        else:
            self.degraded = True

    def _client_error(self, ev: Event) -> None:
        """An ERROR line of LMCache's lookup client (``lmcache_async_lookup_client.py``: ``Error processing request
        from scheduler: …``, the worker side's handler raising): the lookup failed, its answer will not come."""
        if ev.rec.kind != "lmcache" or (ev.rec.file or "") not in LOOKUP_CLIENT_FILES or self.client_error is not None:
            return
        self.client_error = ev
        entry = entry_of(ev)
        self.claims = (entry.fmt,) if entry is not None and entry.fmt else (shape_claim(ev.rec.msg),)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        n = self.n_z1 + self.n_l7
        # an excerpt without the startup lines is what the user chose to show: one timeout in it is the report
        least = self.options["min_timeouts"] if ctx.startup_seen else 1
        if n < least or self.degraded or ctx.lmcache_degraded:
            return []
        b = CauseBoard()
        b.add("worker-lookup-server-slow", 0.6, **fix_and_confirm("worker-lookup-server-slow"))
        b.add("async-lookup-timeout-too-low", 0.4, **fix_and_confirm("async-lookup-timeout-too-low"))
        if self.n_z1:
            ranks = sorted({e.f.get("rank") for e in self.z1})
            b.support("worker-lookup-server-slow", 3, f"{self.n_z1} lookup RPC timeout(s) to rank(s) {', '.join(map(str, ranks))}")
        else:
            b.oppose("worker-lookup-server-slow", 2, "no RPC timeout line")
        if self.n_l7:
            b.support("async-lookup-timeout-too-low", 3, f"{self.n_l7} async lookup(s) gave up after the timeout")
        else:
            b.oppose("async-lookup-timeout-too-low", 3, "no async-lookup timeout line")
        if (err := self.client_error) is not None:
            b.support("worker-lookup-server-slow", 4, f"the lookup client logged an error (line {err.rec.line}: "
                                                      f"'{err.rec.msg.strip()[:100]}'): that lookup failed")
            b.oppose("async-lookup-timeout-too-low", 4, "an error, not a slow answer, came before the timeout: a "
                                                        "longer timeout waits for an answer that never comes")
        ev = self.z1 + self.l7 + ([self.client_error] if self.client_error is not None else [])
        return [Finding(rule=self.code, severity="warning", title=self.title,
                        summary=f"{n} lookup timeout(s) ({self.n_z1} RPC, {self.n_l7} async): each request waited for the "
                                "timeout, then got 0 LMCache hits.",
                        count=n, evidence=_evidence(ev), measurements={"rpc_timeouts": self.n_z1, "async_timeouts": self.n_l7},
                        causes=b.ranked(ceiling=0.8), identity="lookup-timeouts", first_seen=rec_time(ev[0].rec))]
