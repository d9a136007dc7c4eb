"""Did the cell's preset condition happen? A verdict built on a phase that never had two requests in flight,
a "K=0" phase that drafted, or a small cache that never evicted would measure something else.

Each check gives ``{"check", "ok", "detail", "scope"}``: ``ok`` is True, False, or None when the run did not
record what decides it; ``scope`` is ``cell`` (the whole cell is then excluded from the evidence) or
``phase`` (only that phase is left out of the per-phase numbers).
"""

from __future__ import annotations

import json
from typing import Any

#: a K=0 phase may still draft while one request of the pair runs alone (the other finished first); more
#: than this share of what fixed K would draft means the schedule was not applied
K0_DRAFT_TOLERANCE = 0.1


def k_at_batch(schedule: str, k: int, batch: int) -> int | None:
    """K that ``dynamic_k`` gives at ``batch`` (``on`` = ``[[1,1,K],[2,256,0]]``); None for ``off`` or an
    unreadable schedule (fixed K applies)."""
    if schedule in ("off", "false", "default", ""):
        return None
    if schedule in ("on", "true"):
        return k if batch <= 1 else 0
    try:
        rows = json.loads(schedule)
        return next((int(r[2]) for r in rows if int(r[0]) <= batch <= int(r[1])), None)
    except (ValueError, TypeError, IndexError):
        return None


def phase_conditions(phases: list[dict[str, Any]], settings: dict[str, str],
                     max_tokens: int) -> list[dict[str, Any]]:
    """Batch ≥ 2 phases need that many requests in flight; a phase where the schedule gives K=0 must draft
    (almost) nothing."""
    out = []
    k = int(settings.get("num_speculative_tokens", "3") or 3)
    for p in phases:
        if p["batch"] < 2:
            continue
        flight = p.get("in_flight")
        ok = None if flight is None else flight >= p["batch"]
        out.append({"check": f"phase {p['phase']}: {p['batch']} requests in flight", "ok": ok, "scope": "phase",
                    "phase": p["phase"],
                    "detail": (f"phase {p['phase']}: at most {flight} request(s) in flight, batch {p['batch']} planned"
                               if ok is False else f"phase {p['phase']}: in-flight count not recorded"
                               if ok is None else f"phase {p['phase']}: {flight} in flight")})
        if k_at_batch(settings.get("dynamic_k", "off"), k, p["batch"]) == 0:
            limit = K0_DRAFT_TOLERANCE * k * max_tokens * p["batch"]
            ok0 = p["drafted"] <= limit
            out.append({"check": f"phase {p['phase']}: K=0 drafts nothing", "ok": ok0, "scope": "phase",
                        "phase": p["phase"],
                        "detail": f"phase {p['phase']}: {p['drafted']} draft tokens in a K=0 phase"
                                  + ("" if ok0 else f" (more than {limit:g}: the schedule was not applied)")})
    return out


def eviction_condition(log: dict[str, Any], uses_redis: bool) -> dict[str, Any]:
    """A cell meant to evict: Redis ``evicted_keys`` when recorded, else LMCache's eviction and pressure lines."""
    markers = log.get("markers") or {}
    redis = log.get("redis_evicted_keys")
    lines = sum(int(markers.get(m, 0)) for m in ("redis_key_evicted", "evicting", "alloc_failures",
                                                  "cpu_pressure", "no_eviction_candidates"))
    if isinstance(redis, int):
        ok: bool | None = redis > 0 or lines > 0
        detail = f"Redis evicted {redis} key(s); {lines} LMCache eviction/pressure line(s)"
    elif lines:
        ok, detail = True, f"{lines} LMCache eviction/pressure line(s)"
    elif uses_redis:
        ok, detail = None, "Redis eviction count not recorded and no LMCache eviction line"
    else:
        ok, detail = False, "no eviction or memory-pressure line (LMCACHE_LOG_LEVEL=DEBUG logs every eviction)"
    return {"check": "the cache evicted", "ok": ok, "scope": "cell",
            "detail": detail if ok is not False else f"meant to evict and did not: {detail}"}


def cell_conditions(toggled: dict[str, str], settings: dict[str, str], phases: list[dict[str, Any]],
                    log: dict[str, Any], must_evict: dict[str, list[str]], max_tokens: int) -> list[dict[str, Any]]:
    """Every check that applies to this cell; a cell whose batch-2 phases all failed is failed as a whole."""
    out = phase_conditions(phases, settings, max_tokens) if phases else []
    multi = [c for c in out if c["check"].endswith("in flight")]
    bad = {c["phase"] for c in out if c["ok"] is False}
    if multi and all(c["phase"] in bad for c in multi):
        out.append({"check": "batch-2 phases ran", "ok": False, "scope": "cell",
                    "detail": "no batch-2 phase met its condition: " + "; ".join(c["detail"] for c in out
                                                                             if c["ok"] is False)})
    if any(toggled.get(k) in vs for k, vs in must_evict.items()):
        out.append(eviction_condition(log, settings.get("redis_maxmemory", "off") != "off"))
    return out
