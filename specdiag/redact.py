"""``--redact``: replace prompt and completion text before any renderer sees the report.

vLLM's request logger (``--enable-log-requests``, and ``--enable-log-outputs`` since 0.10) writes the user's
text into the log::

    Received request chatcmpl-1: prompt: '<the prompt>', params: SamplingParams(...), prompt_token_ids: [1, 2, ...]
    Generated response chatcmpl-1: output: '<the completion>', output_token_ids: [3, 4, ...], finish_reason: stop

and ``RequestOutput``/``CompletionOutput`` reprs carry ``prompt='…'``, ``text='…'`` and ``token_ids=[…]``.
A finding may quote such a line as evidence, in a measurement, in a cause's reasoning or in the list of
unrecognised warnings. :func:`redact_report` rewrites every string in the :class:`Report` (findings,
evidence, measurements, causes, context, timeline labels, unrecognised shapes) so that the terminal, JSON,
Markdown and HTML outputs all show ``[redacted: N chars]`` / ``[redacted: N token ids]`` instead. The
lengths are kept: they are diagnostic (prefix length, chunk counts) and say nothing about the content.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from copy import deepcopy
from typing import Any

from specdiag.patterns import lazy

#: keys whose string value is user text (prompt or completion)
TEXT_KEYS = ("prompt", "prompts", "output", "outputs", "text", "content", "completion", "generated_text",
             "prompt_text", "output_text", "delta")
#: keys whose list value is the tokenised user text
ID_KEYS = ("prompt_token_ids", "output_token_ids", "token_ids", "prompt_ids", "output_ids",
           "cumulative_token_ids")

_KEYS = "|".join(sorted(TEXT_KEYS, key=len, reverse=True))
_ID_KEYS = "|".join(sorted(ID_KEYS, key=len, reverse=True))
# a Python/JSON string literal, closed or running to the end of the text (a truncated line)
_LIT = r"""'[^'\\]*(?:\\.[^'\\]*)*(?:'|\\?$)|"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?$)"""
# a flat list (of strings or numbers), closed or truncated
_LIST = r"""(?!\[redacted: )\[[^\]'"]*(?:(?:'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")[^\]'"]*)*(?:\]|$)"""
# a list of string literals (a batch of prompts), closed or truncated
_Q = r"""(?:'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")"""
_STRLIST = rf"""\[\s*{_Q}(?:\s*,\s*{_Q})*\s*,?\s*(?:\]|$)"""
_TEXT_RE = lazy(
    rf"""(?P<pre>(?<![\w.])(?P<q>['"]?)(?:{_KEYS})(?P=q)\s*[:=]\s*)(?P<val>{_LIT}|{_STRLIST}|\[\s*['"].*$)""", re.S)
_IDS_RE = lazy(
    rf"""(?P<pre>(?<![\w.])(?P<q>['"]?)(?:{_ID_KEYS})(?P=q)\s*[:=]\s*)(?P<val>{_LIST})""", re.S)
_SENSITIVE_KEYS = set(TEXT_KEYS) | set(ID_KEYS)
_MARK = lazy(r"^\[redacted: \d+ (?:chars|token ids|items)\]$")


def _literal_len(lit: str) -> int:
    try:
        v = ast.literal_eval(lit)
        if isinstance(v, str):
            return len(v)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    body = lit[1:]
    if body.endswith(lit[0]):
        body = body[:-1]
    return len(body)


def _count_ids(lst: str) -> int:
    inner = lst.strip()[1:].rstrip("]").strip()
    return 0 if not inner else inner.count(",") + 1


def _sub_text(m: re.Match) -> str:
    val = m.group("val")
    if val.startswith("["):
        try:
            items = ast.literal_eval(val)
            n = sum(len(x) for x in items if isinstance(x, str)) if isinstance(items, list) else _count_ids(val)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            n = len(val)
        return f"{m.group('pre')}[redacted: {n} chars]"
    return f"{m.group('pre')}[redacted: {_literal_len(val)} chars]"


def _sub_ids(m: re.Match) -> str:
    return f"{m.group('pre')}[redacted: {_count_ids(m.group('val'))} token ids]"


def redact_text(text: str) -> str:
    """The text with every prompt/completion literal and token-id list replaced by its length."""
    if not text or not isinstance(text, str):
        return text
    if not any(k in text for k in ("prompt", "output", "text", "content", "completion", "delta", "ids")):
        return text  # fast path: most log lines carry no request text
    text = _IDS_RE.sub(_sub_ids, text)
    return _TEXT_RE.sub(_sub_text, text)


def _redact_value(v: Any) -> Any:
    """A whole value stored under a sensitive key (``measurements["prompt"]``)."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        return v if _MARK.match(v) else f"[redacted: {len(v)} chars]"
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return f"[redacted: {len(v)} token ids]"
        return f"[redacted: {len(v)} items]"
    return "[redacted]"


def _walk(obj: Any, depth: int = 0) -> Any:
    if depth > 50:
        return obj
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            nk = _walk(k, depth + 1) if isinstance(k, str) else k
            if isinstance(k, str) and k.lower() in _SENSITIVE_KEYS:
                out[nk] = _redact_value(v)
            else:
                out[nk] = _walk(v, depth + 1)
        return out
    if isinstance(obj, list):
        return [_walk(x, depth + 1) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(x, depth + 1) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            # object.__setattr__ also works on frozen dataclasses (Evidence)
            object.__setattr__(obj, f.name, _walk(getattr(obj, f.name), depth + 1))
        return obj
    return obj


def redact_report(report: Any) -> Any:
    """A redacted copy of the report (every renderer then shows the redacted text); the original is kept."""
    if not dataclasses.is_dataclass(report):
        return _walk(deepcopy(report))
    # the rule documentation (``Report.rules``) comes from the registry, not a log: kept as it is, unwalked
    rules = getattr(report, "rules", None)
    bare = dataclasses.replace(report, rules={}) if rules else report
    copy = _walk(deepcopy(bare))
    return dataclasses.replace(copy, redacted=True, **({"rules": rules} if rules else {}))


__all__ = ["redact_report", "redact_text"]
