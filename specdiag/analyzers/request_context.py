"""SRV006 — requests refused because the prompt (with the output asked for) is longer than the context."""

from __future__ import annotations

import re
from typing import NamedTuple

from specdiag.analyzers.base import NOT_YET, WARNING_OR_WORSE, Rule, register, shape_claim
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of, line_label
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

_N = r"(\d{1,9})"
#: vLLM's refusals of a request longer than ``max_model_len``, each era's wording (the API server's
#: ``_validate_input`` 0.4-0.10, ``renderers/params.py`` 0.11+, the input processor 0.8+, V0's engine and scheduler);
#: named groups: ``limit`` (the context), ``total``, ``prompt``, ``output`` where the message says them
_REFUSALS = (
    # 'This model's maximum context length is 8192 tokens. However, you requested 8203 tokens (7691 in the
    # messages, 512 in the completion).' / '… you requested 15000 output tokens and your prompt contains at least
    # 35961 input tokens, for a total of at least 50961 tokens.' / '… your prompt contains 9000 input tokens, which
    # exceeds this limit even without any output tokens.'
    re.compile(r"maximum context length is (?P<limit>\d{1,9}) tokens\. However, (?:you requested (?:(?P<total>\d{1,9}) "
               r"tokens(?: \((?P<prompt>\d{1,9}) in the messages, (?P<output>\d{1,9}) in the completion\))?|(?P<output2>"
               r"\d{1,9}) output tokens and your prompt contains (?:at least )?(?P<prompt2>\d{1,9}) input tokens)|your "
               r"prompt contains (?:at least )?(?P<prompt3>\d{1,9}) input tokens)"),
    # 'The decoder prompt (length 18425) is longer than the maximum model length of 12288.' (v1/engine/processor.py,
    # input_processor.py), '… (length 4096) plus the number of requested output tokens (at least 1) is longer …'
    re.compile(r"prompt \(length (?P<prompt>\d{1,9})\) (?P<plus>plus the number of requested output tokens \(at least "
               r"1\) )?is longer than the maximum model length of (?P<limit>\d{1,9})"),
    # V0 (engine/llm_engine.py 0.5-0.6): 'Prompt length of 5000 is longer than the maximum model length of 4096.'
    re.compile(r"Prompt length of (?P<prompt>\d{1,9}) is longer than the maximum model length of (?P<limit>\d{1,9})"),
    # V0's scheduler, a warning (core/scheduler.py): 'Input prompt (9000 tokens) is too long and exceeds limit of 8192'
    re.compile(r"Input prompt \((?P<prompt>\d{1,9}) tokens\) is too long and exceeds limit of (?P<limit>\d{1,9})"),
)
#: the words every refusal holds: the one test a line pays before the patterns above
_WORDS = ("maximum context length is ", "maximum model length of ", "is too long and exceeds limit of ")
#: refusals kept as evidence, distinct limits counted
MAX_FIRST, MAX_LIMITS = 3, 8


class Refusal(NamedTuple):
    """One refused request's numbers: the context, and what the request needed (None where the message says not)."""

    limit: int
    prompt: int | None
    output: int | None
    total: int | None
    #: the prompt is at least that long: vLLM's tokenizer stopped counting one token past the limit
    at_least: bool = False
    #: V0's scheduler ignored it (a warning; the request ends with no output), rather than a refusal the client sees
    ignored: bool = False


def read_refusal(text: str) -> Refusal | None:
    """The numbers of a refusal in ``text`` (an exception line, a warning), or None when it is none."""
    if not any(w in text for w in _WORDS):
        return None
    for pattern in _REFUSALS:
        m = pattern.search(text)
        if m is None:
            continue
        g = {k: int(v) for k, v in m.groupdict().items() if v is not None and v.isdigit()}
        prompt = g.get("prompt", g.get("prompt2", g.get("prompt3")))
        output = g.get("output", g.get("output2", 1 if m.groupdict().get("plus") else None))
        total = g.get("total", prompt + output if prompt is not None and output is not None else prompt)
        return Refusal(g["limit"], prompt, output, total, "at least " in text[m.start() : m.end()],
                       text.startswith("Input prompt ", m.start()))
    return None


@register
class RequestOverContext(Rule):
    """Requests refused: the prompt, with the output it asks for, is longer than the context (``max_model_len``).

    Detects: vLLM's refusal of a request whose tokens do not fit the context, in each release's words: the API
    server's ``This model's maximum context length is M tokens. However, you requested T tokens (P in the
    messages, C in the completion)`` (0.4-0.10), ``… you requested C output tokens and your prompt contains at
    least P input tokens`` (0.11+), ``… your prompt contains P input tokens, which exceeds this limit``
    (renderers/params.py), the input processor's ``The decoder prompt (length P) is longer than the maximum model
    length of M`` (0.8+), V0's ``Prompt length of P is longer than …`` and its scheduler's ``Input prompt (P tokens)
    is too long and exceeds limit of M``.

    Why it matters: the request is refused before it reaches the engine (the client gets HTTP 400; V0's scheduler
    ignores it and returns an empty output). The server itself is fine: these lines are no crash, though they come
    with a traceback. What to change is on the client (the prompt, ``max_tokens``) or the server's context length.

    Causes weighed: ``prompt-over-context`` (the request asks for more than the context), ``context-capped`` (the
    server runs with a shorter context than it was started with: ``--max-model-len`` in its arguments above the
    engine's ``max_seq_len`` or above the limit in the refusal), ``prompt-over-batch-budget`` (V0's scheduler only:
    with chunked prefill off its prompt limit is the smaller of ``max_model_len`` and ``max_num_batched_tokens``,
    and it ignores the request, which ends with no output).

    References: vLLM ``entrypoints/openai/serving_engine.py`` (``_validate_input``, 0.4-0.10),
    ``renderers/params.py`` (``_token_len_check``, 0.32), ``v1/engine/input_processor.py``
    (``_validate_model_input``); issues #20241, #16375, #20409; vllm-ascend #10952.

    Fix: send less (a shorter prompt, ``max_tokens`` no larger than the context less the prompt), or serve a longer
    context (``--max-model-len``, within the model's own and what the KV cache holds); when the server runs with a
    shorter context than it was started with, find what capped it (its config line's ``max_seq_len``).
    """

    code = "SRV006"
    name = "request-over-context"
    title = "Requests refused: longer than the context (max_model_len)"
    severity = "warning"
    family = "SRV"
    cause_ids = ("prompt-over-context", "context-capped", "prompt-over-batch-budget")
    events = frozenset({"V_EXC", "E_GENERIC"})
    levels = WARNING_OR_WORSE
    #: its finding accounts for the refusal lines it read (``claims``), not for every exception line
    explains = frozenset()

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.refusals = 0
        self.first: list[tuple[Event, Refusal]] | None = None  # made on the first refusal: most logs hold none
        self.limits: set[int] = NOT_YET
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id == CATALOG_EVENT:
            entry = entry_of(ev)
            if entry is None or not entry.fmt or "is too long and exceeds limit of" not in entry.fmt:
                return
            text = ev.rec.msg
        else:
            text = line_label(ev)
        refusal = read_refusal(text)
        if refusal is None:
            return
        self.refusals += 1
        if self.first is None:
            self.first, self.limits = [], set()
        if len(self.limits) < MAX_LIMITS:
            self.limits.add(refusal.limit)
        if len(self.first) < MAX_FIRST:
            self.first.append((ev, refusal))
        claim = shape_claim(line_label(ev)) if ev.id != CATALOG_EVENT else "is too long and exceeds limit of"
        if claim not in self.claims and len(self.claims) < 16:
            self.claims = (*self.claims, claim)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.refusals or self.first is None:
            return []
        ev, r = self.first[0]
        causes = self._causes(ctx, r)
        return [Finding(
            rule=self.code, severity=self.severity, title=self.title, summary=self._summary(r),
            count=self.refusals, evidence=[evidence_of(e, 400) for e, _ in self.first], causes=causes,
            identity=f"{self.code}|{r.limit}", first_seen=rec_time(ev.rec), headline=self._headline(r),
            measurements={"refused": self.refusals, "context_tokens": r.limit, "prompt_tokens": r.prompt,
                          "output_tokens": r.output, "total_tokens": r.total,
                          "over_by": r.total - r.limit if r.total is not None else None,
                          "limits": sorted(self.limits)},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _headline(self, r: Refusal) -> str:
        need = f"{r.total:,} tokens asked" if r.total is not None else "a longer prompt"
        return f"{self.refusals} request(s) refused: {need} where the context is {r.limit:,}"

    def _summary(self, r: Refusal) -> str:
        if r.ignored:
            out = [f"V0's scheduler ignored {self.refusals} request(s) whose prompt is longer than its prompt limit of "
                   f"{r.limit:,} tokens: max_model_len, or with chunked prefill off the smaller of max_model_len and "
                   "max_num_batched_tokens. Such a request ends with no output (finish_reason 'length'), not an error "
                   "the client sees; the refusal by itself is no crash."]
        else:
            out = [f"vLLM refused {self.refusals} request(s) whose tokens do not fit the context of {r.limit:,} tokens "
                   "(max_model_len) before the engine ran them: the client got an error (HTTP 400); the refusal by "
                   "itself is no crash, traceback included."]
        if r.prompt is not None and r.output is not None and r.output > 1:
            fits = r.limit - r.prompt  # vLLM refuses prompt + max_tokens > max_model_len
            out.append(f"The first: a prompt of {'at least ' if r.at_least else ''}{r.prompt:,} tokens plus {r.output:,} "
                       f"output tokens asked (max_tokens) = {r.prompt + r.output:,}, {r.prompt + r.output - r.limit:,} over "
                       "the context. " + self._room(r, fits))
        elif r.prompt is not None:
            out.append(f"The first: a prompt of {r.prompt:,} tokens, {r.prompt - r.limit:,} over the context "
                       "before any output." if r.prompt > r.limit else
                       f"The first: a prompt of {r.prompt:,} tokens, which leaves no room for the output in the context.")
        if len(self.limits) > 1:
            out.append(f"The refusals name {len(self.limits)} different contexts ({', '.join(map(str, sorted(self.limits)))}): "
                       "more than one server or model is in this log.")
        return " ".join(out)

    @staticmethod
    def _room(r: Refusal, fits: int) -> str:
        """What a shorter output would have done: served it, unless the prompt's length is only a lower bound."""
        if r.at_least:
            return ("The prompt is at least that long (vLLM's tokenizer stops counting one token past the limit), so "
                    "it may not fit even with fewer output tokens: count its tokens first.")
        if fits >= 1:
            return f"The prompt alone fits: max_tokens ≤ {fits:,} would have served it."
        return "The prompt alone does not fit."

    def _causes(self, ctx: Context, r: Refusal) -> list:
        b = CauseBoard()
        b.add("prompt-over-context", 0.6, **fix_and_confirm("prompt-over-context"))
        b.add("context-capped", 0.15, **fix_and_confirm("context-capped"))
        if r.ignored:  # V0's scheduler: its limit may be the batch budget, not the context
            b.add("prompt-over-batch-budget", 0.4, **fix_and_confirm("prompt-over-batch-budget"))
            if ctx.max_seq_len and r.limit < ctx.max_seq_len:
                b.support("prompt-over-batch-budget", 6, f"the limit {r.limit:,} is below the engine's max_seq_len="
                                                         f"{ctx.max_seq_len:,}: it is max_num_batched_tokens")
        if not r.ignored:
            b.support("prompt-over-context", 2, f"the refusal's own numbers: {r.total or r.prompt:,} tokens asked, "
                                                f"the context {r.limit:,}")
        else:
            b.oppose("prompt-over-context", 1.2, f"V0's scheduler's limit {r.limit:,} is the context or the batch "
                                                 "budget, whichever is smaller: its line does not say which")
        asked = ctx.serving_options.get("max_model_len")
        running = ctx.max_seq_len
        need = r.total or r.prompt or 0
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > r.limit:
            fits = need <= asked  # served at the context asked for: the cap alone refused it
            b.support("context-capped", 12 if fits else 4,
                      f"the server was started with max_model_len={asked:,} but refused at {r.limit:,}"
                      + (f" (its engine config: max_seq_len={running:,})" if running else "")
                      + (f"; the {need:,} tokens asked fit the {asked:,}" if fits else ""))
        elif isinstance(asked, int) and not isinstance(asked, bool):
            b.oppose("context-capped", 3, f"max_model_len={asked:,} among the server's arguments: the context it runs with")
        else:
            b.absent("context-capped", 1.5, "no max_model_len among the server's non-default args (the model's own "
                     "context, or one the engine fitted to its KV cache)", observable=ctx.vllm_args_seen)
        return b.ranked(ceiling=0.9)
