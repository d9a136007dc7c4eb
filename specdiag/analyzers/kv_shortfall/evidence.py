"""KV001 evidence from the loss's shape, the ranks and the deployment's features and versions.

Each ``weigh_*`` function is one evidence family: it reads the occurrences, the run's state and the
context, and adds support or opposition to the board — nothing else. The order they run in is
``rank.rank_causes``'s, because a board lists its reasons in the order they came. The weights are the
tiers of ``weights.py``.
"""

from __future__ import annotations

from specdiag.analyzers.kv_arith import LossViews
from specdiag.analyzers.kv_shortfall.detect import ShortfallTracker
from specdiag.analyzers.kv_shortfall.shortfall import (
    MIN_BLOCK,
    Shortfall,
    incidents_of,
    one_rank,
    rank_of,
    single_rank,
    tp_stated,
)
from specdiag.analyzers.kv_shortfall.weights import (
    CONCLUSIVE,
    DECISIVE,
    HINT,
    HINT_1_3,
    MODERATE,
    MODERATE_6,
    MODERATE_8,
    RECORD_ONLY,
    SLIGHT,
    SLIGHT_2_5,
    STRONG,
    STRONG_20,
    WEAK,
    WEAK_4,
)
from specdiag.context import Context
from specdiag.findings import CauseBoard
from specdiag.fingerprints import version_tuple


def weigh_alignment(b: CauseBoard, views: list[LossViews], chunk: int, read_miss: bool) -> None:
    """Whole chunks lost (most causes) or a sub-chunk remainder (unfull chunk, adapter accounting)."""
    v = views[0]
    aligned = [x.aligned for x in views]
    if all(a is True for a in aligned):
        basis = "LMCache's retrieve view" if v.not_loaded is not None else "the adapter's numbers"
        b.oppose("unfull-chunk-mismatch", CONCLUSIVE, f"the loss is a whole number of {chunk}-token chunks ({basis})")
        b.oppose("adapter-token-accounting-bug", SLIGHT, "the loss is chunk-aligned")
        b.note_for("lookup-retrieve-eviction", f"chunk-aligned loss ({chunk}-token chunks): whole chunks vanished")
    elif any(a is False for a in aligned):
        known_view = v.not_loaded is not None
        strong = known_view or (v.retrieved or 0) > 0
        sub_chunk = (v.not_loaded if known_view else v.missing or 0) < chunk
        why = (f"the retrieve lost {v.not_loaded} tokens, not a whole number of {chunk}-token chunks" if known_view
               else f"missing tokens are not a multiple of chunk_size {chunk}")
        if read_miss:
            b.support("unfull-chunk-mismatch", SLIGHT, why)
            b.oppose("unfull-chunk-mismatch", MODERATE_8, "a read failed ('can't be retrieved'): the chunk was asked for, "
                     "not cut off by a chunk-multiple slice")
        elif strong and sub_chunk:
            b.support("unfull-chunk-mismatch", STRONG_20, why + ", and less than one chunk short")
        else:
            b.support("unfull-chunk-mismatch", WEAK if strong else HINT, why)
        b.support("adapter-token-accounting-bug", (WEAK if sub_chunk else MODERATE_6) if strong else SLIGHT, why)
        for cid in ("lookup-retrieve-eviction", "remote-backend-loss", "pin-timeout", "pin-accounting-bug"):
            b.oppose(cid, WEAK if strong else HINT_1_3, "chunk-level losses are multiples of chunk_size; this one is not")
    elif v.retrieved == 0 and (v.missing or 0) >= chunk:
        b.oppose("unfull-chunk-mismatch", STRONG, f"nothing of {v.missing} tokens was loaded ({v.missing // chunk} "
                 f"chunk(s) or more): an unfull last chunk loses less than one {chunk}-token chunk")
    else:
        b.note_for("unfull-chunk-mismatch", "retrieved 0 says nothing about alignment: the retrieve line "
                   "('Retrieved X out of Y required tokens') would decide")
    if v.hit_aligned is True and v.not_loaded is not None and v.not_loaded % chunk == 0:
        b.oppose("unfull-chunk-mismatch", WEAK, f"the lookup hit ({v.lmcache_cached} tokens) ends on a chunk boundary")
    elif v.hit_aligned is False:
        b.note_for("unfull-chunk-mismatch", f"the lookup hit ({v.lmcache_cached} tokens) ends mid-chunk: an unfull "
                   "last chunk was stored (save_unfull_chunk, PD or blending)")


def weigh_ranks(b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
    """Which ranks were short: a subset means a per-rank loss; every rank alike means a systematic cause."""
    ranks = sorted({rank_of(o, single_rank(ctx), ctx) for o in occs})
    known = [r for r in ranks if not r.startswith("unknown")]
    where = "/".join(ranks)
    tp = ctx.tensor_parallel_size or 0
    stated = tp_stated(ctx)
    same_numbers = len({(o.expected, o.retrieved) for o in occs}) == 1
    all_ranks = stated and tp > 1 and len(known) >= tp
    if (all_ranks or len(known) >= 2) and same_numbers and len(incidents_of(occs)) == 1:
        what = f"all {tp} ranks" if all_ranks else f"{len(known)} ranks ({where})"
        b.support("adapter-token-accounting-bug", WEAK_4 if all_ranks else SLIGHT_2_5,
                  f"{what} were short by exactly the same numbers at the same moment: a systematic cause "
                  "(accounting, configuration), not a per-rank loss")
        for cid in ("lookup-retrieve-eviction", "pin-accounting-bug", "pin-timeout", "rank-disagreement"):
            b.oppose(cid, SLIGHT_2_5 if all_ranks else HINT, f"{what} lost the same tokens at once: ranks evict and pin "
                     "independently, so a per-rank loss would not repeat identically")
        if ctx.cfg("remote_url"):
            b.support("remote-backend-loss", HINT, "one shared remote store can fail every rank at once")
        return
    if stated and tp > 1 and known and len(known) < tp and len(ctx.ranks_seen) >= tp:
        for cid in ("lookup-retrieve-eviction", "pin-accounting-bug", "remote-backend-loss", "rank-disagreement"):
            b.note_for(cid, f"only {where} of {tp} ranks reported it (all {tp} ranks' lines are in the input): "
                       "a per-rank loss")


def weigh_rank_disagreement(b: CauseBoard, st: ShortfallTracker, ctx: Context, occs: list[Shortfall]) -> None:
    """The scheduler's 'Lookup results … differ across ranks' warning, for this request or anywhere."""
    l6 = [o.l6 for o in occs if o.l6 is not None]
    tied = [o.l6 for o in occs if o.l6 is not None and not o.l6_loose]
    if tied:
        b.support("rank-disagreement", STRONG, f"the lookup of this request warned that ranks disagree: {tied[0].f['results']} (line {tied[0].rec.line})")
    elif l6:
        o = next(o for o in occs if o.l6 is not None)
        why = ("the error names no request, so it is tied to the 'Reqid:' line after that warning only by its "
               f"numbers (need to load {o.lookup.get('need')} = expected {o.expected})" if o.lookup is not None else
               "the 'Reqid:' line that would tie it to this request is not in the input")
        b.support("rank-disagreement", MODERATE, f"ranks disagreed at a lookup just before (line {l6[0].rec.line}: "
                  f"{l6[0].f['results']}), whose minimum fits this load; {why}")
    elif st.l6_count:
        b.support("rank-disagreement", HINT, f"{st.l6_count} 'Lookup results … differ across ranks' warning(s) in the log")
    elif not one_rank(ctx, occs):
        b.absent("rank-disagreement", SLIGHT, "no 'Lookup results … differ across ranks' warning before it",
                 observable=b.observable and any(o.lookup for o in occs))
    else:
        b.rule_out("rank-disagreement", "a single rank cannot disagree with itself")


def weigh_features(b: CauseBoard, st: ShortfallTracker, ctx: Context, occs: list[Shortfall]) -> None:
    """Causes tied to an LMCache feature or version: P2P, async loading, hashing, adapter accounting."""
    cfg = ctx.lmcache_config
    weigh_p2p_precondition(b, st, cfg, occs)
    if cfg is not None:
        if cfg.get("enable_async_loading") is True:
            b.support("async-loading-partial", MODERATE_6, "enable_async_loading: True")
        else:
            b.rule_out("async-loading-partial", "enable_async_loading is not enabled")
    elif st.async_lengths:
        # storage_manager.py:648 (LMCache 0.5.6) answers the scheduler's lookup only on the async path
        b.support("async-loading-partial", WEAK_4, "'Responding to scheduler … with retrieved length' is printed only "
                  "with asynchronous loading (enable_async_loading: True)")
    shorter = async_shorter(st, occs)
    if shorter:
        o, length = shorter[0]
        whose = f"of this very request ({o.req_id})" if o.req_id in st.async_lengths else "of this rank just before"
        b.support("async-loading-partial", DECISIVE, f"the async lookup {whose} answered "
                  f"{length} tokens, fewer than the {o.expected} later expected")
        b.oppose("lookup-retrieve-eviction", WEAK, "the async lookup already answered a shorter prefix: nothing had to "
                 "be evicted after it")
    if len(set(ctx.none_hashes)) > 1:
        b.support("hash-inconsistency", WEAK, "processes initialised different NONE_HASH values")
    b.oppose("hash-inconsistency", WEAK, "hash mismatches make lookups miss (0 hits); they do not make a promised chunk disappear")
    weigh_accounting(b, occs)
    lmc_v = version_tuple(ctx.lmcache_version)
    if lmc_v is not None and lmc_v <= (0, 3, 1):
        b.support("adapter-token-accounting-bug", MODERATE_8, f"LMCache {ctx.lmcache_version} ≤ 0.3.1 had token-accounting bugs (issues #889, #910)")
    elif ctx.lmcache_version_note:
        b.support("adapter-token-accounting-bug", HINT, "LMCache build matches no release (development or patched build)")
    if any(o.retrieved == 0 for o in occs):
        b.support("backend-read-failure", HINT, "retrieved 0: the very first chunk failed")


def weigh_p2p_precondition(b: CauseBoard, st: ShortfallTracker, cfg: dict | None, occs: list[Shortfall]) -> None:
    """``p2p-retrieve-bug`` needs P2P on: ``enable_p2p: True`` in the config dump, or the P2P backend's own
    lines (v1/storage_backend/p2p_backend.py, 0.5.6) when a fragment does not show the dump."""
    if cfg is not None and cfg.get("enable_p2p") is True:
        b.require("p2p-retrieve-bug", "P2P (enable_p2p: True)", True, "")
        weigh_p2p(b, occs, "enable_p2p: True")
    elif st.p2p_lines:
        b.require("p2p-retrieve-bug", f"P2P ({st.p2p_lines} P2P backend line(s))", True, "")
        weigh_p2p(b, occs, f"{st.p2p_lines} P2P backend line(s)")
    elif cfg is not None:
        b.rule_out("p2p-retrieve-bug", "enable_p2p is not enabled")
    else:
        b.require("p2p-retrieve-bug", "P2P (enable_p2p: True)", None,
                  "the LMCache config dump ('Creating LMCacheEngine with config', enable_p2p) or the P2P backend lines")


def weigh_p2p(b: CauseBoard, occs: list[Shortfall], basis: str = "enable_p2p: True") -> None:
    """With P2P on, exactly 0 retrieved is that path's bug, not a lost chunk.

    LMCache ~0.3.2 (issues #1094, #1055): the P2P branch of ``LMCacheEngine.retrieve`` filled the KV but
    never set the returned mask, so ``ret_mask.sum()`` was 0 whatever was loaded. A lost chunk instead
    ends the retrieve at the first hole, which leaves 0 only when the very first chunk is gone.
    """
    zero = [o for o in occs if o.retrieved == 0]
    if not zero:
        b.support("p2p-retrieve-bug", WEAK, basis)
        return
    b.support("p2p-retrieve-bug", DECISIVE, f"{basis} and retrieved exactly 0 of {zero[0].expected} expected: the "
              "P2P retrieve path returned an empty mask (LMCache issues #1094, #1055)")
    b.oppose("lookup-retrieve-eviction", SLIGHT, "retrieved 0 with P2P on: the P2P path reports 0 without any chunk lost")


def weigh_accounting(b: CauseBoard, occs: list[Shortfall]) -> None:
    """The adapter's ``expected`` against what the lookup and vLLM's blocks allow.

    ``start_load_kv`` (LMCache 0.5.6 vllm_v1_adapter.py:756-896) expects ``lmcache_cached − vllm_cached``:
    the lookup's hit (whole chunks unless an unfull last chunk was stored) minus vLLM's own prefix hit
    (whole vLLM blocks, at least 16 tokens each). So ``expected`` is a multiple of 16, and equals the
    lookup line's ``hit − computed`` — unless the adapter subtracted or truncated tokens between lookup and
    retrieve (``skip_last_n_tokens``: issue #889 expected 253 of a 256-token hit; #910, fixed by PR #911).
    """
    for o in occs:
        if o.expected is None or o.expected <= 0:
            continue
        lk = o.lookup or {}
        hit, computed = lk.get("hit"), lk.get("computed")
        if computed is None and hit is not None and isinstance(lk.get("need"), int) and lk["need"] > 0:
            computed = hit - lk["need"] - (1 if hit == lk.get("total") else 0)  # before 0.3.15: from need
        if hit is not None and computed is not None and 0 < abs(hit - computed - o.expected) < MIN_BLOCK:
            b.support("adapter-token-accounting-bug", MODERATE_6,
                      f"the adapter expected {o.expected} tokens but its lookup promised {hit} − {computed} = "
                      f"{hit - computed}: tokens were subtracted between lookup and retrieve (skip_last_n_tokens)")
            return
        if o.expected % MIN_BLOCK and (o.r4 or {}).get("total") is None and hit is None:
            b.support("adapter-token-accounting-bug", MODERATE,
                      f"expected {o.expected} is not a multiple of {MIN_BLOCK}: a chunk-aligned hit minus whole "
                      "vLLM blocks cannot give it, so the adapter dropped a few tokens (or the hit ended mid-chunk)")
            b.support("unfull-chunk-mismatch", HINT, f"expected {o.expected} is not a multiple of {MIN_BLOCK}: "
                      "the hit may end mid-chunk")
            return


def async_shorter(st: ShortfallTracker, occs: list[Shortfall]) -> list[tuple[Shortfall, int]]:
    """Occurrences whose async lookup answer (L8) was shorter than the load later expected, with that length.

    By request id; without one (no ``Request …`` header in the input) the L8 of the same rank just before.
    """
    out = []
    for o in occs:
        if o.expected is None:
            continue
        length = st.async_lengths.get(o.req_id) if o.req_id else None
        if length is None and not o.req_id:
            length = next((e.f.get("length") for e in reversed(o.signals) if e.id == "L8"), None)
        if length is not None and length < o.expected:
            out.append((o, length))
    return out


def weigh_decode_cache(b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
    """The user's usual hunch, kept on the board only to be argued against: it changes stores, not loads."""
    cid = "decode-cache-not-saved"
    sdc = ctx.cfg("save_decode_cache")
    if sdc is False:
        b.note_for(cid, "save_decode_cache is False in the LMCache config")
    elif sdc is True:
        b.rule_out(cid, "save_decode_cache is True: decode chunks are stored")
    if ctx.speculative and ctx.speculative.get("enabled"):
        b.note_for(cid, f"speculative decoding ({ctx.speculative.get('method')}) is on — context only")
    b.oppose(cid, RECORD_ONLY, "save_decode_cache only changes what is *stored*; a lookup counts only chunks that exist, "
                     "so unsaved decode chunks cause misses (fewer hit tokens), never retrieved < expected "
                     "(LMCache vllm_v1_adapter.py: the flag is read only when building save metadata)")
    lk = next((o.lookup for o in occs if o.lookup), None)
    if lk is not None and lk["hit"] <= lk["total"]:
        b.oppose(cid, RECORD_ONLY, f"the promised prefix ({lk['hit']} tokens) lies within the request's {lk['total']} tokens at lookup: "
                         "those chunks were stored and then lost, not skipped")

