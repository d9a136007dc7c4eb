"""LMCache's own arithmetic for one short load: the adapter's view and the retrieve's view.

The adapter (``vllm_v1_adapter.py`` ``start_load_kv``, LMCache 0.5.6 lines 756-896) compares two numbers
that are not measured from the same origin:

* ``num expected = lmcache_cached − vllm_cached`` — not chunk-aligned;
* ``num retrieved = ret_mask.sum()`` of ``LMCacheEngine.retrieve`` (``v1/cache_engine.py``), whose mask
  starts at ``floor(vllm_cached / chunk) * chunk``: the retrieve covers whole chunks, including the part of
  the first one that vLLM already held.

The retrieve line (``Retrieved X out of Y required tokens (from Z total tokens)``, or ``… out of Y out of
total Z`` in older builds) states the second view directly: ``Y`` tokens from the chunk boundary, ``Z`` =
``lmcache_cached``. Retrieval is all-or-nothing per chunk and stops at the first hole, so the loss in that
view is a whole number of chunks unless an unfull last chunk is involved. ``retrieved 0`` therefore says
nothing about alignment: ``Num retrieved 0, expected 16`` with ``Retrieved 0 out of 256`` is one whole
256-token chunk lost, of which vLLM already held 240 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LossViews:
    """Both views of one shortfall, with where each number came from."""

    chunk: int
    expected: int | None  # adapter: lmcache_cached − vllm_cached
    retrieved: int | None
    lmcache_cached: int | None = None  # the lookup's hit (retrieve line total, or the Reqid line)
    vllm_cached: int | None = None  # vLLM's own prefix-cache hit
    required: int | None = None  # retrieve: tokens from the chunk boundary below vllm_cached
    required_basis: str | None = None
    failed_tokens: int | None = None  # 'failed to load N tokens across M blocks'
    failed_blocks: int | None = None

    @property
    def missing(self) -> int | None:
        """Adapter view (the contract's ``missing_tokens``); without it, the failed-block or retrieve count."""
        if self.expected is None or self.retrieved is None:
            if self.failed_tokens is not None:
                return self.failed_tokens
            return self.not_loaded
        return self.expected - self.retrieved

    @property
    def not_loaded(self) -> int | None:
        """Retrieve view: tokens of whole chunks asked for and not loaded."""
        if self.required is None or self.retrieved is None:
            return None
        return self.required - self.retrieved

    @property
    def aligned(self) -> bool | None:
        """Whether the loss is whole chunks, from the retrieve view when known; None when undecidable."""
        nl = self.not_loaded
        if nl is not None:
            return nl % self.chunk == 0
        m = self.missing
        if m is None:
            return None
        if m % self.chunk == 0:
            return True
        if self.retrieved == 0:
            return None  # nothing loaded: the loss starts at a chunk boundary below vllm_cached, size unknown
        return False

    @property
    def lost_chunks(self) -> float | None:
        nl = self.not_loaded
        base = nl if nl is not None else self.missing
        if base is None:
            return None
        if self.aligned is None and self.retrieved == 0 and self.missing is not None:
            # the hit is chunk-aligned in the common case (save_unfull_chunk False): ceil(expected / chunk) chunks
            return -(-self.missing // self.chunk)
        return base // self.chunk if base % self.chunk == 0 else round(base / self.chunk, 2)

    @property
    def hit_aligned(self) -> bool | None:
        return None if self.lmcache_cached is None else self.lmcache_cached % self.chunk == 0

    def chunk_consistent(self) -> bool | None:
        """Whether the assumed chunk size fits the retrieve line (boundary multiple, remainder < chunk)."""
        if self.required is None or self.lmcache_cached is None:
            return None
        start = self.lmcache_cached - self.required
        if start < 0 or start % self.chunk:
            return False
        if self.expected is not None and not 0 <= self.required - self.expected < self.chunk:
            return False
        return True


def loss_views(chunk: int, expected: int | None, retrieved: int | None, r4: dict | None, lookup: dict | None,
               r3_fields: dict | None) -> LossViews:
    """Combine the error pair, the retrieve line, the lookup and the failed-block report of one rank."""
    v = LossViews(chunk=chunk, expected=expected, retrieved=retrieved)
    r4 = r4 or {}
    if v.retrieved is None and r4.get("retrieved") is not None:
        v.retrieved = r4["retrieved"]
    if r4.get("total") is not None:
        v.lmcache_cached = r4["total"]
    elif lookup and lookup.get("hit") is not None:
        v.lmcache_cached = lookup["hit"]
    if v.lmcache_cached is not None and expected is not None:
        v.vllm_cached = v.lmcache_cached - expected
    elif lookup and lookup.get("computed") is not None:
        v.vllm_cached = int(lookup["computed"])
    elif lookup and lookup.get("need") is not None and int(lookup["need"]) > 0 and lookup.get("total") is not None:
        # builds before 0.3.15 print no computed tokens: need = hit − computed − (1 on a full hit)
        full = 1 if lookup["hit"] == lookup["total"] else 0
        v.vllm_cached = max(lookup["hit"] - int(lookup["need"]) - full, 0)
    if r4.get("required") is not None:
        v.required, v.required_basis = r4["required"], "retrieve line"
    elif v.lmcache_cached is not None and v.vllm_cached is not None:
        v.required = v.lmcache_cached - (v.vllm_cached // chunk) * chunk
        v.required_basis = "lookup hit and vLLM computed tokens"
    if v.expected is None and v.lmcache_cached is not None and v.vllm_cached is not None:
        v.expected = v.lmcache_cached - v.vllm_cached
    if r3_fields:
        v.failed_tokens = r3_fields.get("tokens")
        v.failed_blocks = r3_fields.get("blocks")
    return v


def measurements(v: LossViews) -> dict:
    """The numbers of both views under stable names (contract names first, then this module's)."""
    m: dict = {"expected_tokens": v.expected, "retrieved_tokens": v.retrieved, "missing_tokens": v.missing}
    if v.lmcache_cached is not None:
        m["lmcache_cached_tokens"] = v.lmcache_cached
    if v.vllm_cached is not None:
        m["vllm_cached_tokens"] = v.vllm_cached
    if v.required is not None:
        m["retrieve_required_tokens"] = v.required
        m["retrieve_start_token"] = (v.lmcache_cached - v.required) if v.lmcache_cached is not None else None
        m["not_loaded_tokens"] = v.not_loaded
        m["required_basis"] = v.required_basis
    if v.failed_tokens is not None:
        m["failed_load_tokens"] = v.failed_tokens
        m["failed_load_blocks"] = v.failed_blocks
    return m


def describe(v: LossViews, chunk_note: str) -> str:
    """One or two sentences: what these numbers prove, in both views."""
    c = v.chunk
    parts = []
    if v.expected is not None and v.retrieved is not None:
        m = v.expected - v.retrieved
        s = f"expected {v.expected} − retrieved {v.retrieved} = {m} missing tokens"
        if m % c == 0:
            s += f" = {m // c} chunks of {c}{chunk_note}"
            if v.retrieved > 0 and v.not_loaded in (None, m):
                s += f": the last {m // c} chunks of the promised prefix"
        parts.append(s)
    nl = v.not_loaded
    if nl is not None and v.lmcache_cached is not None:
        start = v.lmcache_cached - v.required
        s = (f"the retrieve covered {v.required} tokens from the chunk boundary at {start} "
             f"({v.required_basis}) and loaded {v.retrieved}: {nl} tokens")
        if nl % c == 0:
            s += f" = {nl // c} whole {c}-token chunk{'s' if nl // c != 1 else ''} lost{chunk_note}"
        else:
            s += f", not a whole number of {c}-token chunks{chunk_note} (an unfull last chunk is involved)"
        if v.vllm_cached is not None and v.vllm_cached > start:
            s += (f"; vLLM already held {v.vllm_cached - start} tokens of it, which is why the adapter expected "
                  f"only {v.expected}")
        parts.append(s)
    elif v.expected is not None and v.retrieved is not None and (v.expected - v.retrieved) % c:
        if v.retrieved == 0:
            parts.append(f"nothing was loaded; the retrieve starts at a chunk boundary below vLLM's cached tokens, so "
                         f"with a chunk-aligned hit this is {-(-v.expected // c)} whole chunk(s) lost — retrieved 0 "
                         "says nothing about alignment (the 'Retrieved … out of … required tokens' line would decide)")
        else:
            parts.append(f"{v.expected - v.retrieved} is not a multiple of chunk_size {c}{chunk_note}: either an unfull "
                         "last chunk, or whole chunks of which vLLM already held part (the retrieve line or the "
                         "lookup's computed tokens would decide)")
    elif v.retrieved == 0:
        parts.append("nothing was loaded (the first chunk already failed)")
    if v.failed_tokens is not None:
        parts.append(f"LMCache reported {v.failed_tokens} tokens across {v.failed_blocks} vLLM blocks as failed")
    return "; ".join(parts)
