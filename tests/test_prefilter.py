"""The prefilter counts lines instead of reading them: a line it calls inert must be one the per-line stages
would have read to no effect, the compiled copy must agree with the reference byte for byte, and whole
analyses must not change."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdiag.catalog import catalog
from specdiag.ingest import prefilter
from specdiag.ingest.prefilter import (
    ESC_BLOCK,
    INERT,
    KEEP,
    PREFIXED,
    QUIET,
    RESIDUE_BLOCK,
    inert_kind,
)
from specdiag.ingest.records import LineReader
from specdiag.ingest.sources import SourceStats

ROOT = Path(__file__).resolve().parents[1]
compiled = pytest.importorskip("specdiag.ingest._scan")

FOREIGN = [
    b"node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
    b"node-1:1234:5684 [6] NCCL INFO threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
    b"node-1:1234:5679 [1] NCCL INFO Using network Socket",
    b"2026-05-06 08:12:21,060 - myapp.db - INFO - retrying upstream call (attempt 4)",
    b"2026-05-06 08:11:55,864 - myapp.cache - WARNING - cache miss for key user:50120",
    b"[rank0]:[W506 15:56:03.031500 ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default",
    b"/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
    b"  warnings.warn(",
    b"\x1b[1;36m(VllmWorker TP0 pid=765)\x1b[0;0m node-1:765:765 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
    b"(Worker_TP3 pid=767) node-1:767:767 [3] NCCL INFO comm 0x5581 rank 3 nranks 8 cudaDev 3 busId 41000 - Init COMPLETE",
    b"",
    b"Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.02s/it]",
]
#: other programs' own logging: a JSON logger without a collector's keys, Python logging's default format
APP_LINES = [
    b'{"level":"debug","ts":"2026-05-06T15:56:03.745Z","logger":"gateway","msg":"proxy request","latency_ms":12}',
    b'{"severity": "INFO", "event": "cache warm", "timestamp": "2026-05-06T15:56:03Z"}',
    b"WARNING:root:retrying connection to redis, attempt 3",
    b"DEBUG:urllib3.connectionpool:Starting new HTTPS connection 1 to example.com:443",
    b"ERROR:__main__:upstream returned 502",
]
#: lines that must be read: records, wrappers, tracebacks, exceptions, cut headers, continuation-like rows
READ = [
    b"INFO 05-06 15:56:03 [core.py:94] Initializing a V1 LLM engine",
    b"[2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 49664, num expected tokens: 55808 (vllm_v1_adapter.py:884:x)",
    b"(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache INFO: Stored 256 out of total 512 tokens",
    b"Traceback (most recent call last):",
    b'  File "/x/vllm/v1/engine/core.py", line 1, in run',
    b"RuntimeError: CUDA error: an illegal memory access was encountered",
    b"FutureWarning: something",
    b"torch.OutOfMemoryError: CUDA out of memory.",
    b"2026-05-06T15:56:03.745123456Z node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
    b"[pod/vllm-0/vllm] node-1:1234:5678 [0] NCCL INFO Channel 00/02",
    b'{"log":"node-1 NCCL INFO x\\n","stream":"stdout","time":"2026-05-06T15:56:03Z"}',
    b'{"time":"2026-05-06T15:56:03Z","message":"INFO 05-06 15:56:03 [core.py:94] x"}',
    b'{"textPayload":"x","timestamp":"2026-05-06T15:56:03Z"}',
    b'{"a":1,"MESSAGE":"x","__REALTIME_TIMESTAMP":"1778082963000000"}',
    b'{"line":"x","timestamp":"1778082963000000000"}',
    b'{app="vllm", pod="vllm-0"} INFO 05-06 15:56:03 [core.py:94] x',
    b'{"time":',
    b"{",
    b"INFO:",
    b"WARNING:",
    b"ERROR:1",
    b"Dec 03 10:00:00 host vllm[123]: node NCCL INFO",
    b"Dec 03 10:00:00 host ident[12",
    b"12:INFO 05-06 15:56:03 [core.py:94] x",
    b"serve.log:12:INFO 05-06 15:56:03 [core.py:94] x",
    b"vllm-1  | INFO 05-06 15:56:03 [core.py:94] x",
    b"    INFO 05-06 15:56:03 [core.py:94] x",
    b"> [2026-05-06 15:56:03,745] LMCache INFO: x (a.py:1:b)",
    b"[2026-05-06 15:5",
    b"(Worker_TP2 pid=76",
    b"(Worker_TP2 pid=767) ",
    b"INFO:     10.0.0.1:5555 - \"GET /health HTTP/1.1\" 200 OK",
    b"vLLM API server version 0.11.0",
    b"LMCache: INFO something",
    b"line\rwith a bare CR",
    b"INF",
    b"binary \x00 junk",
]


def _reader() -> LineReader:
    reader = LineReader("x.log", SourceStats("x.log"))
    reader.begin_block(b"", lambda n: None, few_lines=True)
    return reader


def _read_to_no_effect(line: bytes, flags: int) -> tuple[bool, int]:
    """Feed ``line`` to fresh per-line stages whose cleaner has the block flags: (nothing happened, recognised)."""
    reader = _reader()
    reader.cleaner.esc = bool(flags & ESC_BLOCK)
    reader.cleaner.residue = bool(flags & RESIDUE_BLOCK)
    stats = reader.stats
    before = (set(stats.formats), list(stats.errors), stats.access_lines, stats.skipped)
    reader.feed(1, line)
    reader.end()
    after = (set(stats.formats), list(stats.errors), stats.access_lines, stats.skipped)
    quiet = (not reader.out and not reader.busy() and before == after and not reader.unwrapper.seen
             and reader.year_hint is None and reader.cleaner.skipped == 0)
    return quiet, reader.recognized


def _compiled_kinds(lines: list[bytes], flags: int, quiet: prefilter.QuietPlaces | None = None) -> bytes:
    data = b"\n".join(lines)
    blobs = prefilter.blobs_of(quiet)
    return compiled.prefilter(data, 0, *_offsets(lines), flags, len(data), *blobs, prefilter.width_mask(WIDTHS),
                              YEAR)


def _check_sound(line: bytes, flags: int) -> None:
    kind = inert_kind(line, flags)
    if kind != KEEP:
        quiet, recognised = _read_to_no_effect(line, flags)
        assert quiet, f"inert but read to some effect: {line!r}"
        assert recognised == (kind == PREFIXED), line


@pytest.mark.parametrize("flags", [0, ESC_BLOCK, RESIDUE_BLOCK])
def test_foreign_lines_are_inert_and_records_are_read(flags):
    for line in FOREIGN + APP_LINES:
        if b"\x1b" in line and not flags & ESC_BLOCK:
            continue
        assert inert_kind(line, flags) != KEEP, line
        _check_sound(line, flags)
    for line in READ:
        assert inert_kind(line, flags) == KEEP, line


def test_a_process_prefix_counts_as_vllm_output():
    assert inert_kind(FOREIGN[-4], ESC_BLOCK) == PREFIXED
    assert inert_kind(FOREIGN[0], 0) == INERT


def _catalog_lines() -> list[bytes]:
    """Every catalogued message's sample bare (as a paste without its envelope, or a message's later row),
    and in its envelope; plus foreign and record lines."""
    out: list[bytes] = []
    cat = catalog()
    for e in cat.entries:
        for part in cat.sample(e).split("\n"):
            raw = part.encode("utf-8", "replace")
            out += [raw, b"  " + raw, b"12:" + raw, b"(Worker_TP1 pid=9) " + raw, b"* `" + raw + b"`"]
    return out + FOREIGN + READ


def test_no_catalogued_message_is_dropped_and_the_compiled_copy_agrees():
    lines = _catalog_lines()
    for flags in (0, ESC_BLOCK, RESIDUE_BLOCK):
        some = lines if flags == 0 else lines[::7]  # the flags change only colour handling, tested below too
        ref = prefilter.kinds(b"\n".join(some), 0, *_offsets(some), flags)
        assert _compiled_kinds(some, flags) == ref
        for line, kind in zip(some, ref, strict=True):
            if kind != KEEP:
                _check_sound(line, flags)


def _offsets(lines: list[bytes]) -> tuple[array, array]:
    starts, ends, pos = array("q"), array("q"), 0
    for line in lines:
        starts.append(pos)
        ends.append(pos + len(line))
        pos += len(line) + 1
    return starts, ends


#: pieces a hostile or unusual line is built from: every literal the prefilter or the stages look at
PIECES = [b"INFO", b"INF", b"WARN", b"ERROR", b"DEBUG", b"CRITICAL", b" ", b"  ", b":", b"-", b"|", b"[", b"]", b"(",
          b")", b"{", b"}", b">", b"*", b"+", b".", b"0", b"12", b"2026", b"-05-06", b"T", b"Z", b" pid=", b"pid=7",
          b", ip=1", b"Warning", b"Error", b"FutureWarning:", b"LMCache", b"vllm", b"Traceback", b"File \"",
          b"\x1b[1;36m", b"\x1b[0m", b"\x1b", b"[0;0m", b"[1;36m", b"\t", b"\r", b"\x00", b"\xc3\xa9", b"NCCL",
          b"node-1", b"Dec", b"03", b"10:00:00", b"host", b"ident[12]: ", b"[pod/x] ", b"version", b"\"log\"",
          b"(Worker_TP2 pid=767) ", b"[2026-05-06 15:56:03,745] LMCache INFO: ", b"05-06 15:56:03 ", b"a", b"Zz9_",
          b"llm-0 srv ", b'{"', b'"msg"', b'"message"', b'"line"', b'"MESSAGE"', b'"textPayload"', b'{"time"',
          b'{"asctime"', b'":"', b"INFO:", b"WARNING:", b"root:", b"_", b"{app=", b"`", b"``", b"` ", b"%|", b" 75%|##  | 3/4 [00:41<00:09, 9.93s/it]",
          b"[2025-03-06 10:00:00,123 E 5191 5191] ", b"[2025-03-06 10:00:00,123 I 1 2] ", b" W ", b"*** SIG",
          b"*** SIGSEGV received at time=17 ", b"core_worker.cc:1001: ", b"E0905 14:46:37.882738 15817 ",
          b"W1231 ", b"client.cpp:503] ", b"Fatal Python error: ", b"[2025-03-10T15:07:20Z] ", b"  | ", b"| ",
          b"[rank0]:", b"[rank12]:", b"[E ", b"[F ", b"[W506 ", b"[E1021 12:00:00.123456 1234 ", b"ProcessGroupNCCL.cpp:563] ",
          # this stop's shapes: caret-notation colour, glog 0.7's dated header, a multiprocessing banner, a StopIteration,
          # another program's Python logger around a line, LMCache's header without its '['
          b"^[", b"^[[1;36m", b"^[[0;0m", b"E20260106 06:43:02.966198  5793 ", b"I20260106 ", b"Process ",
          b"Process EngineCore_DP0:", b"StopIteration", b"2026-06-27 12:57:51,690 - __main__ - INFO - ",
          b"2026-04-17 14:52:34,143] LMCache ERROR: ", b"ERROR 2025-04-02 17:25:34,553 controller 2922 -- ",
          # pydantic's line of a config dataclass, Ray's prefix colour with its ESC lost
          b"Value error, ", b" [type=value_error, input_value=ArgsKwargs((), {", b"[36m(main_task pid=3523385) ",
          b"!!!!!!! Segfault encountered !!!!!!!", b"ESC[0;0m", b"ESC[", b"ESC", b"^[0m[", b"[rank2]: ", b"[rank2]:", b"[rank1234567]: ", b"(EngineCore_DP0 pid=35109)ESC[0;0m ", b'  File "<unknown>", line 0, in swap_blocks(at::Tensor&)']


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=14), st.sampled_from([0, ESC_BLOCK, RESIDUE_BLOCK]))
def test_built_lines_are_sound_and_both_copies_agree(pieces, flags):
    line = b"".join(pieces).replace(b"\n", b"")
    assert _compiled_kinds([line], flags) == bytes([inert_kind(line, flags)])
    _check_sound(line, flags)


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "300")), deadline=None)
@given(st.binary(max_size=200), st.sampled_from([0, ESC_BLOCK, RESIDUE_BLOCK]))
def test_random_bytes_are_sound_and_both_copies_agree(raw, flags):
    line = raw.replace(b"\n", b"")
    assert _compiled_kinds([line], flags) == bytes([inert_kind(line, flags)])
    _check_sound(line, flags)


def test_adversarial_lines_cost_linear_time():
    """Lines built from the prefilter's own structure (wrapper after wrapper, digit runs, prefix after
    prefix, near-anchors), each 4 KiB and ending in a byte that breaks the shape."""
    shapes = [b"a:1:" * 1024, b"1-" * 2048, b"(a pid=1) " * 409, b"-1" * 2048, b" -" * 2048,
              b"Dec 03 " * 585, b"LMCach" * 682, b"a|" * 2048, b"[1;1" * 1024, b"\x1b[" * 2048]
    lines = [s[:4095] + b"!" for s in shapes] * 25
    t = time.perf_counter()
    _compiled_kinds(lines, ESC_BLOCK)
    assert time.perf_counter() - t < 0.5
    t = time.perf_counter()
    prefilter.kinds(b"\n".join(lines[:10]), 0, *_offsets(lines[:10]), ESC_BLOCK)
    assert time.perf_counter() - t < 2.0


def test_a_record_left_open_still_reads_the_inert_lines_after_it(tmp_path):
    """A traceback, a multi-line LMCache message and a wrapped dump keep reading the next rows, inert or not:
    the records and the report are the same with and without the prefilter."""
    log = tmp_path / "open.log"
    lines = [
        "(Worker_TP0 pid=7) [2026-05-06 15:56:03,745] LMCache ERROR: Num retrieved tokens: 6400, num expected",
        "(Worker_TP0 pid=7) tokens: 8448 and more (vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)",
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/engine/core.py", line 1, in run',
        "    node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
        "RuntimeError: boom",
        "node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
    ] * 50
    log.write_text("\n".join(lines) + "\n")
    on, off = _analyse(log, "on"), _analyse(log, "off")
    assert on == off
    assert on["inputs"][0]["recognized"] > 0


def _analyse(path: Path, switch: str, name: str = "SPECDIAG_PREFILTER", jobs: str = "1") -> dict:
    """The JSON report with the environment switch ``name`` set to ``switch``, without its times."""
    env = {**os.environ, name: switch}
    out = subprocess.run([sys.executable, "-m", "specdiag", "analyze", str(path), "--format", "json", "-j", jobs,
                          "--fail-on", "never"], capture_output=True, text=True, env=env, check=True).stdout
    report = json.loads(out)
    report.pop("generated_at", None)
    report.pop("timing", None)
    return report


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").iterdir() if (p / "serve.log").exists()))
def test_examples_report_the_same_with_and_without_the_prefilter(name):
    log = ROOT / "examples" / name / "serve.log"
    assert _analyse(log, "on") == _analyse(log, "off")


def test_noise_around_an_incident_reports_the_same_with_and_without_the_prefilter(tmp_path):
    rng = random.Random(5)
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_bytes().splitlines()
    noise = FOREIGN[:-1] + APP_LINES + [b"    " + FOREIGN[0], b"12:" + FOREIGN[1], b"x | " + FOREIGN[2]]
    out = []
    for line in start:
        out.append(line)
        out += rng.sample(noise, rng.randrange(0, 4))
    log = tmp_path / "mixed.log"
    log.write_bytes(b"\n".join(out) + b"\n")
    assert _analyse(log, "on") == _analyse(log, "off")



def test_a_held_record_still_takes_its_terminal_row_when_that_row_looks_inert(tmp_path):
    """A vLLM record exactly a terminal's width wide is held for its next row; an inert-looking row right
    after it is read (and joined), one after a prefixed or wider line is only counted."""
    head = "INFO 05-06 15:56:03 [core.py:94] "
    record = head + "x" * (120 - len(head))
    lines = [record, "node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
             "(EngineCore pid=3) " + record, "(EngineCore pid=3) node-1:3:3 [0] NCCL INFO Using network Socket",
             record, "y" * 130] * 30
    log = tmp_path / "held.log"
    log.write_text("\n".join(lines) + "\n")
    assert _analyse(log, "on") == _analyse(log, "off")



WIDTHS = frozenset({80, 100, 120})
YEAR = b"2026"


def _places() -> prefilter.QuietPlaces:
    from specdiag.engine import quiet_places
    from specdiag.events import default_matcher

    quiet = quiet_places(default_matcher())
    for key in (b"DEBUG shm_broadcast.py:393", b"INFO loggers.py:127", b"DEBUG core.py:94",
                b"DEBUG cache_engine.py:1431:lmcache.v1.cache_engine"):
        quiet.add(key)
    return quiet


QUIET_LINES = [
    b"DEBUG 05-06 15:56:03 [shm_broadcast.py:393] waited for a shared memory broadcast block for 60 s; some "
    b"processes are slow",
    b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] short",
    b"\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m DEBUG 05-06 15:56:03.123 [shm_broadcast.py:393] x",
    b"(EngineCore_DP0 pid=7) DEBUG 12-31 23:59:59 [shm_broadcast.py:393] December is read",
    b"(EngineCore_DP0 pid=7) DEBUG 01-01 00:00:00 [shm_broadcast.py:393] January is read",
    b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [core.py:94] Avg prompt throughput is a template's word",
    b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [core.py:94] holds a needle: died unexpectedly",
    b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [core.py:95] an unregistered place",
    b"(EngineCore_DP0 pid=7) WARNING 05-06 15:56:03 [core.py:94] a warning is always read",
    b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [core.py:94] [req_id=1] tagged",
    b"[2026-05-06 15:56:03,745] LMCache DEBUG: Releasing memory object for lookup_id=7 (cache_engine.py:1431:"
    b"lmcache.v1.cache_engine)",
    b"(Worker pid=3) \x1b[32;20m[2026-05-06 15:56:03,745] LMCache DEBUG:\x1b[0m Releasing x (cache_engine.py:1431:"
    b"lmcache.v1.cache_engine)",
    b"[2025-05-06 15:56:03,745] LMCache DEBUG: another year is read (cache_engine.py:1431:lmcache.v1.cache_engine)",
    b"[2026-05-06 15:56:03,745] LMCache DEBUG: another logger (cache_engine.py:1431:lmcache.v1.other)",
    b"[2026-05-06 15:56:03,745] LMCache DEBUG: no suffix yet, the record stays open",
    b"[2026-05-06 15:56:03,745] LMCache DEBUG: Stored 3 out of total 4 tokens (cache_engine.py:1431:lmcache.v1.cache_engine)",
    b"[2026-05-06 15:56:03,745] LMCache WARNING: a warning (cache_engine.py:1431:lmcache.v1.cache_engine)",
    b"[2026-05-06 15:56:03,745] LMCache DEBUG: trailing spaces (cache_engine.py:1431:lmcache.v1.cache_engine)  ",
]
AFTER = [b"", b"(Worker pid=1) next", b"INFO 05-06 15:56:03 [a.py:1] next", b"short", b"x" * 300,
         b"node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1", b"\x1b[1;36m(Worker pid=1)\x1b[0;0m next",
         b"[1;36m(Worker pid=1)[0;0m next", b"line\rwith CR"]


@pytest.mark.parametrize("flags", [0, ESC_BLOCK, RESIDUE_BLOCK])
def test_quiet_records_agree_between_the_copies_whatever_follows_them(flags):
    quiet = _places()
    for line in QUIET_LINES:
        for after in [*AFTER, None]:
            block = [line] if after is None else [line, after]
            ref = prefilter.kinds(b"\n".join(block), 0, *_offsets(block), flags, quiet, None, WIDTHS, YEAR)
            assert _compiled_kinds(block, flags, quiet) == ref, (line, after)


def test_only_registered_unremarkable_records_are_quiet():
    quiet = _places()
    kinds = [inert_kind(line, ESC_BLOCK, quiet, b"(Worker pid=1) next", WIDTHS, YEAR) for line in QUIET_LINES]
    assert kinds[:3] == [QUIET] * 3
    assert QUIET not in kinds[3:10]  # December, January, a template's word, a needle, a new place, a warning, a tag
    assert kinds[10:12] == [QUIET] * 2  # LMCache's, with and without colour
    assert QUIET not in kinds[12:17]  # another year, another logger, no suffix, a template's line, a warning
    assert kinds[17] == QUIET
    unread = QUIET_LINES[15].replace(b"out of total", b"of")  # the template's first word without its needle
    assert inert_kind(unread, 0, quiet, b"", WIDTHS, YEAR) == QUIET
    held = QUIET_LINES[0][:100]  # as wide as a terminal the reader knows
    assert inert_kind(held, 0, quiet, b"short", WIDTHS) == KEEP  # may be the cut rest of a held record
    assert inert_kind(held, 0, quiet, None, WIDTHS) == KEEP  # the next line is the next block's
    assert inert_kind(held, 0, quiet, b"", WIDTHS) == QUIET
    assert inert_kind(held[:99], 0, quiet, b"short", WIDTHS) == QUIET  # no terminal cuts at 99 columns
    assert inert_kind(held[:99], 0, quiet, b"y" * 99, WIDTHS) == KEEP  # unless the next row is as wide


def test_debug_records_at_repeated_places_report_the_same_with_and_without_the_prefilter(tmp_path):
    """Records the analysis learns to count (DEBUG lines of places the catalog knows) beside every kind of
    next line: the same report, the same recognised lines and processes, either way."""
    rng = random.Random(7)
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    debug = ["(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:{s:02d} [shm_broadcast.py:393] No available shared "
             "memory broadcast block found in 60 seconds. This typically happens when some processes are hanging.",
             "(Worker_TP{r} pid=7{r}) DEBUG 05-06 15:56:{s:02d} [shm_broadcast.py:227] Poller received cancel event",
             "DEBUG 12-31 23:59:{s:02d} [shm_broadcast.py:227] Poller received cancel event",
             "DEBUG 01-01 00:00:{s:02d} [shm_broadcast.py:227] Poller received cancel event"]
    others = [line.decode("utf-8", "replace") for line in FOREIGN[:-1] + AFTER[:-1]]
    out = []
    for line in start:
        out.append(line)
        for _ in range(rng.randrange(0, 4)):
            pick = rng.random()
            out.append(rng.choice(debug).format(s=rng.randrange(60), r=rng.randrange(8)) if pick < 0.6
                       else rng.choice(others))
    log = tmp_path / "debug.log"
    log.write_text("\n".join(out) + "\n")
    on, off = _analyse(log, "on"), _analyse(log, "off")
    assert on == off


def test_a_width_proven_inside_a_block_still_joins_a_quiet_record_of_that_width(tmp_path):
    """Kinds are decided at a block's start with the widths known then; a row cut inside a header proves a new
    width mid-block, and a quiet record of that width must then be read, with the row that continues it."""
    debug = "(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:227] Poller received cancel event {}"
    warm = [debug.format(i) for i in range(16000)]  # > 1 MiB: the place is learnt in the first block
    cut = "(Worker_TP1 pid=9) INFO 05-06 15:56:03 ["
    cut = cut + "a" * (97 - len(cut))  # a row that ends inside vLLM's header: 97 columns proven
    record = debug.format("")
    record = record + "z" * (97 - len(record))
    tail = [cut, "bc.py:12] the rest of a cut header", record, "its terminal row"] * 20
    log = tmp_path / "width.log"
    log.write_text("\n".join(warm + tail) + "\n")
    assert log.stat().st_size > 1 << 20
    assert _analyse(log, "on") == _analyse(log, "off")


def test_lmcache_debug_records_and_a_year_change_report_the_same_with_and_without_the_prefilter(tmp_path):
    """LMCache DEBUG records of a learnt place are counted; a line of another year inside a block makes the
    rest of the block's quiet records read (each moves the reader's year back), as before."""
    lmc = ("(Worker_TP{r} pid=7{r}) [{y}-05-06 15:56:{s:02d},745] LMCache DEBUG: Releasing memory object for "
           "lookup_id=req-{i} (cache_engine.py:1431:lmcache.v1.cache_engine)")
    vllm = "(EngineCore_DP0 pid=7) INFO 05-06 15:56:{s:02d} [core.py:94] engine step {i}"
    rng = random.Random(3)
    lines = [lmc.format(r=rng.randrange(4), y=2026, s=i % 60, i=i) for i in range(9000)]  # > 1 MiB: learnt
    for i in range(600):
        year = 2027 if i in (200, 401) else 2026
        lines.append(lmc.format(r=rng.randrange(4), y=year, s=i % 60, i=i))
        if i % 50 == 0:
            lines.append(vllm.format(s=i % 60, i=i))
    log = tmp_path / "lmcache-debug.log"
    log.write_text("\n".join(lines) + "\n")
    assert log.stat().st_size > 1 << 20
    assert _analyse(log, "on") == _analyse(log, "off")


def test_simple_patterns_fit_exactly_what_the_catalog_fits():
    """The compiled copy's format check (literals in order, ``%d`` digits) against the catalog's own
    ``values``, on every one-line format of ``%s`` / ``%d`` placeholders: its sample and texts that break it."""
    from specdiag.catalog.pattern import values
    from specdiag.ingest.prefilter import simple_fits

    cat = catalog()
    checked = 0
    for e in cat.entries[::3]:
        p = cat.pattern_of(e)  # the pattern the catalog matches with
        if p is None or p.head is not None or set(p.kinds) - {"s", "d"} or not all(x.isascii() for x in p.lits):
            continue
        sample = cat.sample(e)
        lits = tuple(x.encode() for x in p.lits)
        for text in (sample, sample + " tail", "x" + sample, sample.replace("42", "4x2"), sample.replace("42", "-42"),
                     sample.replace("x1", ""), sample[: len(sample) // 2], " " + sample + " "):
            if not text.isascii() or not text.isprintable():
                continue  # a line the prefilter reads at all is printable ASCII
            want = values(p, text.strip()) is not None
            assert simple_fits(lits, p.kinds, text.encode()) == want, (e.id, text)
            checked += 1
    assert checked > 1000


def test_a_place_of_several_messages_is_quiet_for_the_texts_of_those_seen():
    from specdiag.ingest.prefilter import inert_kind

    quiet = _places()
    key = b"DEBUG vllm_v1_adapter.py:408:lmcache.integration.vllm.vllm_v1_adapter"
    quiet.add_pattern(key, ("Scheduled to load ", " tokens (", " cached in vLLM) for request ", ""), "dds")
    head = b"[2026-05-06 15:56:03,745] LMCache DEBUG: "
    tail = b" (vllm_v1_adapter.py:408:lmcache.integration.vllm.vllm_v1_adapter)"
    fits = head + b"Scheduled to load 512 tokens (256 cached in vLLM) for request cmpl-1" + tail
    other = head + b"The layer model.layers.0 does not have kv_cache, skip" + tail
    broken = head + b"Scheduled to load many tokens (256 cached in vLLM) for request cmpl-1" + tail
    lines = [fits, other, broken]
    assert [inert_kind(x, 0, quiet, b"", WIDTHS, YEAR) for x in lines] == [QUIET, KEEP, KEEP]
    for flags in (0, ESC_BLOCK):
        ref = prefilter.kinds(b"\n".join(lines), 0, *_offsets(lines), flags, quiet, None, WIDTHS, YEAR)
        assert _compiled_kinds(lines, flags, quiet) == ref


def test_records_of_a_place_of_several_messages_report_the_same_with_and_without_the_prefilter(tmp_path):
    """LMCache DEBUG records at a place that printed other messages in other releases: the texts of the
    message seen are counted, others (another message there, a text that fits none) read, same report."""
    head = "(Worker_TP{r} pid=7{r}) [2026-05-06 15:56:{s:02d},745] LMCache DEBUG: "
    tail = " (vllm_v1_adapter.py:408:lmcache.integration.vllm.vllm_v1_adapter)"
    texts = ["Scheduled to load {n} tokens ({m} cached in vLLM) for request cmpl-{i}",
             "The layer model.layers.{i} does not have kv_cache, skip",
             "Scheduled to load some tokens for request cmpl-{i}"]
    rng = random.Random(11)
    lines = []
    for i in range(14000):
        text = texts[0] if i < 9000 or rng.random() < 0.8 else rng.choice(texts[1:])
        lines.append(head.format(r=rng.randrange(4), s=i % 60) + text.format(n=i, m=i // 2, i=i) + tail)
    log = tmp_path / "several.log"
    log.write_text("\n".join(lines) + "\n")
    assert log.stat().st_size > 1 << 20
    assert _analyse(log, "on") == _analyse(log, "off")


def _stores(n: int, rng: random.Random) -> list[str]:
    """LMCache 0.3.12's per-store INFO line (template S3, which no rule reads) from four workers."""
    return [f"(Worker_TP{r} pid=76{r}) [2026-05-06 15:56:{rng.randrange(60):02d},{rng.randrange(1000):03d}] LMCache "
            f"INFO: Storing KV cache for {k} out of {k} tokens (skip_leading_tokens=0) for request cmpl-{i} "
            "(vllm_v1_adapter.py:1282:lmcache.integration.vllm.vllm_v1_adapter)"
            for i in range(n) for r in (rng.randrange(4),) for k in (256 * rng.randrange(1, 40),)]


def _quiet_count(log: Path, field: str = "quiet") -> int:
    """How many records of ``log`` the analysis counted without reading them (``SourceStats.quiet``; with
    ``field="unknown"``, those nothing recognises, of both projects: ``SourceStats.unknown``)."""
    from specdiag.engine import SourceLoop, analyze

    counted = []
    real_end = SourceLoop.end

    def end(self):
        got = getattr(self.src.stats, field)
        counted.append(sum(got.values()) if isinstance(got, dict) else got)
        return real_end(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SourceLoop, "end", end)
        analyze([str(log)])
    return sum(counted)


def _stores_log(tmp_path: Path, n: int) -> Path:
    """The TP=8 example's start, then ``n`` store lines (more than one 1 MiB block: a place is learnt in
    one block and counted from the next)."""
    rng = random.Random(11)
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    log = tmp_path / "stores.log"
    log.write_text("\n".join(start + _stores(n, rng)) + "\n")
    return log


def test_records_of_a_template_nothing_reads_are_counted_and_report_the_same(tmp_path):
    """``Storing KV cache for …`` is recognised by a hand-written template that no rule reads: its place is
    learnt like a place only the catalog knows, so its records are counted, not read — with the same
    report as with the prefilter off."""
    log = _stores_log(tmp_path, 12_000)
    assert log.stat().st_size > 2 << 20
    assert _analyse(log, "on") == _analyse(log, "off")
    assert _quiet_count(log) > 5_000  # the store lines of the later blocks were counted, not read


def test_a_template_something_reads_is_never_counted_unread(tmp_path, monkeypatch):
    """The same lines when the runs read S3 (as an observer that reads it would): none is counted unread."""
    import specdiag.deployments as deployments

    log = _stores_log(tmp_path, 12_000)
    monkeypatch.setattr(deployments, "RUN_EVENTS", deployments.RUN_EVENTS | {"S3"})
    assert _quiet_count(log) == 0


def test_a_debug_record_holding_the_word_error_is_counted_when_only_error_templates_look_for_it(tmp_path):
    """``Error`` is the needle of a template bound to ERROR records (V_EXC): it cannot match a DEBUG record,
    so a DEBUG record of a learnt place that says ``Error:`` is counted like any other — same report."""
    rng = random.Random(13)
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    debug = [f"(EngineCore pid=203) DEBUG 05-06 08:01:{rng.randrange(60):02d} [inc.py:434] ARK backend is unavailable "
             f"for layer model.layers.{i}; falling back to the default XPU INC path. Error: no kernel {i}"
             for i in range(14_000)]
    log = tmp_path / "debug-error.log"
    log.write_text("\n".join(start + debug) + "\n")
    assert log.stat().st_size > 2 << 20
    assert _analyse(log, "on") == _analyse(log, "off")
    assert _quiet_count(log) > 5_000


def test_a_foreign_line_after_a_record_of_terminal_width_is_not_read_and_reports_the_same(tmp_path, monkeypatch):
    """A vLLM record exactly 120 columns wide is held for its next row; the NCCL or app-logger line after it
    has its whole header, so it can only hand the record on (``prefilter.FOREIGN_HEADER``): neither is read
    once the place is learnt, and the report is the one every line read gives."""
    from specdiag.engine import analyze
    from specdiag.ingest import blocks

    rng = random.Random(17)
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    head = "(EngineCore pid=203) DEBUG 05-06 08:01:37 [nvfp4.py:415] Using "
    foreign = ["node-1:1234:5685 [7] NCCL INFO threadThresholds 8/8/64 | 256/8/64 | 512 | 512",
               "2026-05-06 08:01:37,674 - myapp.api - DEBUG - cache miss for key user:49654"]
    out = list(start)
    for i in range(12_000):
        out.append(head + f"{i:06d}" + "x" * (120 - len(head) - 6))
        out.append(rng.choice(foreign))
    log = tmp_path / "held.log"
    log.write_text("\n".join(out) + "\n")
    assert _analyse(log, "on") == _analyse(log, "off")
    whole = []
    real = blocks._BlockFeed.inert

    def inert(self, n, raw, read, force=False):
        whole.append(read)
        return real(self, n, raw, read, force)

    monkeypatch.setattr(blocks._BlockFeed, "inert", inert)
    analyze([str(log)])
    assert sum(whole) < 100  # a foreign line after a held record is handed on, not read
    # and once the place is learnt, a 120-wide record before a foreign line is itself counted: the prefilter
    # knows that line cannot be its rest (``prefilter._ends_held``)
    assert _quiet_count(log) > 5_000


#: headers of other programs and near misses of each, for the line after a held quiet record
HEADERS = [
    b"node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1", b"node-1:1234:5678 [0] NCCL WARN x",
    b"h:1:2 [3] NCCL TRACE y", b"node-1:1234:5678 [0] NCCL DEBUG x", b"node-1:1234: [0] NCCL INFO x",
    b"node 1:1234:5678 [0] NCCL INFO x", b"a" * 129 + b":1:2 [3] NCCL INFO x", b"n:12345678901:2 [3] NCCL INFO x",
    b"2026-05-06 08:12:21,060 - myapp.db - INFO - retrying", b"2026-05-06T08:12:21.060123 - a - CRITICAL - x",
    b"2026-05-06 08:12:21,060 - myapp.db - TRACE - x", b"2026-05-06 08:12:21 - myapp - INFO - x",
    b"2026-05-06 08:12:21,0601234567 - a - INFO - x", b"2026-05-06 08:12:21,060 -  a - INFO - x",
    b"I0506 08:01:37.123456    77 ProcessGroupNCCL.cpp:1234] comm", b"W0506 08:01:37.123456 7 a.cc:1] x",
    b"I0506 08:01:37.1234567 77 a.cc:1] x", b"I0506 08:01:37.123456          77 a.cc:1] x", b"X0506 08:01:37.123456 7 a:1] x",
    b"/usr/lib/python3/torch/cuda/__init__.py:61: FutureWarning: deprecated", b"/a.py:1: UserWarning: x",
    b"/a.py:1: userWarning: x", b"/a b.py:1: UserWarning: x", b"/a.pyc:1: UserWarning: x", b"/.py:1: UserWarning: x",
    b"/a.py:1: Warning: x", b"/a.py:1: XWarningy: x", b"/a.py:123456789: UserWarning: x",
    b"/a.py:1: A" + b"b" * 64 + b"Warning: x", b"/a.py:1: A" + b"b" * 65 + b"Warning: x",
]


@pytest.mark.parametrize("flags", [0, ESC_BLOCK, prefilter.PLAIN_BLOCK, ESC_BLOCK | prefilter.PLAIN_BLOCK])
def test_a_held_quiet_record_before_another_programs_line_agrees_between_the_copies(flags):
    """A quiet record exactly a terminal's width wide, then each header (or a near miss) a byte shorter: both
    copies decide alike whether that line may be its rest (only with no wrapper seen is a header decisive)."""
    quiet = _places()
    head = b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] "
    held = head + b"y" * (120 - len(head))
    quiet_after = []
    for after in HEADERS:
        after = after[:119]
        block = [held, after]
        ref = prefilter.kinds(b"\n".join(block), 0, *_offsets(block), flags, quiet, None, WIDTHS, YEAR)
        assert _compiled_kinds(block, flags, quiet) == ref, after
        quiet_after.append(ref[0] >= prefilter.QUIET)
    assert any(quiet_after) == bool(flags & prefilter.PLAIN_BLOCK) and not all(quiet_after)


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([b"node-1", b":", b"12", b"1234567", b" ", b"[", b"]", b"NCCL ", b"INFO ", b"WARN",
                                 b"2026-05-06", b"T", b" 08:12:21", b",", b".", b"060", b" - ", b"myapp.db", b"DEBUG",
                                 b"I0506", b"123456", b"/", b"a", b".py", b"UserWarning", b"Warning", b": ", b"A",
                                 b"b" * 30, b"\t", b"x"]), max_size=16))
def test_built_header_lines_agree_between_the_copies(pieces):
    quiet = _places()
    head = b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] "
    held = head + b"y" * (120 - len(head))
    after = b"".join(pieces)[:119]
    block = [held, after]
    flags = prefilter.PLAIN_BLOCK
    ref = prefilter.kinds(b"\n".join(block), 0, *_offsets(block), flags, quiet, None, WIDTHS, YEAR)
    assert _compiled_kinds(block, flags, quiet) == ref, after
    if after:  # an empty last line is the block's end: what follows is not known
        assert (ref[0] >= prefilter.QUIET) == (prefilter.FOREIGN_HEADER.match(after) is not None)


#: text beyond ASCII, valid and not: what a quiet record's body may or may not hold
UTF8_BITS = ["→", "🔵", "é", "日本", "\u2028", "\u2029", "\u0085", "\u009f", "\u00a0", "\u202e", "\ufeff", "\U0010ffff"]
BAD_BYTES = [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8", b"\x80", b"\xc3", b"\xe2\x86",
             b"\xff", b"\x7f", b"\x01"]


@pytest.mark.parametrize("flags", [0, ESC_BLOCK, prefilter.PLAIN_BLOCK])
def test_quiet_records_with_text_beyond_ascii_agree_between_the_copies(flags):
    """A quiet record's body with UTF-8 text (or broken UTF-8, controls, separators): both copies decide
    alike, and only valid printable UTF-8 at a place where every text is recognised is counted."""
    quiet = _places()
    quiet.add_pattern(b"DEBUG pattern.py:7", ("Mapped ", " to ", ""), "ss")
    heads = [b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] ",
             b"DEBUG 05-06 15:56:03 [pattern.py:7] Mapped ",
             b"[2026-05-06 15:56:03,745] LMCache DEBUG: Releasing "]
    tails = [b"", b" (cache_engine.py:1431:lmcache.v1.cache_engine)"]
    for head, tail in zip(heads, [tails[0], tails[0], tails[1]], strict=True):
        for bit in [x.encode() for x in UTF8_BITS] + BAD_BYTES:
            line = head + b"x " + bit + b" y to z" + tail
            block = [line, b"(Worker pid=1) next"]  # a prefixed next line: never the record's rest
            ref = prefilter.kinds(b"\n".join(block), 0, *_offsets(block), flags, quiet, None, WIDTHS, YEAR)
            assert _compiled_kinds(block, flags, quiet) == ref, line
            counted = ref[0] >= prefilter.QUIET
            printable = prefilter.printable_utf8(bit)
            assert counted == (printable and b"pattern.py" not in head), line


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=24), st.text(max_size=8))
def test_built_utf8_bodies_agree_between_the_copies(raw, text):
    quiet = _places()
    line = b"(Worker pid=3) DEBUG 05-06 15:56:03 [shm_broadcast.py:393] " + raw + text.encode("utf-8", "surrogatepass")
    block = [line, b"(Worker pid=1) next"]
    ref = prefilter.kinds(b"\n".join(block), 0, *_offsets(block), prefilter.PLAIN_BLOCK, quiet, None, WIDTHS, YEAR)
    assert _compiled_kinds(block, prefilter.PLAIN_BLOCK, quiet) == ref, line


def test_unread_and_read_events_name_the_same_split_of_the_templates():
    """``Deployment.unread`` (asked per record) and ``read_events`` (given to the prefilter) are two views of
    one set: a template is unread exactly when it is not among the events read."""
    from specdiag.deployments import Deployment
    from specdiag.engine import AnalyzeOptions, deployment_runs
    from specdiag.events import default_matcher

    dep = Deployment("d", deployment_runs(AnalyzeOptions(paths=[])))
    read = dep.read_events()
    ids = {t.id for t in default_matcher().templates}
    assert {t for t in ids if dep.unread(t)} == ids - read
    assert "S3" in ids - read and "L1" in read and "R4" in read  # stores per request: nothing reads them


_BLOCK_FLAGS = [0, ESC_BLOCK, RESIDUE_BLOCK, ESC_BLOCK | prefilter.PLAIN_BLOCK, RESIDUE_BLOCK | prefilter.PLAIN_BLOCK,
                prefilter.PLAIN_BLOCK]


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(QUIET_LINES + AFTER + FOREIGN),
                          st.lists(st.sampled_from(PIECES), max_size=10).map(b"".join)), min_size=1, max_size=12),
       st.lists(st.booleans(), min_size=12, max_size=12), st.sampled_from(_BLOCK_FLAGS))
def test_blocks_of_several_rows_agree_between_the_copies_whichever_lines_are_rows(lines, is_row, flags):
    """Several lines in one block, of which only some are rows (the scanner took the others): each row's next
    line is read from the next row where that row follows it, else from the block; coloured lines are cleaned
    a run at a time between their escapes. Both copies must agree on every row."""
    lines = [ln.replace(b"\n", b"") for ln in lines]
    data = b"\n".join(lines)
    starts, ends = _offsets(lines)
    keep = [i for i in range(len(lines)) if is_row[i]] or [0]
    starts, ends = array("q", [starts[i] for i in keep]), array("q", [ends[i] for i in keep])
    quiet = _places()
    ref = prefilter.kinds(data, 0, starts, ends, flags, quiet, None, WIDTHS, YEAR)
    blobs = quiet.blobs()
    got = compiled.prefilter(data, 0, starts, ends, flags, len(data), *blobs, prefilter.width_mask(WIDTHS), YEAR)
    assert got == ref, (lines, keep)


@pytest.mark.parametrize("flags", _BLOCK_FLAGS)
def test_a_held_record_and_a_next_row_as_long_as_it_agree_between_the_copies(flags):
    """Whether the next line may be a held record's rest turns on its length against the record's: a next
    line one byte shorter, as long, or one byte longer, read from the next row or from the block."""
    quiet = _places()
    for line in QUIET_LINES:
        for delta in (-1, 0, 1):
            after = b"x" * max(0, len(line) + delta)
            for rows in ((0, 1), (0,)):
                block = [line, after]
                starts, ends = _offsets(block)
                starts, ends = array("q", [starts[i] for i in rows]), array("q", [ends[i] for i in rows])
                data = b"\n".join(block)
                ref = prefilter.kinds(data, 0, starts, ends, flags, quiet, None, WIDTHS, YEAR)
                got = compiled.prefilter(data, 0, starts, ends, flags, len(data), *quiet.blobs(),
                                         prefilter.width_mask(WIDTHS), YEAR)
                assert got == ref, (line, delta, rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([prefilter.KEEP, prefilter.INERT, prefilter.PREFIXED, prefilter.QUIET,
                                 prefilter.QUIET_FIRST]), max_size=400),
       st.sampled_from([0.0, 0.02, 0.2, 1.0]))
def test_the_kept_rows_are_the_keep_rows_whether_few_or_many(kinds, keep_share):
    """``blocks._kept_rows`` picks the KEEP rows by index when they are few and by a mask when they are many;
    either way the columns are the rows whose kind is KEEP, in order."""
    from itertools import compress

    from specdiag.ingest.blocks import _kept_rows

    kinds = bytes(prefilter.KEEP if (i * 37) % 100 < keep_share * 100 else k for i, k in enumerate(kinds))
    rare = {name: array("q", [(i + 1) * (7 + j) for i in range(len(kinds))]) for j, name in enumerate(("line", "start", "end"))}
    mask = bytes(k == prefilter.KEEP for k in kinds)
    assert _kept_rows(kinds, rare) == {name: list(compress(col, mask)) for name, col in rare.items()}


JSON_PIECES = [b'"level"', b'"msg"', b'"message"', b'"log"', b'"line"', b'"MESSAGE"', b'"textPayload"', b'"time"',
               b'"asctime"', b'"levelname"', b":", b",", b'"', b"{", b"}", b" ", b"debug", b"INFO 05-06 15:56:03 ",
               b"[core.py:94] ", b"x", b"2026-05-06T15:56:03Z", b"app=", b"_", b"\\u001b[0m", b"\\n", b"vllm"]


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(JSON_PIECES), max_size=16), st.sampled_from([b"{", b'{"', b"12:{", b"    {"]))
def test_json_lines_are_sound_and_both_copies_agree(pieces, head):
    """Lines that start with ``{`` (bare, grep-numbered, indented) built from the keys the wrappers read and
    those an application's JSON logger writes: only JSON no wrapper reads is counted unread."""
    line = head + b"".join(pieces)
    for flags in (0, prefilter.PLAIN_BLOCK):
        assert _compiled_kinds([line], flags) == bytes([inert_kind(line, flags)])
        _check_sound(line, flags)


def test_quiet_records_in_a_residue_block_are_measured_as_the_reader_measures_them(tmp_path):
    """In a block of colour residue (``[1;36m`` without ESC, as a collector's JSON of a coloured line leaves
    it) the reader measures rows without the residue: a quiet record held at a terminal's width and the row
    after it, with residue that makes them as wide or not, report the same with and without the prefilter,
    and a next row wider without its residue no longer keeps the record read."""
    rec = "[1;36m(EngineCore_DP0 pid=7)[0;0m DEBUG 05-06 15:56:{s:02d} [shm_broadcast.py:227] Poller received cancel event"
    warm = [rec.format(s=i % 60) + f" {i}" for i in range(16000)]  # > 1 MiB: the place is learnt in the first block
    base = rec.format(s=3)
    held = base + "z" * (120 + len("[1;36m[0;0m") - len(base))  # 120 columns without its residue: a terminal's
    rows = ["[0;0m" + "r" * 119, "r" * 119 + "[1m", "[0;0m" + "r" * 140, "node-1:1234:5678 [0] NCCL INFO x" + "[0m" * 30]
    tail = [x for row in rows for x in (held, row)] * 20
    log = tmp_path / "residue.log"
    log.write_text("\n".join(warm + tail) + "\n")
    assert _analyse(log, "on") == _analyse(log, "off")
    quiet = _places()
    quiet.add(b"DEBUG shm_broadcast.py:227")
    wider = held.encode(), rows[2].encode()  # 145 columns as written, 140 without residue: wider than 120
    assert inert_kind(wider[0], RESIDUE_BLOCK, quiet, wider[1], frozenset({120}), YEAR) == QUIET
    data = b"\n".join(wider)
    args = (data, 0, *_offsets(list(wider)), RESIDUE_BLOCK, quiet, len(data), frozenset({120}), YEAR)
    assert prefilter.block_kinds(*args)[:1] == prefilter.kinds(*args)[:1] == bytes([prefilter.QUIET_FIRST])
    same = held.encode(), rows[0].encode()  # 120 without residue: may be its rest
    assert inert_kind(same[0], RESIDUE_BLOCK, quiet, same[1], frozenset({120}), YEAR) == KEEP


RESIDUE_PIECES = [b"[0m", b"[1;36m", b"[0;0m", b"[", b"m", b";", b"1", b"x", b" ", b"xxxxxxxxxx", b"\r"]


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "300")), deadline=None)
@given(st.lists(st.sampled_from(RESIDUE_PIECES), max_size=30), st.integers(0, 60), st.integers(0, 40))
def test_the_row_after_a_quiet_record_is_measured_alike_by_both_copies(pieces, pad, wrap):
    """Residue, CRs and widths around a terminal's: both copies decide the same, with and without a wrapper
    width behind the next row."""
    quiet = _places()
    quiet.add(b"DEBUG shm_broadcast.py:227")
    record = b"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:227] Poller received cancel event "
    record += b"p" * pad
    after = b"".join(pieces)
    block = [record, after]
    for flags in (RESIDUE_BLOCK, 0):
        wraps = (array("q", [0, wrap]), array("q", [wrap, 0]))
        data = b"\n".join(block)
        args = (data, 0, *_offsets(block), flags, quiet, len(data), WIDTHS, YEAR)
        assert prefilter.block_kinds(*args, None, wraps) == prefilter.kinds(*args, wraps), (after, flags, wrap)


DOCKER_PIECES = [b"\x1b[1;36m", b"\x1b[0;0m", b"\x1b", b"\x1b[K", b"\x1b[?25l", b"[0m", b"[", b"0m", b"[1;36m", b"m",
                 b"(EngineCore_DP0 pid=7) ", b"DEBUG 05-06 15:56:03 [shm_broadcast.py:227] ", b"Poller received cancel event",
                 b"node-1:1234:5678 [0] NCCL INFO x", b" ", b"x" * 40]


@settings(max_examples=int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "400")), deadline=None)
@given(st.lists(st.sampled_from(DOCKER_PIECES), max_size=12), st.lists(st.sampled_from(DOCKER_PIECES), max_size=8),
       st.sampled_from([0, RESIDUE_BLOCK]), st.integers(0, 90))
def test_docker_texts_are_cleaned_and_measured_alike_by_both_copies(pieces, after, residue, wrap):
    """A docker json-file copy's lines (``DOCKER_TEXT``): colour taken off as ``wrappers.json_line`` takes it
    (``ANSI_BYTES`` where an ESC or ``[0m`` is left after the block's residue), rows measured as the json-file
    line is; both copies decide alike, a quiet place registered, whatever escapes the text holds."""
    quiet = _places()
    quiet.add(b"DEBUG shm_broadcast.py:227")
    block = [b"".join(pieces), b"".join(after)]
    flags = prefilter.DOCKER_TEXT | residue
    wraps = (array("q", [wrap, 0]), array("q", [0, 0]))
    data = b"\n".join(block)
    args = (data, 0, *_offsets(block), flags, quiet, len(data), WIDTHS, YEAR)
    assert prefilter.block_kinds(*args, None, wraps) == prefilter.kinds(*args, wraps), (block, flags, wrap)


def test_a_docker_text_is_cleaned_as_its_json_line_is_read():
    from specdiag.ingest.wrappers import json_line

    for text in (b"\x1b[1;36m(EngineCore pid=7)\x1b[0;0m DEBUG x", b"a\x1b[Kb", b"[[0m0m", b"[1;36mx", b"\x1bx[0m"):
        doc = json.dumps({"log": text.decode() + "\n", "stream": "stdout", "time": "2026-05-06T15:56:03Z"}).encode()
        assert prefilter._cleaned(text, prefilter.DOCKER_TEXT) == json_line(doc)[0], text


def test_a_progress_bar_alone_is_inert_and_one_with_a_record_after_it_is_kept():
    """A flood of bar redraws costs nothing; a bar with text after its ']' may hold a glued record
    (``records.after_bar``): both copies keep it."""
    bar = b"Processed prompts:  75%|#####3 | 3/4 [00:41<00:09,  9.93s/it, est. speed input: 537.68 toks/s]"
    glued = bar + b"ERROR 08-25 16:35:26 [core.py:398] EngineCore encountered a fatal error."
    for line, kind in ((bar, INERT), (bar + b"  ", INERT), (glued, KEEP)):
        assert inert_kind(line, 0) == kind, line
        assert _compiled_kinds([line], 0) == bytes([kind]), line
