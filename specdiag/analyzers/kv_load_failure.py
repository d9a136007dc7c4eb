"""KV003 — vLLM had to recover from, or fail requests because of, KV load failures."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Evidence, Finding
from specdiag.observe import RunState


@register
class KvLoadFailureOutcome(Rule):
    """vLLM recovered from, or failed requests because of, KV-connector load failures.

    Detects: vLLM's scheduler lines ``Recovered from KV load failure: N request(s) rescheduled`` (policy
    ``recompute``) and ``Failing N request(s) due to KV load failure (failure_policy=fail …)``.

    Why it matters: this is the client-visible impact of a KV connector losing data. Under ``fail`` (the
    default from vLLM 0.20) the requests end with an error; under ``recompute`` they succeed at the cost of
    recomputing the affected tokens.

    Causes weighed: the connector's own shortfall (see KV001 for LMCache's reasons); ``policy-fail`` when
    requests were failed that a ``recompute`` policy would have saved.

    Fix: find the connector-side cause (KV001); to keep serving meanwhile set
    ``kv_load_failure_policy: "recompute"`` in ``--kv-transfer-config``.

    References: vLLM ``v1/core/sched/scheduler.py`` (0.32.0 lines 3417/3426), ``KVTransferConfig``.
    """

    code = "KV003"
    name = "kv-load-failure-outcome"
    title = "Requests were recomputed or failed because KV blocks could not be loaded"
    severity = "warning"
    severity_note = ("error when requests failed (kv_load_failure_policy=fail), info when they were recomputed "
                     "(policy recompute)")
    family = "KV"
    cause_ids = ("connector-load-failure", "policy-fail")
    events = frozenset({"V1", "V2"})
    #: under the fail policy the API server logs each request it failed (vLLM 0.13.0+: entrypoints/openai/
    #: serving_engine.py, then openai/engine/serving.py from 0.15.0, generate/base/serving.py from 0.25.0)
    claims = ("failed with an internal error during generation",)

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.recovered = self.failed = 0
        self.rec_tokens = self.fail_tokens = 0
        self.first_v1: Event | None = None
        self.first_v2: Event | None = None

    def observe(self, ev: Event) -> None:
        if ev.id == "V1":
            self.recovered += ev.f["reqs"]
            self.rec_tokens += ev.f["tokens"]
            self.first_v1 = self.first_v1 or ev
        else:
            self.failed += ev.f["reqs"]
            self.fail_tokens += ev.f["tokens"]
            self.first_v2 = self.first_v2 or ev

    def _finding(self, severity: str, title: str, summary: str, count: int, first: Event,
                 measurements: dict, causes: list[Cause], policy: str) -> Finding:
        # identity is the outcome kind, not the count: the same incident keeps its fingerprint as it grows
        return Finding(rule=self.code, severity=severity, title=title, summary=summary, count=count,
                       evidence=[Evidence(first.rec.path, first.rec.line, first.rec.display())],
                       measurements={**measurements, "policy": policy}, causes=causes, identity=policy, priority=-1)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        out = []
        if self.failed:
            out.append(self._finding(
                "error", "Requests failed because KV blocks could not be loaded",
                f"vLLM failed {self.failed} request(s) ({self.fail_tokens} tokens affected) under "
                "kv_load_failure_policy=fail: clients received errors.",
                self.failed, self.first_v2, {"failed_requests": self.failed, "tokens_affected": self.fail_tokens},
                [_connector_cause(),
                 Cause("policy-fail", 0.15, for_=["under policy recompute these requests would have succeeded"],
                       **fix_and_confirm("policy-fail"))],
                "fail"))
        if self.recovered:
            out.append(self._finding(
                "info", "Requests were recomputed after KV load failures",
                f"vLLM rescheduled {self.recovered} request(s) and recomputed {self.rec_tokens} tokens "
                "(policy recompute): no client error, extra prefill cost.",
                self.recovered, self.first_v1, {"recovered_requests": self.recovered, "tokens_recomputed": self.rec_tokens},
                [_connector_cause()], "recompute"))
        return out


def _connector_cause() -> Cause:
    return Cause("connector-load-failure", 0.8, for_=["the KV connector reported blocks it could not load"],
                 **fix_and_confirm("connector-load-failure"))
