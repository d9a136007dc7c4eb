"""KV023 — vLLM's KV offloading failed transfers: offloaded KV was not stored or not loaded."""

from __future__ import annotations

import functools
from collections import Counter

from specdiag.analyzers.base import WARNING_OR_WORSE, Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of, prints_format
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: where vLLM keeps its KV offloading (the OffloadingConnector's worker and scheduler, the CPU and tiered backends,
#: the simple CPU offload), as the catalog names modules
OFFLOAD_DIRS = ("v1/kv_offload/", "v1/simple_kv_offload/", "kv_connector/v1/offloading/")
#: a format about a transfer or an offload job ...
_JOB = lazy(r"(?i)\b(?:transfer|job|I/O|write_blocks|batch_lookup|submit|load|store)\b")
#: ... that failed ...
_FAILED = lazy(r"(?i)\bfail(?:ed|ure)?\b|\bException in\b")
#: ... not one about shutting down, cleaning up or running slower (``cudaHostRegister failed … will still work``)
_BENIGN = lazy(r"(?i)shut ?down|clean ?up|\bclose\b|unlink|remove|release|deregister|telemetry|still work"
               r"|drain")
#: the direction a transfer's message names (``Exception in ('CPU', 'GPU') transfer 235``)
_DIRECTION = lazy(r"\('(\w{1,10})', '(\w{1,10})'\)|\b(load|store)\b")
#: messages kept (a flood of one message must not grow the table)
MAX_MESSAGES = 12


@functools.lru_cache(maxsize=512)
def offload_failure(module: str, fmt: str) -> bool:
    """Whether a catalogued format of vLLM's KV offloading says a transfer or job failed (once per format)."""
    return (any(d in module for d in OFFLOAD_DIRS) and _JOB.search(fmt) is not None and _FAILED.search(fmt) is not None
            and _BENIGN.search(fmt) is None)


def _direction(msg: str) -> str | None:
    """``load`` (into the GPU) or ``store`` (out of it) when the message says which."""
    m = _DIRECTION.search(msg)
    if m is None:
        return None
    if m.group(3):
        return m.group(3)
    return "load" if m.group(2) == "GPU" else "store" if m.group(1) == "GPU" else None


@register
class KvOffloadFailures(Rule):
    """vLLM's KV offloading failed transfers: the KV of those requests was not stored, or not loaded.

    Detects: every message the catalog holds of vLLM's KV offloading (``v1/kv_offload/``, ``v1/simple_kv_offload/``,
    the OffloadingConnector's ``kv_connector/v1/offloading/``) at WARNING or worse that says a transfer or an offload
    job failed: the worker's ``Exception in ('CPU', 'GPU') transfer N: …`` and ``Failed to submit … transfer``
    (0.11-0.24), the CPU worker's ``KV offload %s transfer failed for job %d`` (0.34), the scheduler's ``KV offload
    load job %d failed`` / ``store job %d failed`` (0.34), the tiers' I/O and NIXL transfer failures; not those about
    shutting down, cleaning up or running slower (unpinned memory).

    Why it matters: the OffloadingConnector copies each request's blocks to the offload tier (a store, GPU→CPU) and
    back (a load, CPU→GPU) as asynchronous jobs. Through 0.33 its worker does not support a failed job: its
    ``get_finished`` asserts each transfer's success, so the first failure is an AssertionError in the worker and the
    engine dies (SRV001). From 0.34 a failed store drops those chunks from the CPU cache and a failed load is not tried
    again: the prefix is recomputed.

    Causes weighed: ``kv-offload-transfer-failure``.

    Fix: upgrade vLLM past the fix for the failing transfer (the block-size factor assertion of vLLM #28950, PR
    #28951; ``cuMemcpyBatchAsync failed`` of #40259, PR #46379), or serve without KV offloading.

    References: vLLM 0.32.0 ``distributed/kv_transfer/kv_connector/v1/offloading/worker.py`` (``get_finished``: "we
    currently do not support job failures"), ``v1/kv_offload/worker/worker.py`` (0.11-0.24), 0.34
    ``v1/kv_offload/cpu/gpu_worker.py``; issues #28950, #40259.
    """

    code = "KV023"
    name = "kv-offload-transfer-failures"
    title = "vLLM's KV offloading failed transfers: offloaded KV was not stored or not loaded"
    severity = "warning"
    severity_note = "error at ERROR or worse (a failed job the worker could not absorb)"
    family = "KV"
    cause_ids = ("kv-offload-transfer-failure",)
    levels = WARNING_OR_WORSE

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.messages: Counter[str] | None = None  # made on the first failure: most deployments never offload
        self.directions: Counter[str] = Counter()
        self.first: list[Event] = []
        self.worst = "WARNING"
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id != CATALOG_EVENT or (entry := entry_of(ev)) is None or entry.project != "vllm" or not entry.fmt \
                or not offload_failure(entry.module, entry.fmt):
            return
        if entry.fmt not in self.claims and len(self.claims) < MAX_MESSAGES:
            self.claims = (*self.claims, entry.fmt)  # its lines, the traceback rows under its header among them
        if not prints_format(entry.fmt, ev.rec.msg):
            return  # a row of the traceback logged under the failure's header: the same failure
        if self.messages is None:
            self.messages = Counter()
        if entry.fmt in self.messages or len(self.messages) < MAX_MESSAGES:
            self.messages[entry.fmt] += 1
        if (way := _direction(ev.rec.msg)) is not None:
            self.directions[way] += 1
        if ev.rec.level in ("ERROR", "CRITICAL"):
            self.worst = "ERROR"
        if len(self.first) < 3:
            self.first.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.messages:
            return []
        n = sum(self.messages.values())
        said = "; ".join(f"'{m[:100]}' ×{k}" for m, k in self.messages.most_common(3))
        ways = ", ".join(f"{k} {w}(s)" for w, k in self.directions.most_common())
        cause = Cause("kv-offload-transfer-failure", 0.8, for_=[f"{n} line(s) of vLLM's KV offloading: {said}"],
                      **fix_and_confirm("kv-offload-transfer-failure"))
        return [Finding(
            rule=self.code, severity="error" if self.worst == "ERROR" else "warning", title=self.title,
            summary=(f"vLLM's KV offloading reported {n} failed transfer(s) or job(s){f' ({ways})' if ways else ''}: "
                     f"{said}. Through 0.33 the OffloadingConnector's worker asserts every job's success, so a failed "
                     "one ends the engine (SRV001 when its death is in the log); from 0.34 a failed store drops those "
                     "chunks and a failed load is recomputed."),
            count=n, evidence=[evidence_of(e, 400) for e in self.first], causes=[cause],
            identity=f"{self.code}|{self.messages.most_common(1)[0][0][:60]}", first_seen=rec_time(self.first[0].rec),
            headline=f"KV offloading failed {n} transfer(s)" + (f" ({ways})" if ways else ""),
            measurements={"failures": n, "by_direction": dict(self.directions),
                          "messages": dict(self.messages.most_common(5))},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]
