"""SRV010 — a burst of aborted requests: clients (or a proxy) dropped many requests at once."""

from __future__ import annotations

from collections import deque

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


class _Burst:
    """The densest run of aborts so far: how many within ``window`` seconds (or in a row, where lines have no time)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.times: deque[float] = deque()
        self.run = 0  # aborts in a row without a time
        self.best = 0
        self.best_first: Event | None = None
        self.best_last: Event | None = None
        self.best_ids: list[str] = []
        self._ids: deque[tuple[float, str, Event]] = deque()

    def add(self, t: float | None, ids: list[str], ev: Event) -> None:
        if t is None:
            self.run += len(ids)
            self._ids.extend((0.0, i, ev) for i in ids)
            while len(self._ids) > self.run:
                self._ids.popleft()
            size = self.run
        else:
            self.run = 0
            self._ids.extend((t, i, ev) for i in ids)
            while self._ids and t - self._ids[0][0] > self.window:
                self._ids.popleft()
            size = len(self._ids)
        if size > self.best:
            self.best, self.best_first, self.best_last = size, self._ids[0][2], ev
            self.best_ids = [i for _, i, _ in list(self._ids)[:64]]
        while len(self._ids) > 4096:  # a flood inside the window: the count stays, the ids kept are bounded
            self._ids.popleft()


def one_request(ids: list[str]) -> str | None:
    """The request whose n completions these ids are (``cmpl-…-0`` … ``cmpl-…-8``: one request with n=9), or None."""
    bases = {i.rsplit("-", 1)[0] for i in ids if i.rsplit("-", 1)[-1].isdigit()}
    return next(iter(bases)) if len(bases) == 1 and len(ids) > 1 else None


@register
class ClientAborts(Rule):
    """A burst of aborted requests: clients, or a proxy in front of the server, dropped many requests at once.

    Detects: the API server's ``Aborted request <id>.`` (V0's AsyncLLMEngine and MQLLMEngine; V1's AsyncLLM with
    request logging, ``Aborted request(s) a, b.``), ``min_burst`` or more (5) within ``window_s`` (2 s), or in a row
    where the lines carry no time.

    Why it matters: vLLM aborts a request when its client goes away (a closed connection, a cancelled stream). One
    abort is a user who gave up; many at the same moment with no engine error around them are one timeout firing for
    requests that started together: the client's (the OpenAI client waits 600 s by default), a proxy's read timeout
    (nginx: 60 s), a benchmark's or a gateway's. From the server's side the requests just stop; the client sees a
    timeout. The ids of one request with ``n`` completions (``cmpl-…-0`` … ``-8``) abort together too.

    Causes weighed: ``client-timeout`` (the one cause this rule states; an engine that stalled makes clients time out
    too: SRV002/SRV003 and the stats lines say whether it was generating).

    Fix: raise the client's or proxy's timeout to the longest request (max_tokens at the generation rate the stats
    lines show), or shorten the requests.

    References: vLLM ``engine/async_llm_engine.py`` (``abort``), ``v1/engine/async_llm.py`` (``abort``),
    ``entrypoints/openai`` (a disconnected client's request is aborted); vLLM #2484; tt-inference-server #350.
    """

    code = "SRV010"
    name = "requests-aborted-burst"
    title = "A burst of aborted requests: clients or a proxy dropped them at once"
    severity = "warning"
    family = "SRV"
    cause_ids = ("client-timeout",)
    events = frozenset({"V_ABORTED"})
    defaults = {"min_burst": 5, "window_s": 2.0}

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.total = 0
        self.burst: _Burst | None = None  # made on the first abort: most logs print none

    def observe(self, ev: Event) -> None:
        ids = [i.strip() for i in (ev.f.get("ids") or "").split(",") if i.strip()][:256]
        if not ids:
            return
        if self.burst is None:
            self.burst = _Burst(float(self.options["window_s"]))
        self.total += len(ids)
        self.burst.add(rec_time(ev.rec), ids, ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        b = self.burst
        if b is None or b.best < int(self.options["min_burst"]) or b.best_first is None or b.best_last is None:
            return []
        first, last = b.best_first.rec, b.best_last.rec
        timed = rec_time(first) is not None
        span = f"within {self.options['window_s']:g} s" if timed else "in a row (the lines carry no time)"
        request = one_request(b.best_ids)
        board = CauseBoard()
        board.add("client-timeout", 0.7, **fix_and_confirm("client-timeout"))
        board.support("client-timeout", 1.5, f"{b.best} aborts {span}, lines {first.line}–{last.line}")
        causes = board.ranked(ceiling=0.8)
        summary = (f"{b.best} request(s) were aborted {span} ({first.path}:{first.line}–{last.line}; {self.total} "
                   "aborted in the log): their clients, or a proxy, closed them at once. Many at one moment are one "
                   "timeout firing for requests that started together, not users giving up one by one.")
        if request:
            summary += (f" All are the completions of one request ({request}, n={len(b.best_ids)}): one client "
                        "request timed out.")
        summary += (" These lines hold no engine error; whether the engine was still generating, its stats lines and "
                    "SRV002/SRV003 say.")
        return [Finding(
            rule=self.code, severity=self.severity, title=self.title, summary=summary, count=b.best,
            evidence=[evidence_of(b.best_first, 300), evidence_of(b.best_last, 300)], causes=causes,
            identity=f"{self.code}|burst", first_seen=rec_time(first),
            headline=f"{b.best} requests aborted {span}" + (f" (one request, n={len(b.best_ids)})" if request else ""),
            measurements={"burst": b.best, "aborted": self.total, "one_request": request},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]
