#!/usr/bin/env python3
"""Logs where one high-volume message is ≈90 % of the lines, and a foreign-noise log around one incident.

    python scripts/gen_template_logs.py --list                        # the high-volume templates and why
    python scripts/gen_template_logs.py OUT --template lmc.8d85da13 --size-mb 50
    python scripts/gen_template_logs.py OUT --noise --size-mb 50      # NCCL, app logger, DEBUG internals …

Why these logs exist: the mixed TP=8 / TP=1 shapes say how fast a *typical* log is read, not whether every
line a busy server can repeat millions of times is read at grep-class speed. A message that only a
slow path recognises hides in a mixed log behind the fast ones; a log made of almost nothing else shows
it. Which messages can be high-volume is decided by a rule over the shipped message catalog
(``high_volume``, documented in docs/benchmark.md), not by a hand list, so a new per-request message of a
new release joins the benchmark by itself.

Every line is rendered from the catalog entry's own format (the values vary per line: request ids are
unique, counts and floats change) in the envelope of its project and era: LMCache's coloured
``[time] LMCache LEVEL: msg (file:line:logger)``, vLLM's ``LEVEL MM-DD hh:mm:ss [file:line] msg``, both
behind a vLLM process prefix, at the line the newest release that prints it prints it from. The other
≈10 % are a TP=1 server's start and its ordinary traffic (access, lookup, stats lines).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the catalog and the templates of this checkout, not of whatever copy the interpreter has installed
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gen_bench_log import _drain, _startup, tp1_server  # noqa: E402
from gen_example_logs import LMC_COLOR, LMC_ITALIC, LMC_RESET  # noqa: E402

#: the literal text of a format that marks a message logged once per request, lookup, store or step:
#: a request / lookup identifier beside a placeholder, or a per-operation measurement (rate, cost, time)
PER_EVENT = re.compile(r"req(?:uest)?[_ ]?id|\breqid\b|\brequest %|lookup[_ ]id|\blookup id %|throughput|tokens/s"
                       r"|GB/s|\bcost %|elapsed|\btakes?:? %", re.I)
#: a per-request message that a healthy server does not print (failures, rejections, shutdown): its volume
#: is an incident's, and the incident's rules are measured by the shapes that have one
FAILURE = re.compile(r"fail|reject|abort|shut", re.I)
#: modules outside the hand-written templates' files whose INFO/DEBUG lines are per request or per step by
#: design (vLLM's request logger; the shared-memory broadcast queue between the engine and its workers), and
#: the messages of each that are (the others there print once, at start-up)
EXTRA_MODULES: dict[str, re.Pattern] = {
    "entrypoints/logger.py": re.compile(r"^(Received request|Request %s details|Generated response)"),
    "entrypoints/serve/utils/request_logger.py": re.compile(r"^(Received request|Request %s|Generated response)"),
    "distributed/device_communicators/shm_broadcast.py": re.compile(r"^(Poller|No available shared memory)"),
}
_PH = re.compile(r"%([-+ #0]*)(\d*)(?:\.(\d*))?([diouxXeEfFgGcrsa%])")
_ID_BEFORE = re.compile(r"(req(?:uest)?[_ ]?id[=:]? ?|reqid: |request |lookup[_ ]id[=:]? ?|lookup id |\[req_id=)$", re.I)
_ZERO_BEFORE = ("computed tokens: ", "skip_leading_tokens=")
#: vLLM modules whose lines the API server process prints (the rest: the engine core)
_API_SIDE = ("entrypoints/", "v1/engine/async_llm.py", "v1/metrics/", "v1/spec_decode/metrics.py", "engine/metrics.py")


@dataclass(frozen=True)
class Spec:
    """One high-volume message: what to render, where it is printed from, and what should recognise it."""

    name: str          # the hand-written template id that reads it, else the catalog entry id
    project: str       # "lmcache" | "vllm" | "uvicorn"
    level: str
    fmt: str           # printf format (the catalog's, or a hand-written template's sample for the others)
    module: str
    line: int
    release: str
    why: str           # which part of the rule selected it
    entry_id: str | None = None


def hand_files() -> set[str]:
    """The upstream files the hand-written vLLM/LMCache templates locate: the request path specdiag reads."""
    from specdiag.events import default_matcher

    files: set[str] = set()
    for t in default_matcher().templates:
        if t.source in ("lmcache", "vllm"):
            files.update(m.group(1) for m in re.finditer(r"([\w/]+\.py)", t.location))
    return files


def _selected(e, files: set[str]) -> str | None:
    """Why catalog entry ``e`` can be high-volume, or None (see the module docstring and docs/benchmark.md)."""
    if e.level not in ("INFO", "DEBUG") or not e.fmt or "\n" in e.fmt.strip() or FAILURE.search(e.fmt):
        return None
    for mod, pat in EXTRA_MODULES.items():
        if e.module.endswith(mod) and pat.search(e.fmt):
            return f"per-request/per-step module {mod}"
    if "%" in e.fmt and any(e.module.endswith(f) for f in files) and PER_EVENT.search(e.fmt):
        return "request-path module, per-event format"
    return None


def high_volume(cat=None) -> list[Spec]:
    """Every message that can be high-volume: the catalog rule, one spec per distinct format (its newest
    release's location), plus the scanner's hot lines that no catalogued format prints (uvicorn's access
    line; vLLM's stats line, built at run time from parts since 0.11.1)."""
    from specdiag.catalog import catalog

    cat = cat or catalog()
    files = hand_files()
    by_fmt: dict[tuple[str, str, str], tuple] = {}
    for e in cat.entries:
        why = _selected(e, files)
        if why is not None:
            key = (e.project, e.level, e.fmt.strip())
            if key not in by_fmt or e.newest() > by_fmt[key][0].newest():
                by_fmt[key] = (e, why)
    specs = [Spec(_hand_name(e, cat), e.project, e.level, e.fmt.strip(), e.module, e.runs[-1], e.names[e.newest()],
                  why, e.id) for e, why in by_fmt.values()]
    specs += _hand_only()
    return sorted(specs, key=lambda s: (s.project, s.module, s.fmt))


def _hand_name(e, cat) -> str:
    """The hand-written template that reads this entry's message, else the entry's id."""
    from specdiag.events import default_matcher

    sample = cat.sample(e)
    for t in default_matcher().templates:
        if t.source == e.project and t.needle in sample and t.match(sample) is not None:
            return f"{t.id}:{e.id}"
    return e.id


def _hand_only() -> list[Spec]:
    """The scanner's hot templates (``scan.TEMPLATES``) whose line no catalogued format prints."""
    from specdiag.events import template

    stats = template("V_STATS")
    return [
        Spec("UACCESS", "uvicorn", "INFO", '%s:%d - "POST /v1/chat/completions HTTP/1.1" 200 OK', "uvicorn", 0, "-",
             "scanner hot template (uvicorn access line)"),
        Spec("V_STATS", "vllm", "INFO", stats.sample.replace("%", "%%"), "v1/metrics/loggers.py", 335, "0.32.0",
             "scanner hot template (stats line built at run time)"),
    ]


# ------------------------------------------------------------------------------------------------ render


def _convs(fmt: str) -> list[tuple[str, str]]:
    """(conversion, the literal text before it) of each placeholder of ``fmt``."""
    return [(m.group(4), fmt[max(0, m.start() - 40):m.start()]) for m in _PH.finditer(fmt) if m.group(4) != "%"]


def value_maker(spec: Spec) -> Callable[[int, random.Random], tuple]:
    """A function of (line number, rng) giving the placeholder values of one line.

    Ids are unique per line (a request id never repeats, as on a real server); every count of a line is
    the same number (a store stores all it was asked to, a retrieve gets what it required: no line reads
    as a shortfall), except the computed / skipped counts, which are 0; floats and other texts vary."""
    if spec.project == "uvicorn":
        return lambda i, rng: (_ips(i), 32768 + i % 28000)
    convs = _convs(spec.fmt)
    kinds = []
    for conv, before in convs:
        if conv in "diuxXo":
            kinds.append("z" if before.endswith(_ZERO_BEFORE) else "n")
        elif conv in "eEfFgG":
            kinds.append("f")
        elif conv == "c":
            kinds.append("c")
        elif before.endswith("acceptance rate: "):
            kinds.append("rates")  # SpecDecoding's per-position rates, a list the format prints as one %s
        elif not before and spec.fmt.startswith("%"):
            kinds.append("head")   # vLLM's log prefix ("Engine 000: ") glued before the message
        else:
            kinds.append("id" if _ID_BEFORE.search(before) else "s")

    def make(i: int, rng: random.Random) -> tuple:
        n = 256 * rng.randint(1, 400)
        vals: list[object] = []
        for k in kinds:
            if k == "n":
                vals.append(n)
            elif k == "z":
                vals.append(0)
            elif k == "f":
                vals.append(rng.random() * 100)
            elif k == "c":
                vals.append("c")
            elif k == "rates":
                vals.append(", ".join(f"{rng.random():.3f}" for _ in range(3)))
            elif k == "head":
                vals.append("Engine 000: ")
            elif k == "id":
                vals.append(f"chatcmpl-{i:016x}-{rng.getrandbits(32):08x}")
            else:
                vals.append(f"v{i % 997}")
        return tuple(vals)

    return make


def _logger(module: str) -> str:
    return "lmcache." + module[:-3].replace("/", ".")


class Envelope:
    """The line around a message: process prefix, header of the project's era, LMCache's suffix."""

    def __init__(self, fmt_obj, server) -> None:
        self.api = fmt_obj.prefix("APIServer", server.api_pid)
        self.core = fmt_obj.prefix("EngineCore", server.core_pid)
        self.worker = fmt_obj.prefix("Worker", server.worker_pids[0])

    def wrap(self, spec: Spec, msg: str, lts: str, vts: str) -> str:
        """``msg`` as ``spec``'s project prints it at ``lts`` (LMCache's time) / ``vts`` (vLLM's)."""
        if spec.project == "lmcache":
            proc = self.core if msg.startswith("Reqid:") or "lookup_client" in spec.module else self.worker
            base = spec.module.rsplit("/", 1)[-1]
            return (f"{proc}{LMC_COLOR[spec.level]}[{lts}] LMCache {spec.level}:{LMC_RESET} {msg} "
                    f"{LMC_ITALIC}({base}:{spec.line}:{_logger(spec.module)}){LMC_RESET}\n")
        if spec.project == "uvicorn":
            return f"{self.api}INFO:     {msg}\n"
        proc = self.api if spec.module.startswith(_API_SIDE) else self.core
        return f"{proc}{spec.level} {vts} [{spec.module.rsplit('/', 1)[-1]}:{spec.line}] {msg}\n"


class Clock:
    """Simulated time: LMCache's and vLLM's stamps, formatted once per second (strftime is slow)."""

    def __init__(self, t0: dt.datetime) -> None:
        self.t = t0.replace(tzinfo=dt.timezone.utc).timestamp()
        self._sec = -1
        self._l = self._v = ""

    def tick(self, rng: random.Random, rate: float) -> tuple[str, str]:
        self.t += rng.expovariate(rate)
        sec = int(self.t)
        if sec != self._sec:
            d = dt.datetime.fromtimestamp(sec, dt.timezone.utc)
            self._sec, self._l, self._v = sec, d.strftime("%Y-%m-%d %H:%M:%S"), d.strftime("%m-%d %H:%M:%S")
        return f"{self._l},{int((self.t - sec) * 1000):03d}", self._v


def _other_lines(env: Envelope, k: int, rng: random.Random, lts: str, vts: str) -> str:
    """The ordinary traffic between the dominant lines: an access line, a lookup, a stats line in turn."""
    rid = f"chatcmpl-{rng.getrandbits(64):016x}"
    which = k % 3
    if which == 0:
        return f'{env.api}INFO:     10.42.0.{k % 250}:{32768 + k % 28000} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    if which == 1:
        hit = 256 * rng.randint(0, 40)
        return (f"{env.core}{LMC_COLOR['INFO']}[{lts}] LMCache INFO:{LMC_RESET} Reqid: {rid}, Total tokens "
                f"{hit + 300}, Inference Engine computed tokens: 0, LMCache hit tokens: {hit}, need to load: {hit} "
                f"{LMC_ITALIC}(vllm_v1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter){LMC_RESET}\n")
    return (f"{env.api}INFO {vts} [loggers.py:335] Engine 000: Avg prompt throughput: {rng.uniform(1e3, 9e3):.1f} "
            f"tokens/s, Avg generation throughput: {rng.uniform(100, 900):.1f} tokens/s, Running: {rng.randint(1, 40)} "
            f"reqs, Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(5, 90):.1f}%, Prefix cache hit rate: "
            f"{rng.uniform(5, 25):.1f}%, External prefix cache hit rate: {rng.uniform(5, 60):.1f}%\n")


def _server(rng: random.Random, out: IO[bytes] | None) -> tuple[Envelope, Clock, int]:
    """The TP=1 server's start (written to ``out`` when given), its envelope and its clock."""
    server = tp1_server()
    sink = out if out is not None else io.BytesIO()
    fmt_obj, t0, written = _startup(sink, server, rng)
    return Envelope(fmt_obj, server), Clock(t0), written


def dominant_lines(spec: Spec, n: int, seed: int = 7) -> list[str]:
    """``n`` lines of ``spec`` alone, exactly as ``generate_template`` writes them (for the tests)."""
    rng = random.Random(seed)
    env, clock, _ = _server(rng, None)
    make = value_maker(spec)
    return [env.wrap(spec, spec.fmt % make(i, rng), *clock.tick(rng, 200.0)) for i in range(n)]


def generate_template(out: IO[bytes], spec: Spec, size_bytes: int, seed: int = 7, share: float = 0.9) -> dict:
    """A TP=1 server's start, then ``spec``'s message as ≈``share`` of the lines until ``size_bytes``."""
    rng = random.Random(seed)
    env, clock, written = _server(rng, out)
    make = value_maker(spec)
    buf: list[str] = []
    dominant = other = 0
    while written < size_bytes:
        lts, vts = clock.tick(rng, 200.0)
        if rng.random() < share:
            buf.append(env.wrap(spec, spec.fmt % make(dominant, rng), lts, vts))
            dominant += 1
        else:
            buf.append(_other_lines(env, other, rng, lts, vts))
            other += 1
        written += _drain(out, buf, 4096)
    written += _drain(out, buf)
    return {"bytes": written, "dominant_lines": dominant, "other_lines": other, "template": spec.name,
            "incidents": []}


def _ips(i: int) -> str:
    return f"10.42.{i % 16}.{2 + i % 240}"


# ------------------------------------------------------------------------------------------ foreign noise

_NCCL = ("NCCL INFO Channel {c:02d}/02 : 0 1", "NCCL INFO Channel {c:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
         "NCCL INFO Connected all rings, use ring PXN 0 GDR 1", "NCCL INFO threadThresholds 8/8/64 | 256/8/64 | 512 | 512",
         "NCCL INFO comm 0x{h:x} rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x{h:x} - Init COMPLETE",
         "NCCL INFO NVLS multicast support is not available on dev 0", "NCCL INFO Using network Socket")
_APP = ("query took {f:.1f} ms rows={n}", "cache miss for key user:{n}", "connection pool: {n} idle, 2 busy",
        "request {h:x} handled in {f:.2f}s", "retrying upstream call (attempt {c})")
_ROUTES = ('"GET /health HTTP/1.1" 200 OK', '"GET /metrics HTTP/1.1" 200 OK', '"GET /v1/models HTTP/1.1" 200 OK',
           '"POST /v1/embeddings HTTP/1.1" 200 OK', '"GET /favicon.ico HTTP/1.1" 404 Not Found',
           '"POST /tokenize HTTP/1.1" 200 OK')
_WARNINGS = (
    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is "
    "deprecated. Please install nvidia-ml-py instead.",
    "  warnings.warn(",
    "[rank0]:[W506 15:56:03.{n:06d} ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the "
    "default now, this environment variable is thus deprecated. (function operator())",
    "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py:128: UserWarning: Using `TRANSFORMERS_CACHE` "
    "is deprecated and will be removed in v5 of Transformers.",
)


def debug_internals(cat=None, limit: int = 200) -> list[Spec]:
    """One-line vLLM DEBUG messages of the catalog that no rule reads (engine, worker, compilation …)."""
    from specdiag.catalog import catalog

    cat = cat or catalog()
    out = [Spec(e.id, "vllm", "DEBUG", e.fmt.strip(), e.module, e.runs[-1], e.names[e.newest()], "vLLM DEBUG", e.id)
           for e in cat.entries if e.project == "vllm" and e.level == "DEBUG" and e.fmt and "\n" not in e.fmt
           and "%" in e.fmt and not FAILURE.search(e.fmt)]
    return out[:: max(1, len(out) // limit)][:limit]


def _noise_line(kind: int, k: int, rng: random.Random, env: Envelope, debug: list[tuple], ts: tuple[str, str]) -> str:
    """One foreign line of kind ``kind`` (NCCL, app logger, vLLM DEBUG, other routes, warnings)."""
    n, f, h = rng.randint(1, 99999), rng.random() * 50, rng.getrandbits(48)
    if kind == 0:
        return f"node-1:1234:{5678 + k % 8} [{k % 8}] " + _NCCL[k % len(_NCCL)].format(c=k % 32, h=h) + "\n"
    if kind == 1:
        level = ("DEBUG", "INFO", "DEBUG", "WARNING")[k % 4]
        return (f"{ts[0]} - myapp.{('db', 'cache', 'api')[k % 3]} - {level} - "
                + _APP[k % len(_APP)].format(f=f, n=n, h=h, c=k % 5) + "\n")
    if kind == 2:
        spec, make = debug[k % len(debug)]
        return env.wrap(spec, spec.fmt % make(k, rng), *ts)
    if kind == 3:
        return f"{env.api}INFO:     {_ips(k)}:{32768 + k % 28000} - {_ROUTES[k % len(_ROUTES)]}\n"
    return _WARNINGS[k % len(_WARNINGS)].format(n=n) + "\n"


def incident_lines(env: Envelope, rid: str, lts: str) -> list[str]:
    """One retrieval shortfall: the scheduler's lookup, then the worker's ``Num retrieved tokens`` pair."""
    i, e, r = LMC_COLOR["INFO"], LMC_COLOR["ERROR"], LMC_RESET
    adapter = f"{LMC_ITALIC}(vllm_v1_adapter.py:{{}}:lmcache.integration.vllm.vllm_v1_adapter){r}"
    return [f"{env.core}{i}[{lts}] LMCache INFO:{r} Reqid: {rid}, Total tokens 9472, Inference Engine computed "
            f"tokens: 0, LMCache hit tokens: 8448, need to load: 8448 {adapter.format(1476)}\n",
            f"{env.worker}{e}[{lts}] LMCache ERROR:{r} Request {rid}The number of retrieved tokens is less than the "
            f"expected number of tokens! This should not happen! {adapter.format(876)}\n",
            f"{env.worker}{e}[{lts}] LMCache ERROR:{r} Num retrieved tokens: 6400, num expected tokens: 8448 "
            f"{adapter.format(882)}\n"]


def generate_noise(out: IO[bytes], size_bytes: int, seed: int = 7) -> dict:
    """A TP=1 server's start, then foreign lines (NCCL, an app's logger, vLLM DEBUG internals, other routes'
    access lines, torch/python warnings) with one shortfall incident half-way."""
    rng = random.Random(seed)
    env, clock, written = _server(rng, out)
    debug = [(s, value_maker(s)) for s in debug_internals()]
    rid = f"chatcmpl-{rng.getrandbits(64):016x}-incident"
    pending, buf, k = size_bytes // 2, [], 0
    while written < size_bytes:
        ts = clock.tick(rng, 200.0)
        buf.append(_noise_line(rng.randrange(5), k, rng, env, debug, ts))
        k += 1
        if pending and written >= pending:
            buf += incident_lines(env, rid, ts[0])
            pending = 0
        written += _drain(out, buf, 256)   # small batches: the incident lands half-way even in a tiny file
    written += _drain(out, buf)
    return {"bytes": written, "lines": k, "incidents": [rid]}


def iter_specs(names: str | None) -> Iterator[Spec]:
    """The high-volume specs, or those whose name or entry id contains one of the comma-separated ``names``."""
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()]
    for s in high_volume():
        if not wanted or any(w in s.name for w in wanted):
            yield s


def main(argv: list[str] | None = None) -> int:
    """Write one template's log or the noise log; ``--list`` prints the selected templates and why."""
    ap = argparse.ArgumentParser(description="Per-template and foreign-noise benchmark logs.")
    ap.add_argument("out", nargs="?", type=Path, help="output file ('-' for stdout)")
    ap.add_argument("--list", action="store_true", help="list the high-volume templates and the rule that chose each")
    ap.add_argument("--template", default=None, help="the spec name (or entry id) to make dominant")
    ap.add_argument("--noise", action="store_true", help="write the foreign-noise shape instead")
    ap.add_argument("--size-mb", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if args.list:
        for s in high_volume():
            print(f"{s.name}\t{s.project}\t{s.level}\t{s.module}:{s.line}\t{s.release}\t{s.why}\t{s.fmt[:80]}")
        return 0
    if args.out is None or not (args.noise or args.template):
        ap.error("give OUT and --template NAME or --noise")
    size = int(args.size_mb * 2**20)
    fh = sys.stdout.buffer if str(args.out) == "-" else open(args.out, "wb", buffering=8 << 20)
    try:
        if args.noise:
            stats = generate_noise(fh, size, args.seed)
        else:
            spec = next(iter_specs(args.template), None)
            if spec is None:
                ap.error(f"no high-volume template matches {args.template!r} (see --list)")
            stats = generate_template(fh, spec, size, args.seed)
    finally:
        if fh is not sys.stdout.buffer:
            fh.close()
    print(f"wrote {args.out}: {stats['bytes'] / 2**20:.1f} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
