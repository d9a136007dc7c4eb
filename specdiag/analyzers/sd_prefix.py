"""SD007 — prefix-cache hit rate stuck at 0 % with an EAGLE/MTP drafter on a hybrid model."""

from __future__ import annotations

from specdiag.analyzers.base import register
from specdiag.analyzers.sd_common import (
    HYBRID_HINTS,
    SpecSeriesRule,
    dedupe_evidence,
    ev_of,
    is_eagle_family,
    method_of,
)
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState


@register
class PrefixZeroEagleHybrid(SpecSeriesRule):
    """vLLM's prefix-cache hit rate stays at 0 % with an EAGLE-family drafter on a hybrid model.

    Detects: prefix caching on (the V1 default), an EAGLE/EAGLE-3/MTP/DFlash/DSpark method, a hybrid
    (Mamba/linear-attention) architecture from ``Resolved architecture`` or the model name, and every
    stats line with prompt traffic reporting ``Prefix cache hit rate: 0.0%``.

    Why it matters: EAGLE-family drafters drop the last matched block on a prefix hit to recompute hidden
    states; on hybrid models this leaves no usable hit at all, so every prompt is fully prefilled.

    Causes weighed: ``eagle-block-drop``.

    Fix: set ``disable_eagle_block_drop: true`` in ``--speculative-config`` where available (vLLM 0.32),
    accept the cost, or use a non-EAGLE method on this model.

    References: reference ``spec-decode.md`` §6; vLLM issues #40624, #38182, #54360;
    ``config/speculative.py:452`` (``disable_eagle_block_drop``).
    """

    code = "SD007"
    name = "spec-prefix-cache-zero-hybrid"
    title = "Prefix cache never hits: EAGLE/MTP block drop on a hybrid model"
    severity = "warning"
    cause_ids = ("eagle-block-drop",)
    defaults = {"min_intervals": 5}
    events = SpecSeriesRule.events | frozenset({"V_ARCH"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.arch: Event | None = None

    def observe_other(self, ev: Event) -> None:
        if ev.id == "V_ARCH" and self.arch is None:
            self.arch = ev

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        method = method_of(ctx)
        if not is_eagle_family(method) or ctx.prefix_caching is False:
            return []
        if (ctx.speculative or {}).get("disable_eagle_block_drop"):
            return []
        names = " ".join(x for x in (self.arch.f.get("arch") if self.arch else None, ctx.model) if x).lower()
        compact = names.replace("-", "").replace("_", "")
        hybrid = next((h for h in HYBRID_HINTS if h in names or h.replace("_", "") in compact), None)
        if hybrid is None:
            return []
        out = []
        for label, items in self.engines():
            busy = [iv for iv in items if iv.prefix is not None and (iv.prompt_tps or 0) > 0]
            if len(busy) < self.options["min_intervals"] or any(iv.prefix > 0 for iv in busy):
                continue
            ev = [ev_of(busy[0], spec=False), ev_of(busy[-1], spec=False)]
            if self.arch is not None:
                ev.insert(0, evidence_of(self.arch, None))
            out.append(Finding(
                rule=self.code, severity="warning", title=self.title,
                summary=(f"{label}: {len(busy)} stats intervals with prompt traffic all report a 0.0% prefix cache hit "
                         f"rate; method {method} on a hybrid model ({hybrid!r} in {names!r})."),
                count=len(busy), evidence=dedupe_evidence(ev),
                measurements={"engine": label, "method": method, "intervals": len(busy), "architecture": names},
                causes=[Cause("eagle-block-drop", 0.75,
                              for_=[f"{method} drops the last matched block on prefix hits",
                                    "0 % hits are reported on hybrid models (vLLM #40624, #38182, #54360)"],
                              fix="Set disable_eagle_block_drop: true in --speculative-config (vLLM 0.32+).",
                              confirm_with="send the same prompt twice and compare 'Prefix cache hit rate' with "
                                           "and without disable_eagle_block_drop")],
                identity=f"{label}|{method}", first_seen=busy[0].t,
                next_steps=["Try disable_eagle_block_drop: true and watch the prefix cache hit rate."],
            ))
        return out
