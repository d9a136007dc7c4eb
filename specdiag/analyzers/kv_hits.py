"""KV002 — LMCache never hits although the same prompts are stored again and again; KV014 — the shared cache
whose chunk hash is salted per process, from LMCache's own warning."""

from __future__ import annotations

import operator
from collections import Counter
from itertools import compress, repeat

from specdiag.analyzers.base import Rule, register
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.analyzers.kv_coverage import input_kind
from specdiag.analyzers.signals import PRESSURE_IDS
from specdiag.context import Context
from specdiag.events import Event
from specdiag.events.rows import NA, LookupRows, lookup_event
from specdiag.findings import Cause, CauseBoard, Evidence, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.timeutil import rec_time

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

    Pasted fragment (at most 50 lines, no startup): a handful of ``Reqid:`` lines cannot show that the cache
    *never* hits, but a prompt length that misses again after it was looked up (and, on the first try,
    counted for saving) is already the signature when the excerpt also holds the worker's ``Stored …`` lines
    or a startup hash warning (``Using builtin hash without PYTHONHASHSEED set``, ``Could not load … Using
    builtin hash``). The finding then says what the excerpt proves, caps its confidence and names the lines
    that decide (the same prompt's later lookups, the workers' stores, the startup hash lines).

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
    defaults = {"min_lookups": 10, "max_hit_ratio": 0.02, "min_repeats": 3, "fragment_min_lookups": 2,
                "fragment_min_repeats": 1}
    events = frozenset({"C21b", "C22", "C23", "C24", "C20", "C21", "Z1", "L7", "X8"}) | PRESSURE_IDS
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
        self.remote_evicted = 0
        self.remote_ev: Event | None = None
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
                    self.repeat_example = lookup_event(rows, i)
            if self.first_zero is None:
                self.first_zero = lookup_event(rows, i)
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
        elif tid == "X8":
            self.remote_evicted += 1
            self.remote_ev = self.remote_ev or ev
        elif tid in PRESSURE_IDS:
            self.pressure += 1

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        """A finding only when enough lookups were answered, workers stored, almost none hit, and the same
        prompt lengths missed again and again (a cold cache misses once per prompt, not on every repeat).

        A pasted fragment is held to what it can show: two or more answered lookups, none hit, one prompt
        length missing again, and a worker store or a startup hash warning in the same paste."""
        o = self.options
        self.stores = run.count("S1")  # the most frequent line of a busy log: counted, never parsed
        self.first_store = run.first("S1")
        pasted = input_kind(ctx, run.lines_read, 0) == "fragment"
        if pasted and self.lookups < o["min_lookups"]:
            return self._finish_fragment(ctx)
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

    def _finish_fragment(self, ctx: Context) -> list[Finding]:
        """The few-line form of the finding: what the paste proves, a capped confidence, the deciding lines.

        The scheduler's lookup client hashes each chunk and every rank's lookup server answers for the keys it
        holds (LMCache 0.5.6 integration/vllm/vllm_v1_adapter.py ``get_num_new_matched_tokens``; keys from
        v1/token_database.py). A prompt that misses again after its first pass was stored has keys that do not
        match what the workers wrote — unless the chunks were evicted in between, which the paste cannot rule out.
        """
        o = self.options
        if self.lookups < o["fragment_min_lookups"] or self.hits or not (self.stores or self.hash_warnings):
            return []
        repeated = {t: n for t, n in self.zero_totals.items() if n >= 2}
        repeats = sum(n - 1 for n in repeated.values())
        if repeats < o["fragment_min_repeats"]:
            return []
        board = self._rank_causes(ctx, repeated, pasted=True)
        top_totals = sorted(repeated.items(), key=lambda kv: -kv[1])[:5]
        seen = (f"the workers' 'Stored …' line(s) ({self.stores})" if self.stores else "no worker 'Stored …' line")
        warned = ("a startup hash warning" if self.hash_warnings else "no startup hash line")
        summary = (f"In this pasted fragment {self.lookups} lookup(s) answered 0 hit tokens, and prompts of the same "
                   f"length missed again ({', '.join(f'{t} tokens ×{n}' for t, n in top_totals[:3])}); the paste holds "
                   f"{seen} and {warned}. A fragment shows these misses, not that LMCache never hits: whether later "
                   "lookups of the same prompt ever hit, and whether the chunks were evicted in between, needs the "
                   "lines listed below; confidence is capped.")
        steps = ["Collect later 'Reqid: …, LMCache hit tokens: …' lines of the same prompt (same 'Total tokens'): "
                 "one hit > 0 ends the hash question.",
                 "Collect the workers' 'Stored N out of total M tokens' lines for those requests (were the chunks written?) "
                 "and memory-pressure warnings ('No eviction candidates found …', 'Local cpu memory under pressure …') "
                 "in between (were they evicted?).",
                 "Collect the startup lines of every process: 'Using hash algorithm', 'Initialized NONE_HASH=… / Using "
                 "default NONE_HASH', 'Using builtin hash without PYTHONHASHSEED set' — differing values between processes "
                 "decide it.",
                 "Check that every vLLM process (API server, engine core, each worker) sees the same PYTHONHASHSEED."]
        meas = {"lookups": self.lookups, "lookups_with_hits": 0, "hit_ratio": 0.0, "stores": self.stores,
                "repeated_prompt_lengths": [t for t, _ in top_totals], "repeat_lookups_with_zero_hits": repeats,
                "input_coverage": "fragment"}
        return [Finding(
            rule=self.code, severity="warning", title=self.title, summary=summary, count=repeats,
            evidence=self._evidence(), measurements=meas, causes=board.ranked(ceiling=0.6),
            identity=f"{sorted(repeated)[:5]}", next_steps=steps, first_seen=None,
        )]

    def _rank_causes(self, ctx: Context, repeated: dict[int, int], pasted: bool = False) -> CauseBoard:
        """Weigh the causes of misses on repeated prompts; hash inconsistency leads unless a line says otherwise.

        In a pasted fragment the absence of a timeout or pressure line is not counted: the paste cannot show it."""
        b = CauseBoard()
        for cid, prior in self.PRIORS.items():
            b.add(cid, prior, **fix_and_confirm(cid))
        self._weigh_hashing(b, ctx)
        if self.timeouts:
            b.support("lookup-timeout", 4 if self.timeouts >= self.lookups / 2 else 1.5,
                      f"{self.timeouts} lookup timeout(s) (line {self.timeout_ev.rec.line})")
        elif not pasted:
            b.oppose("lookup-timeout", 5, "no lookup timeout in the log")
        self._weigh_eviction(b, pasted)
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

    def _weigh_eviction(self, b: CauseBoard, pasted: bool) -> None:
        """Eviction against hashing. A lookup that hit anywhere in the input shows the lookup client and the
        workers hash alike (a hash mismatch misses every time, it cannot hit once), so the misses of stored
        prompts are chunks that left the cache; a remote store that says it evicted a key it listed is the
        same story told by the store itself."""
        if self.pressure:
            b.support("capacity-eviction", 3, f"{self.pressure} memory-pressure line(s)")
        if self.remote_evicted:
            line = self.remote_ev.rec.line if self.remote_ev else "?"
            b.support("capacity-eviction", 8, f"the remote store evicted {self.remote_evicted} key(s) it had listed "
                      f"('Key exists but KV cache does not exist', line {line})")
            b.oppose("hash-inconsistency", 8, "the remote store reports evictions: chunks were found, then gone")
        if self.hits:
            b.support("capacity-eviction", 4, f"{self.hits} lookup(s) in the same input hit: stored chunks can be "
                      "found, so the misses are chunks no longer there")
            b.oppose("hash-inconsistency", 12, f"{self.hits} lookup(s) hit with the same hashing: lookup and store "
                     "keys agree")
        if not (self.pressure or self.remote_evicted or self.hits or pasted):
            b.oppose("capacity-eviction", 4, "no memory-pressure line: stored chunks had room to stay")

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
        if self.stores:
            b.support("hash-inconsistency", 2, f"workers stored {self.stores} times, yet prompts of the same length "
                      "missed on every later lookup: stored chunks are never found")

    def _evidence(self) -> list[Evidence]:
        """The first miss, the first repeated miss, the first store and up to two hash warnings, each line once."""
        evidence: list[Evidence] = []
        for e in (self.first_zero, self.repeat_example, self.first_store, *self.hash_warnings[:2]):
            if e is not None and all(x.line != e.rec.line or x.path != e.rec.path for x in evidence):
                evidence.append(evidence_of(e, None))
        return evidence


@register
class SharedCacheWithoutHashSeed(Rule):
    """LMCache shares KV across processes but its chunk hash differs between them.

    Detects: LMCache's own startup warnings ``Centralized cache sharing detected but PYTHONHASHSEED not
    set`` and ``P/D Disaggregation detected but PYTHONHASHSEED not set`` (``v1/token_database.py``): it found
    a remote or shared backend (or a P/D role) while the chunk hash is Python's builtin ``hash()``, which
    CPython salts per process unless ``PYTHONHASHSEED`` is set. Also, from a build that traces each hash
    (``[HASH_GENERATION] prefix_hash=…, tokens_len=…, tokens_preview=…, extra_keys=…, PYTHONHASHSEED=…,
    result_hash=…``, DEBUG), two processes that hashed the same inputs to different results: the proof itself.
    With the same seed on both the difference is in what is hashed: on Python 3.11 and older ``hash(None)`` is
    the object's address, which differs per process, so ``extra_keys=None`` changes every key.

    Why it matters: each process names the same chunk differently, so what one instance stores another
    never finds: a prefiller's KV is invisible to its decoder, a shared store only serves the process that
    wrote it. LMCache logs the warning and goes on; nothing fails, the hits just never come.

    Causes weighed: ``hash-inconsistency``. KV002 reports the symptom (zero hits on repeats) when the log
    holds the lookups; this finding is the configuration that causes it, from the warning alone.

    Fix: export the same ``PYTHONHASHSEED`` (e.g. 0) to every vLLM process that shares the cache, or use a
    sha256-based ``pre_caching_hash_algorithm``; restart and compare hits for repeated prompts.

    References: LMCache ``v1/token_database.py`` (0.3.3+ :313/:320 in 0.3.x); issues #1095, #1139, #1739.
    """

    code = "KV014"
    name = "lmcache-shared-cache-without-hash-seed"
    title = "LMCache shares KV across processes but its chunk hash differs between them"
    severity = "warning"
    family = "KV"
    cause_ids = ("hash-inconsistency",)
    events = frozenset({"C22", "C23", "C24", "L_HASH_GEN"})
    MAX_HASHES = 10_000

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.first: dict[str, Event] = {}
        self.count = 0
        self.hashes: dict[tuple, tuple[str, str, Event]] = {}  # a chunk's hash inputs -> (result, process, line)
        self.conflict: tuple[Event, Event] | None = None

    def observe(self, ev: Event) -> None:
        if ev.id == "L_HASH_GEN":
            self._hash_line(ev)
            return
        self.count += ev.id != "C22"  # the builtin-hash warning alone is no sharing: evidence, not a detection
        self.first.setdefault(ev.id, ev)

    def _hash_line(self, ev: Event) -> None:
        """Keep each chunk's hash inputs (bounded); two processes with the same inputs and another result are
        the conflict."""
        if self.conflict is not None:
            return  # one conflict proves it: a DEBUG log traces every chunk, the rest need not be kept
        f = ev.f
        key = (f["prefix"], f["n"], f["preview"], f["extra"])
        got = self.hashes.get(key)
        if got is None:
            if len(self.hashes) < self.MAX_HASHES:
                self.hashes[key] = (f["result"], ev.rec.origin.key, ev)
        elif self.conflict is None and got[0] != f["result"] and got[1] != ev.rec.origin.key:
            self.conflict = (got[2], ev)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.conflict is not None:
            return [self._conflict_finding()]
        if not self.count:
            return []
        evs = sorted(self.first.values(), key=lambda e: (e.rec.path, e.rec.line))
        what = " and ".join(w for tid, w in (("C23", "centralized cache sharing"), ("C24", "P/D disaggregation"))
                            if tid in self.first)
        b = CauseBoard()
        b.add("hash-inconsistency", 0.5, **fix_and_confirm("hash-inconsistency"))
        b.support("hash-inconsistency", 20, f"LMCache detected {what} with PYTHONHASHSEED unset "
                                            f"({evs[0].rec.path}:{evs[0].rec.line}): builtin hash() is salted per process")
        b.oppose("hash-inconsistency", 1, "the warning is read from each process's environment: a process that did get "
                                          "PYTHONHASHSEED prints none, so the processes that printed it are the ones to fix")
        causes = b.ranked(ceiling=0.85)
        ranks = sorted({e.rec.origin.rank_label or "unknown" for e in evs})
        return [Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"LMCache warned {self.count} time(s) that it found {what} while PYTHONHASHSEED is not set "
                     f"(ranks: {', '.join(ranks)}): its builtin chunk hash differs per process, so KV stored by one "
                     "process is never found by another. Nothing fails; the hits across processes just never come."),
            count=self.count, evidence=[evidence_of(e, 400) for e in evs],
            causes=causes, measurements={"warnings": self.count, "detected": what, "ranks": ranks},
            identity=f"{self.code}|{what}", first_seen=rec_time(evs[0].rec), next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _conflict_finding(self) -> Finding:
        """Two processes hashed the same chunk inputs to different keys: the keys never meet."""
        a, b = self.conflict
        fa, fb = a.f, b.f
        same_seed = fa["seed"] == fb["seed"] and fa["seed"] not in ("None", "unset", "")
        why = (f"Both processes ran with PYTHONHASHSEED={fa['seed']}, so the seed is not the difference: what is "
               f"hashed differs, and extra_keys={fa['extra']} is the part that can (on Python 3.11 and older hash(None) "
               "is the object's address, which differs per process)." if same_seed and fa["extra"] == "None" else
               f"PYTHONHASHSEED {fa['seed']} / {fb['seed']}: builtin hash() is salted per process unless both set it "
               "to the same value." if not same_seed else "Both ran with the same PYTHONHASHSEED: what is hashed differs.")
        cause = Cause("hash-inconsistency", 0.9, for_=[f"same prefix hash, {fa['n']} tokens and extra_keys, results "
                                                       f"{fa['result']} ({a.rec.path}:{a.rec.line}) and {fb['result']} "
                                                       f"({b.rec.path}:{b.rec.line})"], **fix_and_confirm("hash-inconsistency"))
        return Finding(
            rule=self.code, severity="warning", title=self.title,
            summary=(f"Two processes hashed the same chunk (prefix_hash {fa['prefix']}, {fa['n']} tokens from "
                     f"{fa['preview'][:40]}…, extra_keys {fa['extra']}) to different keys ({fa['result']} and "
                     f"{fb['result']}): what one stores the other never finds. {why}"),
            count=1, evidence=[evidence_of(e, 400) for e in (a, b)],
            causes=[cause], identity=f"{self.code}|conflict", first_seen=rec_time(a.rec),
            measurements={"prefix_hash": fa["prefix"], "tokens": fa["n"], "extra_keys": fa["extra"],
                          "results": [fa["result"], fb["result"]], "seeds": [fa["seed"], fb["seed"]]},
            next_steps=([f"The seed is already the same ({fa['seed']}): a sha256 pre_caching_hash_algorithm, or Python "
                         "3.12+ (where hash(None) is a constant), removes what still differs."] if same_seed else [])
                       + [cause.fix, f"Confirm: {cause.confirm_with}"],
        )
