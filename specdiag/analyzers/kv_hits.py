"""KV002 — LMCache never hits although the same prompts are stored again and again."""

from __future__ import annotations

import operator
from collections import Counter
from itertools import compress, repeat

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.findings import CauseBoard, Evidence, Finding
from specdiag.ingest.hot import NA, LookupRows
from specdiag.observe import RunState

MAX_KEYS = 100_000


@register
class ZeroHitsOnRepeats(Rule):
    """LMCache reports 0 hit tokens for prompts it has already stored.

    Detects: every (or almost every) scheduler lookup (``Reqid: …, LMCache hit tokens: 0``) misses while
    workers keep storing (``Stored N out of total N tokens``) and the same prompt lengths recur — the
    cache is written but never read.

    Why it matters: the KV cache offload costs store bandwidth and memory and saves nothing; prefill is
    recomputed for every repeat.

    Causes weighed: ``hash-inconsistency`` (chunk hashes differ between the scheduler's lookup client
    and the workers, or across restarts: builtin ``hash()`` without ``PYTHONHASHSEED``, differing
    ``NONE_HASH``), ``lookup-timeout`` (the lookup RPC times out and reports 0), ``capacity-eviction``
    (chunks evicted before reuse), ``prompt-shorter-than-chunk`` (no full chunk to store or find),
    ``prefix-served-by-vllm`` (vLLM's own prefix cache serves the repeat, so LMCache's hit is not needed).

    Fix: set ``PYTHONHASHSEED`` to the same value for every vLLM process (or use a sha256-based
    ``pre_caching_hash_algorithm``), then verify hits appear for repeated prompts.

    References: LMCache ``v1/token_database.py`` (hash warnings), issues #1739, #2136, #2979, PR #1897;
    vLLM issue #42625.
    """

    code = "KV002"
    name = "lmcache-zero-hits-on-repeats"
    title = "LMCache never hits although the same prompts are stored repeatedly"
    severity = "warning"
    family = "KV"
    cause_ids = ("hash-inconsistency", "lookup-timeout", "capacity-eviction", "prompt-shorter-than-chunk",
                 "prefix-served-by-vllm")
    defaults = {"min_lookups": 10, "max_hit_ratio": 0.02, "min_repeats": 3}
    events = frozenset({"C21b", "C22", "C23", "C24", "C20", "C21", "Z1", "L7"}) | PRESSURE_IDS
    tables = frozenset({"lookups"})
    #: each cause's weight before any evidence (the board keeps this order)
    PRIORS = {"hash-inconsistency": 1.0, "lookup-timeout": 0.3, "capacity-eviction": 0.3,
              "prompt-shorter-than-chunk": 0.2, "prefix-served-by-vllm": 0.1}

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.lookups = 0
        self.hits = 0
        self.zero_totals: Counter[int] = Counter()
        self.stores = 0
        self.first_zero: Event | None = None
        self.repeat_example: Event | None = None
        self.first_store: Event | None = None
        self.hash_warnings: list[Event] = []
        self.timeouts = 0
        self.timeout_ev: Event | None = None
        self.pressure = 0
        self.computed_full = 0

    def observe_rows(self, rows: LookupRows) -> None:
        """Lookups with a known hit count; for a miss, the prompt length (repeats) and vLLM's own hit.

        Once the first miss and the first repeat are kept, whole batches are counted with C-level
        operations (``array.count``, ``compress``): a busy log has a lookup per request.
        """
        if self.repeat_example is not None and self.first_zero is not None and len(rows) > 16:
            self._count_rows(rows)
            return
        hit, total, computed = rows.hit, rows.total, rows.computed
        for i in range(rows.lo, rows.hi):
            h = hit[i]
            if h == NA:
                continue  # "LMCache hit tokens: None": the lookup did not answer
            self.lookups += 1
            if h:
                self.hits += 1
                continue
            t = total[i]
            if len(self.zero_totals) < MAX_KEYS or t in self.zero_totals:
                self.zero_totals[t] += 1
                if self.zero_totals[t] == 2 and self.repeat_example is None:
                    self.repeat_example = rows.event(i)
            if self.first_zero is None:
                self.first_zero = rows.event(i)
            c = computed[i]
            if c != NA and c >= t - 1 > 0:
                self.computed_full += 1

    def _count_rows(self, rows: LookupRows) -> None:
        lo, hi = rows.lo, rows.hi
        hit = rows.hit[lo:hi]
        answered = len(hit) - hit.count(NA)
        misses = list(compress(range(lo, hi), map(operator.not_, hit)))  # hit == 0 (NA is not 0)
        self.lookups += answered
        self.hits += answered - len(misses)
        if not misses:
            return
        totals = list(map(rows.total.__getitem__, misses))
        if len(self.zero_totals) + len(totals) <= MAX_KEYS:
            self.zero_totals.update(totals)
        else:
            for t in totals:
                if len(self.zero_totals) < MAX_KEYS or t in self.zero_totals:
                    self.zero_totals[t] += 1
        # vLLM had computed the whole prompt: ``computed >= total - 1 > 0`` (NA, far below 0, never is)
        spans = list(map(operator.sub, totals, repeat(1)))
        covered = map(operator.ge, map(rows.computed.__getitem__, misses), spans)
        self.computed_full += sum(compress(covered, map(operator.lt, repeat(0), spans)))

    def observe(self, ev: Event) -> None:
        tid = ev.id
        if tid in ("C21b", "C22", "C23", "C24"):
            if len(self.hash_warnings) < 8:
                self.hash_warnings.append(ev)
        elif tid in ("Z1", "L7"):
            self.timeouts += 1
            self.timeout_ev = self.timeout_ev or ev
        elif tid in PRESSURE_IDS:
            self.pressure += 1

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """A finding only when enough lookups were answered, workers stored, almost none hit, and the same
        prompt lengths missed again and again (a cold cache misses once per prompt, not on every repeat)."""
        o = self.options
        self.stores = run.count("S1")  # the most frequent line of a busy log: counted, never parsed
        self.first_store = run.first("S1")
        if self.lookups < o["min_lookups"] or self.stores == 0:
            return []
        ratio = self.hits / self.lookups
        repeated = {t: n for t, n in self.zero_totals.items() if n >= 2}
        repeats = sum(n - 1 for n in repeated.values())
        if ratio > o["max_hit_ratio"] or repeats < o["min_repeats"]:
            return []
        board = self._rank_causes(ctx, repeated)
        top_totals = sorted(repeated.items(), key=lambda kv: -kv[1])[:5]
        meas = {
            "lookups": self.lookups, "lookups_with_hits": self.hits, "hit_ratio": round(ratio, 4),
            "stores": self.stores, "repeated_prompt_lengths": [t for t, _ in top_totals],
            "repeat_lookups_with_zero_hits": repeats,
        }
        summary = (f"{self.lookups} lookups, {self.hits} with any hit ({ratio:.1%}), while workers stored {self.stores} times; "
                   f"prompts of the same length ({', '.join(f'{t} tokens ×{n}' for t, n in top_totals[:3])}) missed every time.")
        return [Finding(
            rule=self.code, severity="warning", title=self.title, summary=summary, count=repeats,
            evidence=self._evidence(), measurements=meas, causes=board.ranked(ceiling=0.85),
            identity=f"{sorted(repeated)[:5]}",
            next_steps=["Check that every vLLM process (API server, engine core, each worker) sees the same PYTHONHASHSEED.",
                        "Replay one prompt twice and look for 'LMCache hit tokens' > 0 on the second lookup."],
            first_seen=None,
        )]

    def _rank_causes(self, ctx: Context, repeated: dict[int, int]) -> CauseBoard:
        """Weigh the causes of misses on repeated prompts; hash inconsistency leads unless a line says otherwise."""
        b = CauseBoard()
        for cid, prior in self.PRIORS.items():
            b.add(cid, prior, **fix_and_confirm(cid))
        self._weigh_hashing(b, ctx)
        if self.timeouts:
            b.support("lookup-timeout", 4 if self.timeouts >= self.lookups / 2 else 1.5,
                      f"{self.timeouts} lookup timeout(s) (line {self.timeout_ev.rec.line})")
        else:
            b.oppose("lookup-timeout", 5, "no lookup timeout in the log")
        if self.pressure:
            b.support("capacity-eviction", 3, f"{self.pressure} memory-pressure line(s)")
        else:
            b.oppose("capacity-eviction", 4, "no memory-pressure line: stored chunks had room to stay")
        chunk = ctx.chunk_size or 256
        if max(repeated) < chunk:
            b.support("prompt-shorter-than-chunk", 10, f"the repeated prompts are shorter than chunk_size {chunk}")
        else:
            b.rule_out("prompt-shorter-than-chunk", f"repeated prompts of {max(repeated)} tokens span full {chunk}-token chunks")
        if self.computed_full:
            b.support("prefix-served-by-vllm", 3, f"{self.computed_full} lookup(s) where vLLM had already computed the prompt")
        else:
            b.oppose("prefix-served-by-vllm", 3, "vLLM's own prefix cache did not cover these prompts either")
        return b

    def _weigh_hashing(self, b: CauseBoard, ctx: Context) -> None:
        """Chunk hashes that differ between processes: hash warnings at startup, several NONE_HASH values,
        lookups hashed in another process than the stores (TP > 1 or builtin ``hash()``)."""
        if self.hash_warnings:
            w = self.hash_warnings[0]
            b.support("hash-inconsistency", 6, f"startup warning at line {w.rec.line}: {w.rec.msg[:110]}")
        if len(set(ctx.none_hashes)) > 1:
            b.support("hash-inconsistency", 5, f"processes logged {len(set(ctx.none_hashes))} different NONE_HASH values")
        if (ctx.tensor_parallel_size or 1) > 1 or ctx.hash_algorithm == "builtin":
            b.note_for("hash-inconsistency", "the scheduler's lookup client and the workers hash in different processes"
                       + (f" (hash algorithm {ctx.hash_algorithm})" if ctx.hash_algorithm else ""))
        b.support("hash-inconsistency", 2, f"workers stored {self.stores} times, yet prompts of the same length "
                  "missed on every later lookup: stored chunks are never found")

    def _evidence(self) -> list[Evidence]:
        """The first miss, the first repeated miss, the first store and up to two hash warnings, each line once."""
        evidence: list[Evidence] = []
        for e in (self.first_zero, self.repeat_example, self.first_store, *self.hash_warnings[:2]):
            if e is not None and all(x.line != e.rec.line or x.path != e.rec.path for x in evidence):
                evidence.append(Evidence(e.rec.path, e.rec.line, e.rec.display()))
        return evidence
