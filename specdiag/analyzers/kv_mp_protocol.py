"""KV021 — LMCache's multiprocess server rejected its client's requests: the two speak different protocols."""

from __future__ import annotations

from collections import Counter

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: the message queue of LMCache's multiprocess server (``v1/multiprocess/mq.py``; from 0.5.3
#: ``transport/zmq_impl/mq.py``): where it dispatches each request to the handler registered for its type
MQ_MODULES = ("v1/multiprocess/mq.py", "v1/multiprocess/transport/zmq_impl/mq.py")
#: its messages that say a request did not fit what the server registered: no handler for its type, or a handler
#: called with other arguments or returning another type (``Handler for %s expects …``); the list of the
#: handlers it has follows the first (``Available handlers: %s``). Its handlers' own exceptions (``Error in
#: blocking handler``) are another matter
REJECTIONS = ("No handler registered for ", "Handler for ", "Available handlers: ")
#: a request type as the server prints it (``RequestType.CB_LOOKUP_PRE_COMPUTED``, ``<RequestType.STORE: 3>``)
_TYPE = lazy(r"\bRequestType\.(\w{1,80})")
#: handler names kept from the server's lists (a list is a few dozen; a hostile log must not grow the set)
MAX_SERVED = 256


def rejection(entry) -> bool:
    """Whether a catalog entry is the multiprocess server rejecting a request as its protocol does not fit."""
    return entry.module in MQ_MODULES and (entry.fmt or "").startswith(REJECTIONS)


@register
class MpProtocolMismatch(Rule):
    """LMCache's multiprocess server rejected its client's requests: the two speak different protocols.

    Detects: the server's message queue (``lmcache server``; ``v1/multiprocess/mq.py``, ``transport/zmq_impl/mq.py``)
    logging ``No handler registered for request type <type>`` (with ``Available handlers: [...]``) or ``Handler for
    <type> expects N arguments, but got M`` / ``… argument N expects type …`` / ``… expects return type …``, every such
    message the catalog holds.

    Why it matters: in multiprocess mode vLLM's LMCache connector sends each lookup, store and retrieve to the
    server as a typed request, and the server runs the handler its modules registered for that type. A type it has
    no handler for, or a call whose arguments differ, is refused: every such request fails (a CacheBlend lookup, a
    store), and the client waits or goes on without the cache.

    Causes weighed: ``lmcache-mp-protocol-mismatch`` (the finding names the rejected types and, when the server
    listed its handlers, those it serves under the same name: ``CB_LOOKUP_PRE_COMPUTED`` asked, ``…_V2`` served).

    Fix: run one LMCache version in the vLLM image and in the server, and start the server with the modules the
    connector uses.

    References: LMCache ``v1/multiprocess/mq.py`` (0.4.x-0.5.2), ``transport/zmq_impl/mq.py`` (0.5.3+); issue #4267.
    """

    code = "KV021"
    name = "lmcache-mp-protocol-mismatch"
    title = "LMCache's multiprocess server rejected its client's requests: they speak different protocols"
    severity = "error"
    family = "KV"
    cause_ids = ("lmcache-mp-protocol-mismatch",)
    levels = frozenset({"ERROR", "CRITICAL"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.asked: Counter[str] = Counter()  # request types refused, by the message that refused them
        self.served: set[str] = set()  # the handlers the server listed
        self.first: list[Event] = []
        self.lines = 0
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id != CATALOG_EVENT or (entry := entry_of(ev)) is None or not rejection(entry):
            return
        self.lines += 1
        if entry.fmt not in self.claims:
            self.claims = (*self.claims, entry.fmt)
        types = _TYPE.findall(ev.rec.msg)
        if entry.fmt.startswith("Available handlers: "):
            if len(self.served) < MAX_SERVED:
                self.served.update(types[:MAX_SERVED])
            return
        kind = types[0] if types else ev.rec.msg.strip()[:120]
        if kind in self.asked or len(self.asked) < 12:
            self.asked[kind] += 1
        if len(self.first) < 3:
            self.first.append(ev)

    def _near_misses(self) -> list[str]:
        """Served handlers named as a refused type plus a suffix (``X`` asked, ``X_V2`` served): a newer protocol."""
        return sorted(s for s in self.served for a in self.asked if s != a and s.startswith(a))[:4]

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.asked:
            return []
        refused = ", ".join(f"{t} ×{n}" for t, n in self.asked.most_common(4))
        near = self._near_misses()
        served = (f" The server serves {', '.join(near)} instead: the same request in another version of the "
                  "protocol." if near else (f" The server listed {len(self.served)} handlers, none of them that type."
                                            if self.served else ""))
        cause = Cause("lmcache-mp-protocol-mismatch", 0.85 if near else 0.75, for_=[f"refused: {refused}"],
                      against=[] if near else ["a handler's module the server was not started with refuses the same "
                                                "way as a version skew: the server's start-up lines say which"],
                      **fix_and_confirm("lmcache-mp-protocol-mismatch"))
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=(f"LMCache's multiprocess server refused {sum(self.asked.values())} request(s) of its client "
                     f"({refused}): it has no handler for them, or its handler takes other arguments.{served} Every "
                     "such request fails."),
            count=self.lines, evidence=[evidence_of(e, 400) for e in self.first], causes=[cause],
            identity=f"{self.code}|{'+'.join(sorted(self.asked))}", first_seen=rec_time(self.first[0].rec),
            headline=f"the lmcache server refused {refused}" + (f"; it serves {near[0]}" if near else ""),
            measurements={"refused": dict(self.asked.most_common(12)), "served_instead": near,
                          "handlers_listed": len(self.served)},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
