"""Numbers read from log text, parsed defensively in one place.

A log is untrusted input: a field can hold ``inf``, ``nan``, a 5,000-digit integer (Python refuses to
convert more than 4,300 digits), a sign where none belongs, or junk. Every template, the metrics parser
and the context builder convert through these helpers, which never raise: an unusable value is ``None``
(the caller treats the field as unparseable and notes the line), never an exception that ends the run.
"""

from __future__ import annotations

import math

#: longer digit strings are not a real count, pid or line number in any vLLM/LMCache log
MAX_INT_DIGITS = 19
MAX_FLOAT_CHARS = 40


def _text(s: str | bytes) -> str:
    return s.decode("ascii", "replace") if isinstance(s, (bytes, bytearray)) else s


def to_int(s: str | bytes | None, *, lo: int | None = None, hi: int | None = None) -> int | None:
    """An integer of at most 19 digits (optional sign, ``_`` not allowed), within ``[lo, hi]``; else None."""
    if s is None:
        return None
    if s.__class__ is bytes and 0 < len(s) <= MAX_INT_DIGITS and s.isdigit():
        v = int(s)  # what a template's digit group holds: bytes.isdigit is ASCII digits only, no sign, no space
    else:
        t = _text(s).strip()
        body = t[1:] if t[:1] in "+-" else t
        if not body or len(body) > MAX_INT_DIGITS or not body.isascii() or not body.isdigit():
            return None
        v = int(t)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        return None
    return v


def to_float(s: str | bytes | None, *, finite: bool = True, lo: float | None = None,
             hi: float | None = None) -> float | None:
    """A float (``inf``/``nan`` rejected when ``finite``), within ``[lo, hi]``; else None."""
    if s is None:
        return None
    t = _text(s).strip().rstrip("%")
    if not t or len(t) > MAX_FLOAT_CHARS or not t.isascii() or "_" in t:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    if finite and not math.isfinite(v):
        return None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        return None
    return v


def finite_or_none(v: object) -> float | int | None:
    """A value from parsed config (YAML, dict repr) as a usable finite number, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if abs(v) < 10**MAX_INT_DIGITS else None
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (str, bytes)):
        i = to_int(v)
        return i if i is not None else to_float(v)
    return None
