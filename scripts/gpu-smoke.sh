#!/usr/bin/env bash
# GPU smoke test for `specdiag repro --device cuda`: one save-decode-cache cell and one dynamic-k cell.
#
# STATUS: NEVER RUN ON A GPU YET. It was written and checked with `bash -n` and `--dry-run` on a machine
# without a GPU; the first GPU run may need fixes (the tiny model's shapes on CUDA, vLLM/LMCache versions).
#
# What it does, in under 8 minutes on one GPU with vLLM + LMCache already installed:
#   1. builds the project's tiny Llama model locally (specdiag/repro/tinymodel.py; no model hub),
#   2. runs one cell of save-decode-cache (save_decode_cache=true, ngram speculation),
#   3. runs one cell of dynamic-k (dynamic_k=on, draft_model, no LMCache),
#   4. fails unless both cells ran (status ok) and wrote verdict.json and report.html.
#
# Env: PYTHON — the python that has vllm, lmcache and this checkout installed (pip install -e .; default
#      python3); PROJECT_PY — the python that runs
#      specdiag (default: PYTHON); OUT — run folders (default runs/gpu-smoke-<UTC time>);
#      SPECDIAG_REPRO_CACHE — where the tiny model is built (default ~/.cache/specdiag/repro).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PROJECT_PY=${PROJECT_PY:-$PYTHON}
CACHE=${SPECDIAG_REPRO_CACHE:-$HOME/.cache/specdiag/repro}
OUT=${OUT:-runs/gpu-smoke-$(date -u +%Y%m%dT%H%M%SZ)}
MODEL=$CACHE/models/tiny-llama-v1
log() { printf '%s gpu-smoke %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu-smoke: no nvidia-smi: this script needs a GPU" >&2; exit 2; }
"$PYTHON" -c 'import vllm, lmcache' || { echo "gpu-smoke: $PYTHON lacks vllm or lmcache" >&2; exit 2; }

log "tiny model -> $MODEL"
timeout 120 "$PYTHON" -m specdiag.repro.tinymodel --out "$MODEL"

run_cell() {  # name, then the repro arguments
  local name=$1; shift
  log "cell $name"
  timeout 240 "$PROJECT_PY" -m specdiag repro "$@" --device cuda --model "$MODEL" --python "$PYTHON" \
    --health-timeout 180 --stop-grace 10 --out "$OUT/$name"
}

run_cell save-decode-cache --preset save-decode-cache --set save_decode_cache=true --set spec=ngram
run_cell dynamic-k --preset dynamic-k --set dynamic_k=on

"$PROJECT_PY" - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("save-decode-cache", "dynamic-k"):
    run = out / name
    v = json.loads((run / "verdict.json").read_text())
    statuses = [s for c in v["cells"] for s in c["status"]]
    assert statuses == ["ok"], f"{name}: cell status {statuses}"
    assert (run / "report.html").is_file(), f"{name}: no report.html"
    print(f"{name}: ok; notes: {v['notes'][:3]}")
PY
log "done: $OUT"
