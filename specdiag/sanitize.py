"""One sanitiser per output channel for text that came from a log.

Every string read from a log (messages, config values, request ids, file names) is untrusted: it can hold
terminal escape sequences (OSC 52 writes the clipboard, ``ESC[2J`` clears the screen), bidi overrides
that make text read backwards, lone surrogates from undecodable bytes, XML-forbidden characters, or
spreadsheet formulas. Renderers pass such text through the function for their channel; our own styling
(Rich markup, HTML tags, workflow-command syntax) is added *after* sanitising, never to log text.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields, is_dataclass
from itertools import chain
from typing import Any

from specdiag.patterns import lazy

#: CSI/OSC/other escape sequences (ESC … final byte, OSC … BEL/ST) and single C1 controls
_ESCAPE_SEQ = lazy(
    r"\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?"  # OSC ... BEL or ST (bounded)
    r"|\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]?"  # CSI
    r"|\x1b[P^_X][^\x1b]{0,4096}(?:\x1b\\)?"  # DCS, PM, APC, SOS
    r"|\x1b[@-_]?"  # two-byte escapes, or a lone ESC
)
#: C0 controls except TAB/LF, DEL, C1 controls; bidi embedding/override/isolate marks; lone surrogates
_CONTROL = lazy("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: characters XML 1.0 forbids (also in attributes), plus lone surrogates
_XML_FORBIDDEN = lazy("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_MD_SPECIAL = lazy(r"([\\`*_{}\[\]()<>#+!|~])")


def _visible(m: re.Match) -> str:
    c = m.group(0)
    if 0xD800 <= ord(c) <= 0xDFFF:
        return "\ufffd"
    return f"\\u{ord(c):04x}" if ord(c) > 0xFF else f"\\x{ord(c):02x}"


def _as_str(s: Any) -> str:
    return s if isinstance(s, str) else str(s)


def plain_text(s: Any, *, keep_newlines: bool = True) -> str:
    """Log text with escape sequences removed and other controls made visible (``\\x07``, ``\\u202e``).

    The base of every channel: what remains is printable text, TAB and (optionally) LF.
    """
    t = _as_str(s)
    if "\x1b" in t:
        t = _ESCAPE_SEQ.sub("", t)
    t = _CONTROL.sub(_visible, t)
    if not keep_newlines:
        t = t.replace("\n", " ")
    return t


def error_text(e: BaseException, limit: int = 200) -> str:
    """An exception as one bounded line (``FieldError: V1: field 'reqs' …``), safe for any channel."""
    text = " ".join(str(e).split())[:limit]
    return plain_text(f"{type(e).__name__}: {text}" if text else type(e).__name__, keep_newlines=False)


def terminal_text(s: Any) -> str:
    """For a terminal (Rich or plain stdout/stderr): no escape sequence or control reaches the tty."""
    return plain_text(s)


def one_line(s: Any) -> str:
    """A single terminal/console line (stderr messages, table cells)."""
    return plain_text(s, keep_newlines=False)


def xml_text(s: Any) -> str:
    """Text that XML 1.0 accepts (JUnit, SARIF-in-XML consumers); the XML writer escapes ``<&>``."""
    return _XML_FORBIDDEN.sub(_visible, plain_text(s))


def json_text(s: Any) -> str:
    """A str that encodes as valid UTF-8 JSON: lone surrogates become U+FFFD."""
    t = _as_str(s)
    try:
        t.encode("utf-8")
        return t
    except UnicodeEncodeError:
        return t.encode("utf-8", "replace").decode("utf-8")


def json_safe(obj: Any, _depth: int = 0) -> Any:
    """A JSON-encodable copy: valid UTF-8 strings and keys, non-finite floats as null, bounded depth."""
    if _depth > 60:
        return None
    if isinstance(obj, str):
        return json_text(obj)
    if isinstance(obj, bool) or obj is None or isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {json_text(str(k)): json_safe(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [json_safe(v, _depth + 1) for v in obj]
    return json_text(str(obj))


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula (OWASP: prefix a quote to formula-leading text)."""
    if not isinstance(value, str):
        return value
    t = plain_text(value, keep_newlines=False)
    return "'" + t if t.startswith(_CSV_FORMULA) else t


def markdown_text(s: Any) -> str:
    """Inline markdown: no raw HTML, no links or images, no emphasis from log text."""
    import html  # here: its entity table is 2 ms of a start that renders no markdown

    t = html.escape(plain_text(s, keep_newlines=False), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", t)


def github_data(s: Any) -> str:
    """The message part of a GitHub workflow command."""
    parts = [plain_text(p).replace("%", "%25").replace("\n", "%0A") for p in _as_str(s).split("\r")]
    return "%0D".join(parts)  # CR is escaped (toolkit command.ts), not shown as a control


def github_property(s: Any) -> str:
    """A property value of a GitHub workflow command (``file=…,title=…``)."""
    return github_data(s).replace(":", "%3A").replace(",", "%2C")


def neutralise_workflow_commands(s: Any) -> str:
    """Text printed to a CI log that must not be read as a workflow command (a line starting ``::``)."""
    t = plain_text(s)
    return re.sub(r"(?m)^(\s*)::", "\\1:\u200b:", t)


_SHARED = frozenset({int, float, bool, type(None), bytes})
_POINTS = frozenset({list, tuple})


def map_strings(obj: Any, fn: Any, _depth: int = 0) -> Any:
    """A copy of ``obj`` with every string (also dict keys, dataclass and ``__slots__``-free object fields)
    passed through ``fn``; other values are shared. For renderers that build output from many fields
    (the Rich terminal view), so that no field is forgotten."""
    if isinstance(obj, str):
        return fn(obj)
    if _depth > 40 or obj is None or isinstance(obj, (bool, int, float, bytes)):
        return obj
    if isinstance(obj, dict):
        return {map_strings(k, fn, _depth + 1): map_strings(v, fn, _depth + 1) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        kinds = set(map(type, obj))
        if _SHARED.issuperset(kinds):  # numbers only (a point of a long series): one C-level pass
            return obj if type(obj) is tuple else list(obj)
        if kinds <= _POINTS and _SHARED.issuperset(map(type, chain.from_iterable(obj))):  # a whole series
            return type(obj)(v if type(v) is tuple else list(v) for v in obj)
        return type(obj)(map_strings(v, fn, _depth + 1) for v in obj)
    if isinstance(obj, (list, tuple)):
        return obj
    state = getattr(obj, "__dict__", None)
    if state is None and is_dataclass(obj) and not isinstance(obj, type):  # a dataclass with slots (Context)
        state = {f.name: getattr(obj, f.name) for f in fields(obj)}
    if isinstance(state, dict) and getattr(type(obj), "__module__", "").startswith("specdiag."):
        import copy

        dup = copy.copy(obj)
        for k, v in state.items():
            try:
                object.__setattr__(dup, k, map_strings(v, fn, _depth + 1))
            except (AttributeError, TypeError):
                pass
        return dup
    return obj


def sanitized_report(report: Any, fn: Any = terminal_text) -> Any:
    """The report as a channel may show it: every string from a log through that channel's sanitiser."""
    return map_strings(report, fn)
