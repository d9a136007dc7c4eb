"""SRV004 — vLLM rejected its configuration at start: the server never started."""

from __future__ import annotations

import re
from typing import NamedTuple

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event, template
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: pydantic's heading of a vLLM config dataclass's validation (``1 validation error for SpeculativeConfig``)
_PYDANTIC = lazy(r"(?P<n>\d{1,4}) validation errors? for (?P<cls>\w{1,80}Config)\b")
#: frames of vLLM's configuration code: the engine arguments turned into the config, the config classes
_CONFIG_FRAME = lazy(r'File "[^"\n]{0,400}/(?:vllm/(?:config[/.]|engine/arg_utils\.py|platforms/|attention/selector\.py'
                     r'|v1/attention/backends/registry\.py)|transformers/models/\w{1,60}/configuration_\w{1,60}\.py)')
#: vLLM's refusals of a setting at start, whose message says so even without the traceback above it: an attention
#: backend forced by name (v1/attention/backends/registry.py ``Unknown attention backend: 'X'``; the platform's
#: ``Selected backend … is not valid for this configuration. Reason: …``), an engine on a device it does not
#: support (``VLLM_USE_V1=1 is not supported with device type=cpu``, engine/arg_utils.py 0.9)
#: the FP8 block-quantized weights' check (quantization/fp8.py create_weights): a layer's output split by TP must be a
#: whole number of quantization blocks; pasted wrapped, the first line is all a reader may get
_BLOCK_WORDS = ("is not divisible by weight quantization block_", "The output_size of gate's and up's weight = ")
_START_REFUSALS = ("Unknown attention backend: ", "is not valid for this configuration",
                   "is not supported with device type=", "Failed to infer device type", *_BLOCK_WORDS)
_BLOCK_HINT = ("tensor parallelism split the layer's output below the FP8 block size (its share must be a multiple of "
               "block_n, 128): with a MoE model enable expert parallelism (--enable-expert-parallel) so experts are not "
               "split, or lower --tensor-parallel-size until the share divides")
#: a RuntimeError vLLM raises for its configuration: no platform found (config.py DeviceConfig, 0.4-0.8: the CUDA
#: build on a host without a GPU, or a GPU the container cannot see)
_RUNTIME_REFUSALS = ("Failed to infer device type",)
#: transformers refusing the model's config.json (its configuration class's validation): a config written for a newer
#: transformers than the installed one (Llama 3.1's ``rope_type: llama3`` before transformers 4.43)
_TRANSFORMERS_HINT = ("transformers refused the model's config.json: a config written for a newer transformers than the "
                      "one installed (a model type it does not know yet, or a rope_scaling it cannot read): upgrade "
                      "transformers (and vLLM to a release that pins it), pip show transformers to compare")
#: transformers refusing to run the model repo's own configuration code (dynamic_module_utils.py
#: ``resolve_trust_remote_code``): the model needs ``--trust-remote-code``, which is not a transformers version
_REMOTE_CODE_WORDS = ("requires you to execute the configuration file", "set the option `trust_remote_code=True`")
_REMOTE_CODE_HINT = ("the model's repo ships its own configuration code and transformers runs it only when allowed: "
                     "start with --trust-remote-code (after reading that code); upgrading transformers does not change it")
_ROPE_NOTE = " (Llama 3.1's rope_scaling with rope_type 'llama3' needs transformers 4.43+)"
#: the attention selector's refusal of every backend (v1/attention/selector.py: ``No valid attention backend found for
#: cuda with AttentionSelectorConfig(…). Reasons: {NAME: [reason, …], …}``), each backend with its reasons
_BACKEND_REASONS = lazy(r"\b([A-Z][A-Z0-9_]{1,40}): \[([^\]\n]{1,400})\]")
_CAPABILITY_ONLY = "compute capability not supported"


def _about_the_gpu(reason: str) -> bool:
    """A selector's reason about the device (its capability, 'not supported on this device', '… only supported on
    Hopper …'), not about a feature of the model's attention."""
    r = reason.lower()
    return "compute capability" in r or "on this device" in r or "only supported on" in r


def _backend_hint(text: str) -> str:
    """When the selector refused every backend, and some only for the GPU's compute capability while every other
    lacks a feature the model needs: the backends this model needs do not run on this GPU (no option to correct),
    which its own reasons say; '' otherwise."""
    if "No valid attention backend found" not in text:
        return ""
    reasons = {name: [r.strip() for r in said.split(",")] for name, said in _BACKEND_REASONS.findall(text)[:24]}
    only_gpu = [n for n, rs in reasons.items() if rs == [_CAPABILITY_ONLY]]
    others = [rs for n, rs in reasons.items() if n not in only_gpu]
    if not only_gpu or not all(any(not _about_the_gpu(r) for r in rs) for rs in others):
        return ""
    return (f"{', '.join(only_gpu)} was refused only for this GPU's compute capability, and every other backend lacks "
            "something this model's attention needs (their reasons): the backend the model needs does not run on "
            "this GPU in this release, which no option changes; serve it on a GPU that backend supports, or with a "
            "release that adds a backend for this GPU")


_DEVICE_HINT = ("no platform was detected: the installed vLLM build found no device it supports (the CUDA wheel on "
                "a host or container without a visible GPU: nvidia-smi in the container, --gpus all; on a CPU-only "
                "host, vLLM's CPU build)")
#: a serving setting a message names (its option, or the feature it turns on) ...
_SETTING = lazy(r"\b(?:tensor[_ ]parallel(?:_size|ism)|pipeline[_ ]parallel(?:_size|ism)|max_num_batched_tokens"
                r"|max_model_len|max_num_seqs|max_lora_rank|max_loras|LoRA is enabled|gpu_memory_utilization"
                r"|kv_cache_dtype|enable_chunked_prefill|--[a-z][a-z-]{2,40})\b")
#: ... and refuses it or says what to change ...
_REFUSES = lazy(r"\b(?:not supported|does not support|hasn't supported|must be|is required|not divisible|"
                r"Please|Consider)\b")
#: ... about the server, not one request (a prompt too long for max_model_len is that request's rejection)
_PER_REQUEST = lazy(r"\b(?:prompts?|requests?)\b", re.I)
#: what the value of an option given as JSON needs (argparse's ``invalid loads value``)
_JSON_HINT = ("the value is not JSON: quote keys and strings with double quotes and write true/false/null, e.g. "
              "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'")
#: pydantic's header and its ``Value error, …`` line pasted as two records: how far apart they may be (lines)
_HEADER_REACH = 3
#: the reasons that may come as a record of their own under a header pasted alone
_REASONS = frozenset({"E_PYDANTIC_VALUE", "E_BATCH_LT_LEN"})
#: what pydantic prints after a dataclass's reason: its input, the constructor's arguments
_DATACLASS_INPUT = "input_value=ArgsKwargs("


def _refuses_a_setting(detail: str) -> bool:
    """A message that names a serving setting and refuses it (``Prequant BitsAndBytes models with tensor parallelism
    is not supported. Please try with pipeline parallelism.``; ``… max_num_batched_tokens must be <= 65528 when LoRA
    is enabled``): vLLM's checks of its configuration while it starts, the traceback above them cut or absent."""
    return (_SETTING.search(detail) is not None and _REFUSES.search(detail) is not None
            and _PER_REQUEST.search(detail) is None)


class Rejection(NamedTuple):
    """A line of vLLM rejecting its configuration: the option or config class it names, its message, and whether
    only its words said so (``_refuses_a_setting``: no configuration frame, no refusal printed only at start)."""

    option: str | None
    message: str
    by_words: bool = False


def _reason(detail: str) -> str:
    """pydantic's reason (``E_PYDANTIC_VALUE``'s text after ``Value error, ``) without its ``[type=…`` tail."""
    return detail.split(" [type=")[0].strip()


def _batch_hint(f: dict) -> str:
    """What SchedulerConfig's batch check asks for: without chunked prefill one scheduler step must hold a whole
    sequence, so the batch budget must reach the context length (or chunked prefill must be on)."""
    return (f"without chunked prefill one step must hold a whole sequence: give --max-num-batched-tokens at least "
            f"{f.get('max_len')} (it is {f.get('batched')}), lower --max-model-len to {f.get('batched')}, or turn "
            "chunked prefill on (--enable-chunked-prefill)")


@register
class ConfigRejected(Rule):
    """vLLM rejected its configuration while starting: the server never started.

    Detects: argparse's exit of vLLM's command line (``vllm serve: error: argument --speculative-config: invalid
    loads value: …``, exit code 2), pydantic's validation of a vLLM config dataclass (``ValidationError: 1
    validation error for SpeculativeConfig`` with its ``Value error, …`` line, that line on the next row when the
    header was pasted alone, or the line alone when pydantic's ``input_value=ArgsKwargs(`` shows a dataclass's
    constructor), ``RuntimeError: Failed to infer device type`` (no platform found: the CUDA build where no GPU is
    visible), transformers refusing the model's ``config.json`` (a ``ValueError`` raised in its
    ``models/*/configuration_*.py``: a config newer than the installed transformers), a ``ValueError`` or
    ``NotImplementedError`` raised through vLLM's configuration code (a frame in
    ``vllm/config``, ``engine/arg_utils.py``, ``platforms/`` or the attention backend's selection) or saying a
    setting is refused (``Unknown attention backend: 'X'``, ``Selected backend … is not valid for this
    configuration``, ``VLLM_USE_V1=1 is not supported with device type=cpu``; and, with a lower confidence, any
    message that names a serving setting and refuses it, about no prompt or request: ``Prequant BitsAndBytes models
    with tensor parallelism is not supported. Please try with pipeline parallelism.``, ``… max_num_batched_tokens must
    be <= 65528 when LoRA is enabled``, ``Model GemmaForCausalLM does not support LoRA, but LoRA is enabled``), and
    SchedulerConfig's
    ``max_num_batched_tokens (N) is smaller than max_model_len (M)`` (chunked prefill off: one step must hold a
    whole sequence), which says the three ways out.

    Why it matters: nothing was served; the message names the option and what is wrong with it, and nothing
    else in the log will.

    Causes weighed: ``config-rejected``.

    Fix: correct the option the message names and start again.

    References: vLLM ``entrypoints/cli`` (argparse), ``config/`` (``SpeculativeConfig.__post_init__``,
    ``VllmConfig``), ``engine/arg_utils.py`` (``create_engine_config``).
    """

    code = "SRV004"
    name = "config-rejected"
    title = "vLLM rejected its configuration at start: the server never started"
    severity = "error"
    family = "SRV"
    cause_ids = ("config-rejected",)
    events = frozenset({"E_CLI_ARG", "E_GENERIC", "V_EXC", "E_PYDANTIC_VALUE", "E_BATCH_LT_LEN"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.first: Event | None = None
        self.option: str | None = None
        self.message: str | None = None
        self.hint = ""
        self.lines = 0
        self.others: list[str] = []  # later rejections with other messages (bounded)
        self.by_words = False  # the first was known by its words alone (``_refuses_a_setting``)

    def observe(self, ev: Event) -> None:
        found = self._rejection(ev)
        if found is None:
            return
        if self.first is None:
            if ev.id == "E_PYDANTIC_VALUE" and _DATACLASS_INPUT not in (ev.f.get("detail") or ""):
                return  # a ``Value error, …`` line alone with nothing to say it is a config dataclass's
            self.first, self.option, self.message, self.by_words = ev, found.option, found.message, found.by_words
            if hint := _backend_hint(ev.rec.text):
                self.hint = hint  # a hardware limit the refusal's own reasons show, not an option to correct
            elif any(w in ev.rec.text for w in _BLOCK_WORDS):
                self.hint = _BLOCK_HINT  # a layout a setting gave (TP without EP), not a value to correct
            elif any(w in ev.rec.text for w in _REMOTE_CODE_WORDS):
                self.hint = _REMOTE_CODE_HINT  # the repo's configuration code, not allowed to run
            elif "/transformers/models/" in ev.rec.text and "configuration_" in ev.rec.text:
                self.hint = _TRANSFORMERS_HINT  # transformers' own check of config.json, not vLLM's
                if "rope_scaling" in ev.rec.text:
                    self.hint += _ROPE_NOTE
        elif ev.id in _REASONS and self._header_alone(ev):
            self.message = found.message  # the reason under a header pasted alone, its class kept
        else:
            said = found.message
            if said and said != self.message and said not in self.others and len(self.others) < 3:
                self.others.append(said)  # another rejection: the next start, after the first was answered
            found = None
        if found is not None and ev.id == "E_BATCH_LT_LEN":
            self.hint = _batch_hint(ev.f)
        self.lines += 1

    @staticmethod
    def _rejection(ev: Event) -> Rejection | None:
        """The rejection ``ev`` says, when it is vLLM rejecting its configuration."""
        f = ev.f
        if ev.id == "E_CLI_ARG":
            return Rejection(f.get("arg"), (f.get("detail") or "").strip())
        if ev.id == "E_PYDANTIC_VALUE":  # a config dataclass's reason
            return Rejection(None, _reason(f.get("detail") or ""))
        if ev.id == "E_BATCH_LT_LEN":
            return Rejection("--max-num-batched-tokens", (f.get("detail") or "").strip())
        exc, detail, text = f.get("exc") or "", (f.get("detail") or "").strip(), ev.rec.text
        if exc.endswith("ValidationError") and (m := _PYDANTIC.search(detail)) is not None:
            v = template("E_PYDANTIC_VALUE").match(text)  # its reason line inside the traceback
            return Rejection(m.group("cls"), _reason(v["detail"]) if v else detail)
        if not exc.endswith(("ValueError", "NotImplementedError")) and not (
                exc.endswith("RuntimeError") and any(p in detail for p in _RUNTIME_REFUSALS)):
            return None
        if _CONFIG_FRAME.search(text) is not None or any(p in detail for p in _START_REFUSALS):
            return Rejection(None, detail)
        return Rejection(None, detail, by_words=True) if _refuses_a_setting(detail) else None

    def _others_said(self) -> str:
        """The other rejections, each quoted: a change that answers the first may be what the next one refuses."""
        if not self.others:
            return ""
        quoted = "; ".join(f"'{m[:200]}'" for m in self.others)
        return (f" It was also refused with other words ({quoted}): answer every message together, since a change "
                "made for one (a --dtype) may be what the next refuses.")

    def _header_alone(self, ev: Event) -> bool:
        """Whether the first rejection is pydantic's header with no reason (``1 validation error for VllmConfig``
        pasted without its indented lines) and ``ev``, its ``Value error, …`` line, comes right under it."""
        first = self.first
        return (first is not None and first.id != "E_PYDANTIC_VALUE" and _PYDANTIC.search(self.message or "") is not None
                and first.rec.path == ev.rec.path and 0 < ev.rec.line - first.rec.line <= _HEADER_REACH)

    def _hint(self) -> str:
        """What the message's own words add to the general fix: the hint read with it, else one its message names."""
        if self.hint:
            return self.hint
        if "Failed to infer device type" in (self.message or ""):
            return _DEVICE_HINT
        return _JSON_HINT if "invalid loads value" in (self.message or "") else ""

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.first is None:
            return []
        what = f"the option {self.option}" if (self.option or "").startswith("-") else (self.option or "its configuration")
        hint = self._hint()
        against = (["known by its words alone (it names a setting and refuses it): no frame of vLLM's configuration code "
                    "and no start-up failure line in the excerpt say it was raised while the server started"]
                   if self.by_words else [])
        cause = Cause("config-rejected", 0.75 if self.by_words else 0.9, for_=[f"'{(self.message or '')[:200]}'"],
                      against=against, **fix_and_confirm("config-rejected"))
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=(f"vLLM rejected {what} while starting: '{(self.message or '')[:300]}'. The server exited before "
                     f"serving anything; the message says what to change.{f' Here {hint}.' if hint else ''}"
                     f"{self._others_said()}"),
            count=self.lines, evidence=[evidence_of(self.first, 400)], causes=[cause],
            identity=f"{self.code}|{self.option or ''}", first_seen=rec_time(self.first.rec),
            measurements={"option": self.option, "message": (self.message or "")[:300],
                          "other_messages": [m[:300] for m in self.others]},
            headline=f"vLLM rejected {what} at start — {(self.message or '')[:90]}",
            next_steps=_steps(hint, cause),
        )]


def _steps(hint: str, cause: Cause) -> list[str]:
    """The hint the message's own words gave (no platform, the repo's remote code, transformers' config check, a
    JSON option) first, when there is one: it is what to do; the general fix and its confirmation after it."""
    first = [hint[:1].upper() + hint[1:] + ".", cause.fix] if hint else [cause.fix]
    return [*first, f"Confirm: {cause.confirm_with}"]
