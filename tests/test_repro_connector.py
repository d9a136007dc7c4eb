"""The pure-torch LMCache CPU connector and its vLLM plugin hook (needs torch + lmcache: skipped otherwise).

Run with the repro environment: ``/work/repro-cache/venv/bin/python -m pytest tests/test_repro_connector.py``.
"""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache")

from specdiag.repro.cpu_connector import CPUPagedConnector  # noqa: E402

L, H, D, BS, NB = 2, 2, 64, 128, 16


def caches() -> list:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(NB, H, BS, 2 * D, generator=g).to(torch.bfloat16) for _ in range(L)]


def test_from_gpu_reads_k_and_v_rows_of_each_slot() -> None:
    kv = caches()
    c = CPUPagedConnector(L, H, D, torch.bfloat16)
    slots = torch.randperm(NB * BS, generator=torch.Generator().manual_seed(1))[:300]
    obj = types.SimpleNamespace(tensor=torch.zeros(tuple(c.get_shape(256)), dtype=torch.bfloat16))
    c.from_gpu(obj, 0, 256, kvcaches=kv, slot_mapping=slots)
    for t in (0, 5, 255):
        s = int(slots[t])
        b, o = s // BS, s % BS
        view = kv[1].view(NB, H, 2 * BS, D)
        assert torch.equal(obj.tensor[0, 1, t].view(H, D), view[b, :, o])
        assert torch.equal(obj.tensor[1, 1, t].view(H, D), view[b, :, BS + o])


def test_to_gpu_round_trip_skips_cached_prefix_and_padding() -> None:
    kv = caches()
    c = CPUPagedConnector(L, H, D, torch.bfloat16)
    slots = torch.randperm(NB * BS, generator=torch.Generator().manual_seed(2))[:256]
    obj = types.SimpleNamespace(tensor=torch.zeros(tuple(c.get_shape(256)), dtype=torch.bfloat16))
    c.from_gpu(obj, 0, 256, kvcaches=kv, slot_mapping=slots)
    new = [torch.zeros_like(x) for x in kv]
    load_slots = slots.clone()
    load_slots[100] = -1  # padding: must be skipped, not written to slot -1
    c.to_gpu(obj, 0, 256, kvcaches=new, slot_mapping=load_slots, vllm_cached_tokens=10)
    nv, ov = new[0].view(NB, H, 2 * BS, D), kv[0].view(NB, H, 2 * BS, D)
    for t, expect_copied in ((3, False), (100, False), (10, True), (200, True)):
        s = int(slots[t])
        b, o = s // BS, s % BS
        assert torch.equal(nv[b, :, o], ov[b, :, o]) is expect_copied, t
        assert torch.equal(nv[b, :, BS + o], ov[b, :, BS + o]) is expect_copied, t


def test_layer_count_mismatch_is_loud() -> None:
    c = CPUPagedConnector(L, H, D, torch.bfloat16)
    with pytest.raises(IndexError, match="expects 2 layers but vLLM registered 4"):
        c.initialize_kvcaches_ptr(kvcaches=caches() + caches())


def test_plugin_patches_only_when_enabled() -> None:
    code = (
        "import os, sys\n"
        "from specdiag.repro import cpu_plugin\n"
        "cpu_plugin.register()\n"
        "import lmcache.v1.gpu_connector as g\n"
        "print(getattr(g, '_specdiag_patched', False))\n"
    )
    for env_value, expected in (("1", "True"), ("0", "False")):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env={"SPECDIAG_LMCACHE_CPU_CONNECTOR": env_value, "PATH": "/usr/bin:/bin"})
        assert r.stdout.strip().splitlines()[-1] == expected, r.stderr[-2000:]
