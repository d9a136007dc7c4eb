"""KV001's finding: its numbers, its text (summary, headline, impact), evidence lines and next steps.

It assembles what detection found and the ranking weighed into one ``Finding`` per set of ranks; the
texts say what the lines show and, on partial input, which lines would decide.
"""

from __future__ import annotations

from specdiag.analyzers.causes import cause
from specdiag.analyzers.kv_arith import LossViews, describe, loss_views, measurements
from specdiag.analyzers.kv_coverage import Coverage
from specdiag.analyzers.kv_shortfall.detect import ShortfallTracker
from specdiag.analyzers.kv_shortfall.rank import CAP, ceiling, rank_causes
from specdiag.analyzers.kv_shortfall.shortfall import (
    MAX_OCCURRENCES,
    Shortfall,
    family,
    one_rank,
    rank_of,
    tp_stated,
)
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Evidence, Finding, evidence_of, with_primary
from specdiag.fingerprints import version_tuple


def _loss_words(v: LossViews) -> str:
    """The verdict's size of the loss: the finding's own missing tokens (``missing_tokens``, what the summary
    computes first), in whole chunks when the numbers show them; when the retrieve line counts another
    number (vLLM already held part of the range it asked for), that too, so the verdict never contradicts
    the arithmetic below it."""
    tokens = v.missing
    if tokens is None:
        return "KV tokens missing"
    if v.not_loaded is not None and v.not_loaded != tokens:
        return f"{tokens} tokens missing (the retrieve loaded {v.retrieved} of {v.required})"
    if v.aligned and tokens:
        return f"{tokens} tokens ({tokens // v.chunk} × {v.chunk}) missing"
    return f"{tokens} tokens missing"



def _chunk_measurements(ctx: Context, views: list[LossViews]) -> dict:
    """The chunk size and where it came from, and whether the loss is whole chunks (on which view's numbers)."""
    v0 = views[0]
    chunk = ctx.chunk_size or 256
    return {
        "chunk_size": chunk,
        "chunk_size_source": "log" if ctx.chunk_size is not None else "assumed default 256 (no config line in the input)",
        "missing_chunks": v0.lost_chunks,
        "chunk_aligned": all(v.aligned is not False for v in views),
        "chunk_alignment_basis": ("retrieve view (required − retrieved)" if v0.not_loaded is not None
                                  else "undecidable: nothing loaded and no retrieve line" if v0.aligned is None
                                  else "adapter view (expected − retrieved)"),
    }



def _headline(v0: LossViews, where: str, outcome: Event | None, requests: int, untracked: int = 0) -> str:
    """The verdict line's clause: the loss, the ranks, vLLM's consequence, how many requests (and how many
    short loads past the tracking cap were only counted)."""
    consequence = {"V2": "request failed", "V1": "recomputed"}.get(outcome.id if outcome else "", "")
    headline = f"{_loss_words(v0)} on {where}" + (f", {consequence}" if consequence else "")
    if requests > 1:
        headline += f", {requests} requests"
    if untracked:
        headline += f" and {untracked} more short loads"
    return headline



def tp_words(ctx: Context, ranks: list[str], stated: bool) -> str:
    """The TP size after the ranks, hedged when the log only lets it be guessed (a lower bound)."""
    tp = ctx.tensor_parallel_size
    if tp and tp > 1:
        return f" of TP={tp}" if stated else f" (TP ≥ {tp}: the log does not state the TP size)"
    return ""


def views_of(o: Shortfall, chunk: int) -> LossViews:
    """Both of LMCache's views of this occurrence's loss (adapter and retrieve), from whichever lines it has."""
    return loss_views(chunk, o.expected, o.retrieved, o.r4, o.lookup, o.r3.f if o.r3 is not None else None)


def build_finding(code: str, title: str, st: ShortfallTracker, ctx: Context, incidents: list[list[Shortfall]], single_rank: bool) -> Finding:
    """One finding for incidents reported by the same set of ranks: numbers of the first, causes of all."""
    first = incidents[0][0]
    all_occ = [o for inc in incidents for o in inc]
    chunk = ctx.chunk_size or 256
    views = [views_of(o, chunk) for o in all_occ]
    ranks = sorted({rank_of(o, single_rank, ctx) for o in all_occ})
    cov = st.coverage(ctx)
    meas = finding_measurements(st, ctx, incidents, views, ranks, single_rank, cov)
    board = rank_causes(st, ctx, all_occ, views, chunk, cov)
    # the line that proves it (the ERROR "Num retrieved tokens: …" when present) is the primary location,
    # not the scheduler's INFO lookup
    anchor = first.anchor.rec
    evidence = with_primary(evidence_lines(incidents), Evidence(anchor.path, anchor.line, anchor.display()))
    outcome = next((o.outcome for o in all_occ if o.outcome is not None), None)
    where = ", ".join(ranks)
    summary = summary_text(ctx, incidents, views[0], ranks, meas, cov, impact(ctx, all_occ, outcome))
    causes = board.ranked(ceiling=ceiling(all_occ, ctx, cov), cap=CAP)
    return Finding(
        rule=code, severity=severity(ctx, all_occ, outcome), title=title, summary=summary,
        count=len(incidents), evidence=evidence, measurements=meas, causes=causes,
        next_steps=next_steps(ctx, all_occ, causes, single_rank, cov, board),
        identity=f"{where}|{first.expected}|{first.retrieved}|{first.req_id or ''}",
        first_seen=first.t, headline=_headline(views[0], where, outcome, len(incidents), st.dropped),
    )


def finding_measurements(st: ShortfallTracker, ctx: Context, incidents: list[list[Shortfall]], views: list[LossViews],
                  ranks: list[str], single_rank: bool, cov: Coverage) -> dict:
    """The finding's numbers (report contract keys, in their documented order): the first occurrence's
    arithmetic, the chunk basis, who and how many, then the spread, the lookup and the parallelism."""
    first = incidents[0][0]
    all_occ = [o for inc in incidents for o in inc]
    v0 = views[0]
    meas = measurements(v0)
    meas.update(_chunk_measurements(ctx, views))
    meas.update({
        "ranks": ranks,
        "request_ids": [inc[0].req_id for inc in incidents if inc[0].req_id][:20],
        "occurrences": len(incidents),
        "error_lines": len(all_occ),
        "evidence_source": first.source,
    })
    if ctx.chunk_size is None and v0.chunk_consistent() is not None:
        meas["chunk_size_consistent_with_retrieve_line"] = v0.chunk_consistent()
    if len({(o.expected, o.retrieved) for o in all_occ}) > 1:
        meas.update(spread(ctx, all_occ, views, single_rank))
    if first.lookup:
        meas["lookup_hit_tokens"] = first.lookup["hit"]
        meas["lookup_total_tokens"] = first.lookup["total"]
        if first.lookup.get("t") and first.t:
            meas["lookup_to_retrieve_s"] = round(first.t - first.lookup["t"], 3)
    if tp_stated(ctx):
        meas["tensor_parallel_size"] = ctx.tensor_parallel_size
    elif ctx.tensor_parallel_size and ctx.tensor_parallel_size > 1:
        meas["tensor_parallel_size_at_least"] = ctx.tensor_parallel_size
    if st.dropped:
        meas["occurrences_not_tracked"] = st.dropped
    meas["input_coverage"] = cov.kind
    return meas


def spread(ctx: Context, occs: list[Shortfall], views: list[LossViews], single_rank: bool) -> dict:
    """When the occurrences' numbers differ: the range and total of missing tokens, and the first 20 rows."""
    miss = [v.missing or 0 for v in views]
    return {
        "missing_tokens_range": [min(miss), max(miss)],
        "total_missing_tokens": sum(miss),
        "per_request": [
            {"request_id": o.req_id, "rank": rank_of(o, single_rank, ctx), "expected": v.expected, "retrieved": v.retrieved}
            for o, v in list(zip(occs, views, strict=True))[:20]
        ],
    }


def severity(ctx: Context, occs: list[Shortfall], outcome: Event | None) -> str:
    """Error for the adapter's error pair; warning for a short retrieve line alone or when vLLM recomputed
    every affected request; info for a short CacheBlend retrieve (segments, not a promised prefix)."""
    severity = "error" if any(o.source in ("pair", "error-line") for o in occs) else "warning"
    if outcome is not None and outcome.id == "V1" and all(o.outcome is not None and o.outcome.id == "V1" for o in occs):
        severity = "warning"
    if severity == "warning" and ctx.cfg("enable_blending") is True and all(o.source == "retrieve" for o in occs):
        severity = "info"  # CacheBlend retrieves reusable segments, not a promised prefix: a short retrieve is normal
    return severity


def summary_text(ctx: Context, incidents: list[list[Shortfall]], v0: LossViews, ranks: list[str], meas: dict,
             cov: Coverage, impact: str) -> str:
    """The arithmetic in words, where it happened, what it cost; then the other requests and the coverage."""
    first = incidents[0][0]
    chunk_note = "" if ctx.chunk_size is not None else " (assuming the default chunk_size 256: no config line in the input)"
    arith = describe(v0, chunk_note)
    if first.source == "retrieve":
        arith = "a retrieve line loaded less than it was asked for (the adapter's error pair is not in the input): " + arith
    elif first.source == "error-line":
        arith = ("a retrieve line loaded less than it was asked for and the adapter's error line says so (its numbers "
                 "line, 'Num retrieved tokens: …, num expected tokens: …', is not in the input): " + arith)
    elif first.source == "failed-blocks":
        arith = "a failed-block report without its error pair: " + arith
    elif first.source == "read-failure":
        arith = (f"LMCache reported a failed read ('{first.marker.rec.msg[:70]}'): the retrieve drops that chunk and "
                 "every later one, so it loaded less than the lookup promised; the error pair with the numbers "
                 "('Num retrieved tokens: …, num expected tokens: …') is not in the input")
    rank_word = "rank" if len(ranks) == 1 else "ranks"
    where = ", ".join(ranks)
    summary = f"{arith[:1].upper()}{arith[1:]}, on {rank_word} {where}{tp_words(ctx, ranks, tp_stated(ctx))}. {impact}"
    if len(incidents) > 1:
        summary += (f" {len(incidents)} requests affected on the same rank(s); numbers above are the first "
                    f"(missing {meas['missing_tokens_range'][0]}–{meas['missing_tokens_range'][1]} tokens, "
                    f"{meas['total_missing_tokens']} in all)." if "missing_tokens_range" in meas
                    else f" {len(incidents)} requests affected, all with the same numbers.")
    untracked = meas.get("occurrences_not_tracked")
    if untracked:
        summary += (f" {untracked} more short loads past the first {MAX_OCCURRENCES} rank-level reports were counted "
                    "but not kept: the numbers and requests above are those of the first ones.")
    if cov.partial:
        summary += f" {cov.sentence()}"
    return summary


def impact(ctx: Context, occs: list[Shortfall], outcome: Event | None) -> str:
    """What the loss cost: vLLM's outcome line when present, else what the policy and version imply."""
    if outcome is not None and outcome.id == "V2":
        return "vLLM failed the request (kv_load_failure_policy=fail): the client received an error."
    if outcome is not None and outcome.id == "V1":
        return "vLLM rescheduled it and recomputed the missing tokens (policy recompute): a latency cost, no error."
    v = version_tuple(ctx.vllm_version)
    if any(o.r3 is not None for o in occs):
        pol = ctx.kv_load_failure_policy
        if pol == "none":
            return (f"LMCache reported the failed blocks, but vLLM {ctx.vllm_version} ignores them: attention ran over "
                    "unfilled KV blocks (silent corruption risk).")
        if pol:
            return f"LMCache reported the failed blocks to vLLM (policy {pol}, {ctx.kv_load_failure_policy_source})."
        return "LMCache reported the failed blocks to vLLM (outcome line not in the log)."
    if v is not None and v < (0, 11, 2):
        return f"vLLM {ctx.vllm_version} has no load-failure handling: the missing KV was used unfilled (corruption risk)."
    return "No failed-block report or vLLM outcome line was found for it."


def evidence_lines(incidents: list[list[Shortfall]]) -> list[Evidence]:
    """At most 14 distinct lines: the first request's lookup, warnings and pair, then the next requests' anchors."""
    out: list[Evidence] = []
    seen: set[tuple[str, int]] = set()

    def add(ev: Event | None) -> None:
        if ev is None:
            return
        k = (ev.rec.path, ev.rec.line)
        if k not in seen and len(out) < 14:
            seen.add(k)
            out.append(evidence_of(ev, None))

    first = incidents[0]
    o = first[0]
    if o.lookup:
        add(o.lookup["ev"])
    if o.l6 is not None:
        add(o.l6)
    by_family: dict[str, Event] = {}
    for s in o.signals:
        by_family[family(s)] = s  # the latest of each kind, so one noisy kind does not crowd out the rest
    for s in sorted(by_family.values(), key=lambda e: (e.rec.path, e.rec.line))[-5:]:
        add(s)
    if o.r4:
        add(o.r4["ev"])
    for occ in first:
        add(occ.r1)
        add(occ.r2)
    if o.r2 is None:
        add(o.anchor)
    add(o.r3)
    add(o.outcome)
    for inc in incidents[1:4]:
        add(inc[0].anchor)
    return out


def next_steps(ctx: Context, occs: list[Shortfall], causes: list, single_rank: bool, cov: Coverage,
                board: CauseBoard) -> list[str]:
    """What to collect next: for an excerpt, exactly the lines that would decide between the top causes."""
    steps = []
    top = causes[0].id if causes else None
    if cov.partial:
        live = [c.id for c in causes if c.confidence > 0.02 and c.id != "decode-cache-not-saved"][:4]
        has_retrieve = any(o.r4 for o in occs)
        for cid in live:
            what = cause(cid).collect
            if cid == "unfull-chunk-mismatch" and has_retrieve:  # its retrieve line is in the input already
                what = "save_unfull_chunk of every instance writing to the store (the retrieve line is in the input)"
            steps.append(f"For {cid}: collect {what}.")
    if not any(o.r4 for o in occs) and any(o.source == "pair" for o in occs):
        steps.append("Include the worker's 'Retrieved X out of Y required tokens (from Z total tokens)' line just "
                     "before the error (same process): it gives LMCache's own view (chunks asked for, chunks lost).")
    if not any(o.lookup for o in occs):
        steps.append("Include the engine-core (scheduler) log: its 'Reqid: … LMCache hit tokens' line shows what the lookup promised.")
    if not ctx.lmcache_config:
        steps.append("Include the LMCache config (the 'Creating LMCacheEngine with config' line, or pass --lmcache-config FILE.yaml).")
    tp = ctx.tensor_parallel_size
    if not tp_stated(ctx) and not one_rank(ctx, occs):
        steps.append("Include vLLM's startup line ('non-default args: … tensor_parallel_size') and every rank's log: "
                     "the TP size is not stated, so whether the other ranks loaded fully is unknown.")
    elif tp and not single_rank and len(ctx.ranks_seen) < tp:
        steps.append(f"Only {len(ctx.ranks_seen)} of {tp} ranks' logs were given: add the others to see whether they loaded fully.")
    if any(o.rank is None and o.anchor.rec.origin.pid is None for o in occs) and not single_rank:
        steps.append(f"These LMCache lines carry no worker prefix ({_why_no_prefix(ctx)}), so the failing rank cannot "
                     "be read from them: compare the per-rank 'Retrieved … out of …' lines of the request, or log each "
                     "worker to its own file.")
    if not any(o.signals for o in occs):
        steps.append("Set LMCACHE_LOG_LEVEL=DEBUG to log evictions ('Evicting N chunks'), and scrape lmcache:local_cpu_evict_count, "
                     "lmcache:pinned_memory_objs_count and lmcache:forced_unpin_count around the error.")
    if top:
        steps.append(f"To confirm {top}: {cause(top).confirm}.")
    return steps


def _why_no_prefix(ctx: Context) -> str:
    """Why an LMCache line shows no worker prefix, as far as the input tells: vLLM 0.31 and later prefix only
    their own records; with an older or unknown release the paste or the logging setup may have dropped it."""
    v = version_tuple(ctx.vllm_version)
    if v is not None and v >= (0, 31):
        return f"vLLM {ctx.vllm_version} prefixes only its own records"
    known = f"vLLM {ctx.vllm_version}" if ctx.vllm_version else "the vLLM release is not in the input"
    return (f"{known}: the paste or the logging setup may have dropped it; vLLM 0.31 and later prefix only their own "
            "records")
