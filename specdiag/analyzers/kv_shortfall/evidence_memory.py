"""KV001 evidence from the lines that name a memory mechanism: pressure, pins, backends, staging.

Each ``weigh_*`` function is one evidence family (see ``evidence.py``): it adds support or opposition to
the board from the signal lines before the occurrences, the run's signal totals and the LMCache config.
"""

from __future__ import annotations

from specdiag.analyzers.kv_shortfall.detect import ShortfallTracker
from specdiag.analyzers.kv_shortfall.evidence import async_shorter
from specdiag.analyzers.kv_shortfall.shortfall import (
    DEFAULT_PIN_TIMEOUT_S,
    Shortfall,
    rank_of,
    single_rank,
)
from specdiag.analyzers.kv_shortfall.weights import (
    CONCLUSIVE,
    HINT,
    HINT_1_3,
    MODERATE,
    MODERATE_6,
    MODERATE_8,
    RECORD_ONLY,
    SLIGHT,
    SLIGHT_2_5,
    STRONG,
    STRONG_12,
    STRONG_15,
    STRONG_25,
    WEAK,
    WEAK_4,
)
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard
from specdiag.fingerprints import version_tuple


def weigh_pressure(b: CauseBoard, st: ShortfallTracker, ctx: Context, fams: dict[str, list[Event]], occs: list[Shortfall],
                    where: str) -> None:
    """Memory pressure is circumstantial for eviction; a line that names the mechanism explains it too.

    Before LMCache 0.3.3 only rank 0 pinned its looked-up chunks (PR #1101), so the other ranks' chunks
    could be evicted between lookup and retrieve; later versions pin on every rank.
    """
    pressure = fams.get("pressure", [])
    specific = specific_mechanism(st, fams, occs)
    if pressure and specific:
        b.support("lookup-retrieve-eviction", HINT_1_3,
                  f"{len(pressure)} memory-pressure line(s) on {where} shortly before — but {specific[1]} names the "
                  f"mechanism ({specific[0]}), which explains the pressure as well")
        b.support("pin-timeout", HINT, "the local cache was full, so force-unpinned chunks would be evicted at once")
    elif pressure:
        b.support("lookup-retrieve-eviction", MODERATE,
                  f"{len(pressure)} memory-pressure line(s) on {where} shortly before "
                  f"(e.g. line {pressure[-1].rec.line}: {pressure[-1].rec.msg[:90]})")
        b.support("pin-timeout", HINT, "the local cache was full, so force-unpinned chunks would be evicted at once")
    elif st.signals.totals.get("pressure"):
        b.support("lookup-retrieve-eviction", HINT, f"{st.signals.totals['pressure']} memory-pressure line(s) elsewhere in the log")
    elif st.stores_total:
        b.absent("lookup-retrieve-eviction", SLIGHT_2_5, f"the log shows {st.stores_total} stores but no memory-pressure line "
                 "(eviction itself is only logged at DEBUG)")
    else:
        b.note_for("lookup-retrieve-eviction", "the most common cause; the log shows too little of this rank to confirm or exclude it")
    lmc_v = version_tuple(ctx.lmcache_version)
    if lmc_v is not None and lmc_v < (0, 3, 3):
        weigh_unpinned_ranks(b, ctx, occs)
    elif lmc_v is not None and not (fams.get("pin-negative") or fams.get("pin-timeout")):
        b.oppose("lookup-retrieve-eviction", HINT_1_3, f"LMCache {ctx.lmcache_version} pins looked-up chunks on every rank; eviction needs a lost pin")


def weigh_unpinned_ranks(b: CauseBoard, ctx: Context, occs: list[Shortfall]) -> None:
    """Before LMCache 0.3.3 only rank 0's lookup server pinned (PR #1101): ranks ≠ 0 could evict freely.

    That explains a loss on a rank ≠ 0 only; rank 0 held its pins, so a short rank 0 needs another cause.
    """
    ranks = {rank_of(o, single_rank(ctx), ctx) for o in occs}
    rank0 = {r for r in ranks if r.endswith("TP0") and not r.startswith("unknown")}
    known = {r for r in ranks if not r.startswith("unknown")}
    v = ctx.lmcache_version
    if rank0:
        b.note_for("lookup-retrieve-eviction", f"LMCache {v} < 0.3.3 pinned only on rank 0 (PR #1101), but rank 0 "
                   "was short too: its pins held, so unpinned ranks do not explain it")
        return
    b.support("lookup-retrieve-eviction", WEAK_4 if known else SLIGHT,
              f"LMCache {v} < 0.3.3: only rank 0 pinned at lookup (fixed by PR #1101)"
              + (f"; {'/'.join(sorted(known))} did not pin" if known else ""))
    b.note_for("lookup-retrieve-eviction", "upgrade LMCache to ≥ 0.3.3 so every rank pins its looked-up chunks")


def weigh_pins(b: CauseBoard, st: ShortfallTracker, cfg: dict | None, fams: dict[str, list[Event]], occs: list[Shortfall],
                where: str, lmcache_version: str | None = None) -> None:
    """A double unpin (negative pin count) or the pin monitor's forced unpin made looked-up chunks evictable."""
    neg = fams.get("pin-negative", []) + fams.get("ref-negative", [])
    pto = fams.get("pin-timeout", [])
    if neg and pto and min((e.rec.path, e.rec.line) for e in pto) < max((e.rec.path, e.rec.line) for e in neg):
        # the pin monitor forced the count to 0; the request's own unpin then goes negative: a consequence
        b.support("pin-accounting-bug", HINT, f"negative pin count at line {neg[-1].rec.line}, but after the pin monitor's forced unpin")
        b.note_for("pin-timeout", f"the negative pin count at line {neg[-1].rec.line} follows the forced unpin "
                   "(the request's own unpin after its retrieve)")
        neg = []
    elif neg:
        # the double unpin is the mechanism; eviction is how its chunks then disappear
        b.support("pin-accounting-bug", CONCLUSIVE, f"'{neg[-1].rec.msg[:70]}…' on {where} at line {neg[-1].rec.line}: a double unpin made pinned chunks evictable")
        b.note_for("lookup-retrieve-eviction", "a lost pin lets eviction take looked-up chunks (see pin-accounting-bug)")
    elif st.signals.totals.get("pin-negative"):
        b.support("pin-accounting-bug", SLIGHT, f"{st.signals.totals['pin-negative']} negative pin-count warning(s) elsewhere in the log")
    elif not pto:
        b.absent("pin-accounting-bug", SLIGHT, "no 'Pin count of MemoryObj … is negative' warning in the log")
    weigh_pin_timeout(b, cfg, pto, occs, where, lmcache_version)


def weigh_pin_timeout(b: CauseBoard, cfg: dict | None, pto: list[Event], occs: list[Shortfall], where: str,
                       lmcache_version: str | None = None) -> None:
    """The pin monitor's forced unpin, or the lookup-to-retrieve gap against ``pin_timeout_sec``.

    Without the config the gap is held against the default: the PinMonitor (LMCache v1/pin_monitor.py,
    0.3.12+) force-unpins every object pinned longer than ``pin_timeout_sec`` (default 300 s, config key
    ``pin_timeout_sec`` / ``LMCACHE_PIN_TIMEOUT_SEC``), and the lookup pinned this request's chunks at its
    ``Reqid:`` line; a build older than 0.3.12 has no monitor, so a long wait cannot unpin anything there.
    """
    gap = next((o.t - o.lookup["t"] for o in occs if o.lookup and o.lookup.get("t") and o.t), None)
    pin_timeout = (cfg or {}).get("pin_timeout_sec")
    newest = version_tuple((lmcache_version or "").split("..")[-1]) if lmcache_version else None
    no_monitor = newest is not None and newest < (0, 3, 12)
    if pto:
        b.support("pin-timeout", STRONG_15, f"pin monitor force-unpinned objects on {where} before the retrieve (line {pto[-1].rec.line})")
        if (cfg or {}).get("save_decode_cache") is True:
            b.note_for("pin-timeout", "save_decode_cache: true adds decode-phase stores that evict force-unpinned chunks")
    elif gap is not None and isinstance(pin_timeout, (int, float)) and gap > pin_timeout:
        b.support("pin-timeout", MODERATE_8, f"{gap:.1f} s between lookup and retrieve exceeds pin_timeout_sec={pin_timeout}")
    elif gap is not None and isinstance(pin_timeout, (int, float)):
        b.oppose("pin-timeout", STRONG, f"only {gap:.2f} s between lookup and retrieve, far below pin_timeout_sec={pin_timeout}")
    elif gap is not None and gap < 30:
        b.oppose("pin-timeout", MODERATE, f"only {gap:.2f} s between lookup and retrieve (default pin_timeout_sec is 300)")
    elif gap is not None and gap > DEFAULT_PIN_TIMEOUT_S and no_monitor:
        b.oppose("pin-timeout", WEAK, f"{gap:.1f} s between lookup and retrieve, but LMCache {lmcache_version} predates "
                 "the pin monitor (0.3.12): nothing force-unpins there")
    elif gap is not None and gap > DEFAULT_PIN_TIMEOUT_S and pin_timeout is None:
        b.support("pin-timeout", MODERATE_6, f"{gap:.1f} s between lookup and retrieve exceeds the default pin_timeout_sec of "
                  f"{DEFAULT_PIN_TIMEOUT_S} (the config is not in the input: its pin_timeout_sec, or a 'Pin timeout "
                  "detected' warning, would confirm it)")
    else:
        b.absent("pin-timeout", HINT, "no 'Pin timeout detected' warning in the log")


def weigh_backends(b: CauseBoard, st: ShortfallTracker, cfg: dict | None, fams: dict[str, list[Event]]) -> bool | None:
    """Remote-store loss and backend read failures; returns whether a remote tier is configured (None: no config)."""
    remote_cfg = weigh_remote_config(b, cfg)
    read_miss = fams.get("read-miss", [])
    redis_ev = fams.get("redis-evicted", [])
    remote_err = fams.get("remote-error", []) + fams.get("remote-timeout", [])
    api_err = fams.get("backend-api-error", [])
    disk_err = fams.get("disk-error", [])
    if not redis_ev and st.signals.totals.get("redis-evicted"):
        b.support("remote-backend-loss", WEAK_4, f"{st.signals.totals['redis-evicted']} Redis 'Key exists but KV cache "
                  "does not exist' warning(s) elsewhere in the log")
    if redis_ev:
        b.support("remote-backend-loss", STRONG_25, f"Redis: 'Key exists but KV cache does not exist' at line {redis_ev[-1].rec.line}: the store evicted the KV bytes after the lookup saw the key")
    if read_miss:
        b.support("backend-read-failure", WEAK, f"'The cache block is in the storage, but it can't be retrieved' at line {read_miss[-1].rec.line}")
        b.support("remote-backend-loss", SLIGHT if remote_cfg else RECORD_ONLY, "a key counted as present could not be read")
        b.oppose("lookup-retrieve-eviction", WEAK, "the key was found but its read failed (evicted keys vanish silently, without this warning)")
    if api_err:
        b.support("backend-read-failure", STRONG_12, f"backend call failed right before: '{api_err[-1].rec.msg[:80]}' (line {api_err[-1].rec.line})")
    if remote_err:
        b.support("backend-read-failure", WEAK_4, f"remote backend error/timeout before the retrieve (line {remote_err[-1].rec.line})")
        b.support("remote-backend-loss", SLIGHT, "remote backend errors around the retrieve")
    if disk_err:
        b.support("backend-read-failure", MODERATE_6, f"disk read error before the retrieve (line {disk_err[-1].rec.line})")
    if not (read_miss or api_err or remote_err or disk_err):
        b.absent("backend-read-failure", SLIGHT, "no 'can't be retrieved' or backend error line before it")
    return remote_cfg


def weigh_remote_config(b: CauseBoard, cfg: dict | None) -> bool | None:
    """What the LMCache config says of a remote tier: none rules remote loss out; remote backends cannot pin."""
    if cfg is None:
        return None
    remote_cfg = bool(cfg.get("remote_url") or cfg.get("storage_plugins") or cfg.get("external_backends"))
    if not remote_cfg:
        b.rule_out("remote-backend-loss", "no remote_url or storage plugin in the LMCache config")
        return remote_cfg
    b.support("remote-backend-loss", SLIGHT, f"remote backend configured ({cfg.get('remote_url') or 'storage plugin'}); remote backends cannot pin")
    if cfg.get("local_cpu") is False and not cfg.get("local_disk"):
        b.oppose("lookup-retrieve-eviction", MODERATE_6, "no local tier: chunks live only in the remote store, whose "
                 "evictions are remote-backend-loss")
    if cfg.get("local_cpu") is True:
        b.oppose("remote-backend-loss", SLIGHT, "a local CPU tier sits in front of the remote store")
    return remote_cfg


def weigh_staging(b: CauseBoard, st: ShortfallTracker, cfg: dict | None, fams: dict[str, list[Event]], where: str,
                   remote_cfg: bool | None) -> None:
    """A disk or remote load needs a CPU staging buffer; without one the load returns partial results."""
    staging = fams.get("staging-exhausted", [])
    if staging:
        b.support("cpu-staging-exhausted", CONCLUSIVE, f"no CPU staging buffer for a disk/remote load on {where} just before "
                  f"(line {staging[-1].rec.line}): the load returned partial results")
    elif st.signals.totals.get("staging-exhausted"):
        b.support("cpu-staging-exhausted", WEAK, f"{st.signals.totals['staging-exhausted']} staging-exhausted line(s) "
                  "elsewhere in the log")
    elif cfg is not None and not (cfg.get("local_disk") or remote_cfg):
        b.rule_out("cpu-staging-exhausted", "no disk or remote tier configured (staging is only needed for those)")


def specific_mechanism(st: ShortfallTracker, fams: dict[str, list[Event]], occs: list[Shortfall]) -> tuple[str, str] | None:
    """The cause named outright by a line of that rank just before (or of the same request), if any."""
    named = (("staging-exhausted", "cpu-staging-exhausted", "a load's staging allocation failure"),
             ("redis-evicted", "remote-backend-loss", "Redis 'Key exists but KV cache does not exist'"),
             ("pin-timeout", "pin-timeout", "the pin monitor's forced unpin"),
             ("pin-negative", "pin-accounting-bug", "a negative pin count"))
    for fam, cid, words in named:
        if fams.get(fam):
            last = fams[fam][-1]
            return cid, f"{words} ('{last.rec.msg[:70]}', line {last.rec.line})"
    if async_shorter(st, occs):
        return "async-loading-partial", "the async lookup's shorter answer"
    return None
