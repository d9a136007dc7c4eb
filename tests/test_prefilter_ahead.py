"""The prefilter's kinds decided on the scan thread (``ahead.scan_and_decide``): the same kinds the reader
would decide, used only while the reader's state is the one they were decided on, and left to the reader
when the scan thread falls behind."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

from specdiag.engine import analyze
from specdiag.ingest import ahead, blocks, prefilter, scan, sources
from specdiag.ingest.cleaner import colour_of
from specdiag.report.json_report import render_json

pytest.importorskip("specdiag.ingest._scan")

from test_prefilter import FOREIGN, QUIET_LINES, READ, WIDTHS, YEAR, _places  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _block(seed: int, colour: bytes) -> bytes:
    """A block of foreign, quiet and read lines in a random order; ``colour`` decides the block's flags (an
    ESC, ESC-less colour residue, or none)."""
    rng = random.Random(seed)
    lines = [rng.choice(FOREIGN + QUIET_LINES + READ) for _ in range(400)]
    lines = [line for line in lines if b"\x1b" not in line and b"[0;0m" not in line and b"[1;36m" not in line]
    lines.insert(rng.randrange(len(lines)), colour)
    return b"\n".join(lines) + b"\n"


def _state(quiet: prefilter.QuietPlaces, plain: int) -> tuple:
    return plain, quiet.blobs(), prefilter.width_mask(WIDTHS), YEAR


def _reader_kinds(data: bytes, res: scan.ScanResult, quiet: prefilter.QuietPlaces, plain: int) -> bytes:
    rare = res.rare
    flags = prefilter.colour_flags(*colour_of(data, 0, len(data))) | plain
    return prefilter.block_kinds(data, 0, rare["start"], rare["end"], flags, quiet, len(data), WIDTHS, YEAR)


COLOURS = {"plain": b"no colour here", "esc": b"\x1b[1;36m(Worker pid=1)\x1b[0;0m NCCL INFO x",
           "residue": b"[1;36m(Worker pid=1)[0;0m node-1:1:1 [0] NCCL INFO x"}


@pytest.mark.parametrize("colour", sorted(COLOURS))
@pytest.mark.parametrize("plain", [0, prefilter.PLAIN_BLOCK])
@pytest.mark.parametrize("seed", range(4))
def test_kinds_decided_on_the_scan_thread_are_the_kinds_the_reader_decides(colour: str, plain: int, seed: int) -> None:
    quiet = _places()
    data = _block(seed, COLOURS[colour])
    res, copy = ahead.scan_and_decide(data, 0, len(data), _state(quiet, plain))
    assert copy is None and len(res.rare["line"]) > 100
    assert isinstance(res.ahead, prefilter.Ahead)
    want = _reader_kinds(data, res, quiet, plain)
    assert res.ahead.kinds == want
    assert set(want) >= {prefilter.KEEP, prefilter.INERT}


def test_kinds_decided_ahead_are_used_only_for_their_block_and_the_readers_state() -> None:
    """A stand-in kind string (every row QUIET) shows whether the ahead kinds were taken: they are for the
    same range and state, and not once the year, the widths, the quiet places, the flags or the range differ."""
    quiet = _places()
    data = _block(9, COLOURS["plain"])
    res, _ = ahead.scan_and_decide(data, 0, len(data), _state(quiet, 0))
    rare = res.rare
    real = res.ahead.kinds
    fake = res.ahead._replace(kinds=bytes([prefilter.QUIET]) * len(real))
    assert fake.kinds != real

    def kinds(flags=0, year=YEAR, widths=WIDTHS, places=quiet, stop=len(data)) -> bytes:
        return prefilter.block_kinds(data, 0, rare["start"], rare["end"], flags, places, stop, widths, year, fake)

    assert kinds() == fake.kinds
    other = _places()
    other.add(b"DEBUG loggers.py:1")
    assert kinds(year=b"2027") != fake.kinds
    assert kinds(widths=WIDTHS | {97}) != fake.kinds
    assert kinds(places=other) != fake.kinds
    assert kinds(flags=prefilter.PLAIN_BLOCK) != fake.kinds
    assert kinds(stop=len(data) - 1) != fake.kinds


def test_a_block_scanned_without_a_state_or_with_its_timestamps_taken_off_has_no_kinds_ahead() -> None:
    quiet = _places()
    data = _block(3, COLOURS["plain"])
    assert ahead.scan_and_decide(data, 0, len(data), None)[0].ahead is None
    stamped = b"".join(b"2026-05-06T15:56:03.745123456Z (Worker pid=1) " + line + b"\n"
                       for line in data.splitlines())
    res, copy = ahead.scan_and_decide(stamped, 0, len(stamped), _state(quiet, 0))
    assert copy is not None and res.ahead is None


def test_a_shifted_scan_keeps_its_kinds_ahead() -> None:
    quiet = _places()
    data = _block(4, COLOURS["plain"])
    res, _ = ahead.scan_and_decide(data, 0, len(data), _state(quiet, 0))
    assert res.shifted(1000).ahead is res.ahead


def test_a_scan_thread_that_falls_behind_leaves_the_next_blocks_kinds_to_the_reader(monkeypatch) -> None:
    """The first block's scan is held back past the moment it is to be handed on: the block submitted next
    goes without the reader's state (the reader decides its kinds), those before it with it."""
    release = threading.Event()
    asked: list[tuple | None] = []
    real = ahead.scan_and_decide

    def scan_and_decide(data: bytes, start: int, end: int, state: tuple | None):
        if not asked:
            release.wait(10)
        asked.append(state)
        return real(data, start, end, None)

    real_told = ahead._told

    def told(item: tuple, waited):  # the held-back scan goes on once its block was found not done
        out = real_told(item, waited)
        release.set()
        return out

    monkeypatch.setattr(ahead, "scan_and_decide", scan_and_decide)
    monkeypatch.setattr(ahead, "_told", told)
    block = b"node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1\n" * 10
    blocks_in = [(block, 0, len(block))] * (ahead.DEPTH + 4)
    try:
        out = list(ahead._pooled(iter(blocks_in), 1, lambda: ("state",)))
    finally:
        release.set()
    assert len(out) == len(blocks_in)
    in_flight = ahead.DEPTH + 1  # one thread: the first block is handed on once this many more are asked for
    assert asked[: in_flight + 1] == [("state",)] * (in_flight + 1)
    assert asked[in_flight + 1] is None  # submitted right after the held-back block was found not done


def _mixed_log(path: Path) -> Path:
    """Several blocks whose reader state changes on the way: quiet DEBUG places learnt, a width proven by a
    row cut inside a header, an LMCache year change, a kubectl prefix first seen late, foreign noise, and
    an incident at the end."""
    rng = random.Random(11)
    debug = "(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [shm_broadcast.py:227] Poller received cancel event {}"
    lmc = ("(Worker_TP{r} pid=7{r}) [{y}-05-06 15:56:{s:02d},745] LMCache DEBUG: Releasing memory object for "
           "lookup_id=req-{i} (cache_engine.py:1431:lmcache.v1.cache_engine)")
    cut = "(Worker_TP1 pid=9) INFO 05-06 15:56:03 ["
    cut = cut + "a" * (97 - len(cut))
    record = debug.format("")
    record = record + "z" * (97 - len(record))
    noise = [line.decode() for line in FOREIGN if b"\x1b" not in line]
    lines = []
    for i in range(60000):
        pick = rng.random()
        if pick < 0.4:
            lines.append(debug.format(i))
        elif pick < 0.7:
            lines.append(lmc.format(r=rng.randrange(4), y=2027 if 40000 < i < 40100 else 2026, s=i % 60, i=i))
        else:
            lines.append(rng.choice(noise))
        if i == 30000:
            lines += [cut, "bc.py:12] the rest of a cut header", record, "its terminal row"]
        if i >= 50000 and i % 7 == 0:
            lines.append("[pod/vllm-0/vllm] " + debug.format(i))
    lines += (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    path.write_text("\n".join(lines) + "\n")
    return path


def test_kinds_decided_on_the_scan_thread_report_what_reading_every_line_reports(tmp_path, monkeypatch) -> None:
    log = _mixed_log(tmp_path / "mixed.log")
    assert log.stat().st_size > 6 << 20
    used = []
    real = prefilter.block_kinds

    def block_kinds(*args, **kwargs):
        out = real(*args, **kwargs)
        given = args[9] if len(args) > 9 else kwargs.get("ahead")
        used.append(given is not None and given.kinds is out)
        return out

    monkeypatch.setattr(prefilter, "block_kinds", block_kinds)
    monkeypatch.setattr(ahead._Balance, "note", lambda self, waited: None)  # every block's kinds asked ahead
    monkeypatch.setattr(sources, "BLOCK_SIZE", 128 * 1024)  # many blocks between the changes of state

    def report(**options) -> dict:
        out = json.loads(render_json(analyze([str(log)], jobs=1, **options)))
        out.pop("generated_at", None)
        out.pop("timing", None)
        return out

    threaded = report(scan_threads=1)
    assert sum(used) >= 20, used  # the kinds decided ahead were taken for most blocks
    assert not all(used)  # and not where the state had changed since the block was handed over
    monkeypatch.setattr(blocks, "PREFILTER", False)
    assert threaded == report(scan_threads=0)
    assert threaded["findings"], "the incident at the end is found"


def _debug_places(n: int) -> list[str]:
    """``n`` one-line vLLM DEBUG records of the catalog with no placeholder, each at its own place, that can be
    counted once their place is learnt (no hand-written template reads them: ``Shutting down …`` is read)."""
    from specdiag.catalog import catalog
    from specdiag.engine import quiet_places
    from specdiag.events import default_matcher
    from specdiag.ingest import prefilter

    quiet = quiet_places(default_matcher())
    out, seen = [], set()
    for e in catalog().entries:
        if e.project != "vllm" or e.level != "DEBUG" or not e.fmt or "\n" in e.fmt or "%" in e.fmt:
            continue
        place = f"{e.module.rsplit('/', 1)[-1]}:{e.runs[2]}"
        line = f"(EngineCore_DP0 pid=7) DEBUG 05-06 15:56:03 [{place}] {e.fmt}"
        quiet.add(f"DEBUG {place}".encode())
        if place not in seen and prefilter.inert_kind(line.encode(), 0, quiet, b"") == prefilter.QUIET:
            seen.add(place)
            out.append(line)
    return out[:n]


def test_records_of_many_new_places_are_read_a_few_times_each_then_counted(tmp_path) -> None:
    """200 DEBUG places, each printing all through the log: once a place's first records are read, the rest
    are counted; the small first reads (``sources.FIRST_BLOCK``) keep the reading to a few records a place."""
    from test_prefilter import _quiet_count

    rng = random.Random(2)
    places = _debug_places(200)
    assert len(places) == 200
    lines = [rng.choice(places) for _ in range(60_000)]
    log = tmp_path / "places.log"
    log.write_text("\n".join(lines) + "\n")
    assert log.stat().st_size > 2 * sources.BLOCK_SIZE
    read = len(lines) - _quiet_count(log)
    assert read <= 5 * len(places), read


def test_diffusion_decoding_metrics_lines_are_counted_unread_once_their_place_is_learnt(tmp_path) -> None:
    """``DiffusionDecoding metrics: …`` holds ``metrics: ``, the literal V_SPEC needs; with V_SPEC dispatched
    on its own first words, nothing the analysis reads looks for it, and its place is learnt like any other."""
    from test_prefilter import _quiet_count

    rng = random.Random(4)
    line = ("(APIServer pid=1) INFO 05-06 08:01:35 [metrics.py:160] DiffusionDecoding metrics: Committed token "
            "throughput: {:.2f} tokens/s, Mean denoising steps per canvas: {:.2f}, Mean tokens committed per "
            "denoising step: {:.2f}, Committed: {} tokens, Denoising steps: {}, Canvas positions evaluated: {}")
    lines = [line.format(rng.random() * 99, rng.random() * 99, rng.random() * 99, n, n, n)
             for n in (rng.randrange(1, 99999) for _ in range(30_000))]
    log = tmp_path / "diffusion.log"
    log.write_text("\n".join(lines) + "\n")
    assert _quiet_count(log) >= len(lines) - 500  # the first read (64 KiB) is read line by line
