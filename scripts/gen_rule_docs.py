#!/usr/bin/env python3
"""Regenerate docs/rules/ from the rule registry (the rules' docstrings).

    python scripts/gen_rule_docs.py           # write docs/rules/*.md, remove pages of rules that are gone
    python scripts/gen_rule_docs.py --check   # exit 1 and list the stale files (tests/test_rules_docs.py)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdiag.ruledocs import generate_docs  # noqa: E402

DOCS = ROOT / "docs" / "rules"


def stale_files(docs_dir: Path = DOCS) -> list[str]:
    """Files under docs_dir that differ from, lack, or are not part of the generated set."""
    want = generate_docs()
    have = {p.name for p in docs_dir.glob("*.md")} if docs_dir.is_dir() else set()
    out = []
    for name, text in sorted(want.items()):
        p = docs_dir / name
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            out.append(name)
    out += sorted(have - set(want))
    return out


def write(docs_dir: Path = DOCS) -> list[str]:
    want = generate_docs()
    docs_dir.mkdir(parents=True, exist_ok=True)
    changed = stale_files(docs_dir)
    for name in changed:
        p = docs_dir / name
        if name in want:
            p.write_text(want[name], encoding="utf-8")
        else:
            p.unlink()
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    args = ap.parse_args()
    if args.check:
        stale = stale_files()
        for name in stale:
            print(f"stale: docs/rules/{name}")
        if stale:
            print("run: python scripts/gen_rule_docs.py")
        return 1 if stale else 0
    for name in write():
        print(f"updated docs/rules/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
