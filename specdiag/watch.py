"""Watching a growing log (``specdiag watch``): new findings as they complete, a status line, the rollout gate.

**When a finding is printed.** The analysis runs once over the stream (``engine.StreamAnalysis``); between
two reads it is asked for the report so far, at most every ``gap`` seconds while lines arrive and once
more when they stop. A finding is *complete* when that report holds it: its rule found all it needs in
the lines read so far (KV001: the retrieve's error pair). Findings are keyed by their fingerprint (the
rule and the incident's stable identity), so each is printed once; later occurrences of the same incident
pattern raise its count, which the status line's ``shortfalls`` shows.

**The counts.** ``requests`` are the scheduler's LMCache lookups (one per request scheduled),
``retrieves`` LMCache's retrieve lines divided by the tensor-parallel size (one per request and rank;
retrieve *lines* where the size is unknown), ``shortfalls`` the requests KV001 found short (its findings'
``count``), ``acceptance`` the speculative tokens accepted over those drafted in the SpecDecoding
intervals read (``—`` when no such line was read).

**The rollout gate.** ``before`` is a previous report (``--baseline``) or the counts at the first line at
or after ``--before TIME``; ``after`` is what was read since (the whole stream with ``--baseline``). Each
rate is stated with its Wilson 95 % interval and the two are compared with Fisher's exact test
(``specdiag.stats``). A shortfall after the change ends the watch with ``EXIT_RECURRED``; ``--clean-after
N`` requests after it without one end it with ``EXIT_CLEAN``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specdiag.stats import ALPHA, describe_p, fisher_exact, wilson

#: the incident whose recurrence the gate watches
GATE_RULE = "KV001"
#: the gate passed: ``--clean-after`` requests after the change, no shortfall (the watch stops)
EXIT_CLEAN = 0
#: the incident recurred after the change (the contract's code for findings)
EXIT_RECURRED = 1
#: the input ended before the gate decided (fewer than ``--clean-after`` requests, no shortfall)
EXIT_UNDECIDED = 5
#: Ctrl-C: the summary so far is printed (the code every specdiag command exits with when interrupted)
EXIT_INTERRUPTED = 130
#: the shortest time between two reports so far, and how many times the last one's cost it is kept above
MIN_GAP_S = 0.25
GAP_FACTOR = 4


@dataclass(frozen=True)
class Tally:
    """The volumes and the incident count of a report, or the difference of two."""

    requests: int | None
    retrieves: int | None
    #: ``retrieves`` counts requests (retrieve lines ÷ TP size); False: lines, the size being unknown
    per_request: bool
    shortfalls: int
    accepted: int | None = None
    drafted: int | None = None

    def minus(self, before: Tally) -> Tally:
        """What was read after ``before`` (a tally of the same stream, taken earlier)."""
        def sub(a: int | None, b: int | None) -> int | None:
            return None if a is None else a - (b or 0)

        drafted = sub(self.drafted, before.drafted)
        return Tally(sub(self.requests, before.requests), sub(self.retrieves, before.retrieves), self.per_request,
                     self.shortfalls - before.shortfalls, sub(self.accepted, before.accepted) if drafted else None,
                     drafted or None)

    @property
    def unit(self) -> str:
        return "retrieves" if self.per_request else "retrieve lines"

    def acceptance(self) -> str:
        return f"{100 * (self.accepted or 0) / self.drafted:.1f} %" if self.drafted else "—"


def _n(v: int | None) -> str:
    return "—" if v is None else f"{v:,}"


def tally(report: dict[str, Any]) -> Tally:
    """The :class:`Tally` of a JSON report (``Report.to_dict()`` or a saved ``analyze --format json``);
    a count the report does not hold (one written before ``deployments[].counts``) is None."""
    requests = retrieves = accepted = drafted = None
    per_request = True
    for dep in report.get("deployments") or []:
        counts = dep.get("counts")
        if not isinstance(counts, dict):
            continue
        tp = (dep.get("context") or {}).get("tensor_parallel_size")
        lines = counts.get("retrieve_lines") or 0
        per_request = per_request and isinstance(tp, int) and tp > 0
        retrieves = (retrieves or 0) + (lines // tp if isinstance(tp, int) and tp > 0 else lines)
        requests = (requests or 0) + (counts.get("lookup_lines") or 0)
        if counts.get("spec_drafted_tokens") is not None:
            accepted = (accepted or 0) + (counts.get("spec_accepted_tokens") or 0)
            drafted = (drafted or 0) + counts["spec_drafted_tokens"]
    shortfalls = sum(int(f.get("count") or 1) for f in report.get("findings") or [] if f.get("rule") == GATE_RULE)
    return Tally(requests, retrieves, per_request, shortfalls, accepted, drafted)


def status_text(lines: int, t: Tally) -> str:
    """``lines 5,121 · requests 256 · retrieves 212 · shortfalls 1 · acceptance 58.7 %``."""
    return (f"lines {lines:,} · requests {_n(t.requests)} · {t.unit} {_n(t.retrieves)} · shortfalls "
            f"{t.shortfalls:,} · acceptance {t.acceptance()}")


def _rate_text(t: Tally) -> str:
    """``1 shortfall per 212 retrieves: 1/212 = 0.5 % (95 % CI 0.1–2.6 %)``."""
    word = "shortfall" if t.shortfalls == 1 else "shortfalls"
    if t.retrieves is None:
        return f"{t.shortfalls:,} {word}, retrieves unknown (the report holds no counts)"
    head = f"{t.shortfalls:,} {word} per {t.retrieves:,} {t.unit}"
    if t.shortfalls > t.retrieves:
        return head
    return f"{head}: {wilson(t.shortfalls, t.retrieves).describe()}"


@dataclass(frozen=True)
class Gate:
    """The rollout gate: what ``before`` is, and after how many clean requests the change passes."""

    #: "baseline" (``before`` is a saved report), "before" (the stream up to ``--before TIME``) or "none"
    mode: str
    before_label: str  # "before 16:05", "baseline REPORT.json"
    after_label: str  # "since 16:05", "this stream"
    clean_after: int | None = None

    def comparison(self, before: Tally | None, after: Tally) -> str:
        """``since 16:05: 0 shortfalls per 3,214 retrieves: …; before 16:05: 1 shortfall per 212 …; p = 0.06``."""
        text = f"{self.after_label}: {_rate_text(after)}"
        if before is None:
            return text
        text += f"; {self.before_label}: {_rate_text(before)}"
        if before.retrieves is None or after.retrieves is None or before.unit != after.unit or \
                before.shortfalls > before.retrieves or after.shortfalls > after.retrieves:
            return text
        p = fisher_exact(after.shortfalls, after.retrieves - after.shortfalls,
                         before.shortfalls, before.retrieves - before.shortfalls)
        verdict = "a significant difference" if p < ALPHA else f"not a significant difference at {ALPHA}"
        return f"{text}; Fisher's exact test {describe_p(p)} ({verdict})"

    def decide(self, after: Tally) -> int | None:
        """``EXIT_RECURRED`` at a shortfall after the change, ``EXIT_CLEAN`` after ``clean_after`` requests
        without one, else None (keep watching)."""
        if after.shortfalls > 0:
            return EXIT_RECURRED
        if self.clean_after is not None and after.requests is not None and after.requests >= self.clean_after:
            return EXIT_CLEAN
        return None


class Watcher:
    """The ticks of one watch: called between reads (``on_read``) and while waiting (``on_wait``); prints
    each new finding once and a status line every ``interval`` seconds; applies the gate."""

    def __init__(self, snapshot: Callable[[], Any], lines: Callable[[], int], out: Callable[[str], None],
                 finding_text: Callable[[Any], str], interval: float = 10.0, gate: Gate | None = None,
                 before: Tally | None = None, stop: Callable[[], None] | None = None) -> None:
        self._snapshot, self._lines, self.out, self.finding_text = snapshot, lines, out, finding_text
        self.interval, self.gate, self.before, self._stop = interval, gate, before, stop
        self.printed: set[str] = set()
        self.report: Any = None
        self.tally: Tally | None = None
        self.decision: int | None = None
        self.gap = MIN_GAP_S
        self._seen_lines = -1
        self._last = self._last_status = time.monotonic()
        self.boundary: Tally | None = None  # ``--before``: the counts at the boundary

    def tick(self) -> None:
        now = time.monotonic()
        if self._lines() != self._seen_lines and now - self._last >= self.gap:
            self.refresh()
        if now - self._last_status >= self.interval:
            if self._lines() != self._seen_lines:
                self.refresh()
            self._last_status = time.monotonic()
            self.out(f"specdiag: {status_text(self._lines(), self.tally or Tally(None, None, True, 0))}")

    def at_boundary(self) -> None:
        """``--before TIME``: the first line at or after it is next; what was read so far is ``before``."""
        self.refresh()
        self.before = self.tally

    def refresh(self) -> None:
        """Take the report so far, print what is new in it and apply the gate."""
        started = time.monotonic()
        self._seen_lines = self._lines()
        self.report = self._snapshot()
        self.tally = tally(self.report.to_dict())
        for f in self.report.findings:
            if f.fingerprint not in self.printed:
                self.printed.add(f.fingerprint)
                self.out(self.finding_text(f))
        self._last = time.monotonic()
        self.gap = max(MIN_GAP_S, GAP_FACTOR * (self._last - started))
        after = self.after()
        if self.gate is not None and after is not None and self.decision is None:
            self.decision = self.gate.decide(after)
            if self.decision is not None and self._stop is not None:
                self._stop()

    def after(self) -> Tally | None:
        """The counts after the change: all of the stream with a baseline, the rest past ``--before``."""
        if self.tally is None:
            return None
        if self.gate is not None and self.gate.mode == "before":
            # --before TIME not reached yet: nothing is after the change
            return None if self.before is None else self.tally.minus(self.before)
        return self.tally


__all__ = ["EXIT_CLEAN", "EXIT_INTERRUPTED", "EXIT_RECURRED", "EXIT_UNDECIDED", "Gate", "Tally", "Watcher",
           "status_text", "tally"]
