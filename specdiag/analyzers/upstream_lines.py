"""The accounting of upstream problem lines: every vLLM or LMCache warning and error lands in a finding.

The specific rules diagnose what they know; a line they read for a finding they reported is theirs. Every
other line at WARNING or worse — a message of one of the hundreds of backends, connectors and servers no
rule reads, or one no catalog holds — is grouped here by signal family (the family the generated message
catalog gives its upstream message), with its count, first and last line, ranks, and where upstream prints
it, so that no error goes unexplained and a report never calls a log with error lines clean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specdiag.analyzers.base import Rule, register, shape_claim
from specdiag.analyzers.engine_environment import package_note
from specdiag.catalog.families import assign
from specdiag.context import Context
from specdiag.events import (
    CATALOG_EVENT,
    CATALOG_KINDS,
    PLACEHOLDER,
    UNKNOWN_EVENT,
    Event,
    entry_of,
    family_description,
    frame_place,
    innermost_frame,
    line_label,
    message_shape,
    prints_format,
)
from specdiag.findings import Evidence, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: distinct messages a finding lists (its line count covers them all)
MAX_MESSAGES = 40
#: distinct (template, printed place) pairs kept; lines past them are counted as "more"
MAX_BUCKETS = 4096
#: ranks named per message and per family
MAX_RANKS = 64
#: messages a finding shows evidence for (first and last line of each)
SHOWN = 3
#: the family of a line no template and no catalog entry knows
UNRECOGNISED = "unrecognised"
#: the templates of a traceback frame: printed under vLLM's header (``events/vllm.py``), and in a raw traceback
TRACEBACK_FRAME, TRACEBACK_FRAMES = "V_TB_FRAME", "E_TB_FRAMES"
#: the exception line of a traceback printed under vLLM's header
TRACEBACK_EXC = "V_EXC"


@dataclass
class _Message:
    """One upstream message's lines in this run: bounded, whatever their number."""

    label: str
    project: str
    level: str
    location: str | None
    releases: str | None
    first: Evidence
    #: the latest record (kept, not rendered: a flood of one warning costs a reference per line)
    last_rec: Any
    first_seen: float | None
    count: int = 0
    ranks: set[str] = field(default_factory=set)
    last_seq: int = 0
    #: the lines of the tracebacks vLLM printed under its records (``logger.exception``), not occurrences
    tb_lines: int = 0
    #: a traceback's innermost frame (``file:line in func``), where it raised: what to read, not the printing call
    frame: str | None = None

    def evidence(self) -> tuple[Evidence, ...]:
        if self.count < 2:
            return (self.first,)
        r = self.last_rec
        return self.first, Evidence(r.path, r.line, r.display()[:600])

    def to_dict(self) -> dict[str, Any]:
        out = {"message": self.label, "project": self.project, "level": self.level, "count": self.count,
               "location": self.location, "releases": self.releases, "ranks": sorted(self.ranks)}
        if self.tb_lines:
            out["traceback_lines"] = self.tb_lines
        return out


@dataclass
class _Bucket:
    """The lines of one template at one printed place, kept before anyone asks which catalog entry they
    are: the entry (the catalog's load and text match) is asked at the end, and only for the buckets no
    reporting rule took."""

    first: Event
    last_rec: Any
    last_seq: int
    count: int = 0
    ranks: set[str] = field(default_factory=set)
    tb_lines: int = 0
    #: of a traceback printed under a record's header: its innermost frame seen so far, and its exception line
    frame: str | None = None
    exc: str | None = None


class _UpstreamLines(Rule):
    """Shared by the error and the warning accounting: what differs is the levels and the severity."""

    family = "LOG"
    late = True
    project_names: ClassVar[dict[str, str]] = {"vllm": "vLLM", "lmcache": "LMCache", "text": "exception",
                                                 "ray": "Ray", "glog": "native library (glog)"}

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.buckets: dict[tuple, _Bucket] = {}
        self.overflow = 0
        self._seq = 0
        #: the bucket of the last record under each header (process, time, place): the traceback lines vLLM
        #: prints under a record's header are that record's (``NewLineFormatter``), not messages of their own
        self._under: dict[tuple, _Bucket] = {}

    def observe(self, ev: Event) -> None:
        rec = ev.rec
        head = (rec.origin.key, rec.ts, rec.file, rec.src_line) if rec.file is not None else None
        if head is not None and (_TB_PART.match(rec.msg) is not None or ev.id == TRACEBACK_EXC):
            b = self._under.get(head)
            if b is not None:
                b.tb_lines += 1
                _note_row(b, ev)
                return
        b = self._bucket(ev)
        if b is not None and b.count == 1:
            _note_row(b, ev)
        if b is not None and head is not None:
            if len(self._under) >= MAX_BUCKETS:
                self._under.clear()
            self._under[head] = b

    def _bucket(self, ev: Event) -> _Bucket | None:
        """Count ``ev`` in the bucket of its template and place (None: past the places kept)."""
        rec = ev.rec
        if ev.id == CATALOG_EVENT:
            key: tuple = (ev.id, ev.f["entry"].id, rec.level)
        elif ev.id == UNKNOWN_EVENT:
            key = (ev.id, rec.kind, rec.level, message_shape(rec.msg))
        elif rec.file is None:  # a raw traceback, a bare exception line: one bucket per exception, not per template
            key = (ev.id, rec.kind, rec.level, message_shape(line_label(ev)))
        elif ev.id == "V_EXC":  # exceptions logged at one place are one bucket each: a rule may claim one of them
            key = (ev.id, rec.file, rec.src_line, rec.level, message_shape(rec.msg))
        else:
            key = (ev.id, rec.file, rec.src_line, rec.level)
        self._seq += 1
        b = self.buckets.get(key)
        if b is None:
            if len(self.buckets) >= MAX_BUCKETS:
                self.overflow += 1
                return None
            b = self.buckets[key] = _Bucket(ev, rec, self._seq)
        b.count += 1
        b.last_rec, b.last_seq = rec, self._seq
        rank = rec.origin.rank_label
        if rank and len(b.ranks) < MAX_RANKS:
            b.ranks.add(rank)
        return b

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        messages: dict[tuple[str, str], _Message] = {}
        read: frozenset[str] | None = None  # asked only for catalog lines: it loads the catalog
        frames_read = TRACEBACK_FRAME in run.explained  # a rule read the frames of tracebacks for its finding
        for b in self.buckets.values():
            if frames_read and _TB_PART.match(b.first.rec.msg) is not None:
                continue  # a traceback cut above its header, whose frames that rule read: its lines are the rule's
            if b.first.id not in run.explained:
                if b.first.id == CATALOG_EVENT and read is None:
                    read = self._read_formats(run.explained)
                _merge(messages, b, run.claimed, read or frozenset())
        by_family: dict[str, list[_Message]] = {}
        for (family, _), msg in messages.items():
            by_family.setdefault(family, []).append(msg)
        ordered = sorted(by_family.items(), key=lambda kv: -sum(m.count for m in kv[1]))
        return [self._finding(family, sorted(msgs, key=lambda m: -m.count), self.overflow if i == 0 else 0)
                for i, (family, msgs) in enumerate(ordered)]

    def _read_formats(self, explained: frozenset[str]) -> frozenset[str]:
        """The catalog formats of the lines a reporting rule read through a template (``EngineCore encountered
        a fatal error.``): traceback rows that did not join that line's bucket (``_under``: a paste's terminal
        cut a frame row, so its rest has no header of its own) reach this rule as catalog lines of the same
        message, and are as much that rule's as the line itself."""
        out = set()
        for b in self.buckets.values():
            tid = b.first.id
            if tid in explained and tid not in (CATALOG_EVENT, UNKNOWN_EVENT):
                entry = entry_of(b.first)
                if entry is not None and entry.fmt:
                    out.add(entry.fmt)
        return frozenset(out)

    def _finding(self, family: str, msgs: list[_Message], overflow: int = 0) -> Finding:
        """One family's finding; ``overflow`` (lines past the places kept, told once per rule) in its summary."""
        lines = sum(m.count + m.tb_lines for m in msgs)
        top = msgs[0]
        projects = sorted({self.project_names.get(m.project, m.project) for m in msgs})
        level = "ERROR" if any(m.level in ("ERROR", "CRITICAL") for m in msgs) else "WARNING"
        what = f"{lines} {'/'.join(projects)} {level} line{'s' if lines != 1 else ''}"
        where = f" at {top.location}" if top.location and top.project != "traceback" else ""  # a frame: next step
        head = f"{what} no rule explains — {family}: '{_short(top.label)}' ×{top.count}{where}"
        evidence = [e for m in msgs[:SHOWN] for e in m.evidence()]
        ranks = sorted({r for m in msgs for r in m.ranks})
        return Finding(
            rule=self.code, severity=self.severity, title=self.title, headline=head,
            summary=_summary(family, what, msgs, overflow), count=lines, evidence=evidence,
            measurements={"family": family, "lines": lines, "ranks": ranks,
                          "messages": [m.to_dict() for m in msgs[:MAX_MESSAGES]]},
            next_steps=_mechanism_step(top) + _next_steps(family, top) + _traceback_step(msgs, top), identity=f"{self.code}|{family}|{top.label}",
            first_seen=min((m.first_seen for m in msgs if m.first_seen is not None), default=None), priority=-1,
        )


def _merge(messages: dict[tuple[str, str], _Message], b: _Bucket, claimed: tuple[str, ...] = (),
           read: frozenset[str] = frozenset()) -> None:
    """Add a bucket to its message: one message per family and format (a message's copies in moved modules
    are one), or per shape when no entry is known; a message a reporting rule claims (``Rule.claims``) or read
    (``read``: its format) is that rule's, not listed."""
    ev = b.first
    if claimed and (shape_claim(ev.rec.msg) in claimed or shape_claim(line_label(ev)) in claimed):
        return  # a line a rule named by its shape: a message no release prints (KV020's connector lines), or one
        # printed under another's header (SRV006's refusal under 'Error in preprocessing prompt inputs')
    entry = None if ev.id == UNKNOWN_EVENT else entry_of(ev)
    if entry is not None and entry.fmt and (entry.fmt in read or any(c in entry.fmt for c in claimed)):
        return
    if entry is not None and not entry.fmt and entry.id in claimed:
        return  # a message whose text is a variable, claimed by its entry (SRV001's logged exception)
    unknown = ev.id == UNKNOWN_EVENT and ev.rec.kind in CATALOG_KINDS  # a vLLM/LMCache message no release prints
    family = (entry.family if entry is not None else None) or (UNRECOGNISED if unknown else None) \
        or _family_by_frame(b.frame or (innermost_frame(ev.rec.raw_text) if ev.rec.kind == "traceback" else None)) \
        or "other"
    key = (family, (entry.fmt or entry.id) if entry is not None else message_shape(line_label(ev)))
    if _TB_PART.match(ev.rec.msg) is not None:  # the excerpt starts inside a traceback: not the message itself
        key = (family, f"traceback\0{key[1]}")
    elif entry is not None and entry.fmt and not prints_format(entry.fmt, ev.rec.msg):
        key = (family, f"under\0{key[1]}")  # a line of the message's text printed under its header
    msg = messages.get(key)
    if msg is None:
        msg = messages[key] = _new_message(ev, entry)
        msg.last_seq = 0
    msg.count += b.count
    msg.tb_lines += b.tb_lines
    if b.frame is not None:
        msg.frame = b.frame
        if b.exc and "raised" not in msg.label:
            msg.label = f"{msg.label}: {_short(b.exc, 60)}, raised in {b.frame}"
    elif b.exc and msg.label.startswith("a traceback printed") and ": " not in msg.label:
        msg.label = f"{msg.label}: {_short(b.exc, 80)}"  # no frame in the excerpt: the exception line still says what
    if b.last_seq > msg.last_seq:
        msg.last_rec, msg.last_seq = b.last_rec, b.last_seq
    msg.ranks.update(sorted(b.ranks)[: MAX_RANKS - len(msg.ranks)])


def _new_message(ev: Event, entry: Any) -> _Message:
    first = evidence_of(ev)
    rec = ev.rec
    part = _TB_PART.match(rec.msg) is not None
    if entry is not None:
        label = entry.fmt if entry.fmt and not PLACEHOLDER.search(entry.fmt) else rec.msg[:160]
        if entry.fmt and not part and not prints_format(entry.fmt, rec.msg):
            label = f"a line printed under “{_short(entry.fmt, 60)}” (its text or traceback): {_short(rec.msg, 80)}"
        if part:  # a traceback cut above its header: where it was printed says which call printed it
            label = (f"a traceback printed where {entry.project} prints '{entry.fmt}'" if entry.fmt
                     else f"a traceback printed at {rec.file}:{rec.src_line}")
        printed = entry.releases_at(rec.src_line) if rec.src_line is not None else None
        if printed is not None:  # the line the log names, and the releases that print it there
            where, releases = f"{entry.project} {entry.module}:{rec.src_line}", printed
        elif rec.file and rec.src_line is not None:  # printed where no catalogued release prints it: say both
            where = f"{entry.project} {rec.file}:{rec.src_line} as printed"
            releases = f"not a catalogued release's line; catalogued at {entry.location()}, {entry.release_range()}"
        else:
            where, releases = f"{entry.project} {entry.location()}", entry.release_range()
        return _Message(label, entry.project, rec.level, where, releases, first, rec, rec_time(rec))
    if part and rec.file:
        return _Message(f"a traceback printed at {rec.file}:{rec.src_line}", rec.kind, rec.level,
                        f"{rec.kind} {rec.file}:{rec.src_line}", None, first, rec, rec_time(rec))
    loc = f"{rec.kind} {rec.file}:{rec.src_line}" if rec.file else None
    if loc is None and rec.kind == "traceback":
        loc = innermost_frame(rec.raw_text)
    return _Message(line_label(ev)[:160], rec.kind, rec.level, loc, None, first, rec, rec_time(rec))


def _note_row(b: _Bucket, ev: Event) -> None:
    """A row of a traceback printed under a record's header: the innermost frame (the last seen) and the
    exception line of that traceback."""
    if ev.id == TRACEBACK_FRAME:
        f = ev.f
        b.frame = frame_place(f.get("file") or "", f.get("line"), f.get("func"))
    elif ev.id == TRACEBACK_EXC:
        b.exc = ev.rec.msg.strip()[:120]






def _family_by_frame(frame: str | None) -> str | None:
    """The family of the vLLM or LMCache module a traceback raised in (its innermost frame of theirs:
    ``vllm/v1/kv_offload/worker/cpu_gpu.py:232 in transfer_async`` is offload-tier), as the catalog files that
    module's messages; None for a frame of neither."""
    if not frame:
        return None
    path = frame.split(":", 1)[0]
    project = next((p for p in ("vllm", "lmcache") if path.startswith(p + "/")), None)
    if project is None or not path.endswith(".py"):
        return None
    family = assign(project, path[len(project) + 1 :], "ERROR", "")
    return None if family == "other" else family


#: a line of a traceback printed under a record's header: its head, a frame, a code line, a caret line, a chain
#: line (matched at the start of the message; each alternative a literal or one run of one class: linear time)
_TB_PART = lazy(r'Traceback \(most recent call last\)|During handling of the above exception|'
                r'The above exception was the direct cause|  File "| {4}\S| *[\^~]+ *$')


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _grep_words(text: str, limit: int = 40) -> str:
    """The first words of ``text`` (at most ``limit`` characters, whole words) as one shell argument for a
    ``grep -F``: single-quoted, or double-quoted when the words hold a quote (``'StorageManager' object``:
    dropping the quotes would make a pattern the line does not hold); cut before the first quote when the
    words also hold a character a double-quoted shell word expands."""
    words = " ".join(text.split())
    if len(words) > limit:
        cut = words.rfind(" ", 0, limit)
        words = words[: cut if cut > 0 else limit]
    if "'" not in words:
        return f"'{words}'"
    if not any(c in words for c in '"$`\\!'):
        return f'"{words}"'
    return "'" + words[: words.index("'")].rstrip() + "'"


def _summary(family: str, what: str, msgs: list[_Message], more: int) -> str:
    desc = family_description(family)
    parts = [f"'{_short(m.label, 100)}' ×{m.count}" + (f" ({', '.join(filter(None, (m.location, m.releases)))})"
                                                      if m.location else "")
             for m in msgs[:5]]
    rest = len(msgs) - 5
    tail = (f"; {rest} more message(s)" if rest > 0 else "") + (f"; {more} line(s) past the {MAX_BUCKETS} "
                                                               "places kept, not grouped" if more else "")
    return (f"{what} of the {family} family ({desc}) that no specific rule read for a diagnosis: "
            f"{'; '.join(parts)}{tail}.")


#: who prints a glog-format line, by its file (Go's klog prints the same header as glog)
_GLOG_SOURCES = (
    ("tpu_", "the TPU runtime (PJRT / XLA) in the process"),
    # torch.distributed's C++ side: the Gloo group of the ranks' CPU traffic, the NCCL group, the c10d rendezvous
    ("processgroupgloo", "torch.distributed's Gloo process group (the ranks' CPU-side group: its address is "
                         "GLOO_SOCKET_IFNAME's interface, or the hostname's)"),
    ("processgroupnccl", "torch.distributed's NCCL process group (its watchdog and collectives)"),
    ("socket.cpp", "torch.distributed's c10d store (the ranks' rendezvous at the master address)"),
    ("tcpstore", "torch.distributed's c10d store (the ranks' rendezvous at the master address)"),
    ("nixl", "NIXL's agent in the process (vLLM's NixlConnector, LMCache's NIXL backend)"),
)


def _glog_source(where: str) -> str:
    """Who printed a glog-format line: a known program or runtime by its file, else a native library."""
    low = where.lower()
    return next((who for key, who in _GLOG_SOURCES if key in low),
                "a native library loaded into the process (glog's format: Mooncake's transfer engine or store client, "
                "NIXL, …)")


#: Python's own words for a call that does not fit the function it calls: the caller and the callee come from
#: releases that disagree (a package upgraded alone, two components of one project at different versions), or a bug
#: in the caller; what to compare, whatever the message's project
_SIGNATURE_WORDS = ("got an unexpected keyword argument", "missing 1 required positional argument",
                    "required positional arguments", "takes from ", "positional arguments but ")


def _mechanism_step(top: _Message) -> list[str]:
    """A step that says what the exception's own words mean, where Python's words name the mechanism: a call whose
    arguments do not fit the function's signature is two releases out of step, not a condition to read up on."""
    label = top.label
    if (said := package_note(label)) is not None:
        return [f"'{_short(label, 90)}': {said}"]
    if not any(w in label for w in _SIGNATURE_WORDS):
        return []
    return ["the call does not fit the function's signature ('" + _short(label, 90) + "'): the caller and the "
            "function come from releases that disagree (one package upgraded alone, or components of one project "
            "at different versions), or the caller has a bug; compare the installed versions (pip show vllm "
            "lmcache) with the pairs each release supports, and the release notes for the function"]


#: the label of a raw traceback read without its exception line (``line_label`` falls back to its first line)
_CUT_TRACEBACK = "Traceback (most recent call last)"


def _traceback_step(msgs: list[_Message], top: _Message) -> list[str]:
    """The innermost frame of a raw traceback filed with the top message (the same module's family), when the top
    message is not it: where that exception was raised is a step of its own."""
    tb = next((m for m in msgs if m is not top and m.project == "traceback" and m.location), None)
    if tb is None:
        return []
    return [f"read {tb.location}, the innermost frame of the traceback filed with it ('{_short(tb.label, 60)}'), for "
            "why it raised"]


def _next_steps(family: str, top: _Message) -> list[str]:
    if family == UNRECOGNISED:
        return [f"'{_short(top.label, 60)}' is in no catalogued vLLM/LMCache release: note the versions in use "
                "(pip show vllm lmcache) and look the message up in that release's source"]
    if not top.location and top.project == "text":
        return ["no traceback was read right above this exception line in the log given: collect the lines of the same "
                f"process before it (grep -B50 -F {_grep_words(top.label)}), whose innermost frame says where it was "
                "raised"]
    if top.project == "glog":
        where = top.location.split(" ", 1)[-1] if top.location else ""
        if ".go:" in where:  # Go's klog: a Kubernetes client or component, not a library in vLLM's process
            return [f"a Go program's klog line (kubectl, client-go or another Kubernetes component) at {where}: it runs "
                    "outside vLLM's processes; the pods' state says what it reports (kubectl get pods, kubectl describe "
                    "pod, kubectl logs --previous of a restarting container)"]
        who = _glog_source(where)
        return [f"{who} reports it{' at ' + where if where else ''}: the file names the program or library; read its "
                "source there, and collect the same process's vLLM and LMCache lines around it (grep -B40 -A30 -F "
                f"{_grep_words(top.label)}), which say which call it failed"]
    if top.project == "ray":
        return ["collect the same process's lines around it (grep -B40 -A30 -F "
                f"{_grep_words(top.label)}): the worker that printed it, its last vLLM lines and, after a "
                "fatal signal, its stack ('PC: @' and '@ 0x…' lines)"]
    if not top.location:
        return [f"read where upstream prints the {family} message, and the lines of the same rank just before it"]
    if top.frame is not None and top.project != "traceback":
        return [f"read {top.frame}, the innermost frame of the traceback printed at {top.location}, for why it "
                "raised, and the lines of the same process just before it"]
    if top.project == "traceback" and top.label.startswith(_CUT_TRACEBACK):
        return [f"the traceback stops at {top.location} with no exception line: the excerpt is cut there, so that is "
                "the last frame shown, not where it raised; collect the traceback down to its last line (the "
                f"exception) (grep -A80 -F {_grep_words(top.label)})"]
    if top.project == "traceback":
        return [f"read {top.location}, the traceback's innermost frame, for why it raised, and the lines of the "
                "same process just before it"]
    releases = "" if not top.releases else (f" ({top.releases})" if top.releases.startswith("not ")
                                            else f" (releases {top.releases})")
    return [f"read {top.location}{releases}, where upstream prints the message, for the condition it reports, "
            "and the lines of the same rank just before it"]


@register
class UpstreamErrors(_UpstreamLines):
    """vLLM or LMCache ERROR lines that no specific rule explains.

    Detects: every record at ERROR or CRITICAL printed by vLLM or LMCache that no rule read for a finding it
    reported — the messages of the storage backends, KV connectors, servers and adapters no specific rule
    diagnoses, and messages no catalogued release prints (family ``unrecognised``) — and the errors around
    them: a raw exception line pasted without its traceback, and under a Ray worker's prefix Ray's C++ core
    errors and the fatal signal it reports (a TP worker that crashed in native code). Lines are grouped by
    the signal family the message catalog gives their upstream message, with counts, the first and last
    line, the ranks and the upstream location and releases.

    Why it matters: an error the tool cannot diagnose is still an error; a report that called such a log
    clean would hide it. This finding names it and where upstream prints it, so it can be read.

    Causes weighed: none — this is an account of lines, not a diagnosis; the specific rules diagnose.

    Fix: read the named upstream location for the condition it reports.

    References: the message catalog generated from the vLLM and LMCache releases' own source
    (``specdiag/catalog``, ``docs/log-formats.md``).
    """

    code = "LOG001"
    name = "upstream-errors-unexplained"
    title = "vLLM/LMCache ERROR lines that no specific rule explains"
    severity = "warning"
    levels = frozenset({"ERROR", "CRITICAL"})


@register
class UpstreamWarnings(_UpstreamLines):
    """vLLM or LMCache WARNING lines that no specific rule explains.

    Detects: every WARNING record printed by vLLM or LMCache that no rule read for a finding it reported,
    grouped by signal family as for LOG001.

    Why it matters: warnings are often the precursor of the incident someone is looking for (memory
    pressure, a backend retrying, a connection lost); listing them by family shows what else the servers
    said.

    Causes weighed: none — an account of lines, not a diagnosis.

    Fix: read the named upstream location for the condition it reports.

    References: the message catalog (``specdiag/catalog``, ``docs/log-formats.md``).
    """

    code = "LOG002"
    name = "upstream-warnings-unexplained"
    title = "vLLM/LMCache WARNING lines that no specific rule explains"
    severity = "info"
    levels = frozenset({"WARNING"})
