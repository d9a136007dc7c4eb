"""The precursor family (KV011–KV013): a warning LMCache prints before a short load, with no short load in the input.

LMCache prints some warnings because what they report can make a later load of looked-up chunks come up
short: a lost pin (KV011), the pin monitor's forced unpin (KV012), a backend read that failed or came
back empty (KV013). Users paste such a line alone, from an issue thread or a grep. It proves the
condition, not the loss: so each rule here names the cause that line points to, caps its confidence,
shows the lines and says what would show whether a load came up short. When the input does hold a
short load, KV001 reports it and weighs these same lines as that rank's signals
(``kv_shortfall.RetrievalShortfall``), so the rules of this family stay silent then. Beside vLLM's
load-failure outcome alone (``Recovered from KV load failure …``, reported by KV003) they still report:
there the precursor is the only mechanism the input offers for that failure.
"""

from __future__ import annotations

import re
from typing import ClassVar

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import CATALOG, fix_and_confirm
from specdiag.analyzers.kv_coverage import input_kind
from specdiag.analyzers.kv_shortfall import complete_retrieve
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

#: a short load is in the input: KV001 reports it and weighs the precursors as that rank's signals
SHORTFALL_EVENTS = frozenset({"R2", "R3", "R4"})
#: vLLM's KV load failure outcome (recovered / failed requests): KV003 reports the impact, not the mechanism,
#: and KV001 needs LMCache's own lines, so beside these alone a precursor is the only candidate mechanism
OUTCOME_EVENTS = frozenset({"V1", "V2"})
#: LMCache's own failed-read lines, which KV001 reports as a loss when no shortfall line is there
#: (``RetrievalShortfall._from_read_failure``): ``… can't be retrieved``, ``… Returning partial results``,
#: ``Failed to allocate memory during remote receive``
READ_LOSS_EVENTS = frozenset({"R7", "D5", "X7"})
#: the pin monitor's forced unpin: it sets the pin count to 0, so the request's own unpin after its load
#: drives the count to -1 ('Pin count … is negative'): a consequence of the timeout, not a double-unpin bug
FORCED_UNPIN = frozenset({"M8", "M9"})
#: no short load in the input: nothing is proven lost; the ceiling of every cause of this family
CEILING = 0.6
#: ... and lower still when the input shows loads of that deployment that were complete
CEILING_COMPLETE_LOADS = 0.4
MAX_EXAMPLES = 4


class LoadWatch:
    """What the input says of loads, for a rule that holds a precursor: a short load that KV001 reports
    (its lines, or LMCache's own failed-read line), vLLM's load-failure outcome lines, complete retrieves."""

    events = SHORTFALL_EVENTS | READ_LOSS_EVENTS | OUTCOME_EVENTS

    def __init__(self) -> None:
        self.short = False
        self.outcomes = 0

    def see(self, ev: Event) -> bool:
        """Take a load line; False for any other event."""
        if ev.id in OUTCOME_EVENTS:
            self.outcomes += 1
        elif ev.id in SHORTFALL_EVENTS or ev.id in READ_LOSS_EVENTS:
            self.short = self.short or not (ev.id == "R4" and complete_retrieve(ev))
        else:
            return False
        return True

    def sentence(self, loads: int) -> str:
        """What the input shows of the loads these lines could affect."""
        if self.outcomes:
            return (f"vLLM reported {self.outcomes} KV load failure(s) in the input (KV003), but none of LMCache's "
                    "lines of that load, which would tie it to these warnings.")
        if loads:
            return f"The {loads} retrieve(s) in the input loaded all they were asked for."
        return "No short load is in the input."

    def clause(self, loads: int) -> str:
        """The same, in a few words, for the verdict line."""
        if self.outcomes:
            return "vLLM reported a KV load failure"
        return f"the {loads} retrieve(s) in the input were complete" if loads else "no short load in the input"

    def weigh(self, b: CauseBoard, cause_ids: tuple[str, ...], loads: int) -> float:
        """For or against each cause from the loads; returns the confidence ceiling."""
        for cid in cause_ids:
            if self.outcomes:
                b.support(cid, 1.5, "vLLM reported a KV load failure in the input: some load did fail, though the "
                          "lines that would tie it to this rank are not here")
            elif loads:
                b.oppose(cid, 3, f"the {loads} retrieve(s) in the input loaded all they were asked for")
            else:
                b.oppose(cid, 2, "no short load in the input: nothing is proven lost yet")
        return CEILING_COMPLETE_LOADS if loads and not self.outcomes else CEILING


def rank_words(by_rank: dict[str, int]) -> str:
    """``by rank: TP1: 2, TP3: 1``, or what the input does not show (a line without a process prefix)."""
    known = {r: n for r, n in by_rank.items() if r != "unknown"}
    if not known:
        return "no rank prefix in the input"
    return "by rank: " + ", ".join(f"{r}: {n}" for r, n in sorted(by_rank.items()))


def load_check_step(by_rank: dict[str, int]) -> str:
    """The lines that would show whether a load of these ranks came up short (a next step of every rule
    that holds a precursor without a short load)."""
    ranks = sorted(r for r in by_rank if r != "unknown")
    whose = f"{'/'.join(ranks)}'s" if ranks else "the same worker's"
    return (f"To see whether a load came up short, collect {whose} 'Retrieved X out of Y required tokens' lines "
            "and 'Num retrieved tokens: …, num expected tokens: …' errors after these lines")


class PrecursorRule(Rule):
    """Shared mechanics of the family: count the precursor lines per template and rank, stand down beside a
    short load, and state the finding with the ceiling, the evidence and what to collect.

    A subclass lists its templates in ``precursors`` and writes ``weigh`` (the causes and why) and
    ``describe`` (the lines in words); ``accept`` filters a template's variants that are no precursor.
    """

    family = "KV"
    severity = "warning"
    precursors: ClassVar[frozenset[str]] = frozenset()
    #: the measurement name of each template's count
    measure: ClassVar[dict[str, str]] = {}
    #: report a count of 0 too (a rule with few templates keeps one shape of measurements)
    measure_zeros: ClassVar[bool] = False

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.examples: list[Event] = []
        self.counts: dict[str, int] = dict.fromkeys(self.measure, 0)
        self.by_rank: dict[str, int] = {}
        self.pressure: dict[str, int] = {}
        self.loads = LoadWatch()
        self.max_line = 0
        #: rank → the first forced unpin there, and the negative pin counts that followed one
        self.forced_at: dict[str, Event] = {}
        self.after_forced: list[Event] = []

    def observe(self, ev: Event) -> None:
        """Count a precursor line per rank; load lines and pressure lines only inform the weighing."""
        if self.loads.see(ev):
            return
        rank = ev.rec.origin.rank_label or "unknown"
        if ev.id in PRESSURE_IDS and ev.id not in self.precursors:
            self.pressure[rank] = self.pressure.get(rank, 0) + 1
            return
        if not self.accept(ev):
            return
        self.counts[ev.id] = self.counts.get(ev.id, 0) + 1
        self.by_rank[rank] = self.by_rank.get(rank, 0) + 1
        self.max_line = max(self.max_line, ev.rec.line)
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(ev)

    def accept(self, ev: Event) -> bool:
        return True

    def note_forced(self, ev: Event) -> None:
        rank = ev.rec.origin.rank_label or "unknown"
        self.forced_at.setdefault(rank, ev)

    def follows_forced(self, ev: Event) -> bool:
        """A negative pin count after a forced unpin on the same rank (or where a rank is not shown)."""
        rank = ev.rec.origin.rank_label or "unknown"
        before = [f for r, f in self.forced_at.items() if r == rank or "unknown" in (r, rank)]
        return any((f.rec.path, f.rec.line) < (ev.rec.path, ev.rec.line) for f in before)

    def weigh(self, b: CauseBoard, ctx: Context) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def consequence(self) -> str:  # pragma: no cover - interface
        """What the condition does to a pending load, in one sentence."""
        raise NotImplementedError

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """One finding per deployment when precursor lines are there and no short load is: KV001's otherwise."""
        n = sum(self.counts.values())
        if not n or self.loads.short:
            return []
        b = CauseBoard()
        self.weigh(b, ctx)
        loads = run.count("R4")
        ranked = b.ranked(ceiling=self.loads.weigh(b, self.cause_ids, loads))
        kind = input_kind(ctx, run.lines_read, self.max_line)
        loss = self.loads.sentence(loads)
        counts = {self.measure[k]: v for k, v in self.counts.items() if k in self.measure and (v or self.measure_zeros)}
        return [Finding(rule=self.code, severity="warning", title=self.title,
                        summary=f"{self.describe()} ({rank_words(self.by_rank)}); {self.consequence()} {loss}",
                        headline=f"{self.describe()}; {self.loads.clause(loads)}",
                        count=n, evidence=[evidence_of(e) for e in self.examples],
                        measurements={**counts, "by_rank": self.by_rank, "complete_retrieves": loads, "input_coverage": kind},
                        causes=ranked, next_steps=self.next_steps(ranked),
                        identity=f"{self.name}|{sorted(self.by_rank)}", first_seen=rec_time(self.examples[0].rec))]

    def next_steps(self, ranked: list) -> list[str]:
        """Which lines would show a loss, then the catalog's decisive lines of each cause weighed."""
        steps = [load_check_step(self.by_rank) + " (and vLLM's 'KV load failure' lines)."]
        steps += [f"For {c.id}: collect {CATALOG[c.id].collect}." for c in ranked if CATALOG[c.id].collect]
        return steps


@register
class PinTimeouts(PrecursorRule):
    """LMCache's pin monitor force-unpinned memory objects that stayed pinned past ``pin_timeout_sec``.

    Detects: ``Pin timeout detected for MemoryObj … Elapsed time: Ns. Forcing unpin to 0.`` and ``Force
    unpinned N timeout objects in M pinned_objects within S seconds``, per rank, when the input holds no
    short load (with one, KV001 weighs them as that rank's signals). A ``Pin count … is negative`` warning
    after it on the same rank is its consequence (the request's own unpin once the count was forced to 0)
    and is noted here rather than reported by KV011.

    Why it matters: a lookup pins the chunks it counted until their retrieve. A request that waits longer
    than ``pin_timeout_sec`` (default 300 s) between lookup and load — no free vLLM KV blocks, a long queue,
    preemption — loses those pins, and once the local cache is full, eviction can take the chunks before
    the load, which then comes up short on that rank. The warning itself loses nothing yet, so a pasted
    warning alone is a warning, not a shortfall; memory-pressure lines beside it make the eviction likely.

    Causes weighed: ``pin-timeout``; ``pin-leak`` (pins nothing releases) when a timed-out object held more than
    one pin (a lookup pins a chunk once) or a report forced most of the pinned objects at once.

    Fix: raise ``pin_timeout_sec`` above the longest lookup-to-load wait, or relieve the vLLM KV-block
    pressure that keeps looked-up requests waiting; collect that rank's retrieve lines and errors to see
    whether loads came up short. For a leak, a release with the pin fix: a longer timeout keeps leaked pins.

    References: LMCache 0.3.12+ ``v1/pin_monitor.py`` (0.5.6 :179 the per-object warning, :151 the summary,
    0.3.15+); the shared reference ``mismatch-causes.md`` §3 (pin-timeout; the CPU reproduction in
    ``cpu-repro.md`` §7.2 lost chunks only when a request was held after its lookup while the local cache was
    full and other requests kept storing).
    """

    code = "KV012"
    name = "lmcache-pin-timeouts"
    title = "LMCache force-unpinned chunks that waited past pin_timeout_sec"
    cause_ids = ("pin-timeout", "pin-leak")
    precursors = FORCED_UNPIN
    measure = {"M8": "pin_timeouts", "M9": "force_unpin_reports"}
    events = precursors | PRESSURE_IDS | LoadWatch.events | {"M5"}

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.longest: float | None = None
        self.forced = 0
        self.timeout_s: int | None = None
        self.max_pins = 0  # the highest pin count a timed-out object held
        self.most_forced: tuple[int, int] | None = None  # a report's (forced, pinned) with the largest share forced

    def accept(self, ev: Event) -> bool:
        f = ev.f or {}
        if ev.id == "M5":
            if self.follows_forced(ev):
                self.after_forced.append(ev)
            return False
        self.note_forced(ev)
        if ev.id == "M8" and isinstance(f.get("secs"), float):
            self.longest = max(self.longest or 0.0, f["secs"])
            count = f.get("count") or ""
            if count.isdigit():
                self.max_pins = max(self.max_pins, int(count))
        elif ev.id == "M9" and isinstance(f.get("n"), int):
            if not f["n"]:
                return False  # a report that forced nothing
            self.forced += f["n"]
            self.timeout_s = f.get("secs")
            pinned = f.get("pinned")
            if isinstance(pinned, int) and pinned and (self.most_forced is None or
                                                        f["n"] / pinned > self.most_forced[0] / self.most_forced[1]):
                self.most_forced = (f["n"], pinned)
        return True

    def weigh(self, b: CauseBoard, ctx: Context) -> None:
        b.add("pin-timeout", 1.0, **fix_and_confirm("pin-timeout"))
        b.support("pin-timeout", 3, "LMCache's pin monitor reports the forced unpin itself")
        configured = ctx.cfg("pin_timeout_sec")
        if configured is not None:
            b.note_for("pin-timeout", f"pin_timeout_sec = {configured} in the LMCache config")
        same = [r for r in self.pressure if r in self.by_rank or "unknown" in (r, *self.by_rank)]
        if same:
            b.support("pin-timeout", 1.5, f"{sum(self.pressure[r] for r in same)} memory-pressure line(s) on the "
                      "same rank: a full cache evicts a force-unpinned chunk at once")
        if self.after_forced:
            b.note_for("pin-timeout", f"{len(self.after_forced)} negative pin count(s) after the forced unpin (line "
                       f"{self.after_forced[0].rec.line}): the request's own unpin once the monitor had set the count to 0")
        self._weigh_leak(b)

    def _weigh_leak(self, b: CauseBoard) -> None:
        """Pins nothing releases: more than one pin on a timed-out object, or most pinned objects forced at once."""
        b.add("pin-leak", 0.3, **fix_and_confirm("pin-leak"))
        leak = []
        if self.max_pins > 1:
            leak.append(f"a timed-out object held {self.max_pins} pins (one lookup pins a chunk once)")
        if self.most_forced is not None and self.most_forced[0] * 2 > self.most_forced[1]:
            leak.append(f"{self.most_forced[0]} of {self.most_forced[1]} pinned objects force-unpinned at once")
        for why in leak:
            b.support("pin-leak", 3, why)
            b.oppose("pin-timeout", 1.5, f"{why}: a leak, not one request's wait")
        if not leak:
            b.oppose("pin-leak", 3, "one pin per timed-out object, and no report forced most pinned objects at once")

    def describe(self) -> str:
        parts = []
        if self.counts.get("M8"):
            longest = f", the longest pinned {self.longest:.0f} s" if self.longest is not None else ""
            parts.append(f"{self.counts['M8']} pin timeout(s){longest}")
        if self.counts.get("M9"):
            within = f" ('within {self.timeout_s} seconds')" if self.timeout_s is not None else ""
            parts.append(f"{self.forced} object(s) force-unpinned in {self.counts['M9']} pin-monitor report(s){within}")
        return "LMCache's pin monitor: " + " and ".join(parts)

    def consequence(self) -> str:
        return ("a request that waited that long between its lookup and its load has lost the pins on its chunks, so "
                "eviction can take them before the load, which then comes up short on that rank.")


@register
class BackendReadErrors(PrecursorRule):
    """A storage backend's read failed or came back empty, with no short load in the input.

    Detects: Redis ``Key exists but KV cache does not exist`` (the store evicted the value); remote-backend
    timeouts and errors in ``get`` (``get blocking timeout, trigger cancel the future task``, ``Error occurred
    in get_blocking: … return None``) and connection failures (``Remote connection failed in …``,
    ``Failed to initialize/re-establish remote connection``); Mooncake ``batch_get_into`` / ``batch_get_buffer`` /
    ``get_into … failed``; local disk ``Failed to load chunk from disk`` and ``File not found on disk``. Per
    rank, when the input holds no short load (with one, or with LMCache's own ``… can't be retrieved``
    line, KV001 reports the loss and weighs these lines).

    Why it matters: the lookup counts a chunk when the backend says it holds it; a read of that chunk that
    then fails returns nothing, the retrieve stops at that chunk and the load comes up short. Remote and
    shared backends cannot pin, so a store that evicts (Redis ``maxmemory`` with an LRU policy) loses chunks
    between lookup and read. The line itself shows the failed read, not the load it belonged to.

    Causes weighed: ``remote-backend-loss`` (a remote store evicted or lost what it reported present),
    ``backend-read-failure`` (the read itself failed: a mismatched client API, an I/O error, a timeout),
    ``backend-not-connected`` (the remote client could not be set up, or every connection was refused or reset,
    and no read reached the store: nothing was stored there, nothing was lost).

    Fix: size the remote store so it does not evict, or put a local CPU tier in front of it; fix the read
    path the error names (timeouts: ``blocking_timeout_secs``); collect that rank's retrieve lines and
    errors to see whether loads came up short.

    References: LMCache 0.5.6 ``v1/storage_backend/connector/redis_connector.py:308``,
    ``v1/storage_backend/remote_backend.py`` (:124, :184, :370, :372), ``connector/mooncakestore_connector.py``
    (0.3.5+), ``v1/storage_backend/local_disk_backend.py`` (:590 0.5.2+, :818 0.3.12+); LMCache PR #3410 (remote
    backends cannot pin), issues #1467, #1514, #1686, #1690, #2106.
    """

    code = "KV013"
    name = "lmcache-backend-read-errors"
    title = "An LMCache storage backend failed or emptied reads of cached chunks"
    cause_ids = ("remote-backend-loss", "backend-read-failure", "backend-not-connected")
    precursors = frozenset({"X8", "X2", "X3", "X1", "X5", "X6", "D4", "D6"})
    measure = {"X8": "redis_values_missing", "X2": "remote_get_timeouts", "X3": "remote_get_errors",
               "X1": "remote_connection_failures", "X5": "remote_reconnect_failures", "X6": "mooncake_read_failures",
               "D4": "disk_read_failures", "D6": "disk_files_missing"}
    events = precursors | LoadWatch.events
    #: Mooncake calls that read (``batch_put_from`` is a store: it loses a write, which later misses)
    MOONCAKE_READS = frozenset({"batch_get_buffer", "batch_get_into", "get_into", "batch_is_exist"})
    #: (label, cause, factor, why) per template: what each line says of the two causes
    SUPPORT = {
        "X8": ("Redis value(s) missing", "remote-backend-loss", 8,
               "Redis held the key but not its KV data: the store evicted it after the lookup saw the key"),
        "X2": ("remote get timeout(s)", "backend-read-failure", 4,
               "a remote get ran past blocking_timeout_secs and was cancelled: the read returned nothing"),
        "X3": ("remote get error(s)", "backend-read-failure", 4, "a remote get failed and returned None"),
        "X1": ("remote connection failure(s)", "backend-read-failure", 1.5,
               "the remote store was unreachable (a failed 'contains' is a miss; reads in the same outage fail)"),
        "X5": ("remote reconnect failure(s)", "backend-read-failure", 1.5, "the remote store connection was down"),
        "X6": ("Mooncake read failure(s)", "backend-read-failure", 5,
               "a Mooncake read call failed (API mismatch, issue #1514; metadata/data inconsistency, issue #1690)"),
        "D4": ("disk read failure(s)", "backend-read-failure", 5, "a chunk on the local disk tier could not be read"),
        "D6": ("disk file(s) missing", "backend-read-failure", 3,
               "the disk tier's index listed a chunk whose file was gone"),
    }
    REMOTE = frozenset({"X8", "X2", "X3", "X1", "X5", "X6"})
    #: what Python or LMCache says when a remote client cannot be set up at all (a client library whose API
    #: the connector does not know, a URL scheme no adapter serves): no outage, and nothing was ever stored
    CLIENT_MISMATCH = re.compile(r"has no attribute|No adapter found for URL|No module named|cannot import name|"
                                 # the connector's own set-up raised a TypeError (LMCache #1961: the S3 connector's
                                 # chunk size never set): its code or configuration, not an outage
                                 r"object cannot be interpreted as|unexpected keyword argument|missing \d+ required")
    #: a connection the remote end refused or dropped at once (a wrong port, TLS or auth the client does not speak)
    REFUSED = re.compile(r"Connection refused|Connection reset by peer|\((?:104|111), |Errno (?:104|111)\b|SSL|"
                         r"certificate|NOAUTH|invalid password|Authentication required")
    #: the lines that show a read reached the store (not just a failed connection)
    READS = ("X8", "X2", "X3", "X6")

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.client_mismatch: str | None = None  # the first reconnect failure that was a client set-up error
        self.mismatches = 0
        self.refused = 0  # connection failures the remote end refused or reset (REFUSED)

    def accept(self, ev: Event) -> bool:
        f = ev.f or {}
        if ev.id == "D6":
            return bool(f.get("file"))  # 'Key … not found in put tasks' is the store path's bookkeeping
        if ev.id == "X6":
            return f.get("op") in self.MOONCAKE_READS
        if ev.id == "X5" and (err := f.get("error")) and self.CLIENT_MISMATCH.search(err[:2000]):
            self.client_mismatch = self.client_mismatch or err[:160]
            self.mismatches += 1
        elif ev.id in ("X1", "X5") and self.REFUSED.search((f.get("error") or "")[:2000]):
            self.refused += 1
        return True

    def weigh(self, b: CauseBoard, ctx: Context) -> None:
        b.add("backend-read-failure", 1.0, **fix_and_confirm("backend-read-failure"))
        outages = {k: self.counts.get(k, 0) - (self.mismatches if k == "X5" else 0) for k in self.REMOTE}
        if any(outages.values()):  # a client that never came up lost nothing it had stored
            b.add("remote-backend-loss", 1.0, **fix_and_confirm("remote-backend-loss"))
        for tid, (_label, cid, factor, why) in self.SUPPORT.items():
            if tid == "X5" and self.mismatches:
                b.support(cid, factor * 2, f"{self.mismatches} × the remote client could not be set up "
                                           f"({self.client_mismatch}): a client library, URL or configuration this "
                                           "LMCache build's connector cannot set up, not an outage")
                if not outages["X5"]:
                    continue
                why, n = "the remote store connection was down", outages["X5"]
                b.support(cid, factor, f"{n} × {why}")
                continue
            if self.counts.get(tid):
                b.support(cid, factor, f"{self.counts[tid]} × {why}")
        if self.counts.get("X8"):
            b.support("backend-read-failure", 1.5, "the read of a key the store reported present returned nothing")
        self._not_connected(b)
        cfg = ctx.lmcache_config
        if any(outages.values()) and cfg is not None and cfg.get("local_cpu") is True:
            b.oppose("remote-backend-loss", 2, "a local CPU tier sits in front of the remote store")

    def _not_connected(self, b: CauseBoard) -> None:
        """A client that could not be set up, or connections refused or reset with no read that reached the store:
        the backend never came up, which explains the lines better than a lost chunk or a failed read."""
        if not (self.mismatches or self.refused) or any(self.counts.get(t) for t in self.READS):
            return
        b.add("backend-not-connected", 1.0, **fix_and_confirm("backend-not-connected"))
        if self.mismatches:
            b.support("backend-not-connected", 12, f"the remote client could not be set up ({self.client_mismatch})")
        if self.refused:
            b.support("backend-not-connected", 4, f"{self.refused} connection(s) refused or reset by the remote end, "
                                                   "and no read that reached the store")

    def describe(self) -> str:
        parts = [f"{self.counts[tid]} {label}" for tid, (label, *_rest) in self.SUPPORT.items() if self.counts.get(tid)]
        if (self.mismatches or self.refused) and not any(self.counts.get(t) for t in self.READS):
            return "LMCache's remote backend did not connect (no read reached it): " + ", ".join(parts)
        return "LMCache backend read errors: " + ", ".join(parts)

    def consequence(self) -> str:
        return ("a read that fails or comes back empty for a chunk the lookup counted stops that rank's retrieve at "
                "that chunk, so the load comes up short.")
