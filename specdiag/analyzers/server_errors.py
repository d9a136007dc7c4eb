"""SRV009 — the API server answered requests with HTTP 5xx: the server failed them, not the clients."""

from __future__ import annotations

from collections import Counter

from specdiag.analyzers.base import NOT_YET, Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: routes and statuses counted (a flood of distinct paths must not grow them without bound)
MAX_KEYS = 32


@register
class ServerErrors(Rule):
    """The API server answered requests with HTTP 5xx: the server failed them.

    Detects: uvicorn's access lines with a 5xx status (``INFO:     127.0.0.1:58634 - "POST /v1/completions HTTP/1.1"
    500 Internal Server Error``), three or more (``min_responses``): one or two are a request's own failure, which
    the rule that reads that request explains (KV003, SRV005) or LOG001 lists.

    Why it matters: a 4xx is the client's request refused (too long, invalid); a 5xx is the server failing a request
    it accepted: an exception in the API server, or an engine that died (every request after it then gets 500).
    The access line never says why: the engine's and API server's lines just before the first one do.

    Causes weighed: ``server-failed-requests``, the one cause this rule states; other rules say why when the log
    holds the lines (SRV001 an engine death, SRV005 a grammar that ended requests, LOG001 an exception no rule reads).

    Fix: read the lines before the first 5xx; a death there (SRV001) is the cause of all the 500s after it.

    References: uvicorn's access log; vLLM ``entrypoints/openai/api_server.py`` (exception handlers: an
    ``EngineDeadError`` or any unhandled exception is a 500).
    """

    code = "SRV009"
    name = "server-errors"
    title = "The API server answered requests with HTTP 5xx"
    severity = "error"
    #: fewer 5xx answers than this are left to the rules that explain their request (KV003's failed load, SRV005's
    #: ended grammar): one or two 500s are a request's failure, three or more a server failing requests
    defaults = {"min_responses": 3}
    family = "SRV"
    cause_ids = ("server-failed-requests",)
    events = frozenset({"U5XX"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.lines = 0
        self.first: Event | None = None
        self.last: Event | None = None
        self.routes: Counter[str] = NOT_YET

    def observe(self, ev: Event) -> None:
        f = ev.f
        key = f"{f.get('method') or '?'} {(f.get('path') or '?').split('?', 1)[0][:80]} → {f.get('status') or '5xx'}"
        if self.first is None:
            self.first, self.routes = ev, Counter()
        self.last = ev
        self.lines += 1
        if key in self.routes or len(self.routes) < MAX_KEYS:
            self.routes[key] += 1

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.first is None or self.last is None or self.lines < int(self.options["min_responses"]):
            return []
        first, last = self.first.rec, self.last.rec
        routes = ", ".join(f"{k} ×{n}" for k, n in self.routes.most_common(4))
        span = (f"from {first.path}:{first.line} to {last.path}:{last.line}" if self.lines > 1
                else f"at {first.path}:{first.line}")
        cause = Cause("server-failed-requests", 0.8, for_=[f"{self.lines} access line(s) with a 5xx status ({routes})"],
                      against=["an access line does not say why: the lines before the first one do"],
                      **fix_and_confirm("server-failed-requests"))
        return [Finding(
            rule=self.code, severity=self.severity, title=self.title,
            summary=(f"The API server answered {self.lines} request(s) with HTTP 5xx {span} ({routes}): it failed "
                     "requests it had accepted. The access lines do not say why; the lines before the first one do."),
            count=self.lines, evidence=[evidence_of(self.first, 300)] + ([evidence_of(self.last, 300)]
                                                                        if self.lines > 1 else []),
            causes=[cause], identity=f"{self.code}|5xx", first_seen=rec_time(first),
            headline=f"{self.lines} response(s) 5xx: {routes}",
            measurements={"responses_5xx": self.lines, "by_route": dict(self.routes.most_common(8))},
            next_steps=[cause.fix, f"the first 5xx is at {first.path}:{first.line}: read the lines before it"],
        )]
