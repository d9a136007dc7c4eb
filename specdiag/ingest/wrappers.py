"""Outer wrappers added by collectors (docker, kubectl, journald, compose), stripped before anything else.

The wrapper style is sniffed once per input from its first lines, so the per-line cost for an unwrapped
log is nil and only the styles actually present are tried on each line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

ANSI_RE = re.compile(r"\x1b?\[\d{1,3}(?:;\d{1,3})*m")
ISO_TS = re.compile(r"(\d{4})-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)? ")
KUBECTL_PREFIX = re.compile(r"\[pod/[^\]]+\] ")
JOURNALD_ISO = re.compile(r"(\d{4})-\d\d-\d\dT\S+ \S+ [^:\s\[]+\[\d+\]: ")
JOURNALD_SHORT = re.compile(r"\S+\.? +\d+ \d\d:\d\d:\d\d \S+ [^:\s\[]+\[\d+\]: ")
COMPOSE = re.compile(r"[\w.-]+\s+\| ")


def strip_ansi(text: str) -> str:
    if "[" not in text:
        return text
    return ANSI_RE.sub("", text)


_ASCTIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d:\d\d:\d\d)")


def _json_logging(obj: dict) -> tuple[str, int | None]:
    """vLLM's JSON log formatter (0.32 ``--logging-config``) → the plain vLLM line it stands for."""
    m = _ASCTIME.search(str(obj.get("asctime") or obj.get("time") or ""))
    ts = f"{m.group(2)}-{m.group(3)} {m.group(4)}" if m else "01-01 00:00:00"
    where = f"{obj.get('filename') or obj.get('name') or 'json'}:{obj.get('lineno') or 0}"
    who = f"({obj.get('processName')} pid={obj.get('process')}) " if obj.get("process") is not None else ""
    text = f"{who}{obj.get('levelname', 'INFO')} {ts} [{where}] {obj.get('message', '')}"
    return text, int(m.group(1)) if m else None


def _docker_json(line: str) -> tuple[str, int | None]:
    if not line.startswith("{") or '"log"' not in line and '"levelname"' not in line:
        return line, None
    try:
        obj = json.loads(line)
    except ValueError:
        return line, None
    if isinstance(obj, dict) and isinstance(obj.get("message"), str) and "levelname" in obj:
        return _json_logging(obj)
    if not isinstance(obj, dict) or not isinstance(obj.get("log"), str):
        return line, None
    year = None
    t = obj.get("time")
    if isinstance(t, str) and len(t) >= 4 and t[:4].isdigit():
        year = int(t[:4])
    return strip_ansi(obj["log"].rstrip("\r\n")), year


def _regex_stripper(rx: re.Pattern) -> Callable[[str], tuple[str, int | None]]:
    def strip(line: str) -> tuple[str, int | None]:
        m = rx.match(line)
        if not m:
            return line, None
        year = int(m.group(1)) if rx.groups and m.group(1) else None
        return line[m.end() :], year

    return strip


# order matters: outermost first (kubectl --prefix, then --timestamps, then journald ...)
STYLES: list[tuple[str, Callable[[str], tuple[str, int | None]], re.Pattern | None]] = [
    ("docker-json", _docker_json, None),
    ("kubectl-prefix", _regex_stripper(KUBECTL_PREFIX), KUBECTL_PREFIX),
    ("journald-iso", _regex_stripper(JOURNALD_ISO), JOURNALD_ISO),
    ("iso-timestamp", _regex_stripper(ISO_TS), ISO_TS),
    ("journald", _regex_stripper(JOURNALD_SHORT), JOURNALD_SHORT),
    ("compose", _regex_stripper(COMPOSE), COMPOSE),
]


class Unwrapper:
    """Strips the wrapper styles found in the sample; remembers the year a wrapper timestamp carried."""

    def __init__(self, sample_lines: list[str]) -> None:
        self.active: list[tuple[str, Callable]] = []
        lines = [ln for ln in sample_lines if ln.strip()][:400]
        if not lines:
            return
        for name, fn, rx in STYLES:
            hits = 0
            for ln in lines:
                if name == "docker-json":
                    hits += ln.startswith("{") and ('"log"' in ln or '"levelname"' in ln)
                else:
                    # the sample has already been stripped by the outer styles found so far
                    hits += bool(rx.match(self._strip_outer(ln)))
            # compose/journald shapes could match ordinary text by accident: demand a clear majority
            need = 0.5 if name in ("compose", "journald") else 0.05
            if hits and hits >= need * len(lines):
                self.active.append((name, fn))
        self.names = [n for n, _ in self.active]

    def _strip_outer(self, line: str) -> str:
        for _name, fn in self.active:
            line, _ = fn(line)
        return line

    def __bool__(self) -> bool:
        return bool(self.active)

    def strip(self, line: str) -> tuple[str, int | None]:
        year = None
        for _name, fn in self.active:
            line, y = fn(line)
            if y:
                year = y
        return line, year
