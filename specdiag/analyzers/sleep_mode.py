"""SRV008 — vLLM's sleep-mode allocator could not map GPU memory (``csrc/cumem_allocator.cpp``)."""

from __future__ import annotations

from collections import Counter

from specdiag.analyzers.base import NOT_YET, Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

MAX_FIRST = 3


@register
class SleepModeMemory(Rule):
    """vLLM's sleep-mode allocator could not map GPU memory: a wake-up (or an allocation) found the GPU full.

    Detects: ``CUDA Error: <error> at …/csrc/cumem_allocator.cpp:N``, printed by the allocator vLLM uses with
    ``enable_sleep_mode`` (``CuMemAllocator``, 0.7.3+) when a CUDA driver call fails: ``out of memory`` from
    ``cuMemCreate``, then ``invalid argument`` from the calls on the handle that was never made. Python then raises
    ``RuntimeError: CUDA Error: …`` from ``create_and_map`` (SRV001 reads that one when the engine dies of it).

    Why it matters: sleep mode frees the GPU memory of weights and KV cache (``/sleep``, ``llm.sleep()``) so that
    another process (an RL trainer colocated on the same GPUs) can use it; ``wake_up`` maps it again and needs it
    free. What the other process still holds at that moment (its activations, optimizer state, a cache torch did not
    return) is missing, and the wake-up fails: the rollout engine cannot run.

    Causes weighed: ``sleep-wake-oom`` (out of memory: the memory sleep freed was not free again), ``sleep-map-failed``
    (another driver error only).

    Fix: free the other process's GPU memory before ``wake_up`` (offload the trainer's model and optimizer,
    ``torch.cuda.empty_cache()``), lower the engine's ``gpu_memory_utilization``, or wake the weights and the KV
    cache separately (``wake_up(tags=["weights"])`` first, where the release has tags).

    References: vLLM ``csrc/cumem_allocator.cpp``, ``vllm/device_allocator/cumem.py`` (``wake_up``,
    ``create_and_map``); vLLM #13941, PR #12981; OpenRLHF #1050; lmm-r1 #43; verl #302.
    """

    code = "SRV008"
    name = "sleep-mode-memory"
    title = "vLLM's sleep-mode allocator could not map GPU memory"
    severity = "error"
    severity_note = "warning when no line says out of memory"
    family = "SRV"
    cause_ids = ("sleep-wake-oom", "sleep-map-failed")
    events = frozenset({"E_CUMEM_ERROR"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.errors: Counter[str] | None = None
        self.first: list[Event] = NOT_YET

    def observe(self, ev: Event) -> None:
        if self.errors is None:
            self.errors, self.first = Counter(), []
        self.errors[(ev.f.get("detail") or "").strip()[:80]] += 1
        if len(self.first) < MAX_FIRST:
            self.first.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.errors is None:
            return []
        oom = sum(n for e, n in self.errors.items() if "out of memory" in e)
        lines = sum(self.errors.values())
        kinds = ", ".join(f"'{e}' ×{n}" for e, n in self.errors.most_common(4))
        b = CauseBoard()
        b.add("sleep-wake-oom", 0.5 if oom else 0.1, **fix_and_confirm("sleep-wake-oom"))
        b.add("sleep-map-failed", 0.2 if oom else 0.5, **fix_and_confirm("sleep-map-failed"))
        if oom:
            b.support("sleep-wake-oom", 3, f"'out of memory' ×{oom} from the allocator (cuMemCreate)")
        causes = b.ranked(ceiling=0.85)
        summary = (f"vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp) reported {lines} failed CUDA driver call(s): "
                   f"{kinds}. It maps the weights' and KV cache's memory again at wake_up, so "
                   + ("the GPU had no room for what sleep had freed: another process (a colocated trainer) held it. "
                      "The 'invalid argument' lines after it are calls on the handle that was never made."
                      if oom else "the engine's memory is not mapped again and it cannot run."))
        return [Finding(
            rule=self.code, severity="error" if oom else "warning", title=self.title, summary=summary, count=lines,
            evidence=[evidence_of(e, 400) for e in self.first], causes=causes, identity=f"{self.code}|{bool(oom)}",
            first_seen=rec_time(self.first[0].rec), headline=f"cumem_allocator: {kinds}",
            measurements={"lines": lines, "out_of_memory": oom, "errors": dict(self.errors.most_common(8))},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]
