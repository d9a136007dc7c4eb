"""KV016 — LMCache's writes to a storage backend failed: the chunks are not kept there."""

from __future__ import annotations

import functools
from collections import Counter

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import CATALOG_EVENT, Event, entry_of
from specdiag.findings import Cause, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: what each line is, for the summary
LABELS = {"X4": "remote put task failure(s)", "X9": "batched put error(s)", "X6": "Mooncake batch_put_from failure(s)",
          "G_MOONCAKE_PUT": "Mooncake client put failure(s)", "X10": "file write failure(s)",
          CATALOG_EVENT: "other catalogued write failure(s)"}
#: a catalogued storage-backend error (the catalog's ``backend-io`` family) is a write's when its format names a
#: write and no read (``Failed to upload %s to S3: %s``, ``BigtableL2Adapter store failed: %s``, ``eic mset %s
#: failed``; not ``Failed to download …``, ``batched_get``, ``lookup``)
_WRITE = lazy(r"(?i)(?:\b|_)(?:put|mset|set|store|upload|write|save|persist|flush)(?:\b|_|s\b|ed\b)")
_READ = lazy(r"(?i)(?:\b|_)(?:get|mget|load|download|read|lookup|exists|contains|delete|retrieve|fetch|releasing"
             r"|closing)"
             r"(?:\b|_|s\b|ed\b)")


def _with_last_value(entry, msg: str) -> str:
    """A catalogued message as its format's literals with only the last placeholder's text filled in (``Failed to
    upload … to S3: AWS_ERROR_S3_INVALID_RESPONSE_STATUS: …``): the reason, without the keys that make lines differ."""
    from specdiag.catalog import catalog
    from specdiag.catalog.pattern import values

    p = catalog().pattern_of(entry)
    got = values(p, msg.strip()) if p is not None else None
    if not got:
        return entry.fmt.strip()
    return "…".join(p.lits[:-1]) + got[-1] + p.lits[-1]


def catalogued_write_failure(entry) -> bool:
    """Whether a catalog entry is an LMCache storage backend's failed write, at ERROR or worse."""
    return (entry.project == "lmcache" and entry.family == "backend-io" and entry.level in ("ERROR", "CRITICAL")
            and _names_a_write(entry.fmt or ""))


@functools.lru_cache(maxsize=256)
def _names_a_write(fmt: str) -> bool:
    """Whether a format names a write and no read (once per format: a backend failing floods its one message)."""
    return _WRITE.search(fmt) is not None and _READ.search(fmt) is None


@register
class BackendWriteErrors(Rule):
    """LMCache's writes to a storage backend failed: the chunks are not kept there.

    Detects: the remote backend's ``Put task failed for key …``, a connector's ``batched put error: …``,
    Mooncake's ``batch_put_from failed`` and, from Mooncake's own C++ client in the worker (glog lines),
    ``Put operation failed with error: …`` / ``Failed to end put operation: …``, and a file connector's
    ``Failed to write file <path>: <error>`` (the fs connector, 3FS); and every other message the catalog files
    under storage-backend I/O at ERROR whose format names a write and no read (63 formats in 28 modules across LMCache's releases: S3's
    ``Failed to upload %s to S3: %s``, Azure's, Valkey's ``Fail to put data``, GDS's, the L2 adapters' store
    failures), each quoted as its format with the last value, the reason, filled in.

    Why it matters: a chunk whose write failed is not in the store, so every later lookup of it there misses:
    another instance never reuses it, and once the local tier evicts it the prompt is recomputed. Nothing
    fails for the client; the cache just stays empty. A ``Stored N out of total N tokens`` line before the
    errors does not show that the remote write succeeded.

    Causes weighed: ``backend-write-failure``.

    Fix: the write path the error names: room in the store, a client library the connector supports, the
    store's master service.

    References: LMCache ``v1/storage_backend/remote_backend.py`` (0.5.6 :220),
    ``connector/instrumented_connector.py`` (:118, :186), ``connector/mooncakestore_connector.py``,
    ``connector/fs_connector.py`` (0.3.0 :134), ``connector/hf3fs_connector.py`` (0.5.5 :262); issues #1518, #2166,
    #1862.
    """

    code = "KV016"
    name = "lmcache-backend-write-errors"
    title = "LMCache's writes to a storage backend failed: the chunks are not kept there"
    severity = "warning"
    family = "KV"
    cause_ids = ("backend-write-failure",)
    events = frozenset(LABELS) - {CATALOG_EVENT}
    #: the catalogued writes come as every ERROR line does (an observer of catalog events in ``events`` would keep
    #: every DEBUG/INFO record of a known place read instead of counted: ``docs/scanner.md``, quiet records)
    levels = frozenset({"ERROR", "CRITICAL"})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.first: list[Event] = []
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id == "X6" and ev.f.get("op") != "batch_put_from":
            return  # a read: KV013's
        if ev.id not in LABELS:
            return  # another ERROR line (``levels``)
        if ev.id == CATALOG_EVENT:
            entry = entry_of(ev)
            if entry is None or not catalogued_write_failure(entry):
                return
            if entry.fmt not in self.claims and len(self.claims) < 20:
                self.claims = (*self.claims, entry.fmt)
            ev = Event(CATALOG_EVENT, ev.rec, {"error": _with_last_value(entry, ev.rec.msg)})
        self.counts[ev.id] += 1
        err = (ev.f.get("error") or "").strip()[:120]
        if err and (err in self.errors or len(self.errors) < 20):
            self.errors[err] += 1
        if len(self.first) < 3:
            self.first.append(ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        total = sum(self.counts.values())
        if not total:
            return []
        what = ", ".join(f"{n} {LABELS[tid]}" for tid, n in self.counts.most_common())
        top = [f"'{e}' ×{n}" for e, n in self.errors.most_common(3)]
        cause = Cause("backend-write-failure", 0.8, for_=[f"{total} failed write line(s): {what}"],
                      **fix_and_confirm("backend-write-failure"))
        first = self.first[0]
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"{what}{' (' + '; '.join(top) + ')' if top else ''}: those chunks are not in the store, so later "
                     "lookups of them there miss. Nothing fails for the client; a 'Stored N out of total N tokens' "
                     "line does not show that the remote write succeeded."),
            count=total, evidence=[evidence_of(e, 400) for e in self.first],
            causes=[cause], identity=f"{self.code}|{self.errors.most_common(1)[0][0] if self.errors else ''}",
            first_seen=rec_time(first.rec), next_steps=[cause.fix, f"Confirm: {cause.confirm_with}"],
            measurements={"failed_writes": total, "by_kind": dict(self.counts), "errors": dict(self.errors.most_common(5))},
        )]
