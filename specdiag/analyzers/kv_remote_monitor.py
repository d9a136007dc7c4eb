"""KV022 — LMCache's remote monitor found the remote backend unhealthy: its puts and gets went to a blackhole."""

from __future__ import annotations

from collections import Counter

from specdiag.analyzers.base import WARNING_OR_WORSE, Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: the remote backend's health check (``v1/storage_backend/remote_monitor.py``, 0.3.3-0.3.12): what each of its
#: messages says of the connection, by the literal start of its format
MONITOR_MODULE = "v1/storage_backend/remote_monitor.py"
SAYS = (("Ping failed with error code: ", "ping failed"), ("Ping timeout", "ping timed out"),
        ("Ping error: ", "ping raised"), ("Original connector is None", "not connected"),
        ("original_connector is None", "not connected"))
#: the error code a failed ping answered with
_CODE = lazy(r"error code: (-?\d{1,12})")
#: processes whose monitor lines are kept apart (a hostile log must not grow the table)
MAX_PROCESSES = 64


def monitor_says(entry) -> str | None:
    """What a catalog entry of the remote monitor says (``ping failed``, …), None for any other message."""
    if entry.module != MONITOR_MODULE or entry.project != "lmcache" or not entry.fmt:
        return None
    return next((what for lit, what in SAYS if entry.fmt.startswith(lit)), None)


@register
class RemoteBackendBlackholed(Rule):
    """LMCache's remote monitor found the remote backend unhealthy: while it was, remote puts and gets went nowhere.

    Detects: the remote backend's health check (``RemoteMonitor``, LMCache 0.3.3-0.3.12
    ``v1/storage_backend/remote_monitor.py``): ``Ping failed with error code: N``, ``Ping timeout``, ``Ping error: …``
    and ``original_connector is None, re-initializing connection.`` (the connection never came up), per process.

    Why it matters: every ping interval the monitor pings the remote connector (lm server, Redis, a connector of
    one's own); when a ping fails, times out or raises it switches the backend to its blackhole connector
    (``_safe_switch_connector(self.blackhole_connector)``) until a ping succeeds again. Meanwhile every remote put is
    dropped and every remote get misses: nothing reaches the remote tier or comes back from it, other instances
    share nothing, and only the local tiers cache. Nothing fails for the client.

    Causes weighed: ``remote-backend-unhealthy``.

    Fix: the remote store's health and reachability from this pod (its address in ``remote_url``, its own log);
    a ping timeout shorter than the store answers in under load.

    References: LMCache 0.3.10 ``v1/storage_backend/remote_monitor.py`` (the ping loop, ``blackhole_connector``);
    LMCache PR #764.
    """

    code = "KV022"
    name = "lmcache-remote-blackholed"
    title = "LMCache's remote backend failed its health check: remote puts and gets went to a blackhole"
    severity = "warning"
    family = "KV"
    cause_ids = ("remote-backend-unhealthy",)
    levels = WARNING_OR_WORSE

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.said: dict[tuple, Counter[str]] | None = None  # by process: what the monitor said, how often
        self.codes: Counter[str] = Counter()
        self.first: list[Event] = []
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id != CATALOG_EVENT or (entry := entry_of(ev)) is None or (what := monitor_says(entry)) is None:
            return
        if entry.fmt not in self.claims:
            self.claims = (*self.claims, entry.fmt)
        if self.said is None:
            self.said = {}
        said, key = self.said, ev.rec.origin.key
        if key not in said and len(said) >= MAX_PROCESSES:
            return
        said.setdefault(key, Counter())[what] += 1
        if (m := _CODE.search(ev.rec.msg)) and (m.group(1) in self.codes or len(self.codes) < 16):
            self.codes[m.group(1)] += 1
        if len(self.first) < 3:
            self.first.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.said:
            return []
        total: Counter[str] = Counter()
        for c in self.said.values():
            total.update(c)
        lines = sum(total.values())
        what = ", ".join(f"{w} ×{n}" for w, n in total.most_common())
        codes = f" (error codes: {', '.join(f'{c} ×{n}' for c, n in self.codes.most_common(3))})" if self.codes else ""
        cause = Cause("remote-backend-unhealthy", 0.8, for_=[f"the remote monitor's own lines: {what}{codes}"],
                      against=["the lines do not say how long it stayed unhealthy: a later successful ping (not "
                               "logged) switches the connector back"], **fix_and_confirm("remote-backend-unhealthy"))
        procs = len(self.said)
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"LMCache's remote monitor found the remote backend unhealthy: {what}{codes}"
                     f"{f' in {procs} processes' if procs > 1 else ''}. While a ping fails it sends every remote put "
                     "and get to a blackhole connector: nothing is stored in the remote tier or loaded from it, and "
                     "only the local tiers cache. Nothing fails for the client."),
            count=lines, evidence=[evidence_of(e, 400) for e in self.first], causes=[cause],
            identity=f"{self.code}|{'+'.join(sorted(total))}", first_seen=rec_time(self.first[0].rec),
            headline=f"the remote backend failed its health check ({what}): remote puts and gets went to a blackhole",
            measurements={"monitor_lines": dict(total), "error_codes": dict(self.codes.most_common(8)),
                          "processes": procs},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
