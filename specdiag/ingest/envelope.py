"""The envelope parsers' vocabulary: what a logger header looks like, and the Record it becomes.

A physical line is a record's first line when it carries a logger envelope: LMCache's formatter
(``[YYYY-MM-DD HH:MM:SS,mmm] LMCache LEVEL: msg (file.py:NNN:logger)``), its legacy form, vLLM's formatter
of every era (``LEVEL MM-DD HH:MM:SS [file.py:NNN] msg``), or an exception line of raw text. The patterns,
level maps and the suffix splitter live here, apart from the per-line state machine in ``records.py``,
because the scanner (``scan.py``, ``hot.py``), the joiner (``joiner.py``) and the block plumbing
(``blocks.py``) read the same envelopes and build the same :class:`Record`. Pure: no state, no I/O.
"""

from __future__ import annotations

from specdiag.ingest.origin import Origin
from specdiag.numbers import to_int
from specdiag.patterns import lazy

VLLM_LEVELS = {b"INFO": "INFO", b"WARNING": "WARNING", b"ERROR": "ERROR", b"DEBUG": "DEBUG", b"CRITICAL": "CRITICAL",
               b"WARN": "WARNING"}
LMC_LEVELS = {b"INFO": "INFO", b"WARNING": "WARNING", b"ERROR": "ERROR", b"DEBUG": "DEBUG", b"CRITICAL": "CRITICAL",
              b"WARN": "WARNING"}
LMC_LEVELS.update({k + b" ": v for k, v in list(LMC_LEVELS.items())})  # "LMCache WARN :" after addLevelName
VLLM_REST = lazy(rb"(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?([^\]:\s]+?):(\d+)\] ?")
LMC_LEGACY = lazy(
    rb"(DEBUG|INFO|WARNING|ERROR|CRITICAL) LMCache: (.*) \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] -- (\S+\.py):(\d+)$"
)
#: Ray's C++ log line (glog style, ``ray/util/logging.cc``): ``[YYYY-MM-DD HH:MM:SS,mmm L PID TID] file.cc:N: msg``,
#: printed under a Ray worker's or the raylet's prefix when a TP worker runs as a Ray actor (every part bounded)
RAY_CPP = lazy(rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ([IWEFC]) \d{1,10} \d{1,10}\] "
               rb"([\w.-]{1,100}):(\d{1,7}): ")
#: Ray's levels by their letter (``F``/``C``: fatal; Ray aborts the process after it)
RAY_LEVELS = {b"W": "WARNING", b"E": "ERROR", b"F": "CRITICAL", b"C": "CRITICAL"}
#: Ray Serve's Python logger (``ray/serve/_private/logging_utils.py``): ``LEVEL DATE TIME,ms COMPONENT ID -- msg``
#: (``ERROR 2025-04-02 17:25:34,553 controller 2922 -- Exception in Replica(…)``), at WARNING or worse
RAY_SERVE = lazy(rb"(WARNING|ERROR|CRITICAL) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) [\w:.-]{1,200} [\w.-]{1,100} -- ")
#: the failure-signal handler Ray's C++ core installs (abseil): what a worker that crashed in native code prints
FATAL_SIGNAL = lazy(rb"\*\*\* (SIG[A-Z]{2,8}) received at time=\d{1,20}")
#: a native library's glog line at WARNING or worse (``E0905 14:46:37.882738 15817 master_client.cpp:297] …``):
#: Mooncake's store client and other C++ transfer engines loaded into a vLLM worker log so (glog 0.7+ puts the
#: year before the month: ``E20260106 06:43:02.966198``)
GLOG = lazy(rb"([WEF])(\d{8}|\d{4}) (\d\d:\d\d:\d\d)\.\d{6} {1,8}\d{1,10} ([\w.-]{1,100}):(\d{1,7})\] ")
GLOG_LEVELS = {b"W": "WARNING", b"E": "ERROR", b"F": "CRITICAL"}
#: torch's C++ logging (c10) at ERROR or worse, as a TP worker prints NCCL's watchdog: ``[rank0]:[E
#: ProcessGroupNCCL.cpp:563] `` (torch 2.2-2.3; before 2.2 without ``[rank0]:``), ``[rank2]:[E1021 12:00:00.123456
#: 1234 ProcessGroupNCCL.cpp:1414] `` (2.4+: glog's header in brackets). Warnings (``[W…``) are no records: torch
#: prints them by the thousand (the prefilter leaves them too). Every part bounded.
TORCH_C10 = lazy(rb"(?:\[rank\d{1,6}\]:)?\[([EF])(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d{1,9})?(?: {1,8}\d{1,10})?)? ?"
                 rb"([\w.-]{1,128}\.(?:cpp|cc|cu|h|hpp|ts)):(\d{1,7})\] ")  # torch_npu: E324, compiler_depend.ts
#: CPython's faulthandler line after a fatal signal (``Fatal Python error: Segmentation fault``): the start of a
#: native crash's report, CRITICAL
FATAL_PYTHON = b"Fatal Python error"
#: apache-tvm-ffi's SIGSEGV handler (loaded with FlashInfer and xgrammar in vLLM's processes): this banner, then the
#: native stack innermost first as ``  File "<unknown>", line 0, in swap_blocks(…)`` rows; then the signal kills
#: the process
SEGFAULT_BANNER = b"!!!!!!! Segfault encountered !!!!!!!"
#: the prefix under which a Ray driver prints what a raylet pushed to it (``(raylet)``, ``(raylet, ip=…)`` for
#: another node's): no pid, so it is no vLLM process prefix
RAYLET = lazy(rb"\(raylet(?:, ip=[0-9A-Fa-f.:]{1,64})?\) ")
#: the raylet's report of a worker process that died while running a task (``events.ray`` parses it)
WORKER_DIED = b"A worker died or was killed"
EXC_LINE = lazy(rb"(?:[A-Za-z_][\w.]*\.)?(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)|StopIteration"
                rb"|StopAsyncIteration)\b(?::|$)")


def _d(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


class Record:
    """One logical log record.

    ``raw`` is the message as bytes; ``msg``/``text``/``ts`` decode on first use. ``year`` is the inferred
    year for vLLM timestamps, which print none.
    """

    __slots__ = ("path", "line", "end_line", "origin", "kind", "level", "_ts", "year",
                 "_file", "src_line", "_logger", "raw", "cont", "_msg")

    def __init__(self, path: str, line: int, origin: Origin, kind: str, level: str, ts: bytes | None,
                 year: int | None, file: bytes | None, src_line: int | None, logger: bytes | None, raw: bytes) -> None:
        self.path = path
        self.line = line
        self.end_line = line
        self.origin = origin
        self.kind = kind
        self.level = level
        self._ts = ts
        self.year = year
        self._file = file
        self.src_line = src_line
        self._logger = logger
        self.raw = raw
        self.cont: list[bytes] | None = None
        self._msg: str | None = None

    @property
    def msg(self) -> str:
        if self._msg is None:
            self._msg = self.raw.decode("utf-8", "replace")
        return self._msg

    @property
    def ts(self) -> str | None:
        return _d(self._ts)

    def place_key(self) -> bytes | None:
        """``LEVEL file:line`` as the envelope printed them (LMCache's with its logger, which tells apart
        modules of one basename): the key of a place the prefilter may count (``prefilter.QuietPlaces``);
        None for a record whose envelope names no place."""
        if self._file is None or self.src_line is None:
            return None
        if self.kind == "lmcache":
            return None if self._logger is None else b"%s %s:%d:%s" % (self.level.encode(), self._file,
                                                                       self.src_line, self._logger)
        return b"%s %s:%d" % (self.level.encode(), self._file, self.src_line)

    @property
    def file(self) -> str | None:
        return _d(self._file)

    @property
    def logger(self) -> str | None:
        return _d(self._logger)

    @property
    def module(self) -> str | None:
        """The upstream source file the logger names, relative to its package (``lmcache.v1.cache_engine`` →
        ``v1/cache_engine.py``): a line whose format printed no file (Python logging's ``%(name)s``) can
        still be traced to its source."""
        return module_path(self.logger)

    @property
    def raw_text(self) -> bytes:
        """Message plus continuation lines, as bytes (what templates match against)."""
        if self.cont:
            return self.raw + b"\n" + b"\n".join(self.cont)
        return self.raw

    @property
    def text(self) -> str:
        """Message plus continuation lines."""
        return self.raw_text.decode("utf-8", "replace") if self.cont else self.msg

    def display(self) -> str:
        """A one-line rendering for evidence: prefix, level and message (no colour)."""
        who = f"({self.origin.proc} pid={self.origin.pid}) " if self.origin.pid is not None else ""
        if self.kind == "lmcache":
            loc = f" ({self.file}:{self.src_line}:{self.logger})" if self._file else ""
            if not loc and self._logger:
                loc = f" ({self.logger})"  # Python logging's format: the logger name is all it printed
            when = f"[{self.ts}] " if self._ts is not None else ""  # a paste without the time shows none
            return f"{who}{when}LMCache {self.level}: {self.msg}{loc}"
        if self.kind == "vllm":
            when = f" {self.ts}" if self._ts is not None else ""
            where = f"{self.file}:{self.src_line}" if self._file else self.logger  # Python logging: the logger
            return f"{who}{self.level}{when} [{where}] {self.msg}" if where else f"{who}{self.level}{when} {self.msg}"
        return f"{who}{self.msg}"

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Record({self.path}:{self.line} {self.kind} {self.level} {self.msg[:60]!r})"


def module_path(logger: str | None) -> str | None:
    """``lmcache.v1.cache_engine`` → ``v1/cache_engine.py``, ``vllm.v1.engine.core_client`` →
    ``v1/engine/core_client.py`` (the package's own name dropped, as the template tables name files);
    None for a name that is no vLLM/LMCache module. A package's ``__init__.py`` cannot be told apart."""
    if not logger:
        return None
    top, _, rest = logger.partition(".")
    if top not in ("vllm", "lmcache") or not rest:
        return None
    return rest.replace(".", "/") + ".py"


def split_suffix(msg: bytes) -> tuple[bytes, bytes | None, int | None, bytes | None]:
    """Remove LMCache's trailing ``(file.py:123:logger.name)``; returns (msg, file, line, logger)."""
    if msg[-1:] != b")":
        msg = msg.rstrip()
        if msg[-1:] != b")":
            return msg, None, None, None
    i = msg.rfind(b" (")
    if i >= 0:
        a = msg.find(b":", i)
        b = msg.find(b":", a + 1) if a > 0 else -1
        if b > 0 and msg[a - 3 : a] == b".py":
            num = msg[a + 1 : b]
            if num.isdigit() and b < len(msg) - 2:
                return msg[:i], msg[i + 2 : a], to_int(num), msg[b + 1 : -1]
    return msg, None, None, None


def parses_as_record(rest: bytes) -> bool:
    """Whether ``rest`` (after the process prefixes) opens an LMCache or vLLM record the parsers accept."""
    if rest[:1] == b"[":
        if not rest.startswith(b"] LMCache ", 24):
            return False
        colon = rest.find(b":", 34)
        return colon > 0 and rest[34:colon] in LMC_LEVELS
    sp = rest.find(b" ", 3, 10)
    return sp > 0 and rest[:sp] in VLLM_LEVELS and VLLM_REST.match(rest, sp + 1) is not None


_TS_PARTS = lazy(rb"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?")


def canonical_lmcache_ts(line: bytes) -> bytes:
    """``[2026-05-06T15:56:03.745123+00:00] LMCache …`` → ``[2026-05-06 15:56:03,745] LMCache …``."""
    idx = line.find(b"] LMCache ")
    m = _TS_PARTS.match(line, 1)
    if m is None or m.start() != 1:
        return line
    frac = (m.group(3) or b"0")[:3].ljust(3, b"0")
    return b"[" + m.group(1) + b" " + m.group(2) + b"," + frac + line[idx:]


def record_from_hot(item: tuple) -> Record | None:
    """Turn a line that ingest only counted (a scanner row: evidence, look-back) into its Record."""
    path, lineno, origin, line, year = item
    colon = line.find(b":", 34)
    level = LMC_LEVELS.get(line[34:colon])
    msg = line[colon + 2 :]
    msg, file, src_line, logger = split_suffix(msg)
    return Record(path, lineno, origin, "lmcache", level or "INFO", line[1:24], None, file, src_line, logger, msg)

