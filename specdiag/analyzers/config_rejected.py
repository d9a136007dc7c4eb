"""SRV004 — vLLM rejected its configuration at start: the server never started."""

from __future__ import annotations

import re

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: pydantic's heading of a vLLM config dataclass's validation (``1 validation error for SpeculativeConfig``)
_PYDANTIC = re.compile(r"(?P<n>\d{1,4}) validation errors? for (?P<cls>\w{1,80}Config)\b")
#: the message under it: ``  Value error, <message> [type=value_error, …``
_VALUE_ERROR = re.compile(r"^\s{0,8}(?:Value|Assertion) error, (?P<msg>[^\n]{1,600}?)(?: \[type=|$)", re.M)
#: frames of vLLM's configuration code: the engine arguments turned into the config, the config classes
_CONFIG_FRAME = re.compile(r'File "[^"\n]{0,400}/vllm/(?:config[/.]|engine/arg_utils\.py)')
#: what the value of an option given as JSON needs (argparse's ``invalid loads value``)
_JSON_HINT = ("the value is not JSON: quote keys and strings with double quotes and write true/false/null, e.g. "
              "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'")


@register
class ConfigRejected(Rule):
    """vLLM rejected its configuration while starting: the server never started.

    Detects: argparse's exit of vLLM's command line (``vllm serve: error: argument --speculative-config: invalid
    loads value: …``, exit code 2), pydantic's validation of a vLLM config dataclass (``ValidationError: 1
    validation error for SpeculativeConfig`` with its ``Value error, …`` line), and a ``ValueError`` raised through
    vLLM's configuration code (a frame in ``vllm/config`` or ``engine/arg_utils.py``).

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
    events = frozenset({"E_CLI_ARG", "E_GENERIC", "V_EXC"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.first: Event | None = None
        self.option: str | None = None
        self.message: str | None = None
        self.lines = 0

    def observe(self, ev: Event) -> None:
        found = self._rejection(ev)
        if found is None:
            return
        self.lines += 1
        if self.first is None:
            self.first, (self.option, self.message) = ev, found

    @staticmethod
    def _rejection(ev: Event) -> tuple[str | None, str] | None:
        """(the option or config class, the message) when ``ev`` is vLLM rejecting its configuration."""
        f = ev.f
        if ev.id == "E_CLI_ARG":
            return f.get("arg"), (f.get("detail") or "").strip()
        exc, detail, text = f.get("exc") or "", (f.get("detail") or "").strip(), ev.rec.text
        if exc.endswith("ValidationError") and (m := _PYDANTIC.search(detail)) is not None:
            v = _VALUE_ERROR.search(text)
            return m.group("cls"), (v.group("msg") if v else detail)
        if exc.endswith("ValueError") and _CONFIG_FRAME.search(text) is not None:
            return None, detail
        return None

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.first is None:
            return []
        what = f"the option {self.option}" if (self.option or "").startswith("-") else (self.option or "its configuration")
        hint = f" Here {_JSON_HINT}." if "invalid loads value" in (self.message or "") else ""
        cause = Cause("config-rejected", 0.9, for_=[f"'{(self.message or '')[:200]}'"], **fix_and_confirm("config-rejected"))
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=(f"vLLM rejected {what} while starting: '{(self.message or '')[:300]}'. The server exited before "
                     f"serving anything; the message says what to change.{hint}"),
            count=self.lines, evidence=[evidence_of(self.first, 400)], causes=[cause],
            identity=f"{self.code}|{self.option or ''}", first_seen=rec_time(self.first.rec),
            measurements={"option": self.option, "message": (self.message or "")[:300]},
            headline=f"vLLM rejected {what} at start — {(self.message or '')[:90]}",
            next_steps=[cause.fix + hint, f"Confirm: {cause.confirm_with}"],
        )]
