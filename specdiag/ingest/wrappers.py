"""Outer wrappers added by collectors and by pasting, recognised and stripped per line.

A physical line may carry, outermost first, a paste prefix (chat code-block indentation, ``grep -n`` /
``grep -H`` prefixes), collector wrappers (kubectl ``--prefix`` and ``--timestamps``, journald ``short`` /
``short-iso``, the CRI format of Kubernetes nodes, docker json-file, docker compose ``name | ``, vLLM's JSON
log formatter) and only then the
vLLM process prefix and the logger envelope. Nothing is sniffed once per file: ``cat`` of two sources, a
collector that changes format mid-file or a container restart would otherwise hide everything after the
change. The cost stays off the hot path because the caller first tests the line's first bytes
(:func:`looks_plain`): an unwrapped vLLM/LMCache line never reaches a regex here.

Strict shapes (an RFC 3339 timestamp, ``[pod/…]``, journald's ``host ident[pid]: ``, a JSON object with a
``log`` string) are stripped wherever they match. Loose shapes that ordinary message text could also have
(``123:``, ``name | ``, leading spaces) are stripped only when what follows is itself a recognised envelope
or wrapper, or when the same wrapper was just seen on the previous lines (grep context lines are numbered
consecutively, compose prefixes repeat a known container name).

Each wrapper that names where the line came from sets :attr:`LineUnwrapper.deployment`: the kubectl pod
and container, the journald host, the compose container. Timestamps that carry a year set
:attr:`LineUnwrapper.year` (vLLM's own timestamps print none).
"""

from __future__ import annotations

import functools
import json
import re

from specdiag.ingest.envelope import EXC_LINE
from specdiag.ingest.rows import MIN_ROW, cut_head
from specdiag.ingest.shapes import starts_head
from specdiag.patterns import lazy

ANSI_RE = lazy(r"\x1b?\[\d{1,3}(?:;\d{1,3})*m")
ANSI_BYTES = lazy(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b|\[\d{1,3}(?:;\d{1,3})*m")

#: docker/kubectl ``--timestamps``: RFC 3339 with nanoseconds (the year is kept)
ISO_TS = lazy(rb"(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? ")
#: the CRI log format's stream and tag after its RFC 3339 time (containerd, CRI-O: the files a Kubernetes node
#: keeps under /var/log/pods and /var/log/containers, what log shippers tail): ``stdout F msg``; ``P`` marks a
#: line the runtime split (over 16 KiB by default), whose pieces are read as lines of their own, as docker's are
CRI_TAGS = (b"stdout F ", b"stderr F ", b"stdout P ", b"stderr P ")
#: journald ``-o short-iso`` / ``short-iso-precise``: timestamp, host, ident[pid]
JOURNALD_ISO = lazy(rb"(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? (\S+) [^:\s\[]+\[\d+\]: ")
#: journald ``short`` / ``short-precise``: localised month (``Dec``, ``déc.``, ``janv.``, ``Mär``, ``dic``,
#: ``дек``), day, time, host, ident[pid]; no year
JOURNALD_SHORT = lazy(rb"[^\s\d\[\](){}]\S{0,11} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? (\S+) [^:\s\[]+\[\d+\]: ")
KUBECTL_PREFIX = lazy(rb"\[(pod/[^\]\s]+)\] ")
#: torch's launcher (torchrun, ``torch.distributed.run``) before each line of a rank's output (``[rank2]: Traceback
#: …``); torch's C++ logging prints the same with no space before its own header (``[rank0]:[W506 …]``), which is
#: that line's, not a wrapper (``envelope.TORCH_C10``)
RANK_PREFIX = lazy(rb"\[rank(\d{1,6})\]: ")
#: the same prefix with its space lost (``[rank1]:ValueError: …``, a paste that trimmed it): taken before an exception
#: line only, where no other reading of the row is possible
RANK_PREFIX_TIGHT = lazy(rb"\[rank(\d{1,6})\]:(?=[A-Za-z_][\w.]{0,200}(?:Error|Exception|Interrupt|Exit)\b)")
#: the vertical bar of a terminal UI's frame (U+2502, as k9s draws its log view)
BOX_BAR = "│".encode()
#: a CI runner's time before each line (Buildkite's ``[2025-03-10T15:07:20Z] ``), as vLLM's CI logs are pasted
BRACKET_ISO = lazy(rb"\[" + ISO_TS.pattern.removesuffix(b" ") + rb"\] ")
#: another program's Python logger around a line it re-logs: ``DATE - [name - ]LEVEL - [[tag] ]``, FastChat's
#: ``DATE | LEVEL | stream | `` (its model worker logs vLLM's stdout and stderr so), or a bare ``DATE `` (Docker
#: Desktop's log view copied); bounded runs between distinct separators: linear time
RELOGGED = lazy(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d{1,9} - (?:[\w.-]{1,128} - )?"
                rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:\[[\w.-]{1,64}\] )?"
                rb"|(?:[,.]\d{1,9})? \| (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \| [\w.-]{1,64} \| "
                rb"|(?:[,.]\d{1,9})? )")
#: RFC 5424 syslog (rsyslog / syslog-ng forwarding): ``<PRI>1 TIME HOST APP PROCID MSGID SD `` then the message
#: (after an optional BOM); structured data is ``-`` or bracketed elements with quoted, escaped values
SYSLOG_5424 = lazy(rb'<\d{1,3}>\d{1,2} (\d{4}|-)\S{0,40} (\S{1,255}) \S{1,48} \S{1,128} \S{1,32} '
                   rb'(?:-|(?:\[(?:[^\]\\"\n]|\\.|"(?:[^"\\\n]|\\.)*")*\])+) (?:\xef\xbb\xbf)?')
#: stern's (multi-pod ``kubectl logs``) default output: the pod's and the container's names before each line
#: (lowercase DNS names); a loose shape, stripped only before an envelope or a strict wrapper
STERN = lazy(rb"([a-z][a-z0-9.-]{0,252}) ([a-z][a-z0-9-]{0,62}) ")
#: Loki's ``logcli query`` default output after its time: the stream's labels, ``{app="vllm", pod="vllm-0"} ``
#: (each value between quotes, no quote inside: the labels end at the first ``} `` after a closing quote)
LOKI_LABELS = lazy(rb'\{([A-Za-z_][\w.]{0,63}="[^"\n]{0,253}"(?:, ?[A-Za-z_][\w.]{0,63}="[^"\n]{0,253}"){0,31})\} ')
_LOKI_LABEL = lazy(rb'(?<![\w.])([A-Za-z_][\w.]{0,63})="([^"\n]{0,253})"')  # a name starts at a boundary
COMPOSE = lazy(rb"([A-Za-z0-9][\w.-]*)\s*\| ?")
#: ``grep -n`` (``123:`` / context ``123-``), ``cat -n`` / ``nl`` (right-aligned number, a tab) and ``less -N``
#: (number, a space); a loose shape, so stripped only before an envelope or a consecutive number
GREP_N = lazy(rb"(\d{1,9})([:-]|\t| {1,4}|[.)] {1,3})")  # grep -n, cat -n, less -N; a markdown numbered list
GREP_H = lazy(rb"([^\s:()\[\]{}|]+?)(?:([:-])(\d{1,9})\2|:)")
#: chat code-block indentation (no-break spaces when copied from a rendered web page) or a ``> `` quote
#: indentation, a markdown quote (``>``, nested) and list bullet (``-``, ``*``, ``+`` and a space): how a paste
#: into an issue or chat arrives; peeled only when what follows starts a record
INDENT = lazy(rb"(?:[ \t]|\xc2\xa0|>|[-*+|](?=[ \t]))+")  # ``| ``: a CI viewer's gutter (Buildkite)
_INDENT_FIRST = frozenset(b" \t>-*+|")
_ASCTIME = lazy(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d:\d\d:\d\d)")

#: first words of lines that carry no wrapper: vLLM's formatter, uvicorn, tracebacks, LMCache's without its time
PLAIN_STARTS = (b"INFO ", b"WARNING ", b"ERROR ", b"DEBUG ", b"CRITICAL ", b"WARN ", b"INFO:", b"WARNING:",
                b"ERROR:", b"Traceback ", b"LMCache ")
_VLLM_LEVELS = (b"INFO ", b"WARNING ", b"ERROR ", b"DEBUG ", b"CRITICAL ", b"WARN ")
_MAX_DEPTH = 6


def code_span(line: bytes) -> bytes | None:
    """The text inside a markdown code span that is the whole line (one to three backticks each side, one
    space of padding dropped), how a log line quoted inline in an issue or chat arrives; None otherwise
    (a fence line, backticks inside the text). No pattern: a scan from each end."""
    end = len(line.rstrip(b" \t\r"))
    k = 0
    while k < 3 and k < end and line[k] == 0x60:
        k += 1
    if k == 0 or end < 2 * k + 1 or line[end - k : end] != line[:k] or line[k] == 0x60 or line[end - k - 1] == 0x60:
        return None
    inner = line[k : end - k]
    if inner[:1] == b" " and inner[-1:] == b" " and inner.strip(b" "):
        inner = inner[1:-1]  # CommonMark: one space of padding each side
    return inner


def strip_ansi(text: str) -> str:
    if "[" not in text:
        return text
    return ANSI_RE.sub("", text)


def looks_plain(line: bytes) -> bool:
    """True when the first bytes prove there is no wrapper: ``(`` process prefix, ``[20…`` LMCache
    timestamp, a vLLM level word. Literal tests only — this runs on every kept line."""
    c = line[:1]
    if c == b"(":
        return True
    if c == b"[":
        return line[1:5] not in (b"pod/", b"rank") and not runner_time(line)
    return line.startswith(PLAIN_STARTS)


def bracket_time(line: bytes) -> bool:
    """Whether ``line`` may start with a bracketed RFC 3339 time (``BRACKET_ISO``): ``[dddd-dd-ddT``. LMCache's
    own header (``[2026-05-06 15:56:03,745]``) has a space where this has the ``T``."""
    return line[5:6] == b"-" and line[11:12] == b"T" and line[1:2].isdigit()


def runner_time(line: bytes) -> bool:
    """Whether ``line`` may start with a CI runner's bracketed time (``BRACKET_ISO``), a wrapper: LMCache's own
    header can print an ISO time in its brackets too (``[2026-05-06T15:56:03.745123+00:00] LMCache ERROR:``)."""
    return bracket_time(line) and b"] LMCache " not in line[:48]


def _error_line(rest: bytes) -> bool:
    """An exception's line whose name ends in Error or Exception (``RuntimeError: …``): both literals the prefilter
    keeps a line for (a ``…Warning:`` line it may count)."""
    m = EXC_LINE.match(rest)
    return m is not None and m.group(0).rstrip(b":").endswith((b"Error", b"Exception"))


def lost_bracket(line: bytes) -> bool:
    """LMCache's header whose opening ``[`` a paste lost: ``2026-04-17 14:52:34,143] LMCache ERROR: …``."""
    return line[:1].isdigit() and line[4:5] == b"-" and b"] LMCache " in line[19:40]


#: a colour code whose ``ESC[`` a paste lost at the start of a row (the selection began inside it): ``1;20m`` right
#: before LMCache's ``[time]`` or a process prefix's ``(``
_LOST_CSI = lazy(rb"(?:\d{1,3};){0,4}\d{1,3}m(?=[\[(])")


def lost_csi_end(line: bytes) -> int:
    """Where a row starts after a colour code whose ``ESC[`` was lost (``1;20m[2026-03-27 …] LMCache ERROR``); 0
    without one."""
    m = _LOST_CSI.match(line) if line[:1].isdigit() else None
    return m.end() if m is not None else 0


#: a vLLM process prefix whose opening ``(`` a paste lost (``Worker_TP0_DCP0 pid=379759) [2026-02-11 …] LMCache …``)
_LOST_PAREN = lazy(rb"[A-Za-z_][\w.-]{0,63} pid=\d{1,10}(?:, ip=[0-9A-Fa-f.:]{1,64})?\) ")


def lost_paren(line: bytes) -> bool:
    """A process prefix whose ``(`` a paste lost (its selection started one character late): the name, `` pid=N)``."""
    return b" pid=" in line[:80] and _LOST_PAREN.match(line) is not None


def is_envelope(rest: bytes) -> bool:
    """A line that starts a vLLM / LMCache / uvicorn record or a traceback (after any wrapper)."""
    c = rest[:1]
    if lost_bracket(rest):
        return True
    if c == b"(":
        return b" pid=" in rest[:200]
    if c == b"[":
        if bracket_time(rest) and (m := BRACKET_ISO.match(rest)) is not None:
            return is_envelope(rest[m.end() :])
        return b"] LMCache " in rest[:48]
    if rest.startswith(_VLLM_LEVELS):
        sp = rest.find(b" ")
        if rest[sp + 3 : sp + 4] == b"-" and rest[sp + 1 : sp + 3].isdigit() or rest[sp + 1 : sp + 9] == b"LMCache:":
            return True
        return starts_head(rest)  # the time cut off: only what the template tables vouch for
    if rest.startswith(b"Traceback (most recent call last)"):
        return True
    if rest.startswith((b"INFO:", b"WARNING:", b"ERROR:")):
        after = rest[rest.index(b":") + 1 :][:1]
        if not (after == b"_" or after.isalpha()):  # uvicorn's ``INFO:     …``; ``INFO:root:`` is Python logging's
            return True
    return starts_head(rest)  # Python logging's formats, ``LMCache LEVEL:`` without time


def _cut_row(line: bytes, rest: bytes) -> bool:
    """A loose wrapper before a record's header that a terminal cut (``    [2026-05-06 15:5``): as good a
    proof of the wrapper as a whole header."""
    return len(line) >= MIN_ROW and cut_head(rest, False)


def _json_logging(obj: dict) -> tuple[str, int | None]:
    """vLLM's JSON log formatter (0.32 ``--logging-config``) → the plain vLLM line it stands for."""
    m = _ASCTIME.search(str(obj.get("asctime") or obj.get("time") or ""))
    ts = f"{m.group(2)}-{m.group(3)} {m.group(4)}" if m else "01-01 00:00:00"
    where = f"{obj.get('filename') or obj.get('name') or 'json'}:{obj.get('lineno') or 0}"
    who = f"({obj.get('processName')} pid={obj.get('process')}) " if obj.get("process") is not None else ""
    text = f"{who}{obj.get('levelname', 'INFO')} {ts} [{where}] {obj.get('message', '')}"
    return text, int(m.group(1)) if m else None


#: JSON lines of collectors and log exports other than docker's: the key of the line's text, the style noted,
#: the keys of its time (one of which, or a source's, must be there: a JSON object a program printed with a
#: ``message`` is no export), and where the source it names is (``_json_source``). journald ``-o json``, Google
#: Cloud Logging (``textPayload``), Loki's ``logcli --output=jsonl`` (``line``), Elasticsearch / OpenSearch,
#: Fluent Bit and Vector documents (``message`` or ``log`` beside Kubernetes metadata).
_JSON_EXPORTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("MESSAGE", "journald-json", ("__REALTIME_TIMESTAMP",)),
    ("textPayload", "gcp-json", ("timestamp", "receiveTimestamp")),
    ("line", "loki-json", ("timestamp",)),
    ("message", "export-json", ("@timestamp", "timestamp", "time")),
)
_JSON_SOURCES = ("kubernetes", "labels", "resource", "_HOSTNAME")
#: a JSON line is read as a wrapper only when it holds one of these keys (the prefilter's ``_json_start`` and
#: its compiled copy count any other JSON line unread: an application's own JSON logger)
JSON_KEYS = (b'"log"', b'"levelname"', b'"MESSAGE"', b'"textPayload"', b'"line"', b'"message"')
#: the first keys of a JSON line that validates a loose wrapper before it (``_is_wrapped``)
JSON_FIRST_KEYS = (b'{"log"', b'{"asctime"', b'{"time"', b'{"levelname"')
_JSON_KEY = lazy(b"|".join(map(re.escape, JSON_KEYS)))
#: each export with the keys that mark a line as one (its times, or a source)
_JSON_EXPORT_MARKS = tuple((key, style, times, (*times, *_JSON_SOURCES)) for key, style, times in _JSON_EXPORTS)


def json_line(line: bytes) -> tuple[bytes, int | None, str, str | None] | None:
    """docker json-file (``{"log": …, "time": …}``), vLLM JSON logging, or a collector's or export's JSON line
    (``_JSON_EXPORTS``) → (inner line, year, style, the source it names or None)."""
    if _JSON_KEY.search(line) is None:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: hostile nesting, e.g. {"log": [[[[…
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("message"), str) and "levelname" in obj:
        text, year = _json_logging(obj)
        return text.encode("utf-8", "replace"), year, "vllm-json", None
    log = obj.get("log")
    if isinstance(log, str):
        style = "docker-json" if "kubernetes" not in obj else "export-json"
        return _inner(log), _year_of(obj.get("time")), style, _json_source(obj)
    for key, style, times, marks in _JSON_EXPORT_MARKS:
        text = obj.get(key)
        if isinstance(text, str) and _holds_any(obj, marks):
            return _inner(text), _first_year(obj, times), style, _json_source(obj)
    return None


def _holds_any(obj: dict, keys: tuple[str, ...]) -> bool:
    for k in keys:  # a loop, not any(): this runs for every line of an export
        if k in obj:
            return True
    return False


def _first_year(obj: dict, times: tuple[str, ...]) -> int | None:
    """The year of the first of ``times`` that holds one."""
    for t in times:
        y = _year_of(obj.get(t))
        if y is not None:
            return y
    return None


def _inner(text: str) -> bytes:
    """A JSON line's text as the line it was: without its line end, colour and CRs."""
    inner = text.rstrip("\r\n").encode("utf-8", "replace")
    if b"\x1b" in inner or b"[0m" in inner or b"\r" in inner:
        inner = ANSI_BYTES.sub(b"", inner).replace(b"\r", b"")
    return inner


def _year_of(t: object) -> int | None:
    """The year of an RFC 3339 time, or of journald's microseconds since the epoch (``__REALTIME_TIMESTAMP``)."""
    if isinstance(t, str) and len(t) >= 4 and t[:4].isdigit():
        return int(t[:4]) if t[4:5] == "-" else _year_of_micros(t)
    return None


def _year_of_micros(t: str) -> int | None:
    if not t.isdigit() or not 15 <= len(t) <= 17:  # 2001–2286 in microseconds
        return None
    return _year_of_day(int(t) // 86_400_000_000)


@functools.lru_cache(maxsize=64)
def _year_of_day(day: int) -> int:
    """The year of a day since the epoch (UTC): a journal's lines come from few days."""
    import datetime as dt

    return dt.datetime.fromtimestamp(day * 86_400, dt.timezone.utc).year


def _json_source(obj: dict) -> str | None:
    """The source a collector's JSON line names, as the plain wrappers name it: a Kubernetes pod and container
    (``k8s:pod/<pod>/<container>``, as ``kubectl --prefix``), else a journald host (``host:…``)."""
    k8s = _field(obj, "kubernetes")
    if k8s:  # Fluent Bit / Vector: pod_name, container_name; Filebeat (ECS): pod.name, container.name
        pod = k8s.get("pod_name") or _field(k8s, "pod").get("name")
        container = k8s.get("container_name") or _field(k8s, "container").get("name")
    else:  # Cloud Logging's resource labels, Loki's stream labels
        labels = _field(obj, "labels") or _field(_field(obj, "resource"), "labels")
        pod = labels.get("pod_name") or labels.get("pod")
        container = labels.get("container_name") or labels.get("container")
    if isinstance(pod, str) and pod:
        return f"k8s:pod/{pod}/{container}" if isinstance(container, str) and container else f"k8s:pod/{pod}"
    host = obj.get("_HOSTNAME")
    return f"host:{host}" if isinstance(host, str) and host else None


def _field(obj: dict, key: str) -> dict:
    """``obj[key]`` when it is an object, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


class LineUnwrapper:
    """Strips every wrapper of one line; remembers what the last line's wrappers said.

    After :meth:`strip`, ``deployment`` is the collector's name for the source (``k8s:pod/…``,
    ``host:…``, ``compose:…``) or None, ``year`` the year a wrapper timestamp carried or None, and
    ``seen`` accumulates the wrapper styles found (for the input's ``formats``).
    """

    def __init__(self) -> None:
        self.deployment: str | None = None
        self.year: int | None = None
        self.seen: set[str] = set()
        self._compose: set[bytes] = set()
        self._grep_next: int | None = None  # the grep line number expected on the next line
        #: the indentation (or ``> ``) stripped from the last line when that line filled a terminal row: a pasted
        #: block indents every row alike, so the wrapped rest of it loses exactly that much although it is no envelope
        self._indent: bytes | None = None

    def carries(self) -> bool:
        """Whether the last line left something for the next one: a ``grep -n`` number it expects, an
        indentation the paste's next row may repeat."""
        return self._grep_next is not None or self._indent is not None

    def strip(self, line: bytes) -> bytes:
        self.deployment = None
        self.year = None
        if not line:
            return line  # a blank row inside a pasted block keeps the block's indentation in mind
        grep_next, self._grep_next = self._grep_next, None
        indent, self._indent = self._indent, None
        for _ in range(_MAX_DEPTH):
            if not line or looks_plain(line):
                return line
            rest = self._peel_one(line, grep_next, indent)
            if rest is None:
                return line
            line = rest
            indent = None  # a grep number may still follow a quote or an indentation
        return line

    def _peel_one(self, line: bytes, grep_next: int | None, indent: bytes | None = None) -> bytes | None:
        """Remove the outermost wrapper, or None when the line has none."""
        c = line[0]
        if 48 <= c <= 57:  # a digit: a timestamp, another program's Python logger, or a grep -n number
            if line[4:5] == b"-" and line[10:11] == b"T":
                return self._timestamp(line)
            if line[4:5] == b"-" and line[10:11] == b" " and (rest := self._relogged(line)) is not None:
                return rest
            return self._grep_n(line, grep_next)
        if c == 123:  # '{'
            got = json_line(line)
            if got is None:
                return self._loki_labels(line)
            inner, year, style, source = got
            self.year = year or self.year
            self.deployment = self.deployment or source
            self.seen.add(style)
            return inner
        if c == 91:  # '[' and not plain: kubectl --prefix, a rank's prefix, a CI runner's time
            if line[1:5] == b"rank":
                return self._rank(line)
            m = KUBECTL_PREFIX.match(line)
            if m is None:
                return self._bracket_time(line)
            self.deployment = self.deployment or "k8s:" + m.group(1).decode("utf-8", "replace")
            self.seen.add("kubectl-prefix")
            return line[m.end() :]
        if c == 60 and (rest := self._syslog_5424(line)) is not None:  # '<' (a traditional one: journald's shape)
            return rest
        if c == 0xE2 and line[:3] == BOX_BAR:  # a terminal UI's frame around each row (k9s: '│ … │')
            return self._box(line)
        if c == 96:  # '`': a markdown code span around the line ("* `LMCache WARNING: …`" in an issue)
            inner = self._code_span(line)
            if inner is not None:
                self.seen.add("code-span")
            return inner
        if c in _INDENT_FIRST or (c == 0xC2 and line[1:2] == b"\xa0"):  # indentation, "> " quote, "- " bullet
            m = INDENT.match(line)
            if m is None:
                return None
            rest = line[m.end() :]
            if rest and (is_envelope(rest) or self._is_wrapped(rest) or _cut_row(line, rest)
                         or (rest[:1] == b"`" and self._code_span(rest) is not None)):
                self.seen.add("indented")
                if not rest.startswith(b"Traceback"):
                    self._indent = m.group(0)  # a terminal may have wrapped the row onto the next, indented alike
                return rest
            if indent is not None and line.startswith(indent) and len(line) > len(indent):
                self._indent = indent  # the block goes on (widths are the joiner's business, on the rows as read)
                return line[len(indent) :]
            return None
        return self._named(line, grep_next)

    def _relogged(self, line: bytes) -> bytes | None:
        """vLLM's output re-logged by the program that runs it (``2025-06-27 12:57:51,690 - __main__ - INFO - ``, or
        ``… - INFO - [container] ``: Python logging's default format): what follows, when it is vLLM's own — a
        process prefix, a traceback's lines or an exception line. Each of those holds a literal the prefilter
        keeps a line for, or is read only inside a record already open, so no line it counts is read here."""
        m = RELOGGED.match(line)
        if m is None:
            return None
        rest = line[m.end() :]
        if rest[:1] in (b" ", b"\t") and not rest.lstrip().startswith(b'File "'):
            return rest  # a traceback's code or caret row: read only inside a record already open (not a sign)
        if not (rest[:1] == b"(" and b" pid=" in rest[:200] or rest.lstrip().startswith((b"Traceback", b'File "'))
                or _error_line(rest)):
            return None
        self.year = self.year or int(line[:4])
        self.seen.add("relogged")
        return rest

    def _code_span(self, line: bytes) -> bytes | None:
        """The record a markdown code span holds (``code_span``): None unless what it holds starts one. A span
        opened on this line and closed on a later one (several lines pasted inside one pair of backticks) loses
        its opening backticks here, when a record follows them."""
        inner = code_span(line)
        if inner is None:
            k = len(line) - len(line.lstrip(b"`"))
            inner = line[k:] if 0 < k <= 3 else None
        return inner if inner is not None and (is_envelope(inner) or self._is_wrapped(inner)) else None

    def _syslog_5424(self, line: bytes) -> bytes | None:
        """An RFC 5424 header: its time's year, and its host as the deployment."""
        m = SYSLOG_5424.match(line)
        if m is None:
            return None
        if m.group(1) != b"-":
            self.year = self.year or int(m.group(1))
        if m.group(2) != b"-":
            self.deployment = self.deployment or "host:" + m.group(2).decode("utf-8", "replace")
        self.seen.add("syslog-5424")
        return line[m.end() :]

    def _loki_labels(self, line: bytes) -> bytes | None:
        """``logcli``'s stream labels before a line: the pod and container they name are its deployment."""
        m = LOKI_LABELS.match(line)
        if m is None:
            return None
        labels = {k.decode("ascii"): v.decode("utf-8", "replace") for k, v in _LOKI_LABEL.findall(m.group(1))}
        self.deployment = self.deployment or _json_source({"labels": labels})
        self.seen.add("loki-labels")
        return line[m.end() :]

    def _timestamp(self, line: bytes) -> bytes | None:
        """kubectl/docker ``--timestamps``, or journald ``short-iso`` when a host and ident[pid] follow."""
        m = ISO_TS.match(line)
        if m is None:
            return None
        self.year = self.year or int(m.group(1))
        rest = line[m.end() :]
        if rest[:9] in CRI_TAGS:
            self.seen.update(("iso-timestamp", "cri"))
            return rest[9:]
        if not looks_plain(rest):  # the common kubectl case needs no second regex
            j = JOURNALD_ISO.match(line)
            if j is not None:
                self.deployment = self.deployment or "host:" + j.group(2).decode("utf-8", "replace")
                self.seen.add("journald-iso")
                return line[j.end() :]
        self.seen.add("iso-timestamp")
        return rest

    def _box(self, line: bytes) -> bytes:
        """The row inside a terminal UI's frame (k9s's log view: ``│ ERROR … │``, padded to the frame's width)."""
        rest = line[3:]
        if rest.endswith(BOX_BAR):
            rest = rest[:-3].rstrip(b" ")
        self.seen.add("box-border")
        return rest[1:] if rest[:1] == b" " else rest

    def _rank(self, line: bytes) -> bytes | None:
        """torchrun's ``[rankN]: `` before a rank's line (``RANK_PREFIX``); its space is the prefix's, not the line's."""
        m = RANK_PREFIX.match(line) or RANK_PREFIX_TIGHT.match(line)
        if m is None:
            return None
        self.seen.add("rank-prefix")
        return line[m.end() :]

    def _bracket_time(self, line: bytes) -> bytes | None:
        """A CI runner's time in brackets (``BRACKET_ISO``): its year, as kubectl's ``--timestamps`` give theirs."""
        m = BRACKET_ISO.match(line)
        if m is None:
            return None
        self.year = self.year or int(m.group(1))
        self.seen.add("bracketed-timestamp")
        return line[m.end() :]

    def _grep_n(self, line: bytes, grep_next: int | None) -> bytes | None:
        m = GREP_N.match(line)
        if m is None:
            return None
        rest = line[m.end() :]
        n = int(m.group(1))
        if n == grep_next or is_envelope(rest) or self._is_wrapped(rest) or _cut_row(line, rest):
            self._grep_next = n + 1
            self.seen.add("grep")
            return rest
        return None

    def _named(self, line: bytes, grep_next: int | None) -> bytes | None:
        """Wrappers that start with a word: journald month, compose container, grep -H file name."""
        if b"]: " in line[:160]:
            m = JOURNALD_SHORT.match(line)
            if m is not None:
                self.deployment = self.deployment or "host:" + m.group(1).decode("utf-8", "replace")
                self.seen.add("journald")
                return line[m.end() :]
        if b"|" in line[:80]:
            m = COMPOSE.match(line)
            if m is not None and line[m.end() - 1 : m.end()] in (b" ", b"|"):
                rest = line[m.end() :]
                name = m.group(1)
                if name in self._compose or is_envelope(rest) or self._is_wrapped(rest):
                    if len(self._compose) < 256:
                        self._compose.add(name)
                    self.deployment = self.deployment or "compose:" + name.decode("utf-8", "replace")
                    self.seen.add("compose")
                    return rest
        m = GREP_H.match(line)
        if m is not None:
            rest = line[m.end() :]
            num = m.group(3)
            if ((num is not None and int(num) == grep_next) or is_envelope(rest) or self._is_wrapped(rest)
                    or _cut_row(line, rest)):
                if num is not None:
                    self._grep_next = int(num) + 1
                self.seen.add("grep")
                return rest
        return self._stern(line)

    def _stern(self, line: bytes) -> bytes | None:
        """stern's ``pod container `` before an envelope or a strict wrapper: that pod's and container's line."""
        m = STERN.match(line)
        if m is None:
            return None
        rest = line[m.end() :]
        if not (is_envelope(rest) or self._is_wrapped(rest)):
            return None
        pod, container = (g.decode("ascii") for g in m.groups())
        self.deployment = self.deployment or f"k8s:pod/{pod}/{container}"
        self.seen.add("stern")
        return rest

    def _is_wrapped(self, rest: bytes) -> bool:
        """Whether ``rest`` starts with a strict wrapper (used to validate a loose outer one)."""
        c = rest[:1]
        if c == b"{":
            return rest.startswith(JSON_FIRST_KEYS)
        if c == b"[":
            return rest[1:5] == b"pod/"
        if c.isdigit():
            if ISO_TS.match(rest) is not None:
                return True
            m = GREP_N.match(rest)  # grep -n output pasted as an indented block; ``cat -n`` right-aligns its number
            if m is None:
                return False
            after = rest[m.end() :]  # grep -n of a kubectl --prefix capture, quoted
            return is_envelope(after) or after[:5] == b"[pod/" and KUBECTL_PREFIX.match(after) is not None
        if c in (b" ", b"\t"):
            m = INDENT.match(rest)  # ``grep -n`` of an indented paste
            return m is not None and is_envelope(rest[m.end():])
        if b"]: " in rest[:160] and JOURNALD_SHORT.match(rest) is not None:
            return True
        m = GREP_H.match(rest)  # ``grep -H`` output pasted as an indented block or a quote
        return m is not None and is_envelope(rest[m.end() :])
