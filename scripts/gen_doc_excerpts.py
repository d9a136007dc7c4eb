#!/usr/bin/env python3
"""Regenerate the report excerpts the docs quote, from today's output.

usage: gen_doc_excerpts.py [--check]   (--check exits 1 when an excerpt on disk differs from today's output)

An excerpt is a fenced block between ``<!-- excerpt: COLUMNS ARGS... -->`` and ``<!-- /excerpt -->`` in a
markdown file under docs/ or examples/: the output of ``specdiag ARGS`` at that terminal width, without
colour, run from the repository root. Only outputs without timings or paths of this machine belong there
(``-q``: the verdict block). ``ARGS | box "TEXT"`` quotes one box of the full report instead of all of it:
the box (``╭`` … ``╰``) holding the first line that contains TEXT — ``| box "─ timeline ─"`` is the timeline,
``| box "ERROR  KV001"`` the KV001 finding — so a section can be shown without the run's timing line.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BLOCK = re.compile(r"(<!-- excerpt: (\d+) (.+?) -->\n```text\n)(.*?)(```\n<!-- /excerpt -->)", re.S)
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.md"))]


def box_containing(text: str, needle: str) -> str:
    """The box of ``text`` (its ``╭`` line to its ``╰`` line) around the first line that contains ``needle``."""
    lines = text.splitlines(keepends=True)
    hit = next((i for i, ln in enumerate(lines) if needle in ln), None)
    if hit is None:
        raise SystemExit(f"gen_doc_excerpts: no line of the report contains {needle!r}")
    top = next((i for i in range(hit, -1, -1) if lines[i].startswith("╭")), None)
    end = next((i for i in range(hit, len(lines)) if lines[i].startswith("╰")), None)
    if top is None or end is None:
        raise SystemExit(f"gen_doc_excerpts: the line with {needle!r} is in no box")
    return "".join(lines[top:end + 1])


def output_of(width: int, args: str) -> str:
    """``specdiag ARGS`` as a user sees it at ``width`` columns, without colour (run in this process); with
    ``| box "TEXT"``, only the box that holds TEXT."""
    if " | box " in args:
        args, needle = args.split(" | box ", 1)
        return box_containing(output_of(width, args), shlex.split(needle)[0])
    import os

    from typer.testing import CliRunner

    from specdiag.cli import app

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(app, shlex.split(args), env={"NO_COLOR": "1", "COLUMNS": str(width)})
    finally:
        os.chdir(cwd)
    return res.output if res.output.endswith("\n") else res.output + "\n"


def refreshed(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + output_of(int(m.group(2)), m.group(3)) + m.group(5), text)


def main() -> int:
    stale = []
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        new = refreshed(text)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if "--check" not in sys.argv:
                path.write_text(new, encoding="utf-8")
    if "--check" in sys.argv and stale:
        print(f"stale report excerpts in {', '.join(map(str, stale))}: run scripts/gen_doc_excerpts.py")
        return 1
    for p in stale:
        print(f"updated {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
