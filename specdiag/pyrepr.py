"""Safe readers for Python reprs printed in logs (dicts, ``Namespace(...)``, ``Foo(a=1, b='x')``).

Never ``eval``: ``ast.literal_eval`` after quoting bare ``inf``/``nan``, then a tolerant key/value scan
for reprs that contain objects literal_eval cannot read (enums, ``torch.bfloat16``, nested dataclasses).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from specdiag.patterns import lazy

_BARE_FLOAT = lazy(r"(?<![\w'\".])(-?inf|nan)(?![\w'\"])")
_KV_DICT = lazy(
    r"'(?P<k>\w+)':\s*(?P<v>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None|-?inf|nan)"
)
_KV_CALL = lazy(
    r"(?<![\w.])(?P<k>[a-z_]\w*)=(?P<v>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None)(?=[,)\s]|$)"
)


def _scalar(text: str) -> Any:
    if text in ("inf", "-inf", "nan"):
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_dict(text: str) -> dict[str, Any]:
    """A ``{...}`` dict repr → dict. Falls back to scanning top-level scalar ``'key': value`` pairs."""
    fixed = _BARE_FLOAT.sub(lambda m: repr(m.group(1)), text)
    try:
        val = ast.literal_eval(fixed)
        if isinstance(val, dict):
            return {str(k): (float(v) if v in ("inf", "-inf", "nan") else v) for k, v in val.items()}
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    out: dict[str, Any] = {}
    for m in _KV_DICT.finditer(text):
        out.setdefault(m.group("k"), _scalar(m.group("v")))  # the first (outermost) occurrence wins
    return out


def parse_call_kwargs(text: str) -> dict[str, Any]:
    """``Name(a=1, b='x', ...)`` or ``a=1, b='x'`` → {a: 1, b: 'x'} for scalar values only."""
    return {m.group("k"): _scalar(m.group("v")) for m in _KV_CALL.finditer(text)}


def balanced(text: str, start: int) -> str | None:
    """The bracketed expression beginning at ``text[start]`` (``{``, ``[`` or ``(``), quotes respected."""
    if start < 0 or start >= len(text) or text[start] not in "{[(":
        return None
    pairs = {"{": "}", "[": "]", "(": ")"}
    stack = []
    quote = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return text[start : i + 1]
        i += 1
    return None


def value_after(text: str, key: str) -> str | None:
    """The bracketed value following ``'key': `` or ``key=`` in a repr."""
    for pat in (f"'{key}': ", f"{key}="):
        i = text.find(pat)
        if i >= 0:
            j = i + len(pat)
            if j < len(text) and text[j] in "{[(":
                return balanced(text, j)
            # SpeculativeConfig(...) style: Name(
            m = re.match(r"[A-Za-z_]\w*\(", text[j:])
            if m:
                b = balanced(text, j + m.end() - 1)
                return text[j : j + m.end() - 1] + b if b else None
            end = re.search(r",\s|\)|\}|$", text[j:])
            return text[j : j + end.start()] if end else text[j:]
    return None
