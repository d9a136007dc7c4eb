#!/usr/bin/env python3
"""Regenerate the report excerpts the docs quote, from today's output.

usage: gen_doc_excerpts.py [--check]   (--check exits 1 when an excerpt on disk differs from today's output)

An excerpt is a fenced block between ``<!-- excerpt: COLUMNS ARGS... -->`` and ``<!-- /excerpt -->`` in a
markdown file under docs/ or examples/: the output of ``specdiag ARGS`` at that terminal width, without
colour, run from the repository root. Only outputs without timings or paths of this machine belong there
(``-q``: the verdict block).
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


def output_of(width: int, args: str) -> str:
    """``specdiag ARGS`` as a user sees it at ``width`` columns, without colour (run in this process)."""
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
