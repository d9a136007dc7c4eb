"""KV020 — vLLM's KV-transfer code (a KV connector: NIXL, Mooncake, MoRIIO, P2P NCCL, 3FS, …) logged errors."""

from __future__ import annotations

import functools
from collections import Counter

from specdiag.analyzers.base import Rule, register, shape_claim
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, UNKNOWN_EVENT, Event, entry_of
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: where vLLM keeps its KV-transfer code (connectors, pipes, lookup buffers), as the catalog names modules
TRANSFER_DIR = "distributed/kv_transfer/"
#: the NIXL failure kinds KV015 reads (a handshake that failed); every other kind is a transfer's (KV020)
HANDSHAKE_KINDS = ("handshake",)
#: path parts that say nothing of which connector printed a line
_PLUMBING = frozenset({"kv_connector", "v1", "kv_pipe", "kv_lookup_buffer", "utils"})
#: a request id as vLLM's connectors print them (``cmpl-…``, ``chatcmpl-…``, a hex id in a list)
_REQ_ID = lazy(r"\b((?:chat)?cmpl-[\w-]{6,80}|[0-9a-f]{16,40})\b")
#: messages kept per connector, request ids kept
MAX_MESSAGES, MAX_IDS = 12, 5
#: a connector saying its transport library is not there (``NIXL is not available``: nixl_connector.py when
#: ``import nixl`` failed; a Mooncake connector asking to install mooncake; vLLM-Omni's factory: ``Failed to create
#: connector MooncakeTransferEngineConnector: Mooncake not available``)
_MISSING = lazy(r"\bis not available\b|\b[A-Z][a-z]\w{1,40} not available\b|not installed|No module named"
                r"|[Pp]lease install|Failed to import")
#: NIXL's agent when asked for a transfer's telemetry it does not keep (nixl_agent.cpp, NIXL 1.3.1)
_NO_TELEMETRY = "getXferTelemetry: cannot return values when telemetry is not enabled"
#: a connector class named in a line (its first word names the transport: ``MooncakeTransferEngineConnector``)
_CONNECTOR_CLASS = lazy(r"\b([A-Z][a-z]{1,30})\w{0,60}Connector\b")


def connector_of(path: str) -> str:
    """The connector a KV-transfer module belongs to: ``…/v1/mooncake/mooncake_connector.py`` and
    ``…/v1/mooncake_connector.py`` are ``mooncake``, ``…/v1/nixl/base_worker.py`` is ``nixl``."""
    parts = [p for p in path.split(TRANSFER_DIR, 1)[-1].split("/") if p not in _PLUMBING]
    name = parts[0] if parts else path.rsplit("/", 1)[-1]
    for suffix in (".py", "_connector", "_pipe", "_integration"):
        name = name.removesuffix(suffix)
    return name or "?"


@functools.lru_cache(maxsize=256)
def transfer_module_named(base: str) -> str | None:
    """The KV-transfer module a file of this basename is, when every catalogued file of that name is one
    (``mooncake_connector.py``; never ``worker.py``, which other code has too), or, a name no catalogued release
    has, when it is named as vLLM names its connectors and their modules (``mooncake_hybrid_connector.py``,
    vLLM-Ascend's ``kv_transfer.py``): a line printed there that no catalogued release prints (a plugin's
    connector, a fork, a newer build) is still the connector's."""
    from specdiag.catalog import catalog

    modules = catalog().modules_named(base)
    if not modules:
        return base if base.endswith(".py") and ("_connector" in base or "kv_transfer" in base) else None
    return next(iter(sorted(modules))) if all(TRANSFER_DIR in m for m in modules) else None


@register
class KvTransferErrors(Rule):
    """vLLM's KV-transfer code logged errors: KV did not move between instances as asked.

    Detects: every ERROR or CRITICAL line printed by vLLM's KV-transfer modules (``distributed/kv_transfer/``:
    the NIXL, Mooncake, MoRIIO, P2P NCCL, 3FS, offloading and multi connectors and V0's pipes), found by the
    catalog from where the line says it was printed; a line no catalogued release prints from a file only
    KV-transfer code has (a vLLM-Ascend or forked connector); a line elsewhere naming a connector class whose
    transport library is missing (``Failed to create connector MooncakeTransferEngineConnector: Mooncake not
    available``, vLLM-Omni's factory); and NIXL's ``NIXL transfer failure: <kind>``
    of every kind but a handshake's (KV015). The lines of other rules (KV015's handshakes, KV018's expired
    blocks, KV003's outcome, KV001's LMCache shortfall) are theirs.

    Why it matters: a connector logs at ERROR when a request's KV could not be sent, pulled, stored or
    loaded: a peer it could not reach or that timed out, a transfer the transport failed, blocks read after
    their lease. vLLM (0.10+) marks a failed load's blocks invalid and, per ``kv_load_failure_policy``,
    recomputes the request or fails it; a connector that raises in its own thread may instead leave the
    request waiting.

    Causes weighed: ``kv-transfer-failed`` (which transfer, and why, is in the messages quoted),
    ``connector-library-missing``, ``nixl-telemetry-disabled`` (NIXL's agent refused a completed transfer's telemetry,
    so vLLM counted it failed: ``getXferTelemetry: cannot return values when telemetry is not enabled``).

    Fix: what the messages name: the peer's reachability and ports, the transport, the timeouts, and that
    both instances run the same vLLM and connector versions.

    References: vLLM ``distributed/kv_transfer/kv_connector/v1/`` (``nixl_connector.py`` ``_log_failure``
    0.14–0.19, ``nixl/worker.py`` 0.20+; ``mooncake/mooncake_connector.py`` 0.25+); vLLM-Ascend
    ``vllm_ascend/distributed/mooncake_connector.py``.
    """

    code = "KV020"
    name = "kv-transfer-errors"
    title = "vLLM's KV connector logged errors: KV was not transferred as asked"
    severity = "error"
    family = "KV"
    cause_ids = ("kv-transfer-failed", "connector-library-missing", "nixl-telemetry-disabled")
    events = frozenset({"V_NIXL_FAILURE"})
    levels = frozenset({"ERROR", "CRITICAL"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.messages: dict[str, Counter[str]] = {}  # connector -> message (format or shape) -> lines
        self.examples: dict[str, str] = {}  # a message's first line as printed (a shape reads badly)
        self.first: list[Event] = []
        self.ids: list[str] = []
        self.lines = 0
        self.native: Counter[str] = Counter()  # the transfer engine's own glog errors, by shape
        self.native_first: Event | None = None
        self.missing: Event | None = None  # a line saying the connector's transport library is not there
        self.telemetry: Event | None = None  # NIXL's agent refusing to read telemetry it does not keep
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.rec.kind == "glog":
            self._native(ev)
            return
        found = self._message_of(ev)
        if found is None:
            return
        connector, message = found
        self.lines += 1
        if self.missing is None and _MISSING.search(ev.rec.msg):
            self.missing = ev
        per = self.messages.setdefault(connector, Counter())
        if message in per or len(per) < MAX_MESSAGES:
            per[message] += 1
            if ev.id == UNKNOWN_EVENT:  # named by its shape: quoted as first printed
                self.examples.setdefault(message, ev.rec.msg.strip())
        if len(self.first) < 3:
            self.first.append(ev)
        if len(self.ids) < MAX_IDS:
            named = ev.f.get("req_id") if ev.id == "V_NIXL_FAILURE" else None
            self.ids.extend(i for i in ([named] if named else _REQ_ID.findall(ev.rec.msg)[:1]) if i not in self.ids)

    def _native(self, ev: Event) -> None:
        """A native transfer engine's own error (Mooncake's, in the worker: ``rdma_transport.cpp``, a slice whose
        ``transport retry counter exceeded``): the transport's side of a connector's failure, shown with it."""
        rec = ev.rec
        if self.telemetry is None and _NO_TELEMETRY in rec.msg:
            self.telemetry = ev  # claimed with the native errors below when the finding is made
            self.native[shape_claim(rec.msg)] += 1
            return
        if rec.level in self.levels and ("transport" in (rec.file or "") or "transfer" in (rec.file or "")
                                         or "transport" in rec.msg):
            key = shape_claim(rec.msg)
            if key in self.native or len(self.native) < MAX_MESSAGES:
                self.native[key] += 1
                self.examples.setdefault(key, f"{rec.file}:{rec.src_line}] {rec.msg.strip()}")
            self.native_first = self.native_first or ev

    def _message_of(self, ev: Event) -> tuple[str, str] | None:
        """(connector, message as catalogued or printed) of a KV-transfer error line; None for any other line."""
        rec = ev.rec
        if ev.id == "V_NIXL_FAILURE":
            kind = ev.f.get("kind") or ""
            return None if kind.startswith(HANDSHAKE_KINDS) else ("nixl", f"NIXL transfer failure: {kind}")
        if rec.kind != "vllm" or rec.level not in self.levels or ev.id not in (CATALOG_EVENT, UNKNOWN_EVENT):
            return None
        if ev.id == CATALOG_EVENT:
            entry = entry_of(ev)
            if entry is None or TRANSFER_DIR not in entry.module or not entry.fmt:
                return None
            return connector_of(entry.module), entry.fmt
        module = transfer_module_named(rec.file) if rec.file else None
        if module is not None:
            return connector_of(module), shape_claim(rec.msg)
        # printed elsewhere (a factory that builds connectors): only a line naming a connector whose library is missing
        named = _CONNECTOR_CLASS.search(rec.msg) if _MISSING.search(rec.msg) else None
        return None if named is None else (named.group(1).lower(), shape_claim(rec.msg))

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.lines:
            return []
        self.claims = (*(m for per in self.messages.values() for m in per), *self.native)
        parts = []
        for connector, per in sorted(self.messages.items(), key=lambda kv: -sum(kv[1].values())):
            top = "; ".join(f"'{self._shown(m)}' ×{n}" for m, n in per.most_common(3))
            parts.append(f"{connector}: {top}")
        if self.native:
            top = "; ".join(f"'{self._shown(m)}' ×{n}" for m, n in self.native.most_common(2))
            parts.append(f"the transfer engine's own (native) errors: {top}")
        ids = f" Requests named: {', '.join(self.ids[:3])}." if self.ids else ""
        cause = self._cause()
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=f"{self.lines} ERROR line(s) of vLLM's KV-transfer code — {' | '.join(parts)}.{ids} {self._meaning()}",
            count=self.lines, causes=[cause],
            evidence=[evidence_of(e, 400) for e in (*self.first, *([self.native_first] if self.native_first else []))],
            identity=f"{self.code}|{'+'.join(sorted(self.messages))}", first_seen=rec_time(self.first[0].rec),
            measurements={"lines": self.lines, "by_connector": {c: sum(p.values()) for c, p in self.messages.items()},
                          "messages": {c: dict(p.most_common(5)) for c, p in self.messages.items()},
                          "request_ids": self.ids[:MAX_IDS], "native_transfer_errors": sum(self.native.values())},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )]

    def _shown(self, message: str) -> str:
        """A message as the summary quotes it: its format when catalogued, else its first line as printed."""
        return self.examples.get(message, message)[:120]

    def _meaning(self) -> str:
        if self.missing is not None:
            return ("The connector could not load its transport library, so it was never created: the engine does "
                    "not start with it, and nothing was transferred.")
        return ("A connector logs at ERROR when a request's KV could not be sent, pulled, stored or loaded; vLLM then "
                "recomputes or fails the request (kv_load_failure_policy; KV003 when its line is in the input), or the "
                "request waits when the connector's own thread failed.")

    def _cause(self) -> Cause:
        """A library the connector could not load, when a line says so; else a transfer that failed."""
        if self.missing is not None:
            return Cause("connector-library-missing", 0.85, for_=[f"'{self.missing.rec.msg.strip()[:160]}'"],
                         **fix_and_confirm("connector-library-missing"))
        if self.telemetry is not None and "nixl" in self.messages:
            t = self.telemetry.rec
            return Cause("nixl-telemetry-disabled", 0.8,
                         for_=[f"NIXL's agent: '{t.msg.strip()[:120]}' ({t.file}:{t.src_line}), beside the connector's "
                               "failures: a transfer that completed is counted as failed"],
                         **fix_and_confirm("nixl-telemetry-disabled"))
        return Cause("kv-transfer-failed", 0.7, for_=[f"{self.lines} ERROR line(s) of vLLM's KV-transfer code"],
                     against=["the lines say what failed, not always why: the peer's own log may hold the reason"],
                     **fix_and_confirm("kv-transfer-failed"))

