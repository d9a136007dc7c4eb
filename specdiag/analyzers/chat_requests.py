"""SRV011 — chat requests refused while their prompt was rendered: no chat template, a tokenizer the release cannot
build or drive, a conversation the tokenizer's validator rejects."""

from __future__ import annotations

from typing import NamedTuple

from specdiag.analyzers.base import NOT_YET, WARNING_OR_WORSE, Rule, register, shape_claim
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event, line_label
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


class Kind(NamedTuple):
    """One way the rendering of a chat request fails: its cause id, the words that say it, what it is."""

    cause: str
    words: tuple[str, ...]
    said: str


#: the refusals, by the words of the exception each raises (first match wins)
KINDS = (
    # transformers 4.44+ has no default template: vLLM's chat_utils / renderers/hf.py raise it (ChatTemplateResolutionError
    # 0.11+), older transformers' apply_chat_template said the second
    Kind("no-chat-template", ("default chat template is no longer allowed", "ChatTemplateResolutionError",
                              "tokenizer.chat_template is not set"),
         "the model's tokenizer defines no chat template, and vLLM was given none"),
    # transformers_utils/tokenizer.py / tokenizers/registry.py: a --tokenizer-mode this release does not know
    Kind("tokenizer-mode-unsupported", ("No tokenizer registered for tokenizer_mode=",),
         "the --tokenizer-mode asked is not one this vLLM release registers"),
    # a keyword vLLM passes that the installed tokenizer's apply_chat_template does not take (vLLM #38560: 0.18 passes
    # reasoning_effort to mistral-common's tokenizer, transformers' tokenization_mistral_common.py refuses it)
    Kind("tokenizer-rejects-argument", ("are not supported by `MistralCommonTokenizer.apply_chat_template`",
                                        "apply_chat_template() got an unexpected keyword argument"),
         "vLLM passed the tokenizer an argument the installed tokenizer library does not take"),
    # mistral-common's request validator (its conversation rules: roles in order, tool messages after tool calls)
    # and 0.6's validation of a message's content parts (``Error in applying chat template from request: 1 validation
    # error for ValidatorIterator … 0.type Field required``: a part without its type, an older client)
    Kind("chat-request-invalid", ("Unexpected role '", "validation error for ValidatorIterator"),
         "the request's messages break the rules of their format (the order of roles, a content part's fields)"),
)
#: the start-up warm-up of chat rendering (entrypoints/openai/chat_completion/serving.py ``warmup``, 0.16-0.17): it
#: logs this at ERROR when the model has no template, and serving goes on
WARMUP_WORDS = ("Chat template warmup failed",)
MAX_FIRST = 3
#: the rows of a traceback printed under vLLM's header (events/vllm.py)
TRACEBACK_ROWS = frozenset({"V_TB_FRAME", "V_TB_CODE"})
#: refusals remembered to tell a repeat of one from the next (beyond them every refusal line counts)
MAX_SEEN = 64


def kind_of(text: str) -> Kind | None:
    """The refusal ``text`` names, or None."""
    return next((k for k in KINDS if any(w in text for w in k.words)), None)


@register
class ChatRequestRefused(Rule):
    """Chat requests refused while vLLM rendered their prompt: the client got HTTP 400, the engine never saw them.

    Detects: the exceptions vLLM's chat path logs under ``Error in preprocessing prompt inputs`` / ``Error in
    applying chat template from request`` or returns as a 400: ``As of transformers v4.44, default chat template is
    no longer allowed …`` (``ChatTemplateResolutionError`` in 0.11+), ``No tokenizer registered for
    tokenizer_mode='…'``, ``Kwargs [...] are not supported by `MistralCommonTokenizer.apply_chat_template```,
    mistral-common's ``Unexpected role 'user' after role 'tool'``; and the start-up warm-up's ``Chat template warmup
    failed``, which alone is an info: nothing was refused yet.

    Why it matters: these are no crash, though a traceback comes with each; every chat request of that kind fails the
    same way until the template, the tokenizer or the client changes. /v1/completions does not render a chat
    template and is unaffected.

    Causes weighed: ``no-chat-template`` (a base model, or a tokenizer without ``chat_template``),
    ``tokenizer-mode-unsupported`` (a ``--tokenizer-mode`` newer than the release), ``tokenizer-rejects-argument``
    (vLLM and the tokenizer library out of step), ``chat-request-invalid`` (the client's conversation).

    References: vLLM ``entrypoints/chat_utils.py`` and ``renderers/hf.py`` (``safe_apply_chat_template``),
    ``renderers/mistral.py``, ``tokenizers/registry.py``; issues #30933, #38560, #35679; agent-lightning #57.

    Fix: give the model a chat template (``--chat-template``) or serve its instruct variant; upgrade vLLM for a
    tokenizer mode or a tokenizer library it does not yet drive; correct the client's conversation.
    """

    code = "SRV011"
    name = "chat-request-refused"
    title = "Chat requests refused while their prompt was rendered"
    severity = "warning"
    family = "SRV"
    cause_ids = tuple(k.cause for k in KINDS)
    events = frozenset({"V_EXC", "E_GENERIC"})
    levels = WARNING_OR_WORSE
    #: its finding accounts for the lines it read (``claims``), not for every exception line
    explains = frozenset()

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.refused = 0
        self.warmups = 0
        self.first: list[tuple[Event, Kind | None]] | None = None  # made on the first line read: most logs hold none
        self.kinds: dict[str, int] = NOT_YET
        self.seen: set[tuple] = NOT_YET
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id in TRACEBACK_ROWS:
            return  # a frame or a code row (``raise ChatTemplateResolutionError(``): the exception line says it
        text = line_label(ev) if ev.id in self.events else ev.rec.msg
        kind = kind_of(text)
        warmup = kind is None and any(w in text for w in WARMUP_WORDS)
        if kind is None and not warmup:
            return
        if self.first is None:
            self.first, self.kinds, self.seen = [], {}, set()
        if warmup:
            self.warmups += 1
        elif self._new_refusal(ev, text):
            self.refused += 1
            self.kinds[kind.cause] = self.kinds.get(kind.cause, 0) + 1
        if len(self.first) < MAX_FIRST:
            self.first.append((ev, kind))
        claim = shape_claim(line_label(ev)) if ev.id in self.events else WARMUP_WORDS[0]
        if claim not in self.claims and len(self.claims) < 16:
            self.claims = (*self.claims, claim)

    def _new_refusal(self, ev: Event, text: str) -> bool:
        """Whether the line is another request's refusal, not the same exception again: a paste quotes the exception
        above its traceback, and the traceback's last row says it once more. The same words at the same time (or
        with no time) are one request; a bounded memory of them."""
        key = (ev.rec.ts, text[:160])
        if key in self.seen:
            return False
        if len(self.seen) < MAX_SEEN:
            self.seen.add(key)
        return True

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.first is None:
            return []
        led = max(self.kinds, key=self.kinds.get) if self.kinds else "no-chat-template"
        kind = next(k for k in KINDS if k.cause == led)
        severity = self.severity if self.refused else "info"
        cause = Cause(led, 0.85 if self.refused else 0.5, for_=[self._for(kind)], against=self._against(),
                      **fix_and_confirm(led))
        ev = self.first[0][0]
        return [Finding(
            rule=self.code, severity=severity, title=self.title, summary=self._summary(kind), count=self.refused
            + self.warmups, evidence=[evidence_of(e, 400) for e, _ in self.first], causes=[cause],
            identity=f"{self.code}|{led}", first_seen=rec_time(ev.rec), headline=self._headline(kind),
            measurements={"refused": self.refused, "warmup_failures": self.warmups, "by_kind": dict(self.kinds)},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]

    def _for(self, kind: Kind) -> str:
        if not self.refused:
            return ("the start-up warm-up of chat rendering failed: the model has no usable chat template, so chat "
                    "requests will be refused")
        return f"{self.kinds.get(kind.cause, 0)} request(s) refused with words that say it: {kind.said}"

    def _against(self) -> list[str]:
        if self.refused:
            return []
        return ["no request was refused in these lines: the warm-up alone, which vLLM logs at ERROR and serves on "
                "(0.18 logs it at DEBUG); /v1/completions is unaffected"]

    def _headline(self, kind: Kind) -> str:
        if not self.refused:
            return "chat template warm-up failed at start: chat requests will be refused"
        return f"{self.refused} chat request(s) refused (HTTP 400): {kind.said}"

    def _summary(self, kind: Kind) -> str:
        if not self.refused:
            return ("vLLM's start-up warm-up could not render a chat prompt ('Chat template warmup failed'): the "
                    "model has no chat template and none was given. Serving goes on; /v1/chat/completions requests "
                    "will be refused with HTTP 400 until one is given, /v1/completions works.")
        others = {k: n for k, n in self.kinds.items() if k != kind.cause}
        more = f" Other refusals: {', '.join(f'{k} ×{n}' for k, n in others.items())}." if others else ""
        return (f"vLLM refused {self.refused} chat request(s) while rendering their prompt, before the engine ran "
                f"them (the client got HTTP 400): {kind.said}. No crash, traceback included.{more}")
