"""SRV005 — structured output: the grammar refused tokens the model produced, or could not be compiled."""

from __future__ import annotations

import re
from collections import Counter

from specdiag.analyzers.base import WARNING_OR_WORSE, Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.sd_common import method_of
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of
from specdiag.findings import Cause, CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: the catalog's structured-output messages this rule reads, by what each says (literal starts of their formats)
KINDS = (
    ("Failed to advance FSM for request ", "fsm"),  # v1/structured_output/backend_xgrammar.py 0.8.1-0.33
    ("Unexpected: grammar rejected tokens ", "rejected"),  # v1/core/sched/scheduler.py 0.14+
    ("Unexpected: grammar terminated or rejected draft token ", "draft"),  # v1/structured_output/__init__.py 0.30-0.33
    ("Failed to compile grammar for request ", "compile"),  # v1/structured_output/__init__.py 0.26+
    ("LLMatcher error: ", "matcher"), ("Error in LLMatcher: ", "matcher"),  # the guidance backend
)
#: the API server's line for a request the engine ended with an error (the client's 500); counted only for a
#: request id a grammar line named
INTERNAL = "failed with an internal error during generation"
#: the request id and the token(s) in the messages above
_FSM = lazy(r"for request (\S{1,200}) for tokens (\d{1,12})")
_REJECTED = lazy(r"rejected tokens \[?([\d, ]{1,400})\]? for request (\S{1,200}?)\.?(?: Terminating|$)")
_DRAFT = lazy(r"draft token (\d{1,12}) for request (\S{1,200}) during")
_REQUEST = lazy(r"Request (\S{1,200}) failed with an internal error")
#: request ids kept (a flood of failing requests must not grow the set without bound), distinct tokens counted
MAX_REQUESTS, MAX_TOKENS = 4096, 64


def kind_of(entry) -> str | None:
    """What a catalogued structured-output message says, or None for any other message."""
    if entry.family != "structured-output" or not entry.fmt:
        return None
    return next((k for lit, k in KINDS if entry.fmt.startswith(lit)), None)


class _Seen:
    """What the grammar lines said: counts by kind, the requests and tokens they named, the first lines."""

    def __init__(self) -> None:
        self.lines: Counter[str] = Counter()
        self.requests: set[str] = set()
        self.tokens: Counter[str] = Counter()
        self.terminating = 0  # the scheduler ended the request (0.20+: 'Terminating request.')
        self.failed_requests = 0  # the API server's internal error for a request a grammar line named
        self.first: list[Event] = []

    def add(self, kind: str, ev: Event) -> None:
        msg = ev.rec.msg
        self.lines[kind] += 1
        request, tokens = _ids(kind, msg)
        if request and (request in self.requests or len(self.requests) < MAX_REQUESTS):
            self.requests.add(request)
        for t in tokens:
            if t in self.tokens or len(self.tokens) < MAX_TOKENS:
                self.tokens[t] += 1
        if kind == "rejected" and "Terminating request" in msg:
            self.terminating += 1
        if len(self.first) < 3 or kind in ("rejected", "compile") and len(self.first) < 5:
            self.first.append(ev)


def _ids(kind: str, msg: str) -> tuple[str | None, list[str]]:
    """The request id and the token ids one grammar line names."""
    if kind == "fsm" and (m := _FSM.search(msg)):
        return m.group(1), [m.group(2)]
    if kind == "rejected" and (m := _REJECTED.search(msg)):
        return m.group(2), [t for t in re.split(r"[, ]+", m.group(1)) if t][:16]
    if kind == "draft" and (m := _DRAFT.search(msg)):
        return m.group(2), [m.group(1)]
    if kind == "compile":
        return msg.rsplit(" ", 1)[-1].strip() or None, []
    return None, []


@register
class StructuredOutputRejected(Rule):
    """Structured output: the grammar refused tokens the model produced, or could not be compiled for a request.

    Detects: every catalogued structured-output message that says so: the grammar backend's ``Failed to advance
    FSM for request R for tokens T`` (xgrammar, 0.8.1-0.33), the scheduler's ``Unexpected: grammar rejected tokens
    [...] for request R`` (a warning in 0.14-0.19; ``… Terminating request.`` at ERROR from 0.20), ``Unexpected:
    grammar terminated or rejected draft token T for request R during bitmask fill`` (0.30-0.33), ``Failed to
    compile grammar for request R`` (0.26+) and guidance's ``LLMatcher error``; and the API server's ``Request R
    failed with an internal error during generation`` for a request those lines named.

    Why it matters: with structured output (a JSON schema, ``response_format``, a strict tool call) vLLM masks the
    logits of every step with the grammar, then advances the grammar by the tokens sampled. A token the grammar
    refuses means the mask and the tokens went out of step: the output may break the schema, and from 0.20 the
    scheduler ends the request with an error (the client's 500). A grammar that cannot be compiled fails its
    request (or, in some releases, the engine: SRV001).

    Causes weighed: ``so-spec-decode-drafts`` (drafted tokens accepted past the grammar: speculative decoding is
    configured, or the draft-token message is there), ``so-async-scheduling`` (``--async-scheduling``: the mask of a
    step computed before the previous step's tokens were accepted), ``so-reasoning-boundary`` (a reasoning parser:
    the grammar starts where the reasoning ends, and the same token refused again and again is that boundary),
    ``so-grammar-desync`` (none of these in the log), ``so-grammar-compile`` (the compile failures).

    Fix: a vLLM release with the fix for the combination in use, or serve structured-output requests without it
    (no speculative decoding, no async scheduling); a schema the backend compiles.

    References: vLLM ``v1/structured_output/backend_xgrammar.py`` (``accept_tokens``), ``v1/core/sched/scheduler.py``
    (0.32.0 ``update_from_output``), ``v1/structured_output/__init__.py``; issues #22483, #29379, #44006, #46118,
    #53777, PR #18780.
    """

    code = "SRV005"
    name = "structured-output-rejected"
    title = "Structured output: the grammar refused the model's tokens or could not be compiled"
    severity = "warning"
    severity_note = "error when the scheduler ended requests for it ('Terminating request') or grammars failed to compile"
    family = "SRV"
    cause_ids = ("so-spec-decode-drafts", "so-async-scheduling", "so-reasoning-boundary", "so-grammar-desync",
                 "so-grammar-compile")
    levels = WARNING_OR_WORSE

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.seen: _Seen | None = None  # made on the first grammar line: most deployments never print one
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id != CATALOG_EVENT or (entry := entry_of(ev)) is None:
            return
        kind = kind_of(entry)
        if kind is None:
            if entry.fmt and INTERNAL in entry.fmt and self.seen is not None:
                self._internal_error(entry, ev, self.seen)
            return
        self._claim(entry.fmt)
        if self.seen is None:
            self.seen = _Seen()
        self.seen.add(kind, ev)

    def _internal_error(self, entry, ev: Event, seen: _Seen) -> None:
        m = _REQUEST.search(ev.rec.msg)
        # the engine's id is the API server's with a suffix of its own (0.22+: ``chatcmpl-…-92abbc5c``)
        if m and any(r.startswith(m.group(1)) for r in seen.requests):
            seen.failed_requests += 1
            self._claim(entry.fmt)

    def _claim(self, fmt: str) -> None:
        if fmt not in self.claims and len(self.claims) < 16:
            self.claims = (*self.claims, fmt)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        s = self.seen
        if s is None:
            return []
        rejected = s.lines["fsm"] + s.lines["rejected"] + s.lines["draft"] + s.lines["matcher"]
        causes = self._causes(ctx, rejected)
        failed = s.terminating or s.failed_requests or s.lines["compile"]
        return [Finding(
            rule=self.code, severity="error" if failed else "warning", title=self.title,
            summary=self._summary(rejected), count=sum(s.lines.values()),
            evidence=[evidence_of(e, 400) for e in s.first], causes=causes,
            identity=f"{self.code}|{'+'.join(sorted(s.lines))}", first_seen=rec_time(s.first[0].rec),
            headline=self._headline(rejected),
            measurements={"lines": dict(s.lines), "requests": len(s.requests), "requests_capped": len(s.requests) >= MAX_REQUESTS,
                          "terminated": s.terminating, "internal_errors": s.failed_requests,
                          "tokens_refused": dict(s.tokens.most_common(8))},
            next_steps=self._next_steps(ctx, causes, rejected),
        )]

    @staticmethod
    def _next_steps(ctx: Context, causes: list[Cause], rejected: int) -> list[str]:
        """The lead's fix and experiment; first what to collect when the log cannot tell the known causes apart."""
        steps = [causes[0].fix, f"Confirm: {causes[0].confirm_with}"]
        if rejected and not ctx.vllm_args_seen and causes[0].id != "so-spec-decode-drafts":
            steps.insert(0, "Collect the server's start-up lines (its 'non-default args' line): speculative decoding, "
                            "--async-scheduling and a reasoning parser each make the grammar refuse tokens, and this "
                            "log does not show which of them are on")
        return steps

    def _headline(self, rejected: int) -> str:
        s = self.seen
        parts = [f"the grammar refused tokens {rejected}× in {len(s.requests)} request(s)"] if rejected else []
        if s.lines["compile"]:
            parts.append(f"{s.lines['compile']} grammar(s) failed to compile")
        return "; ".join(parts)

    def _summary(self, rejected: int) -> str:
        s = self.seen
        out = []
        if rejected:
            top = ", ".join(f"{t} ×{n}" for t, n in s.tokens.most_common(3))
            out.append(f"The structured-output grammar refused tokens the model produced: {rejected} line(s) about "
                       f"{len(s.requests)} request(s){' (tokens ' + top + ')' if top else ''}. The logits mask and the "
                       "tokens went out of step, so that output may break its schema.")
            if s.terminating:
                out.append(f"The scheduler ended {s.terminating} request(s) for it ('Terminating request', 0.20+): "
                           "their clients got an error" + (f" ({s.failed_requests} 'internal error' line(s) of the API "
                                                           "server for them)" if s.failed_requests else "") + ".")
            elif s.lines["rejected"]:
                out.append("The scheduler warned and let the request(s) go on (0.14-0.19 print no 'Terminating request').")
        if s.lines["compile"]:
            out.append(f"{s.lines['compile']} request(s) had a grammar the backend could not compile: each failed.")
        return " ".join(out)

    def _causes(self, ctx: Context, rejected: int) -> list[Cause]:
        s = self.seen
        b = CauseBoard()
        if rejected:
            for cid, prior in (("so-spec-decode-drafts", 0.2), ("so-async-scheduling", 0.2),
                               ("so-reasoning-boundary", 0.2), ("so-grammar-desync", 0.3)):
                b.add(cid, prior, **fix_and_confirm(cid))
            self._weigh(b, ctx)
        if s.lines["compile"]:
            b.add("so-grammar-compile", 0.6 if not rejected else 0.3, **fix_and_confirm("so-grammar-compile"))
            b.support("so-grammar-compile", 2, f"'Failed to compile grammar for request' ×{s.lines['compile']}")
        return b.ranked(ceiling=0.8)

    def _weigh(self, b: CauseBoard, ctx: Context) -> None:
        """What the log shows of the serving options each cause needs."""
        s, opts = self.seen, ctx.serving_options
        method = method_of(ctx)
        if s.lines["draft"]:
            b.support("so-spec-decode-drafts", 3, f"'rejected draft token … during bitmask fill' ×{s.lines['draft']}")
        elif method or ctx.spec_intervals:
            b.support("so-spec-decode-drafts", 2, f"speculative decoding is on ({method or 'SpecDecoding metrics'})")
        else:
            b.absent("so-spec-decode-drafts", 2, "no speculative_config among the server's non-default args",
                     observable=ctx.vllm_args_seen)
        if opts.get("async_scheduling") is True:
            b.support("so-async-scheduling", 2, "async_scheduling=True among the server's non-default args")
        else:
            b.absent("so-async-scheduling", 1.5, "async_scheduling is not among the server's non-default args",
                     observable=ctx.vllm_args_seen)
        parser = opts.get("reasoning_parser")
        token, n = (s.tokens.most_common(1) or [(None, 0)])[0]
        if parser:
            b.support("so-reasoning-boundary", 2 if n >= 3 and len(s.requests) > 1 else 1,
                      f"reasoning_parser={parser}" + (f"; token {token} refused {n}× across requests" if n >= 3 else ""))
        else:
            b.absent("so-reasoning-boundary", 1.5, "no reasoning_parser among the server's non-default args",
                     observable=ctx.vllm_args_seen)
