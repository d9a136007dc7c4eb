"""Formats as literal segments between typed placeholders, matched in linear time.

A catalog format is a canonical printf string (``%d``, ``%.2f``, ``%s``, ``%%``). Matching never uses a
regex over placeholders: the first literal must start the message, each next literal is found with
``str.find`` left to right (leftmost, never revisited), the last literal must end the message, and each
placeholder's text is then checked cheaply for its type. Every step is a bounded scan of the message, so
the cost is linear in its length whatever it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdiag.patterns import lazy

_PH = lazy(r"%([-+ #0]*)(\d*)(?:\.(\d*))?([diouxXeEfFgGcrsa%])")
#: placeholder conversion -> the kind checked: d(ecimal), f(loat), x (hex), o(ctal), c(har), s (anything)
_KIND = {"d": "d", "i": "d", "u": "d", "x": "x", "X": "x", "o": "o", "e": "f", "E": "f", "f": "f", "F": "f",
         "g": "f", "G": "f", "c": "c", "r": "s", "s": "s", "a": "s"}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")


@dataclass(frozen=True, slots=True)
class Pattern:
    """``lits[0] P1 lits[1] … Pn lits[n]``: n+1 literals around n placeholders of ``kinds[i]``."""

    lits: tuple[str, ...]
    kinds: str
    convs: str  # the printf conversions, for rendering samples
    weight: int  # literal characters: how specific the format is
    typed: int  # placeholders with a type to check (a tie between equally long formats goes to the typed)
    longest: int  # non-space characters of the longest literal: below 4 the text alone says too little
    head: Pattern | None = None  # the format up to its first literal newline, for a first line alone
    #: the format with its literal newlines removed, for a record whose continuation ingest joined to its
    #: first line as one wrapped row (a multi-line message under a width-cutting collector)
    flat: Pattern | None = None


def compile_fmt(fmt: str) -> Pattern:
    """The pattern of a canonical format (outer whitespace ignored, as envelopes trim it)."""
    lits, convs, pos, cur = [], [], 0, []
    for m in _PH.finditer(fmt):
        cur.append(fmt[pos:m.start()])
        pos = m.end()
        if m.group(4) == "%":
            cur.append("%")
            continue
        lits.append("".join(cur))
        cur = []
        convs.append(m.group(4))
    cur.append(fmt[pos:])
    lits.append("".join(cur))
    lits[0] = lits[0].lstrip()
    lits[-1] = lits[-1].rstrip()
    head = None
    for i, lit in enumerate(lits):
        cut = lit.find("\n")
        if cut >= 0:
            if i < len(lits) - 1 or cut < len(lit.rstrip()):
                head = _pattern(lits[:i] + [lit[:cut].rstrip()], convs[:i], None)
            break
    flat = _pattern([lit.replace("\n", "") for lit in lits], convs, None) if "\n" in "".join(lits) else None
    return _pattern(lits, convs, head if head is not None and head.longest >= 4 else None, flat)


def _pattern(lits: list[str], convs: list[str], head: Pattern | None, flat: Pattern | None = None) -> Pattern:
    kinds = "".join(_KIND[c] for c in convs)
    return Pattern(tuple(lits), kinds, "".join(convs), sum(map(len, lits)), len(kinds) - kinds.count("s"),
                   max(len("".join(x.split())) for x in lits), head, flat)


def values(p: Pattern, msg: str) -> list[str] | None:
    """The placeholder texts when ``msg`` (already stripped) fits the pattern, else None."""
    lits = p.lits
    first = lits[0]
    if not msg.startswith(first):
        return None
    n = len(p.kinds)
    if n == 0:
        return [] if len(msg) == len(first) else None
    last = lits[-1]
    pos, end = len(first), len(msg) - len(last)
    if end < pos or not msg.endswith(last):
        return None
    out, glued = [], []
    for i in range(1, n):
        lit = lits[i]
        if lit:
            j = msg.find(lit, pos, end)
            if j < 0:
                return None
        else:  # two placeholders side by side: the split is unknowable, so neither is type-checked
            j = pos
            glued.append(i)
        out.append(msg[pos:j])
        pos = j + len(lit)
    out.append(msg[pos:end])
    kinds = p.kinds
    for i, v in enumerate(out):
        k = kinds[i]
        if k != "s" and i + 1 not in glued and i not in glued and not _typed(k, v):
            return None
    return out


def _typed(kind: str, v: str) -> bool:
    """Whether a placeholder's text can be what its conversion prints (bounded, never raises)."""
    if kind == "c":
        return len(v) == 1
    v = v.strip()
    if v[:1] in "+-":
        v = v[1:]
    if kind == "d":
        return v.isdigit() and v.isascii()
    if kind == "f":
        try:
            float(v)
        except ValueError:
            return False
        return True
    if kind == "x":
        v = v[2:] if v[:2] in ("0x", "0X") else v
        return bool(v) and all(c in _HEX for c in v)
    v = v[2:] if v[:2] in ("0o", "0O") else v
    return bool(v) and all(c in _OCT for c in v)


def fits(p: Pattern, msg: str) -> list[str] | None:
    """``values`` on the whole message, else on its first line against the format's first line."""
    got = values(p, msg)
    if got is None and p.head is not None:
        cut = msg.find("\n")
        got = values(p.head, msg if cut < 0 else msg[:cut].rstrip())
        if got is None and cut < 0 and p.flat is not None:
            got = values(p.flat, msg)
    return got


def render(fmt: str, p: Pattern) -> str:
    """The format with typed sample values: ints 42, floats 3.14, one char, strings x1, x2, …"""
    args: list[object] = []
    for i, c in enumerate(p.convs):
        if c in "diuxXo":
            args.append(42)
        elif c in "eEfFgG":
            args.append(3.14)
        elif c == "c":
            args.append("c")
        else:
            args.append(f"x{i + 1}")
    return fmt % tuple(args)


def words(text: str) -> tuple[str | None, bool]:
    """The first word of a literal, and whether it is whole (whitespace after it, or nothing at all)."""
    parts = text.split(None, 1)
    if not parts:
        return None, False
    return parts[0], len(parts) == 2 or text[len(text.lstrip()) + len(parts[0]):][:1].isspace()
