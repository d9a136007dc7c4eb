"""KV004 — LMCache runs in degraded mode (initialisation failed or unhealthy): nothing is cached."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.events.rows import LookupRows
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState


@register
class LMCacheDegraded(Rule):
    """LMCache is in degraded mode: it neither stores nor loads KV.

    Detects: ``Failed to initialize LMCacheManager components: … System will operate in degraded mode``,
    ``LMCacheEngine marked as init failed``, ``Skipping post_init``, the health monitor's ``System
    unhealthy``, ``LMCache is unhealthy, skipping …``, the multi-process ``LMCache server is unhealthy``,
    and the lookup RPC timeouts that follow when the worker-side lookup server never started.

    Why it matters: the server keeps answering, so the failure is silent — but every prompt is
    recomputed, and with a dead lookup server each request waits for the lookup timeout (about 3 s).

    Causes weighed: ``no-device-connector`` (no LMCache connector for this device, e.g. vLLM's CPU
    backend: ``No supported cpu connector found``), ``init-failure`` (another exception during LMCache
    initialisation), ``health-monitor`` (LMCache declared itself unhealthy at run time),
    ``vendored-adapter-import`` (vLLM's bundled adapter cannot import the installed LMCache).

    Fix: depends on the cause; for the CPU backend, provide a CPU connector (see ``specdiag repro
    --device cpu``) or disable the KV connector.

    References: LMCache ``v1/manager.py`` (0.5.6 :107, :189), ``v1/gpu_connector/__init__.py:247``,
    ``v1/health_monitor/base.py``; ``docs/rules/KV004.md``.
    """

    code = "KV004"
    name = "lmcache-degraded-mode"
    title = "LMCache is in degraded mode: no KV cache is stored or loaded"
    severity = "warning"
    family = "KV"
    cause_ids = ("no-device-connector", "init-failure", "health-monitor", "vendored-adapter-import", "lmcache-torch-abi",
                 "lmcache-vllm-version")
    #: ``V_EXC``: the same exception lines behind vLLM's header — ``logger.exception`` prints every traceback line
    #: with it (``NewLineFormatter``), so a worker's or engine core's ImportError arrives as a vLLM record
    events = frozenset({"C32", "C33", "C33b", "C34", "R8", "P3", "Z1", "L7", "E_NO_CONNECTOR", "E_IMPORT", "V_EXC",
                        "V_CONNECTOR"})
    tables = frozenset({"lookups"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.init_fail: list[Event] = []
        self.unhealthy: list[Event] = []
        self.timeouts: list[Event] = []
        self.no_connector: Event | None = None
        self.import_err: Event | None = None
        self.lookups = 0
        self.zero = 0
        self.n_unhealthy = 0
        self.n_timeouts = 0
        self.adapter: str | None = None  # which adapter vLLM's connector imports: "native" (vLLM's copy), "latest dev"

    def observe(self, ev: Event) -> None:
        tid = ev.id
        if tid in ("C32", "C33", "C33b"):
            if len(self.init_fail) < 6:
                self.init_fail.append(ev)
            if "connector found" in ev.rec.text and self.no_connector is None:
                self.no_connector = ev
        elif tid in ("C34", "R8", "P3"):
            if tid == "C34" and ev.f.get("state") == "recovered":
                return
            self.n_unhealthy += 1
            if len(self.unhealthy) < 4:
                self.unhealthy.append(ev)
        elif tid in ("Z1", "L7"):
            self.n_timeouts += 1
            if len(self.timeouts) < 4:
                self.timeouts.append(ev)
        elif tid == "E_NO_CONNECTOR":
            self.no_connector = self.no_connector or ev
        elif tid == "E_IMPORT":
            if "lmcache" in ev.rec.text.lower() and self.import_err is None:
                self.import_err = ev
        elif tid == "V_EXC":
            self._vllm_exception(ev)
        elif tid == "V_CONNECTOR":
            self.adapter = self.adapter or ev.f.get("which")

    def _vllm_exception(self, ev: Event) -> None:
        """An exception line behind vLLM's header: LMCache's missing-connector error or an LMCache import error."""
        exc, detail = ev.f.get("exc") or "", ev.f.get("detail") or ""
        if exc.endswith("RuntimeError") and detail.startswith("No supported ") and "connector found" in detail:
            self.no_connector = self.no_connector or ev  # v1/gpu_connector/__init__.py:247 (LMCache 0.5.6)
        elif exc.endswith(("ImportError", "ModuleNotFoundError")) and "lmcache" in detail.lower():
            self.import_err = self.import_err or ev

    def observe_rows(self, rows: LookupRows) -> None:
        self.lookups += len(rows)  # one per request
        self.zero += rows.hit[rows.lo : rows.hi].count(0)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not (self.init_fail or self.unhealthy or self.no_connector or self.import_err):
            return []  # lookups that timed out with no line of a failed start or an unhealthy server: KV010's
        if self.import_err is not None and not (self.init_fail or self.unhealthy or self.no_connector or self.n_timeouts):
            return [self._import_failed()]
        b = CauseBoard()
        b.add("no-device-connector", 0.3, **fix_and_confirm("no-device-connector"))
        b.add("init-failure", 0.4, **fix_and_confirm("init-failure"))
        b.add("health-monitor", 0.2, **fix_and_confirm("health-monitor"))
        b.add("vendored-adapter-import", 0.1, **fix_and_confirm("vendored-adapter-import"))
        if self.no_connector is not None:
            b.support("no-device-connector", 20, f"'No supported {ctx.device or ''} connector found' (line {self.no_connector.rec.line})".replace("  ", " "))
            b.oppose("init-failure", 3, "the init exception is the missing device connector")
        else:
            b.oppose("no-device-connector", 5, "no 'No supported … connector found' error")
        if self.init_fail:
            b.support("init-failure", 3, f"initialisation failed (line {self.init_fail[0].rec.line})")
        else:
            b.rule_out("init-failure", "no initialisation failure logged")
        if self.unhealthy:
            b.support("health-monitor", 6, f"{self.n_unhealthy} 'unhealthy' line(s) (line {self.unhealthy[0].rec.line})")
        else:
            b.oppose("health-monitor", 4, "no health-monitor line")
        if self.import_err is not None:
            b.support("vendored-adapter-import", 10, f"LMCache import failed: {self.import_err.rec.text.splitlines()[-1][:100]}")
        else:
            b.rule_out("vendored-adapter-import", "no LMCache import error")
        evidence = []
        for e in [*self.init_fail[:2], self.no_connector, *self.unhealthy[:2], *self.timeouts[:2], self.import_err]:
            if e is not None and all(x.line != e.rec.line for x in evidence):
                evidence.append(evidence_of(e))
        summary = "LMCache initialisation failed; it runs in degraded mode (recompute): nothing is stored or loaded."
        if not self.init_fail and self.unhealthy:
            summary = "LMCache declared itself unhealthy and skipped stores/loads."
        if self.n_timeouts:
            summary += (f" {self.n_timeouts} lookup RPC timeout(s): each request waited for the lookup timeout "
                        f"and got 0 hits ({self.zero} of {self.lookups} lookups reported 0).")
        meas = {"init_failures": len(self.init_fail), "unhealthy_lines": self.n_unhealthy, "lookup_timeouts": self.n_timeouts,
                "lookups": self.lookups, "lookups_with_zero_hits": self.zero}
        return [Finding(rule=self.code, severity="warning", title=self.title, summary=summary, count=1,
                        evidence=evidence, measurements=meas, causes=b.ranked(ceiling=0.9),
                        identity=f"degraded|{bool(self.no_connector)}",
                        next_steps=["Fix the initialisation error, restart, and check for 'LMCache initialized for role "
                                    "KVConnectorRole.WORKER … metadata: LMCacheEngineMetadata(…)' (not 'None')."])]

    def _import_failed(self) -> Finding:
        """LMCache could not be imported: vLLM's connector is never created, which is no degraded mode (that is
        LMCache running without its caches) but a server that does not start. Which pairing broke is in the error."""
        err = self.import_err
        last = err.rec.text.splitlines()[-1].strip() if err.rec.text else err.rec.msg
        b = CauseBoard()
        b.add("lmcache-torch-abi", 0.2, **fix_and_confirm("lmcache-torch-abi"))
        b.add("lmcache-vllm-version", 0.2, **fix_and_confirm("lmcache-vllm-version"))
        b.add("vendored-adapter-import", 0.2, **fix_and_confirm("vendored-adapter-import"))
        if "undefined symbol" in last:
            b.support("lmcache-torch-abi", 10, f"'{last[:120]}': a compiled module misses a symbol of the torch it "
                                               "was built with")
        else:
            b.oppose("lmcache-torch-abi", 4, "no 'undefined symbol' in the error")
        if "No module named 'vllm" in last or "from 'vllm" in last:
            b.support("lmcache-vllm-version", 10, f"'{last[:120]}': a vLLM module LMCache imports is missing")
        else:
            b.oppose("lmcache-vllm-version", 3, "the missing name is not vLLM's")
        if self.adapter == "latest dev":
            b.rule_out("vendored-adapter-import", "'Initializing latest dev LMCache connector': vLLM imports LMCache's "
                                                  "own adapter here, not its vendored copy (use_native is off)")
        elif self.adapter == "native":
            b.support("vendored-adapter-import", 2, "'Initializing native LMCache connector': vLLM's vendored adapter")
        causes = b.ranked(ceiling=0.9)
        adapter = {"native": " through vLLM's vendored adapter (use_native)",
                   "latest dev": " through LMCache's own adapter"}.get(self.adapter or "", "")
        return Finding(
            rule=self.code, severity="error", title="LMCache could not be imported: vLLM cannot create its LMCache connector",
            summary=(f"Importing LMCache failed{adapter}: '{last[:200]}'. vLLM cannot create the LMCache connector, so "
                     "the server does not start (this is no degraded mode: nothing of LMCache runs)."),
            count=1, evidence=[evidence_of(err)], causes=causes, identity=f"{self.code}|import|{causes[0].id}",
            measurements={"import_error": last[:200], "adapter": self.adapter},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"])

