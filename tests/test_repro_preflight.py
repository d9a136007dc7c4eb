"""The CPU tier's pre-flight check: an environment whose specdiag plugin does not import (set up from a
checkout since removed) or comes from another checkout is refused before any server starts, with the fix.
Measured: an environment set up from a removed checkout ran every LMCache cell in degraded mode
("No supported cpu connector found"), 0 loads in each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdiag.repro import backends, cpu_plugin
from specdiag.repro.backends import BackendError, DeviceSpec, preflight


def _python(tmp_path: Path, found: dict) -> str:
    """A stand-in interpreter that answers the pre-flight script with ``found``."""
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\nprintf '%s\\n' '" + json.dumps(found) + "'\n")
    exe.chmod(0o755)
    return str(exe)


def _spec(tmp_path: Path, found: dict) -> DeviceSpec:
    return DeviceSpec("cpu", _python(tmp_path, found), str(tmp_path / "model"), str(tmp_path), "redis-server")


HERE = str(Path(cpu_plugin.__file__).resolve())


def test_a_plugin_that_does_not_import_is_refused_with_the_fix(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"vllm": True, "lmcache": True, "plugin": True,
                            "plugin_error": "ModuleNotFoundError: No module named 'specdiag'"})
    with pytest.raises(BackendError, match="does not import.*specdiag repro setup --device cpu"):
        preflight(spec, needs_lmcache=True, needs_redis=False)


def test_a_plugin_from_another_checkout_is_refused(tmp_path: Path) -> None:
    other = "/elsewhere/main/specdiag/repro/cpu_plugin.py"
    spec = _spec(tmp_path, {"vllm": True, "lmcache": True, "plugin": True, "plugin_file": other})
    with pytest.raises(BackendError, match="/elsewhere/main, not from this checkout"):
        preflight(spec, needs_lmcache=True, needs_redis=False)


def test_this_checkouts_plugin_passes_and_cells_without_lmcache_need_none(tmp_path: Path) -> None:
    ok = _spec(tmp_path, {"vllm": True, "lmcache": True, "plugin": True, "plugin_file": HERE})
    preflight(ok, needs_lmcache=True, needs_redis=False)
    (tmp_path / "other").mkdir()
    broken = _spec(tmp_path / "other", {"vllm": True, "lmcache": False, "plugin": False, "plugin_error": "ImportError: x"})
    preflight(broken, needs_lmcache=False, needs_redis=False)
    with pytest.raises(BackendError):  # the same environment fails once LMCache cells need it
        preflight(broken, needs_lmcache=True, needs_redis=False)


def test_the_check_runs_where_the_servers_run_not_in_this_checkout(tmp_path: Path, monkeypatch) -> None:
    """Run from a checkout, ``python -c`` would import that checkout's specdiag and hide a broken install."""
    seen = {}

    def run(argv, **kw):  # type: ignore[no-untyped-def]
        seen.update(kw)
        raise OSError("stop here")

    monkeypatch.setattr(backends.subprocess, "run", run)
    with pytest.raises(BackendError):
        preflight(_spec(tmp_path, {}), needs_lmcache=True, needs_redis=False)
    assert seen["cwd"] == str(tmp_path)
