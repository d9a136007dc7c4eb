"""The verdict: one line per finding group that a reader at 3 a.m. can act on, plus the honest status when
there is nothing to say.

Shared by the terminal and HTML reports (pure functions, no Rich, no I/O). A verdict line reads::

    KV001 error — 6144 tokens (24 × 256) missing on TP2, request failed; most likely pin-accounting-bug (0.60); next: …

The headline is the rule's own ``Finding.headline`` when it set one (the number and the consequence),
otherwise the first sentence of its summary, shortened at a clause boundary. The "nothing found" status is
only "no problem found" when every line was recognised, at least one of them reached the rules as a usable event
(``Report.analysed``) *and* every rule ran (with lines of other programs it says "no finding in the N recognised
lines" and how many were not judged): a report on input nothing recognised, on recognised lines that
were all cut or known to no template ("nothing analysed"), or with rules deselected, says so instead,
because silence from a rule that did not run, or saw nothing, is not evidence of health.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specdiag.findings import SEVERITY_RANK, Finding
from specdiag.patterns import lazy

HEADLINE_MAX = 110
#: the rule that lists upstream warnings no specific rule diagnoses: information, not a problem found
WARNINGS_LISTED = "LOG002"
_TO_CONFIRM = lazy(r"^To confirm [\w.-]+: ")  # the cause id is already on the verdict line
_SENTENCE_END = lazy(r"(?<![.\s][a-z])(?<!\.)\.(?!\.)(?:\s|$)")  # '. ' but not "e.g. ", "i.e. ", "..."


#: below this confidence the leading cause is not called "most likely": the verdict says the cause is
#: undetermined and names the leading candidates (a cause at 0.13 is a candidate, not a diagnosis)
UNDETERMINED_BELOW = 0.25


@dataclass(frozen=True)
class Verdict:
    """One finding group (all findings of one rule): what the verdict line says, as parts."""

    rule: str
    severity: str
    headline: str
    count: int
    cause: str | None
    confidence: float | None
    next: str
    #: the leading causes with their confidences (shown when the cause is undetermined)
    candidates: tuple[tuple[str, float], ...] = ()

    def line(self) -> str:
        return f"{self.rule} {self.severity} — {self.headline}" + self.tail()

    def tail(self, esc: Callable[[str], str] = str, strong: Callable[[str], str] = str) -> str:
        """What follows the headline: more of the same rule, the top cause (or, below
        ``UNDETERMINED_BELOW``, that it is undetermined and the leading candidates), the next step. ``esc``
        and ``strong`` let a renderer escape the text and mark the cause (HTML)."""
        s = f" (+{self.count - 1} more)" if self.count > 1 else ""
        if self.cause and self.confidence is not None and self.confidence < UNDETERMINED_BELOW:
            lead = ", ".join(f"{strong(esc(c))} {p:.2f}" for c, p in self.candidates[:2])
            s += f"; cause undetermined (leading: {lead})"
        elif self.cause:
            s += f"; most likely {strong(esc(self.cause))} ({self.confidence:.2f})"
        if self.next:
            s += f"; next: {esc(self.next)}"
        return s


def _balanced(s: str) -> bool:
    return (s.count("(") <= s.count(")") and s.count("'") % 2 == 0 and s.count("[") <= s.count("]")
            and s.count("“") <= s.count("”"))


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, preferably at a clause boundary (': ', '; ', ', ') that leaves
    no parenthesis or quote open."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    for sep in (": ", "; ", ", ", " ("):
        cut = text.rfind(sep, 0, limit)
        while cut >= limit // 2:
            if _balanced(text[:cut]):
                return text[:cut]
            cut = text.rfind(sep, 0, cut)
    cut = text.rfind(" ", 0, limit - 1)
    cut = cut if cut > limit // 2 else limit - 1
    opener = max(text.rfind(" '", 0, cut), text.rfind(" (", 0, cut))
    if not _balanced(text[:cut]) and opener > limit // 2:
        cut = opener  # do not end inside a quotation or a parenthesis
    return text[:cut] + "…"


def headline(f: Finding) -> str:
    """The finding in one clause: the rule's headline, else the summary's first sentence, else the title."""
    own = getattr(f, "headline", "") or ""
    if own:
        return shorten(own, HEADLINE_MAX + 40)
    text = (f.summary or "").strip()
    if text:
        m = _SENTENCE_END.search(text)
        first = text[: m.start()] if m else text
        return shorten(first, HEADLINE_MAX)
    return shorten(f.title, HEADLINE_MAX)


def next_action(f: Finding) -> str:
    """The first thing to do: the finding's first next step, else the top cause's check, else its fix —
    its first sentence whole (a step cut mid-sentence cannot be followed)."""
    c = f.top_cause
    for cand in (*(f.next_steps[:1]), c.confirm_with if c else "", c.fix if c else ""):
        if cand:
            return first_sentence(_TO_CONFIRM.sub("", cand))
    return ""


def first_sentence(text: str) -> str:
    """``text``'s first sentence, whole, without its full stop."""
    text = " ".join(text.split())
    m = _SENTENCE_END.search(text)
    return (text[: m.start()] if m else text).rstrip(".")


def verdicts(findings: list[Finding], where: Callable[[Finding], str | None] | None = None) -> list[Verdict]:
    """One verdict per rule, in the order of ``findings`` (already sorted most severe first); the group's
    severity is its worst, its headline that of its first (most severe, most confident) finding.

    ``where`` names a finding's deployment when the report holds several: then one verdict per deployment
    and rule, its headline led by the deployment, so two pods' incidents are never folded into one line.
    """
    groups: dict[tuple[str | None, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((where(f) if where else None, f.rule), []).append(f)
    out = []
    for (dep, rule), fs in groups.items():
        lead = fs[0]
        worst = max(fs, key=lambda x: SEVERITY_RANK[x.severity]).severity
        c = lead.top_cause
        confident = c is not None and c.confidence >= 0.05
        head = f"{dep}: {headline(lead)}" if dep else headline(lead)
        out.append(Verdict(rule, worst, head, len(fs), c.id if confident else None,
                           c.confidence if confident else None, next_action(lead),
                           tuple((x.id, x.confidence) for x in lead.causes[:3])))
    return out


#: the settings users suspect first, each the cause id through which the rules weigh it
SUSPECTS: dict[str, str] = {
    "save_decode_cache": "decode-cache-not-saved",
    "enable_async_loading": "async-loading-partial",
    "dynamic-k": "stale-draft-kv",
    "chunk-size": "unfull-chunk-mismatch",
    "pin_timeout_sec": "pin-timeout",
    "hashing": "hash-inconsistency",
}
#: a suspect at or above this confidence, ranked first in its finding, is supported; above ``POSSIBLE`` possible
SUPPORTED, POSSIBLE = 0.5, 0.15


@dataclass(frozen=True)
class Suspect:
    """What the evidence says of one suspected setting: ``verdict`` (rejected | possible | supported | not
    weighed), its confidence, why in one clause, and the experiment that would settle it."""

    name: str
    verdict: str
    confidence: float | None
    why: str
    settle: str

    def line(self) -> str:
        conf = f" ({self.confidence:.2f})" if self.confidence is not None else ""
        settle = f"; settle: {self.settle}" if self.settle else ""
        return f"{self.name}: {self.verdict}{conf} — {self.why}{settle}"


#: the suspect every retrieve shortfall is blamed on first: always answered where it was weighed
CLASSIC_SUSPECT = "save_decode_cache"


def suspects(findings: list[Finding], asked: tuple[str, ...] = (), present: frozenset[str] = frozenset()) -> list[Suspect]:
    """The user's own question answered where they look: one line per suspected setting that was asked
    about (``--suspect``), that the input's configuration shows in use (``present``: a confounder), that
    the evidence allows or supports, and the classic suspect wherever a finding weighed it — each with
    the verdict, why in one clause, and the experiment that would settle it."""
    out = []
    for name in dict.fromkeys([*asked, *SUSPECTS]):
        cause_id = SUSPECTS.get(name, name)
        weighed = [(i, c) for f in findings for i, c in enumerate(f.causes) if c.id == cause_id]
        if not weighed:
            if name in asked or name in present:
                out.append(Suspect(name, "not weighed", None, "no finding in this input is one it could cause", ""))
            continue
        rank, c = max(weighed, key=lambda w: w[1].confidence)
        s = _suspect(name, rank, c)
        if name in asked or name in present or name == CLASSIC_SUSPECT or s.verdict != "rejected":
            out.append(s)
    return out


def present_suspects(contexts: list[dict[str, Any]]) -> frozenset[str]:
    """The suspected settings the inputs' configuration shows in use (the confounders of the report)."""
    out: set[str] = set()
    for ctx in contexts:
        cfg = ctx.get("lmcache_config") or {}
        spec = ctx.get("speculative") or {}
        if cfg.get("save_decode_cache") is False:
            out.add("save_decode_cache")
        if cfg.get("enable_async_loading") is True:
            out.add("enable_async_loading")
        if spec.get("per_batch_size"):
            out.add("dynamic-k")
    return frozenset(out)


def _suspect(name: str, rank: int, c: Any) -> Suspect:
    if rank == 0 and c.confidence >= SUPPORTED:
        verdict, why = "supported", (c.for_ or ["the evidence puts it first"])[0]
    elif c.confidence >= POSSIBLE:
        verdict, why = "possible", (c.for_ or c.against or ["weighed below the leading cause"])[0]
    else:
        verdict, why = "rejected", (c.against or ["the evidence does not point at it"])[0]
    settle = _TO_CONFIRM.sub("", c.confirm_with or "").strip()
    return Suspect(name, verdict, c.confidence, first_clause(why), settle)


def first_clause(text: str) -> str:
    """The first clause of a reason: up to its first ``; `` or parenthesis, without markdown emphasis."""
    text = first_sentence(text).replace("*", "")
    for sep in ("; ", " ("):
        cut = text.find(sep)
        if cut > 20:
            text = text[:cut]
    return text


@dataclass(frozen=True)
class Status:
    """What the report can honestly claim when it has no finding (or before its findings)."""

    kind: str  # "nothing-recognised" | "nothing-analysed" | "rules-skipped" | "no-rules" | "clean" | "partial" | "findings"
    text: str
    hints: tuple[str, ...] = ()
    #: every line was vLLM/LMCache output (a "clean" status then says "no problem found")
    all_lines: bool = True


def _skipped_codes(rules_run: list[str], all_codes: list[str]) -> list[str]:
    ran = set(rules_run)
    return [c for c in all_codes if c not in ran]


def code_ranges(codes: list[str]) -> str:
    """``KV001, KV002, KV003, SD001`` → ``KV001–KV003, SD001`` (consecutive codes of one family merged)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            out.append(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}")

    for code in codes:
        m = re.fullmatch(r"([A-Z]+)(\d+)", code)
        if run and m:
            p = re.fullmatch(r"([A-Z]+)(\d+)", run[-1])
            if p and p.group(1) == m.group(1) and int(m.group(2)) == int(p.group(2)) + 1:
                run.append(code)
                continue
        flush()
        run = [code]
    flush()
    return ", ".join(out)


def status(report: Any, all_codes: list[str]) -> Status:
    """The status line of a report: findings, or exactly why there are none; inputs that could not be
    read are named in it, because a clean result on part of a deployment is not a clean deployment."""
    st = _status(report, all_codes)
    if any("bare-text" in (i.get("formats") or ()) for i in report.inputs):
        st = Status(st.kind, st.text, (*st.hints, BARE_HINT), st.all_lines)
    unread = [str(e.get("path") or e.get("message")) for e in getattr(report, "tool_errors", None) or []]
    unread += beyond_limit_notes(report)
    if not unread:
        return st
    kind = "partial" if st.kind == "clean" else st.kind
    text = st.text.replace("no problem found:", "no problem found in what could be read:").replace(
        "no finding in the", "no finding in what could be read, in the")
    return Status(kind, f"{text}; NOT READ: {', '.join(unread[:5])}" + (" …" if len(unread) > 5 else ""), st.hints,
                  st.all_lines)


#: said of an input read as message texts pasted without their headers (``sources.BARE_PASTE_MAX``)
BARE_HINT = ("the lines were pasted without vLLM's or LMCache's header and were read by their text alone: their "
             "time, the process that printed them and the release are not known; paste the lines as the server "
             "printed them for those")


def beyond_limit_notes(report: Any) -> list[str]:
    """What a status names as not read when an input group held more deployments than are analysed
    (``inputs[].beyond_limit``): their records reached no rule, so nothing is clean about them."""
    out = []
    for inp in report.inputs:
        over = inp.get("beyond_limit") or {}
        if over.get("records"):
            out.append(f"{over['records']:,} record(s) of deployments beyond the first {over.get('limit', 0):,} "
                       f"in {inp.get('path')}")
    return out


def _status(report: Any, all_codes: list[str]) -> Status:
    lines = sum(int(i.get("lines", 0)) for i in report.inputs)
    rec = report.recognized_lines
    n_in = len(report.inputs)
    where = f"{n_in} input{'s' if n_in != 1 else ''}"
    if report.findings and not all(f.rule == WARNINGS_LISTED for f in report.findings):
        s = report.summary
        parts = [f"{s['errors']} error{'s' if s['errors'] != 1 else ''}",
                 f"{s['warnings']} warning{'s' if s['warnings'] != 1 else ''}", f"{s['infos']} info"]
        return Status("findings", f"{', '.join(parts)} in {where} ({rec:,} of {lines:,} lines recognised)")
    if rec == 0:
        text = (f"nothing recognised: none of the {lines:,} line{'s' if lines != 1 else ''} in {where} looks like "
                "vLLM or LMCache output, so no rule could judge it — this is not a clean bill of health")
        hints = ("specdiag reads the server's own log lines as vLLM and LMCache print them (e.g. 'INFO 05-06 "
                 "15:56:03 [scheduler.py:…]' or '[2026-05-06 15:56:03,745] LMCache ERROR: …'); an indented or "
                 "re-wrapped paste, benchmark output or another program's log is not recognised",)
        return Status("nothing-recognised", text, hints)
    unjudged = nothing_judged(report)
    if unjudged is not None:
        return unjudged
    if not report.rules_run:
        return Status("no-rules", f"no rule ran (every rule was deselected): nothing was checked in the {rec:,} "
                                  "recognised lines")
    skipped = _skipped_codes(report.rules_run, all_codes)
    if skipped:
        return Status("rules-skipped",
                      f"no finding from the {len(report.rules_run)} rule(s) that ran on {rec:,} recognised lines; "
                      f"{len(skipped)} rule(s) did not run ({code_ranges(skipped)}, deselected by --select/--ignore "
                      "or the configuration), so this is not a clean bill of health")
    unknown = unknown_upstream_records(report)
    if unknown:
        return unknown_status(report, unknown, rec)
    unseen, hints = nothing_to_judge(report)
    listed = sum(f.count for f in report.findings)
    also = (f"; {listed:,} upstream WARNING line{'s' if listed != 1 else ''} no rule diagnoses listed "
            f"({WARNINGS_LISTED})") if listed else ""
    others = lines - rec
    if others > 0:  # lines of other programs (or of nothing) were not judged: no clean bill for them
        one = others == 1
        return Status("clean", f"no finding in the {rec:,} recognised line{'s' if rec != 1 else ''} "
                               f"(all {len(report.rules_run)} rules ran){also}{unseen}; {others:,} of {lines:,} "
                               f"line{'s' if lines != 1 else ''} {'is' if one else 'are'} not vLLM/LMCache output "
                               f"and {'was' if one else 'were'} not judged", hints, all_lines=False)
    return Status("clean", f"no problem found: {rec:,} of {lines:,} lines recognised, all {len(report.rules_run)} "
                           f"rules ran{also}{unseen}", hints)


def nothing_to_judge(report: Any) -> tuple[str, tuple[str, ...]]:
    """What a clean report's log holds none of: a rule that saw no LMCache line (or no speculative
    decoding) vouches for nothing there, so a clean status says which families had nothing to judge."""
    formats = {f for i in report.inputs for f in i.get("formats", ())}
    if "lmcache" in formats:
        return "", ()
    ctx = report.context  # None with several deployments: whether they drafted is theirs to say
    no_spec = ctx is not None and not (ctx.get("speculative") or ctx.get("spec_intervals"))
    hint = ("for the KV rules, collect a log with LMCache's own lines at INFO level (LMCACHE_LOG_LEVEL=INFO: "
            "lookups, stores, retrieves)")
    if not no_spec:
        return "; the log holds no LMCache line, so the KV rules had nothing to judge there", (hint,)
    hint += "; for speculative decoding, vLLM's 'SpecDecoding metrics' lines (VLLM_LOG_STATS_INTERVAL)"
    return ("; the log holds no LMCache line and no speculative-decoding metrics, so the KV and SD rules had "
            "nothing to judge there", (hint,))


def unknown_upstream_records(report: Any) -> int:
    """Records that vLLM or LMCache printed (their envelope says so) whose message neither a template nor
    the message catalog knows: no rule read them, so a report with any is not clean."""
    unrec = report.unrecognized or {}
    return sum(v for k, v in unrec.items() if k in ("vllm", "lmcache") and isinstance(v, int))


def unknown_status(report: Any, unknown: int, rec: int) -> Status:
    """No finding, but upstream records no rule could read: say how many, show the first shapes, and what
    to do, instead of 'no problem found'."""
    shapes = list((report.unrecognized or {}).get("top_warnings") or {})[:2]
    seen = f" (e.g. {'; '.join(repr(s[:80]) for s in shapes)})" if shapes else ""
    text = (f"no finding in {rec:,} recognised lines, but {unknown:,} vLLM/LMCache record{'s' if unknown != 1 else ''}"
            f" carr{'y' if unknown != 1 else 'ies'} a message no template and no catalogued release knows{seen}, so "
            "no rule read them — this is not a clean bill of health")
    hint = ("name the vLLM and LMCache versions in use (pip show vllm lmcache): a message from a newer release or a "
            "plugin is not catalogued yet")
    return Status("unknown-records", text, (hint,))


#: what to collect when the recognised lines were cut (a terminal or chat paste, a dump)
COLLECT_WHOLE = ("collect the server's log as it wrote it, whole lines from its start through the incident "
                 "(kubectl logs POD > serve.log, docker logs, journalctl -o short-iso), not a paste of a terminal")
#: what to collect when every record read was one no rule reads
COLLECT_MORE = ("collect the server's log from its start through the incident at INFO level (VLLM_LOGGING_LEVEL, "
                "LMCACHE_LOG_LEVEL): the config dumps, lookups, stores, retrieves and errors the rules read")


def _cut_notes(report: Any, limit: int = 1) -> list[str]:
    """The inputs' notes about lines not read whole (cut at a length limit), the first ``limit``."""
    notes = [f"{str(i.get('path') or 'input').rsplit('/', 1)[-1]}: {e}" for i in report.inputs
             for e in i.get("errors") or () if "cut" in str(e)]
    return notes[:limit] + ([f"{len(notes) - limit} more such note(s)"] if len(notes) > limit else [])


def nothing_judged(report: Any) -> Status | None:
    """The 'nothing analysed' status when lines were recognised but none reached a rule as a whole, usable
    record (no event, row or counted line: ``Report.analysed`` is 0, or every recognised line was cut); None
    otherwise, and for a report the engine did not count (``analysed`` None)."""
    rec = report.recognized_lines
    if not rec:
        return None
    cut = sum(int(i.get("cut_lines", 0)) for i in report.inputs)
    if getattr(report, "analysed", None) == 0 or cut >= rec:
        return nothing_analysed(report)
    return None


def nothing_analysed(report: Any) -> Status:
    """Lines were recognised as vLLM/LMCache output but none reached a rule as a usable event (each was cut,
    or a record no template knows): silence from rules that saw nothing is not health, so this says what was
    read, what kept it out, and what to collect."""
    lines = sum(int(i.get("lines", 0)) for i in report.inputs)
    rec = report.recognized_lines
    n_in = len(report.inputs)
    n_cut = sum(int(i.get("cut_lines", 0)) for i in report.inputs)
    unknown = {k: v for k, v in (report.unrecognized or {}).items() if k != "top_warnings" and isinstance(v, int) and v}
    why = [f"{v:,} {k} record{'s' if v != 1 else ''} no rule reads" for k, v in unknown.items()]
    cut = _cut_notes(report)
    if n_cut:
        why.insert(0, f"{n_cut:,} recognised line{'s' if n_cut != 1 else ''} read only in part, cut at a length limit")
    why += cut
    one = rec == 1
    text = (f"nothing analysed: {rec:,} of {lines:,} line{'s' if lines != 1 else ''} in {n_in} "
            f"input{'s' if n_in != 1 else ''} {'was' if one else 'were'} recognised as vLLM/LMCache output, but "
            f"{'it did not reach' if one else 'none reached'} a rule as a whole, usable record" + (f" ({'; '.join(why)})" if why else "")
            + f", so no rule could judge {'it' if one else 'them'} — this is not a clean bill of health")
    return Status("nothing-analysed", text, (COLLECT_WHOLE,) if n_cut or cut else (COLLECT_MORE,))


__all__ = ["SUSPECTS", "Status", "Suspect", "Verdict", "first_clause", "present_suspects", "suspects", "code_ranges", "headline", "next_action", "nothing_analysed", "nothing_judged",
           "nothing_to_judge", "shorten", "status", "unknown_status", "unknown_upstream_records", "verdicts"]
