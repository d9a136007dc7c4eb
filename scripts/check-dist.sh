#!/usr/bin/env bash
# Build the sdist and a wheel as a release would, check their metadata, and install the wheel into a
# fresh environment outside the source tree: the shipped message catalog and the compiled scanner must
# be in it, and `specdiag analyze` must work from it (an editable install would hide a missing file).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -m pip install -q build twine
"$py" -m build -q --outdir "$out/dist" . >/dev/null
"$py" -m twine check "$out"/dist/*
python3 -m venv "$out/venv"
"$out/venv/bin/pip" install -q "$out"/dist/*.whl
cd "$out"
"$out/venv/bin/python" - <<'PY'
import specdiag.catalog as c, specdiag.ingest.scan as s
cat = c.catalog()
assert len(cat.entries) > 10_000, len(cat.entries)
print(f"wheel: {len(cat.entries):,} catalogued messages, compiled scanner: {s.compiled_in_use()}")
PY
# the whole output first: a reader that stops early (head) would make the write fail, which is exit 2
report=$("$out/venv/bin/specdiag" analyze "$OLDPWD/examples/tp8-shortfall/serve.log" --fail-on never -q)
printf '%s\n' "$report" | head -n 2
