"""Deterministic HTTP workloads that provoke each symptom, plus a tiny Prometheus text parser.

Determinism: fixed prompts from a seeded generator, ``temperature: 0``, ``ignore_eos`` so every request
produces exactly ``max_tokens``. No per-request ``seed``: on vLLM's CPU backend seeded requests crash the
engine under chunked prefill (cpu-repro.md §3), and greedy decoding needs no seed.
Only the standard library is used (urllib + threads), so the client runs in specdiag's own environment.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from specdiag.repro.materialise import SERVED_MODEL_NAME
from specdiag.repro.plan import WorkloadSpec

_CONS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def syllable_words(seed: int, n: int) -> list[str]:
    """``n`` pseudo-words from a fixed seed. The CPU tiny tokenizer is trained on the same generator,
    so prompts tokenise to roughly one to two tokens per word."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        out.append("".join(rnd.choice(_CONS) + rnd.choice(_VOWELS) for _ in range(rnd.randint(1, 3))))
    return out


def text(seed: int, words: int) -> str:
    ws = syllable_words(seed, words)
    # a line break every 12 words keeps the text looking like the tokenizer's training lines
    return "\n".join(" ".join(ws[i:i + 12]) for i in range(0, len(ws), 12))


# ------------------------------------------------------------------------------------------- metrics
def parse_prometheus(body: str) -> dict[str, float]:
    """``name{labels}`` → value for every sample line (comments skipped). Enough for counters/gauges."""
    out: dict[str, float] = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, rest = line.rpartition(" ")
        if not key:
            continue
        # a trailing timestamp is allowed by the format: "name{..} value ts"
        if " " in key and not key.endswith("}"):
            key, _, rest = key.rpartition(" ")
        try:
            out[key.strip()] = float(rest)
        except ValueError:
            continue
    return out


def metric_sum(samples: dict[str, float], name: str) -> float:
    """Sum of every sample of ``name`` across labels (``name`` or ``name{...}``)."""
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


# ------------------------------------------------------------------------------------------- client
@dataclass
class RequestRecord:
    tag: str
    phase: int
    status: int
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    output: str = ""
    token_ids: list[int] = field(default_factory=list)
    #: monotonic send time (the in-flight check of batch phases compares these windows)
    started: float | None = None


@dataclass
class WorkloadResult:
    kind: str
    requests: list[RequestRecord] = field(default_factory=list)
    #: for phased workloads: /metrics samples (spec-decode counters only) before phase 0 and after each phase
    phase_metrics: list[dict[str, float]] = field(default_factory=list)
    phase_batch: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.requests if r.status == 200]
        lat = sorted(r.latency_s for r in ok)
        return {
            "requests": len(self.requests),
            "ok": len(ok),
            "failed": len(self.requests) - len(ok),
            "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
            "latency_p95_s": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3) if lat else None,
            "latency_max_s": round(lat[-1], 3) if lat else None,
            "prompt_tokens": sum(r.prompt_tokens for r in ok),
            "completion_tokens": sum(r.completion_tokens for r in ok),
            "elapsed_s": round(self.elapsed_s, 1),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary(),
            "phase_batch": self.phase_batch,
            "phase_metrics": self.phase_metrics,
            "requests": [asdict(r) | {"output": r.output[:200], "token_ids": len(r.token_ids)}
                         for r in self.requests],
        }


class Client:
    """Minimal OpenAI-completions client bound to one loopback server."""

    def __init__(self, base_url: str, timeout_s: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def complete(self, prompt: str | list[int], max_tokens: int, tag: str, phase: int = 0,
                 extra: dict[str, Any] | None = None) -> RequestRecord:
        payload: dict[str, Any] = {
            "model": SERVED_MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True,
        }
        payload.update(extra or {})
        body = json.dumps(payload).encode()
        req = urllib.request.Request(self.base_url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:  # noqa: S310 - loopback
                data = json.loads(r.read())
                usage = data.get("usage") or {}
                choice = data["choices"][0]
                return RequestRecord(tag, phase, r.status, time.monotonic() - t0,
                                     int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)),
                                     output=choice.get("text", ""), token_ids=list(choice.get("token_ids") or []),
                                     started=t0)
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode("utf-8", "replace")
            return RequestRecord(tag, phase, e.code, time.monotonic() - t0, error=detail, started=t0)
        except (urllib.error.URLError, OSError, ValueError) as e:
            return RequestRecord(tag, phase, 0, time.monotonic() - t0, error=repr(e)[:300], started=t0)

    def tokenize(self, prompt: str, add_special_tokens: bool) -> list[int]:
        """Token ids from the server's own tokenizer (POST /tokenize)."""
        body = json.dumps({"model": SERVED_MODEL_NAME, "prompt": prompt,
                           "add_special_tokens": add_special_tokens}).encode()
        req = urllib.request.Request(self.base_url + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 - loopback
            return [int(t) for t in json.loads(r.read())["tokens"]]

    def metrics(self) -> dict[str, float]:
        try:
            with urllib.request.urlopen(self.base_url + "/metrics", timeout=30) as r:  # noqa: S310
                return parse_prometheus(r.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError):
            return {}

    def metrics_text(self) -> str:
        try:
            with urllib.request.urlopen(self.base_url + "/metrics", timeout=30) as r:  # noqa: S310
                return r.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError):
            return ""


SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


def _spec_snapshot(client: Client) -> dict[str, float]:
    m = client.metrics()
    snap = {name: metric_sum(m, name) for name in SPEC_COUNTERS}
    for k, v in m.items():
        if k.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total{"):
            snap[k] = v
    return snap


# ------------------------------------------------------------------------------------------- workloads
def pool_run(fn: Callable[..., Any], items: list[Any], workers: int, stop: threading.Event) -> list[Any]:
    """``[fn(x) for x in items]`` on ``workers`` threads, but interruptible.

    ``with ThreadPoolExecutor()`` would, on Ctrl-C, wait for every queued request before the server can be
    stopped; here an interrupt sets ``stop`` (the workloads check it between requests), cancels what has not
    started and returns control at once; requests in flight end when the server is killed.
    """
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    futs: list[Future[Any]] = [pool.submit(fn, x) for x in items]
    try:
        pending = set(futs)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            for f in done:
                if f.exception() is not None:
                    raise f.exception()  # type: ignore[misc]
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [f.result() for f in futs]


def run_multi_turn(client: Client, p: dict[str, Any], res: WorkloadResult, stop: threading.Event) -> None:
    """Conversations whose next prompt = previous prompt + previous output + new text (decode chunks reused).

    ``token_exact`` (default): prompts are sent as token ids and the previous output is appended as the exact
    token ids the server generated (``return_token_ids``). Re-sending the output as *text* would re-tokenise
    it differently (a random model emits non-canonical BPE sequences), so decode-phase chunks could never be
    hit and save_decode_cache could not matter — measured: identical hit rates with text prompts.
    """
    shared = text(1, int(p.get("prefix_words", 300)))
    exact = bool(p.get("token_exact", True))
    turn_words = int(p.get("turn_words", 40))

    def conversation(c: int) -> None:
        first = shared + "\n" + text(100 + c, turn_words)
        prompt: str | list[int] = client.tokenize(first, True) if exact else first
        for t in range(int(p.get("turns", 5))):
            if stop.is_set():
                return
            rec = client.complete(prompt, int(p.get("max_tokens", 96)), f"conv{c}-turn{t}", phase=t,
                                  extra={"return_token_ids": True} if exact else None)
            with client._lock:
                res.requests.append(rec)
            if rec.status != 200:
                return
            new = "\n" + text(1000 + 10 * c + t, turn_words)
            if exact:
                assert isinstance(prompt, list)
                prompt = prompt + rec.token_ids + client.tokenize(new, False)
            else:
                assert isinstance(prompt, str)
                prompt = prompt + rec.output + new

    pool_run(conversation, list(range(int(p.get("conversations", 6)))), int(p.get("concurrency", 3)), stop)


def run_alternating_batch(client: Client, p: dict[str, Any], res: WorkloadResult,
                          stop: threading.Event) -> None:
    """Phases of 1 or 2 simultaneous requests; spec-decode counters are read around every phase so the
    acceptance of a batch-1 phase that follows a batch-2 (K=0) phase can be compared with the first one."""
    phases = [int(b) for b in p.get("phases", [1, 2, 1, 2, 1])]
    res.phase_batch = phases
    res.phase_metrics.append(_spec_snapshot(client))
    for i, batch in enumerate(phases):
        if stop.is_set():
            return
        prompts = [text(500 + 10 * i + j, int(p.get("prompt_words", 250))) for j in range(batch)]
        recs = pool_run(lambda jp, i=i: client.complete(jp[1], int(p.get("max_tokens", 64)),
                                                        f"phase{i}-req{jp[0]}", i),
                        list(enumerate(prompts)), batch, stop)
        res.requests.extend(recs)
        res.phase_metrics.append(_spec_snapshot(client))


def run_distinct_prefixes(client: Client, p: dict[str, Any], res: WorkloadResult,
                          stop: threading.Event) -> None:
    """More distinct long prefixes than the cache holds; each sent again right after it was stored."""
    n = int(p.get("prompts", 16))
    prefixes = [text(2000 + i, int(p.get("prompt_words", 700))) for i in range(n)]

    def one(args: tuple[int, int]) -> None:
        rnd, i = args
        for k in range(int(p.get("repeats_back_to_back", 2))):
            if stop.is_set():
                return
            suffix = "\n" + text(9000 + 100 * rnd + 10 * k + i, 6)
            rec = client.complete(prefixes[i] + suffix, int(p.get("max_tokens", 8)), f"r{rnd}-p{i}-k{k}", rnd)
            with client._lock:
                res.requests.append(rec)

    for rnd in range(int(p.get("rounds", 2))):
        pool_run(one, [(rnd, i) for i in range(n)], int(p.get("concurrency", 4)), stop)


def run_pin_window(client: Client, p: dict[str, Any], res: WorkloadResult, stop: threading.Event) -> None:
    """Hold a looked-up request between lookup and retrieve (cpu-repro.md §7.2).

    Per iteration: P (about 4 chunks) is stored; then A (long prompt, long output, not saved) takes most KV
    blocks while B (short prompt, long output) decodes — and, with save_decode_cache, keeps storing chunks;
    0.2 s later P is sent again: its lookup hits and pins its chunks, but it has to wait for KV blocks. If
    the wait outlasts pin_timeout_sec the pins are forced off and B's stores can evict P's chunks before
    P's retrieve: the shortfall. Tag ``iter<k>-P2`` is the request to watch.
    """
    skip_save = {"kv_transfer_params": {"lmcache.skip_save": True}}
    for it in range(int(p.get("iterations", 4))):
        if stop.is_set():
            return
        prompt_p = text(7000 + it, int(p.get("p_words", 560)))
        res.requests.append(client.complete(prompt_p, int(p.get("p_max_tokens", 8)), f"iter{it}-P1", it))
        jobs: list[tuple[float, str | list[int], int, str, dict[str, Any] | None]] = [
            (0.0, text(7100 + it, int(p.get("a_words", 1750))), int(p.get("a_max_tokens", 500)), "A", skip_save),
            (0.0, text(7200 + it, int(p.get("b_words", 50))), int(p.get("b_max_tokens", 500)), "B", None),
            (float(p.get("delay_s", 0.2)), prompt_p, int(p.get("p_max_tokens", 8)), "P2", None),
        ]

        def send(job: tuple[float, str | list[int], int, str, dict[str, Any] | None], it: int = it) -> RequestRecord:
            delay, prompt, max_tokens, name, extra = job
            time.sleep(delay)  # P2 goes 0.2 s after A and B: its lookup happens while they hold the blocks
            return client.complete(prompt, max_tokens, f"iter{it}-{name}", it, extra)

        res.requests.extend(pool_run(send, jobs, 3, stop))


WORKLOADS: dict[str, Callable[[Client, dict[str, Any], WorkloadResult, threading.Event], None]] = {
    "multi_turn": run_multi_turn,
    "alternating_batch": run_alternating_batch,
    "distinct_prefixes": run_distinct_prefixes,
    "pin_window": run_pin_window,
}


def run_workload(spec: WorkloadSpec, base_url: str, stop: threading.Event | None = None) -> WorkloadResult:
    res = WorkloadResult(kind=spec.kind)
    t0 = time.monotonic()
    WORKLOADS[spec.kind](Client(base_url), spec.params, res, stop or threading.Event())
    res.elapsed_s = time.monotonic() - t0
    return res
