"""Generated documentation must match the code it is generated from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_log_formats_doc_is_generated_from_the_template_tables() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_format_docs.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in text.split("```bash\n")[1:3]]
    assert "pip install" in blocks[0] and "specdiag analyze examples/" in blocks[0]
    assert "pytest" in blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "-m pytest -q" in ci
