"""KV005/KV006 — known LMCache crash signatures."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time


@register
class AsyncLoadingInvalidatedObject(Rule):
    """LMCache async loading touched an invalidated memory object.

    Detects: ``Trying to access an invalidated MemoryObj`` from LMCache, especially when followed by the
    worker's ``assert memory_obj.tensor is not None`` AssertionError and the engine's death, with
    ``enable_async_loading: True``.

    Why it matters: a chunk freed while an async lookup still referenced it is loaded anyway; in the
    LMCache 0.5.6 CPU repro this killed the engine after a few requests (every later request: HTTP 500).

    Causes weighed: ``async-loading-invalidated-object`` (the known LMCache async-loading race),
    ``ref-count-bug`` (another double free).

    Fix: set ``enable_async_loading: false`` (sync loading pins chunks until the load completes), or
    upgrade LMCache to a release with the async pin fixes.

    References: LMCache ``v1/memory_management.py:865`` (0.5.6), ``v1/cache_engine.py`` retrieve;
    LMCache issues #3381, #4133; specdiag docs/repro.md.
    """

    code = "KV005"
    name = "lmcache-async-invalidated-object"
    title = "LMCache accessed an invalidated memory object (async loading crash signature)"
    severity = "error"
    severity_note = "error when the load assertion killed the engine, warning when it kept running"
    family = "KV"
    cause_ids = ("async-loading-invalidated-object", "ref-count-bug")
    #: lines that prove the engine died (a header, or the crash dump printed only on its except path)
    DEATH = frozenset({"V_CORE_FATAL", "V_PROC_DIED", "V_DUMP_INPUT", "V_DUMP_SCHED", "V_DUMP_SCHED_OBJ"})
    events = frozenset({"M13", "E_INVALIDATED_ASSERT", "V_INVALIDATED_ASSERT", "L8", "M6"}) | DEATH

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.m13: list[Event] = []
        self.n_m13 = 0
        self.asserts: list[Event] = []
        self.async_seen = False
        self.m6 = 0
        self.death: Event | None = None  # an engine death after the first invalidated access

    def observe(self, ev: Event) -> None:
        if ev.id in self.DEATH:
            if self.m13 and self.death is None:
                self.death = ev
        elif ev.id == "M13":
            self.n_m13 += 1
            if len(self.m13) < 3:
                self.m13.append(ev)
        elif ev.id in ("E_INVALIDATED_ASSERT", "V_INVALIDATED_ASSERT"):
            if len(self.asserts) < 3:
                self.asserts.append(ev)
        elif ev.id == "L8":
            self.async_seen = True
        elif ev.id == "M6":
            self.m6 += 1

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.m13:
            return []
        async_on = ctx.cfg("enable_async_loading") is True or self.async_seen
        crashed = bool(self.asserts) or self.death is not None
        c1 = Cause("async-loading-invalidated-object", 0.8 if async_on else 0.45,
                   **fix_and_confirm("async-loading-invalidated-object"))
        if async_on:
            c1.for_.append("asynchronous loading is on (enable_async_loading / 'Responding to scheduler … retrieved length')")
        else:
            c1.against.append("the log does not show asynchronous loading")
        if self.asserts:
            c1.for_.append(f"the worker then failed 'assert memory_obj.tensor is not None' (line {self.asserts[0].rec.line})")
        elif crashed:
            c1.for_.append(f"the engine died after it (line {self.death.rec.line}; SRV001 has the root error)")
        c2 = Cause("ref-count-bug", 0.1 + (0.3 if self.m6 else 0.0), **fix_and_confirm("ref-count-bug"))
        if self.m6:
            c2.for_.append(f"{self.m6} negative ref-count warning(s)")
        else:
            c2.against.append("no negative ref-count warning")
        causes = sorted([c1, c2], key=lambda c: -c.confidence)
        summary = f"{self.n_m13} 'Trying to access an invalidated MemoryObj' warning(s)"
        summary += (", followed by the load assertion that kills the engine." if self.asserts
                    else ", followed by an engine death (see SRV001)." if crashed else ".")
        return [Finding(rule=self.code, severity="error" if crashed else "warning", title=self.title, summary=summary,
                        count=self.n_m13, evidence=[evidence_of(e, 800) for e in (self.m13[:2] + self.asserts[:1])],
                        measurements={"invalidated_accesses": self.n_m13, "crashed": crashed, "async_loading": async_on},
                        causes=causes, identity=f"m13|{crashed}", first_seen=rec_time(self.m13[0].rec))]


@register
class DraftModelLayerMismatch(Rule):
    """LMCache sized its KV layout without the draft model's layers (``method=draft_model``).

    Detects: LMCache's startup line ``… num_draft_layers: 0`` while vLLM runs speculative decoding with
    ``method='draft_model'``; escalates when the store then fails with ``IndexError: index L is out of
    bounds for dimension 1 with size L`` (and the engine dies).

    Why it matters: LMCache counts extra draft layers only for ``deepseek_mtp`` and EAGLE-family methods,
    but vLLM registers the draft model's attention layers as extra KV caches, so LMCache's layer count is
    short and the first store indexes past it (observed on CPU with LMCache 0.5.6; expected on GPU too).

    Causes weighed: ``draft-layer-count-mismatch``.

    Fix: do not combine LMCache with ``method=draft_model`` on affected versions (use ngram/EAGLE/MTP, or
    disable the KV connector for the draft setup) until LMCache counts draft-model layers.

    References: LMCache ``integration/vllm/utils.py:569-597`` (``calculate_draft_layers``, 0.5.6);
    vLLM ``v1/spec_decode/draft_model.py``; specdiag docs/repro.md.
    """

    code = "KV006"
    name = "lmcache-draft-layer-mismatch"
    title = "LMCache counts 0 draft layers while vLLM runs a draft model"
    severity = "error"
    family = "KV"
    cause_ids = ("draft-layer-count-mismatch",)
    events = frozenset({"C12", "E_INDEX_LAYERS", "E_WORKER_FAILED", "V_EXC"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.c12: Event | None = None
        self.index_err: Event | None = None

    def observe(self, ev: Event) -> None:
        if ev.id == "C12":
            if ev.f.get("draft_layers") == 0 and self.c12 is None:
                self.c12 = ev
        elif ev.id == "E_INDEX_LAYERS" or ev.id in ("E_WORKER_FAILED", "V_EXC") and "out of bounds for dimension" in ev.rec.text:
            self.index_err = self.index_err or ev

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        spec = ctx.speculative or {}
        if self.c12 is None or spec.get("method") != "draft_model":
            return []
        crashed = self.index_err is not None
        cause = Cause("draft-layer-count-mismatch", 0.9 if crashed else 0.7,
                      for_=["LMCache logged num_draft_layers: 0", "speculative_config method is draft_model"],
                      **fix_and_confirm("draft-layer-count-mismatch"))
        if crashed:
            cause.for_.append(f"the store failed: {self.index_err.rec.text.strip().splitlines()[-1][:120]} (line {self.index_err.rec.line})")
        ev = [evidence_of(self.c12, 800)] + ([evidence_of(self.index_err, 800)] if crashed else [])
        summary = ("vLLM registers the draft model's layers as extra KV caches, LMCache sized its objects for the target "
                   "layers only" + (": the first store failed and the engine died." if crashed else ": the first store will fail."))
        return [Finding(rule=self.code, severity="error", title=self.title, summary=summary, count=1, evidence=ev,
                        measurements={"num_draft_layers": 0, "method": "draft_model", "crashed": crashed,
                                      "num_layer": self.c12.f.get("num_layer")},
                        causes=[cause], identity="draft_model|0")]
