"""Bare-CR splitting: where a carriage return inside a line starts a record of its own.

A progress bar redraws itself after a bare ``\r``; a log record written after one (or a stretch of
CR-ended lines inside an LF file) shares the physical line with the bar. The reader (``records.py``)
cuts such a line before every CR that starts a record and reads the pieces in order; every other CR is
left for the cleaner to drop. Apart from the reader because it is a self-contained, linear-time splitter
that tests exercise directly (and the source reader's docs point at it).
"""

from __future__ import annotations

from itertools import pairwise

from specdiag.ingest.cleaner import ANSI_ESC, ANSI_RESIDUE
from specdiag.ingest.wrappers import is_envelope

#: CRs inside one line tried as record starts (``cr_records``): past them the line's rest stays one piece
MAX_CR_TRIES = 4096
#: bytes after a CR that ``_starts_record`` reads: a colour code or two and a record header fit well within
CR_HEAD = 256
#: a record's first byte: a process prefix, LMCache's ``[``, an escape, a level word, ``Traceback``, and for the
#: rarer shapes (``shapes.py``) ``LMCache`` without its time and Python logging's ``asctime``, and ``^`` of a colour
#: code printed in caret notation (``^[[1;36m``, a paste of ``cat -v`` output)
_RECORD_FIRST = frozenset(b"([\x1bIWEDCTL0123456789^")


def _starts_record(line: bytes, at: int) -> bool:
    """Whether ``line[at:]`` starts a log record (colour codes in front allowed): a vLLM process prefix or
    header, an LMCache header, a uvicorn line, a traceback, or a header of ``shapes.py`` (Python logging's
    formats with a vLLM/LMCache logger, ``LMCache LEVEL:``). A progress bar's redraw starts with none."""
    if at >= len(line) or line[at] not in _RECORD_FIRST:
        return False
    head = line[at : at + CR_HEAD]
    if b"\x1b" in head:
        head = ANSI_ESC.sub(b"", head)
    elif head[:1] in b"[^":
        head = ANSI_RESIDUE.sub(b"", head)
    return is_envelope(head)


def cr_records(line: bytes) -> list[bytes]:
    """``line`` cut before every bare CR that starts a log record (a record written after a progress bar's
    ``\\r``, or a stretch of CR-ended lines inside an LF file); other CRs stay where they are (the cleaner
    drops them: a bar's redraws are one line). Linear: one ``find`` per CR and, at most :data:`MAX_CR_TRIES`
    times per line, a first-byte test and literal tests on the :data:`CR_HEAD` bytes after it (the colour
    patterns run on those bytes only); no pattern runs over the line."""
    cuts = [0]
    last = len(line) - 1
    pos = line.find(b"\r", 0, last)
    tries = 0
    while pos >= 0 and tries < MAX_CR_TRIES:
        tries += 1
        if _starts_record(line, pos + 1):
            cuts.append(pos + 1)
        pos = line.find(b"\r", pos + 1, last)
    if len(cuts) == 1:
        return [line]
    cuts.append(len(line))
    return [line[a:b] for a, b in pairwise(cuts)]



#: glued bars tried per line (``after_bar``)
MAX_BAR_TRIES = 16


def after_bar(line: bytes) -> int | None:
    """Where a record starts right after a progress bar on the same line, with no CR between (a paste or a
    terminal that dropped it): ``Processed prompts:  75%|█▎ | 3/4 [00:41<00:09, 9.93s/it](EngineCore_1 pid=7)
    ERROR …``. A tqdm bar is ``N%|…|`` then its ``[…]`` stats; the record must start at the bracket's end.
    Linear: one ``find`` for the bar and at most :data:`MAX_BAR_TRIES` for its closing bracket."""
    bar = line.find(b"%|")
    if bar < 0:
        return None
    pos, tries = line.find(b"]", bar), 0
    while pos >= 0 and tries < MAX_BAR_TRIES:
        tries += 1
        if _starts_record(line, pos + 1):
            return pos + 1
        pos = line.find(b"]", pos + 1)
    return None
