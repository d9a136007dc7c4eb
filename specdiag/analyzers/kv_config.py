"""KV017 — LMCache ignored configuration keys it does not know."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

MAX_KEYS = 50


@register
class UnknownConfigKeys(Rule):
    """LMCache ignored configuration keys it does not know.

    Detects: LMCache's ``Unknown configuration key: KEY (source: …)`` and ``Unknown config key: KEY,
    ignoring`` (``v1/config_base.py``), once per key.

    Why it matters: the key is dropped, so what it was meant to set keeps its default. A misspelt size or
    a backend list of another release quietly changes what is cached and where (``pd_backends`` under a
    release that does not know it: the P/D backends are not the ones configured).

    Causes weighed: ``unknown-config-key``.

    Fix: check the key against the configuration reference of the LMCache release in use; fix it, move it, or
    use a release that knows it.

    References: LMCache ``v1/config_base.py`` (0.5.x :187/:212, the older form :602); issue #2854.
    """

    code = "KV017"
    name = "lmcache-unknown-config-key"
    title = "LMCache ignored configuration keys it does not know"
    severity = "warning"
    family = "KV"
    cause_ids = ("unknown-config-key",)
    events = frozenset({"C4", "C4b"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.keys: dict[str, Event] = {}
        self.count = 0

    def observe(self, ev: Event) -> None:
        self.count += 1
        key = (ev.f.get("key") or "").strip()
        if key and len(self.keys) < MAX_KEYS:
            self.keys.setdefault(key, ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.keys:
            return []
        first = next(iter(self.keys.values()))
        source = (first.f.get("source") or "").strip()
        names = ", ".join(self.keys)
        cause = Cause("unknown-config-key", 0.85, for_=[f"LMCache says it does not know {names}"],
                      **fix_and_confirm("unknown-config-key"))
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"LMCache ignored {names}, {len(self.keys)} configuration key(s) it does not know"
                     f"{f' (source: {source})' if source else ''}, in {self.count} warning line(s); what they were "
                     "meant to set keeps its default."),
            count=self.count, evidence=[evidence_of(e, 400)
                                        for e in list(self.keys.values())[:5]],
            causes=[cause], identity=f"{self.code}|{names[:80]}", first_seen=rec_time(first.rec),
            measurements={"unknown_keys": list(self.keys), "source": source or None, "lines": self.count},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
