"""A pure-torch LMCache connector between vLLM's CPU KV cache and LMCache memory objects.

Loaded only inside vLLM server processes (via ``cpu_plugin``), never by the specdiag CLI: it imports torch
and LMCache. Layouts (vLLM 0.32.0 CPU backend, LMCache 0.5.6; cpu-repro.md §4.3):

* vLLM keeps one tensor per attention layer, ``[num_blocks, num_kv_heads, block_size, 2 * head_size]``;
  its CPU attention reads it as ``[num_blocks, num_kv_heads, 2 * block_size, head_size]`` with rows
  ``[0, block_size)`` = K and ``[block_size, 2 * block_size)`` = V.
* LMCache memory objects (format KV_2LTD) hold ``[2, num_layers, num_tokens, num_kv_heads * head_size]``.

Token positions come from ``slot_mapping`` (slot = block * block_size + offset). Only the non-layerwise,
non-MLA path is supported: that is what the repro presets use.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface


class CPUPagedConnector(GPUConnectorInterface):
    def __init__(self, num_layers: int, num_kv_heads: int, head_size: int, dtype: torch.dtype) -> None:
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.hidden = num_kv_heads * head_size
        self.dtype = dtype
        self.kvcaches: list[torch.Tensor] | None = None

    @classmethod
    def from_metadata(cls, metadata: Any, layout_hints: Any = None) -> CPUPagedConnector:
        # kv_shape: (num_layers, 2, chunk_size, num_kv_heads, head_size)
        num_layers, _, _, num_kv_heads, head_size = metadata.kv_shape
        return cls(int(num_layers), int(num_kv_heads), int(head_size), metadata.kv_dtype)

    # ---------------------------------------------------------------------------------------- helpers
    def initialize_kvcaches_ptr(self, **kwargs: Any) -> None:
        if "kvcaches" in kwargs and kwargs["kvcaches"] is not None:
            kv = kwargs["kvcaches"]
            self.kvcaches = list(kv.values()) if isinstance(kv, dict) else list(kv)
            if len(self.kvcaches) != self.num_layers:
                # e.g. method=draft_model: vLLM registers draft layers LMCache did not count (crash B);
                # refuse loudly instead of storing a partial KV
                raise IndexError(f"specdiag CPU connector: LMCache expects {self.num_layers} layers but vLLM "
                                 f"registered {len(self.kvcaches)} KV caches")

    def _views(self) -> list[torch.Tensor]:
        assert self.kvcaches is not None, "kvcaches were never passed to the connector"
        out = []
        for t in self.kvcaches:
            nb, h, bs, two_d = t.shape
            out.append(t.view(nb, h, 2 * bs, two_d // 2))
        return out

    def get_shape(self, num_tokens: int) -> torch.Size:
        return torch.Size([2, self.num_layers, num_tokens, self.hidden])

    # ---------------------------------------------------------------------------------------- transfers
    def from_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None:
        """vLLM cache → memory object for tokens [start, end)."""
        assert memory_obj.tensor is not None
        self.initialize_kvcaches_ptr(**kwargs)
        slots = kwargs["slot_mapping"][start:end].to(torch.long)
        assert bool((slots >= 0).all()), "stored slots must be >= 0"
        n = end - start
        dst = memory_obj.tensor
        for layer, view in enumerate(self._views()):
            bs = view.shape[2] // 2
            blocks, offs = slots // bs, slots % bs
            k = view[blocks, :, offs]  # [T, H, D]
            v = view[blocks, :, offs + bs]
            dst[0, layer, :n].copy_(k.reshape(n, self.hidden))
            dst[1, layer, :n].copy_(v.reshape(n, self.hidden))

    def to_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None:
        """Memory object → vLLM cache, skipping tokens vLLM already holds and padding slots."""
        assert memory_obj.tensor is not None
        self.initialize_kvcaches_ptr(**kwargs)
        skip = min(end - start, max(0, int(kwargs.get("vllm_cached_tokens", 0)) - start))
        slots = kwargs["slot_mapping"][start:end].to(torch.long)
        keep = torch.arange(end - start) >= skip
        keep &= slots >= 0
        if not bool(keep.any()):
            return
        idx = keep.nonzero().squeeze(1)
        slots = slots[idx]
        src = memory_obj.tensor
        for layer, view in enumerate(self._views()):
            bs = view.shape[2] // 2
            blocks, offs = slots // bs, slots % bs
            k = src[0, layer].index_select(0, idx).reshape(-1, self.num_kv_heads, self.head_size)
            v = src[1, layer].index_select(0, idx).reshape(-1, self.num_kv_heads, self.head_size)
            view[blocks, :, offs] = k.to(view.dtype)
            view[blocks, :, offs + bs] = v.to(view.dtype)

    def batched_from_gpu(self, memory_objs: Any, starts: Any, ends: Any, **kwargs: Any) -> None:
        for obj, s, e in zip(memory_objs, starts, ends, strict=False):
            self.from_gpu(obj, s, e, **kwargs)

    def batched_to_gpu(self, memory_objs: Any, starts: Any, ends: Any, **kwargs: Any) -> None:
        for obj, s, e in zip(memory_objs, starts, ends, strict=False):
            self.to_gpu(obj, s, e, **kwargs)


def create_cpu_connector(config: Any, metadata: Any, layout_hints: Any = None) -> CPUPagedConnector:
    if getattr(config, "use_layerwise", False):
        raise RuntimeError("specdiag CPU connector: use_layerwise is not supported")
    if getattr(metadata, "use_mla", False):
        raise RuntimeError("specdiag CPU connector: MLA models are not supported")
    conn = CPUPagedConnector.from_metadata(metadata, layout_hints)
    print(f"specdiag LMCache CPU connector active: kv_shape={tuple(metadata.kv_shape)} "
          f"dtype={metadata.kv_dtype} layout_hints={layout_hints}", file=sys.stderr, flush=True)
    return conn
