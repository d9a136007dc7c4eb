"""Where the corpus cases live for tests: the copy in tests/corpus (the shared one beside the repo as fallback)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def corpus_root() -> Path:
    local = HERE / "corpus"
    if local.is_dir() and any(local.glob("*/expected.json")):
        return local
    return (HERE.parent.parent / "shared" / "corpus").resolve()


CORPUS = corpus_root()
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []
