"""KV001 ranking: the priors, the confidence ceilings and the order the evidence families weigh in.

The board starts every cause at its prior (how often it explains a shortfall in practice), the evidence
families of ``evidence.py`` and ``evidence_memory.py`` multiply or divide those weights, and the ceiling
bounds the confidence by what the input can show: a log without discriminating lines never yields a
confident answer.
"""

from __future__ import annotations

from specdiag.analyzers.causes import cause
from specdiag.analyzers.kv_arith import LossViews
from specdiag.analyzers.kv_coverage import Coverage
from specdiag.analyzers.kv_shortfall import evidence as ev
from specdiag.analyzers.kv_shortfall import evidence_memory as mem
from specdiag.analyzers.kv_shortfall.detect import ShortfallTracker
from specdiag.analyzers.kv_shortfall.shortfall import Shortfall, rank_of, signal_families, single_rank
from specdiag.analyzers.kv_shortfall.weights import (
    PRIOR_COMMON,
    PRIOR_COMMON_0_4,
    PRIOR_HUNCH,
    PRIOR_OCCASIONAL,
    PRIOR_OCCASIONAL_0_2,
    PRIOR_RARE,
    PRIOR_RARE_0_06,
    PRIOR_UNCOMMON,
    PRIOR_UNCOMMON_0_15,
    PRIOR_USUAL,
)
from specdiag.context import Context
from specdiag.findings import CauseBoard

#: the causes KV001 weighs (their texts live in the shared catalog, analyzers/causes.py)
KV001_CAUSES = (
    "lookup-retrieve-eviction", "pin-accounting-bug", "pin-timeout", "remote-backend-loss", "backend-read-failure",
    "cpu-staging-exhausted", "adapter-token-accounting-bug", "p2p-retrieve-bug", "rank-disagreement",
    "hash-inconsistency", "async-loading-partial", "unfull-chunk-mismatch", "decode-cache-not-saved",
)
#: each cause's weight before any evidence: how often it explains a shortfall in practice
PRIORS = {
    "lookup-retrieve-eviction": PRIOR_USUAL, "pin-accounting-bug": PRIOR_COMMON, "pin-timeout": PRIOR_COMMON_0_4,
    "remote-backend-loss": PRIOR_OCCASIONAL, "backend-read-failure": PRIOR_COMMON,
    "cpu-staging-exhausted": PRIOR_OCCASIONAL_0_2, "adapter-token-accounting-bug": PRIOR_UNCOMMON_0_15,
    "p2p-retrieve-bug": PRIOR_RARE, "rank-disagreement": PRIOR_COMMON, "hash-inconsistency": PRIOR_RARE_0_06,
    "async-loading-partial": PRIOR_UNCOMMON, "unfull-chunk-mismatch": PRIOR_UNCOMMON,
    "decode-cache-not-saved": PRIOR_HUNCH,
}
#: confidence ceilings by how much of the log the input covers (a two-line paste proves the arithmetic only)
CEILING = {"fragment": 0.6, "partial": 0.7}
#: the ceiling when a signal line or an L6 warning discriminates between the causes
CEILING_DISCRIMINATING = 0.85
#: the ceiling with a lookup and the LMCache config but no discriminating line
CEILING_LOOKUP_AND_CONFIG = 0.6
#: the ceiling with less than that: the arithmetic alone
CEILING_ARITHMETIC_ONLY = 0.45
#: ``decode-cache-not-saved`` (the user's usual hunch) never explains a shortfall: its confidence is capped
CAP = {"decode-cache-not-saved": 0.05}


def ceiling(occs: list[Shortfall], ctx: Context, cov: Coverage) -> float:
    """The highest confidence these occurrences allow: by the lines that discriminate, then by coverage."""
    discriminating = any(o.signals or o.l6 is not None for o in occs)
    if discriminating:
        top = CEILING_DISCRIMINATING
    elif any(o.lookup for o in occs) and ctx.lmcache_config:
        top = CEILING_LOOKUP_AND_CONFIG
    else:
        top = CEILING_ARITHMETIC_ONLY
    return min(top, CEILING.get(cov.kind, 1.0))


def prior_board(cov: Coverage) -> CauseBoard:
    """A board with every cause at its prior; on partial input a missing line is not counted against one."""
    b = CauseBoard()
    b.observable = not cov.partial
    for cid, prior in PRIORS.items():
        c = cause(cid)
        b.add(cid, prior, fix=c.fix, confirm_with=c.confirm)
    return b


def rank_causes(st: ShortfallTracker, ctx: Context, occs: list[Shortfall], views: list[LossViews], chunk: int,
                cov: Coverage) -> CauseBoard:
    """Weigh every KV001 cause against the lines of these occurrences.

    The weighing steps run in a fixed order: a board multiplies weights as evidence comes in, and the
    order of its reasons is the order a reader sees them in.
    """
    b = prior_board(cov)
    fams = signal_families(occs)
    where = "/".join(sorted({rank_of(o, single_rank(ctx), ctx) for o in occs}))
    ev.weigh_alignment(b, views, chunk, bool(fams.get("read-miss")))
    ev.weigh_ranks(b, ctx, occs)
    mem.weigh_pressure(b, st, ctx, fams, occs, where)
    mem.weigh_pins(b, st, ctx.lmcache_config, fams, occs, where, ctx.lmcache_version)
    remote_cfg = mem.weigh_backends(b, st, ctx.lmcache_config, fams)
    mem.weigh_staging(b, st, ctx.lmcache_config, fams, where, remote_cfg)
    ev.weigh_rank_disagreement(b, st, ctx, occs)
    ev.weigh_features(b, st, ctx, occs)
    ev.weigh_decode_cache(b, ctx, occs)  # the user's usual hunch
    return b
