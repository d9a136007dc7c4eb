"""vLLM general plugin that gives LMCache a CPU connector inside every vLLM process.

Registered in pyproject.toml under ``[project.entry-points."vllm.general_plugins"]``; vLLM calls
``register()`` in the API server, the EngineCore and every Worker (``load_general_plugins``). It does nothing
unless ``SPECDIAG_LMCACHE_CPU_CONNECTOR=1`` (set by ``specdiag repro --device cpu`` for LMCache cells), so an
environment with specdiag installed keeps stock LMCache behaviour by default.

Why a hook and not a config key: LMCache 0.5.6's ``CreateGPUConnector`` handles cuda/xpu/musa/hpu only and
raises ``No supported cpu connector found`` otherwise; no LMCache setting selects a connector. We wrap that
factory: on ``torch_device_type == "cpu"`` with the vLLM engine type it returns specdiag's pure-torch
connector (``cpu_connector.py``) and defers to the original for everything else. The wrap happens when
``lmcache.v1.gpu_connector`` is imported (a ``sys.meta_path`` finder), or immediately if it already was,
so importing vLLM does not import LMCache or torch any earlier than it would anyway.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

ENV = "SPECDIAG_LMCACHE_CPU_CONNECTOR"
TARGET = "lmcache.v1.gpu_connector"


def _patch(module: Any) -> None:
    if getattr(module, "_specdiag_patched", False):
        return
    original = module.CreateGPUConnector

    def CreateGPUConnector(config, metadata, engine, layout_hints=None):  # noqa: N802 - LMCache's name
        import lmcache
        from lmcache.utils import EngineType

        if getattr(lmcache, "torch_device_type", None) == "cpu" and engine == EngineType.VLLM:
            from specdiag.repro.cpu_connector import create_cpu_connector

            return create_cpu_connector(config, metadata, layout_hints)
        return original(config, metadata, engine, layout_hints=layout_hints)

    module.CreateGPUConnector = CreateGPUConnector
    module._specdiag_patched = True


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        self.inner.exec_module(module)  # type: ignore[attr-defined]
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


def register() -> None:
    """vLLM plugin entry point; cheap and idempotent."""
    if os.environ.get(ENV) != "1":
        return
    if TARGET in sys.modules:
        _patch(sys.modules[TARGET])
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
