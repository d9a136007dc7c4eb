"""SRV003 — an engine process waited minutes for another over vLLM's shared-memory message queue."""

from __future__ import annotations

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import fmt_log_time, rec_time

#: processes whose waits are kept apart (a hostile input naming thousands adds nothing)
MAX_PROCESSES = 64
#: lines of one wait are an interval apart; a gap this much longer starts another wait
GAP_SLACK = 1.5


class _Waits:
    """One process's wait lines: how many, the longest run of them an interval apart, the first and last."""

    __slots__ = ("first", "last", "lines", "run", "longest", "last_t", "interval")

    def __init__(self, ev: Event, interval: int) -> None:
        self.first = self.last = ev
        self.lines = self.run = self.longest = 0
        self.last_t: float | None = None
        self.interval = interval

    def add(self, ev: Event, t: float | None) -> None:
        self.lines += 1
        self.last = ev
        near = t is not None and self.last_t is not None and t - self.last_t <= self.interval * GAP_SLACK
        self.run = self.run + 1 if near or self.last_t is None or t is None else 1
        self.longest = max(self.longest, self.run)
        self.last_t = t if t is not None else self.last_t


@register
class EngineStall(Rule):
    """An engine process waited minutes for another: a worker hung, or worked long while starting.

    Detects: vLLM's ``No available shared memory broadcast block found in 60 seconds`` (``shm_broadcast.py``; INFO
    from 0.11.0, WARNING 0.6.0–0.6.4 as ``No available block found``; the DEBUG lines of 0.6.5–0.10.2 are not read,
    as reading every DEBUG record of that first word would cost a DEBUG flood its count), printed by a side
    of the engine core's message queue to its workers (``MessageQueue``) that waited
    ``VLLM_RINGBUFFER_WARNING_INTERVAL`` seconds for the other, and again every interval of the same wait.

    Why it matters: every step passes through that queue; a minute without a block is an engine that serves
    nothing meanwhile. While serving, a step never takes that long: a worker is stuck (a collective whose peer
    stopped, a kernel that does not return), and the engine dies when the RPC times out, or hangs. While
    starting, it may be compilation or weight/KV quantization of a large model.

    Causes weighed: ``worker-hang``, ``long-startup-work`` (only before any stats line: the engine was not yet
    serving); and, from the Ray executor's ``Waiting for creating a placement group of specs for N seconds``
    (``executor/ray_utils.py``) with no such wait, ``ray-placement``: the engine waited for Ray to have room for its
    workers' GPU bundles.

    Fix: dump the processes' stacks while it waits (py-spy); a collective names the peer to read.

    References: vLLM ``distributed/device_communicators/shm_broadcast.py``; PR #25566 (the message reworded,
    as users read it for a shared-memory size problem).
    """

    code = "SRV003"
    name = "engine-stalled"
    title = "An engine process waited minutes for another: a worker hung, or worked long while starting"
    severity = "warning"
    severity_note = "error when the engine was serving (stats lines before it) and one wait lasted 3 intervals or more"
    family = "SRV"
    cause_ids = ("worker-hang", "long-startup-work", "ray-placement")
    events = frozenset({"V_SHM_WAIT", "V_SHM_WAIT_OLD", "V_STATS_V0", "V_PG_WAIT"})
    tables = frozenset({"metrics"})  # a stats line before the wait (V1's as rows, V0's as events): it was serving
    defaults = {"error_intervals": 3}

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.waits: dict[str, _Waits] = {}
        self.serving = False  # a stats line came before the first wait
        #: each process's 'Waiting for creating a placement group …' lines (the Ray executor's): first, last, how many
        self.placing: dict[str, _Waits] = {}

    def observe_metrics(self, rows) -> None:
        if not self.waits:
            self.serving = True

    def observe(self, ev: Event) -> None:
        if ev.id == "V_STATS_V0":
            self.observe_metrics(None)
            return
        waits = self.placing if ev.id == "V_PG_WAIT" else self.waits
        key = ev.rec.origin.key
        w = waits.get(key)
        if w is None:
            if len(waits) >= MAX_PROCESSES:
                return
            w = waits[key] = _Waits(ev, ev.f.get("seconds") or 60)
        w.add(ev, rec_time(ev.rec))

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if not self.waits:
            return [self._placement()] if self.placing else []
        worst = max(self.waits.values(), key=lambda w: w.longest)
        waited = worst.longest * worst.interval
        lines = sum(w.lines for w in self.waits.values())
        error = self.serving and worst.longest >= self.options["error_intervals"]
        causes = self._causes(waited, ctx.startup_seen)
        who = worst.first.rec.origin.proc or "the process"
        when = ("while it was serving (stats lines before it)" if self.serving
                else "with no stats line before it, after the engine's start-up lines: it may still have been starting"
                if ctx.startup_seen else "in an excerpt with neither the start-up nor a stats line before it: whether "
                "the engine was serving or still starting is not in the input")
        summary = (f"{who} waited at least {waited} s ({worst.longest} line(s) {worst.interval} s apart, "
                   f"{fmt_log_time(rec_time(worst.first.rec))} to {fmt_log_time(rec_time(worst.last.rec))}) for another "
                   f"process of the engine over vLLM's shared-memory message queue, {when}; {lines} such line(s) from "
                   f"{len(self.waits)} process(es). The message is no shared-memory size problem: one side of the "
                   "queue got nothing from the other for that long.")
        return [Finding(
            rule=self.code, severity="error" if error else "warning", title=self.title, summary=summary, count=lines,
            evidence=[evidence_of(worst.first, 400), evidence_of(worst.last, 400)], causes=causes,
            identity=f"{self.code}|{causes[0].id}", first_seen=rec_time(worst.first.rec),
            measurements={"longest_wait_s": waited, "wait_lines": lines, "processes": len(self.waits),
                          "interval_s": worst.interval, "serving_before": self.serving},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _placement(self) -> Finding:
        """The Ray executor waited for Ray to place its workers: the engine does not start meanwhile (the process
        that waited longest; its latest line says how long)."""
        w = max(self.placing.values(), key=lambda p: p.last.f.get("seconds") or 0)
        first, last = w.first, w.last
        waited = last.f.get("seconds") or 0
        bundles = last.rec.msg.count("'GPU'")
        cause = Cause("ray-placement", 0.8, for_=[f"'Waiting for creating a placement group of specs for {waited} "
                                                    f"seconds' ({bundles or 'its'} GPU bundle(s))"],
                      **fix_and_confirm("ray-placement"))
        return Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"vLLM's Ray executor waited at least {waited} s for Ray to place its workers' "
                     f"{bundles or ''} GPU bundle(s) ({fmt_log_time(rec_time(first.rec))} to "
                     f"{fmt_log_time(rec_time(last.rec))}): the engine does not start until Ray has room, and gives up "
                     "after 1,800 s (executor/ray_utils.py PG_WAIT_TIMEOUT: 'Cannot provide a placement group …')."),
            count=w.lines, evidence=[evidence_of(e, 400) for e in dict.fromkeys((first, last))],
            causes=[cause], identity=f"{self.code}|ray-placement", first_seen=rec_time(first.rec),
            measurements={"placement_wait_s": waited, "gpu_bundles": bundles or None},
            next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
        )

    def _causes(self, waited: int, startup_seen: bool) -> list[Cause]:
        """A hang while serving; while starting, long work is as likely until the wait outlasts ten minutes; with
        neither in the excerpt, a hang a little more (a step is far more often waited on than a start-up)."""
        hang, work = fix_and_confirm("worker-hang"), fix_and_confirm("long-startup-work")
        if self.serving:
            return [Cause("worker-hang", 0.75, for_=["stats lines before the wait: the engine was serving, where no "
                                                      "step takes a minute"], **hang)]
        long_wait = waited >= 600
        unknown = [] if startup_seen else ["the excerpt shows no start-up line: when the wait began is not known"]
        hang_p = 0.5 if long_wait else (0.35 if startup_seen else 0.4)
        work_p = 0.3 if long_wait else (0.45 if startup_seen else 0.3)
        return sorted([Cause("worker-hang", hang_p, for_=[f"a wait of {waited} s"],
                             against=["no stats line before it: it may be start-up work"], **hang),
                       Cause("long-startup-work", work_p, for_=["no stats line before the wait"],
                             against=([f"{waited} s is long even for a large model's compilation"] if long_wait else [])
                             + unknown, **work)],
                      key=lambda c: -c.confidence)
