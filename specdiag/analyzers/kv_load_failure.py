"""KV003 — vLLM had to recover from, or fail requests because of, KV load failures; KV015 — the NIXL
connector's handshake with a remote instance failed."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


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
                       evidence=[evidence_of(first, None)],
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


#: the message of the exception a failed NIXL handshake raised when the remote agent is another engine's
_ENGINE_MISMATCH = "engine ID mismatch"


@register
class NixlHandshakeFailed(Rule):
    """The NIXL connector's handshake with a remote (prefill) instance failed: its KV was not transferred.

    Detects: vLLM's ``Handshake with <engine> failed`` (``nixl_connector.py``, logged with the exception),
    ``Handshake failed for request <id>, marking blocks as invalid`` and, from 0.20, ``NIXL transfer failure:
    handshake_failed | Context: …``. The exception under the first names the reason when the excerpt holds it:
    ``Remote NIXL agent engine ID mismatch`` means the side channel reached another engine than the one the
    request's ``kv_transfer_params`` name.

    Why it matters: the decode instance cannot read the prefill instance's KV blocks. vLLM marks them invalid;
    the request is recomputed or failed (``kv_load_failure_policy``, KV003), so P/D disaggregation buys nothing
    while it lasts.

    Causes weighed: ``nixl-side-channel-mismatch`` (the side channel, ``VLLM_NIXL_SIDE_CHANNEL_HOST`` /
    ``_PORT``, points at the wrong instance or rank: several instances or DP ranks on one host share a port,
    or the host is left at its default), ``nixl-unreachable`` (the remote agent's side channel is not reachable:
    a firewall, a pod network, an instance that restarted).

    Fix: give every prefill instance (and each DP rank) its own reachable ``VLLM_NIXL_SIDE_CHANNEL_HOST`` and
    port, and make the proxy pass the prefill's ``kv_transfer_params`` unchanged; check the port from the decode
    host.

    References: vLLM ``distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` (0.9.2–0.19: :534–:1156),
    ``…/nixl/worker.py`` (0.20+: :573–:690); vLLM issue #27083.
    """

    code = "KV015"
    name = "nixl-handshake-failed"
    title = "The NIXL connector's handshake with a remote instance failed: its KV was not transferred"
    severity = "error"
    family = "KV"
    cause_ids = ("nixl-side-channel-mismatch", "nixl-unreachable")
    events = frozenset({"V_NIXL_HANDSHAKE", "V_NIXL_HANDSHAKE_REQ", "V_NIXL_FAILURE", "V_NIXL_ENGINE_MISMATCH"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.lines: list[Event] = []
        self.count = 0
        self.requests: set[str] = set()
        self.mismatch: Event | None = None

    def observe(self, ev: Event) -> None:
        if ev.id == "V_NIXL_FAILURE" and not (ev.f.get("kind") or "").startswith("handshake"):
            return  # a transfer's failure: KV020's
        if ev.id == "V_NIXL_ENGINE_MISMATCH":
            self.mismatch = self.mismatch or ev
            return
        self.count += 1
        if len(self.lines) < 5:
            self.lines.append(ev)
        if ev.id == "V_NIXL_HANDSHAKE_REQ" and len(self.requests) < 1000:
            self.requests.add(ev.f.get("req_id") or "")
        if self.mismatch is None and _ENGINE_MISMATCH in ev.rec.text:
            self.mismatch = ev

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        shown = sorted({*self.lines[:3], *([self.mismatch] if self.mismatch is not None else [])},
                       key=lambda e: (e.rec.path, e.rec.line))
        if not shown:
            return []
        count = max(self.count, 1)  # an 'engine ID mismatch' alone is the exception of a failed handshake
        causes = self._causes()
        reqs = f" for {len(self.requests)} request(s)" if self.requests else ""
        reason = (" The exception says the remote agent is another engine ('engine ID mismatch')."
                  if self.mismatch is not None else " The exception that says why is not in the input.")
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=(f"{count} NIXL handshake failure line(s){reqs}: the decode side could not reach the remote "
                     f"instance's KV, so vLLM marked those blocks invalid and recomputed or failed the requests "
                     f"(kv_load_failure_policy; KV003 when its line is in the input).{reason}"),
            count=count, evidence=[evidence_of(e, 400) for e in shown],
            causes=causes, identity=f"{self.code}|{causes[0].id}", first_seen=rec_time(shown[0].rec),
            measurements={"handshake_failures": count, "requests": len(self.requests),
                          "engine_id_mismatch": self.mismatch is not None},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _causes(self) -> list[Cause]:
        wrong, unreachable = fix_and_confirm("nixl-side-channel-mismatch"), fix_and_confirm("nixl-unreachable")
        if self.mismatch is not None:
            return [Cause("nixl-side-channel-mismatch", 0.8, for_=["'Remote NIXL agent engine ID mismatch': the side "
                                                                    "channel answered for another engine"], **wrong),
                    Cause("nixl-unreachable", 0.05, against=["the remote side answered (with the wrong engine)"],
                          **unreachable)]
        return [Cause("nixl-unreachable", 0.4, for_=["the handshake failed"],
                      against=["the reason is not in the input: collect the exception under 'Handshake with … failed'"],
                      **unreachable),
                Cause("nixl-side-channel-mismatch", 0.35, for_=["the handshake failed"],
                      against=["no 'engine ID mismatch' in the input"], **wrong)]


@register
class PdKvNotRead(Rule):
    """A prefill instance released KV blocks that no decode instance read.

    Detects: the NIXL connector's ``Releasing expired KV blocks for request <id> which were retrieved by 0
    decode worker(s) within <N> seconds`` (0.10.1–0.21; from 0.22 ``… by 0 remote worker(s) before lease
    expired.``), printed by the prefill instance (the KV producer) when the blocks it kept for a request were
    not read by its decode side before ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT`` (120 s by default) or their lease.
    A line with a reader count above zero (some of several decode workers read) is counted but not a finding.

    Why it matters: the prefill work for those requests was wasted, and their decode side either never ran
    them or recomputed the prompt. Disaggregation bought nothing for them; when it happens to every request, the
    decode side is not reading from this instance at all.

    Causes weighed: ``pd-kv-not-read`` (the decode instance never got the request, could not reach this one,
    or queued it past the timeout: the prefill log cannot tell which, the decode log can).

    Fix: read the decode instance's log for the request ids named here.

    References: vLLM ``distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` (0.10.2 :1048, 0.19 :2327),
    ``…/nixl/worker.py`` (0.20–0.23), ``…/nixl/base_worker.py`` (0.24+); vLLM issue #25562.
    """

    code = "KV018"
    name = "pd-kv-not-read"
    title = "The prefill instance released KV blocks no decode instance read"
    severity = "warning"
    family = "KV"
    cause_ids = ("pd-kv-not-read",)
    events = frozenset({"V_NIXL_EXPIRED"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.unread: list[Event] = []  # the first lines of requests nobody read (bounded)
        self.requests = 0
        self.partly = 0
        self.seconds: int | None = None

    def observe(self, ev: Event) -> None:
        if ev.f.get("readers"):
            self.partly += 1
            return
        self.requests += 1
        self.seconds = self.seconds or ev.f.get("seconds")
        if len(self.unread) < 5:
            self.unread.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.unread:
            return []
        ids = [e.f.get("req_id") or "" for e in self.unread[:3]]
        waited = f"within {self.seconds} s" if self.seconds else "before their lease expired"
        cause = Cause("pd-kv-not-read", 0.7, for_=[f"{self.requests} request(s) whose KV no decode worker read {waited}"],
                      against=["the decode instance's log, which says why, is not in the input"],
                      **fix_and_confirm("pd-kv-not-read"))
        partly = f"; {self.partly} more were read by some of their decode workers only" if self.partly else ""
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"The prefill instance released the KV blocks of {self.requests} request(s) that no decode worker "
                     f"read {waited} (first: {', '.join(ids)}){partly}: their prefill was wasted, and their decode "
                     "side never ran them or recomputed the prompt."),
            count=self.requests, evidence=[evidence_of(e, 400) for e in self.unread[:3]],
            causes=[cause], identity=f"{self.code}|pd-kv-not-read", first_seen=rec_time(self.unread[0].rec),
            measurements={"unread_requests": self.requests, "partly_read": self.partly, "timeout_s": self.seconds,
                          "request_ids": ids},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
