#!/usr/bin/env python3
"""The benchmark suite of issue 9 (item 7): every shape and input path in one run, each beside grep.

    python scripts/bench.py --suite [--size-mb 200] [--stream-gb 2] [--json] [--data-dir bench-data]

Rows (each ``specdiag analyze … --format json`` beside ``grep -c LMCache`` on the same bytes, in the same
run): the TP=8 shape with ``-j 1`` and ``-j 2``, the lookup-heavy TP=1 shape with ``-j 1``, both shapes on
the pure-Python fallback (``SPECDIAG_SCANNER=python``), both shapes gzip- and zstd-compressed (``zcat`` /
``zstd -dc`` piped to grep; specdiag reads the compressed file itself), and a TP=1 stream of
``--stream-gb`` GiB from the generator through a pipe into ``specdiag analyze -``.

Why it is built this way:

* Every child is reaped with ``os.wait4`` (under GNU ``/usr/bin/time`` when installed, for an exact peak
  RSS), so a row's CPU seconds and peak RSS are that command's alone. In the stream rows the generator
  and the analyzer are separate processes reaped separately: the generator's CPU is reported, never
  charged to specdiag.
* grep's stdout is a pipe (GNU grep stops at the first match when its stdout is /dev/null).
* The generator's incident request ids come from its ``--stats-json``; a row counts as correct only if
  every one of them is named by a KV001 finding. A benchmark that silently loses the incidents is
  worse than a slow one, so that check is printed beside the speed.
* Generated files are cached in the data directory with their statistics beside them (``.stats.json``);
  a file without its statistics is regenerated.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench  # noqa: E402

GENERATOR = HERE / "gen_bench_log.py"
MIB = 2**20

#: (target id, row, what it reads, threshold, the issue's wording)
TARGETS: tuple[tuple[str, str, float, str], ...] = (
    ("tp8-j1", "mb_per_s", 600.0, "TP=8 shape: >= 600 MB/s on one core end to end (-j 1)"),
    ("tp8-j2", "mb_per_s", 1000.0, "TP=8 shape: >= 1 GB/s with -j 2"),
    ("tp1-j1", "mb_per_s", 300.0, "lookup-heavy TP=1 shape: >= 300 MB/s on one core"),
    ("tp8-python-j2", "mb_per_s", 150.0, "pure-Python fallback, TP=8 shape: >= 150 MB/s (-j 2, the default on 2 cores)"),
    ("tp1-python-j2", "mb_per_s", 150.0, "pure-Python fallback, TP=1 shape: >= 150 MB/s (-j 2, the default on 2 cores)"),
)
RSS_LIMIT_MIB = 100.0
STREAM_IDS_TARGET = 10_000_000


@dataclass
class Input:
    """One benchmark input: a cached file (maybe compressed) or a generator stream."""

    shape: str
    path: Path | None            # None: a stream from the generator
    stats: dict                  # the generator's statistics (bytes, requests, incidents, distinct ids)
    compression: str | None = None
    stream_mib: float = 0.0


@dataclass
class Row:
    """One line of the table: specdiag's figures beside grep's on the same bytes."""

    name: str
    what: str
    bytes: int = 0
    analyze: dict = field(default_factory=dict)
    grep: dict = field(default_factory=dict)
    generator: dict | None = None
    report: dict = field(default_factory=dict)
    incidents: dict = field(default_factory=dict)
    scanner: str = "?"
    note: str = ""


# ---------------------------------------------------------------------------------------------- inputs


def generated(data_dir: Path, shape: str, mib: float, seed: int, incidents: int, force: bool) -> Input:
    """The cached generated file of ``shape`` with its statistics (written by the generator itself)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"suite-{shape}-{mib:g}mib-seed{seed}-inc{incidents}.log"
    side = path.with_suffix(".stats.json")
    if force or not path.is_file() or not side.is_file():
        part = path.with_suffix(".log.part")
        argv = [sys.executable, str(GENERATOR), str(part), "--size-mb", f"{mib:g}", "--shape", shape,
                "--seed", str(seed), "--incidents", str(incidents), "--count-ids", "--stats-json", str(side)]
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        part.replace(path)
        print(f"generated {path.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return Input(shape, path, json.loads(side.read_text(encoding="utf-8")))


def _compress_cmd(kind: str) -> list[str] | None:
    if kind == "gz" and shutil.which("gzip"):
        return ["gzip", "-c", "-6"]
    if kind == "zst" and shutil.which("zstd"):
        return ["zstd", "-q", "-c", "-3"]
    return None


def compressed(src: Input, kind: str) -> tuple[Input | None, str]:
    """``src`` compressed as ``kind`` (gz or zst), cached beside it; (None, why) when no tool can."""
    assert src.path is not None
    dst = src.path.with_name(src.path.name + "." + kind)
    if dst.is_file() and dst.stat().st_mtime >= src.path.stat().st_mtime:
        return Input(src.shape, dst, src.stats, kind), ""
    part = dst.with_name(dst.name + ".part")
    cmd = _compress_cmd(kind)
    if cmd:
        with open(src.path, "rb") as fin, open(part, "wb") as fout:
            subprocess.run(cmd, stdin=fin, stdout=fout, check=True)
    elif kind == "gz":
        with open(src.path, "rb") as fin, gzip.open(part, "wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout, 8 * MIB)
    else:
        try:
            import zstandard
        except ImportError:
            return None, "skipped: neither the zstd CLI nor the python zstandard module is installed"
        with open(src.path, "rb") as fin, open(part, "wb") as fout:
            zstandard.ZstdCompressor(level=3).copy_stream(fin, fout)
    part.replace(dst)
    return Input(src.shape, dst, src.stats, kind), ""


def decompress_argv(kind: str) -> list[str]:
    """A command that writes the decompressed file to stdout, for grep's side of the row."""
    if kind == "gz":
        return ["gzip", "-dc"] if shutil.which("gzip") else [sys.executable, "-c", _PY_GUNZIP]
    if shutil.which("zstd"):
        return ["zstd", "-q", "-dc"]
    return [sys.executable, "-c", _PY_UNZSTD]


_PY_GUNZIP = "import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), sys.stdout.buffer, 1 << 23)"
_PY_UNZSTD = ("import zstandard,sys; zstandard.ZstdDecompressor().copy_stream(open(sys.argv[1], 'rb'), "
              "sys.stdout.buffer)")


# -------------------------------------------------------------------------------------------- processes


@dataclass
class Child:
    """A started child: what ``reap`` needs to report its own wall time, CPU and peak RSS."""

    popen: subprocess.Popen
    t0: float
    err: IO[bytes]
    timefile: str | None


def start(argv: list[str], *, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env: dict | None = None,
          use_time: bool = False) -> Child:
    """Start ``argv`` (under GNU time when ``use_time``, for its exact peak RSS)."""
    err = tempfile.TemporaryFile()
    timefile = None
    if use_time:
        fd, timefile = tempfile.mkstemp(prefix="bench-time-", suffix=".txt")
        os.close(fd)
        argv = [bench.GNU_TIME, "-f", "%e %U %S %M %x", "-o", timefile, *argv]
    p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=err, env=env)
    return Child(p, time.perf_counter(), err, timefile)


def reap_all(children: list[Child], timeout: float) -> list[dict]:
    """Wait for every child (in any order, so a pipeline never deadlocks); one figures dict each."""
    out: list[dict | None] = [None] * len(children)
    deadline = time.perf_counter() + timeout
    while any(r is None for r in out):
        for i, c in enumerate(children):
            if out[i] is None:
                pid, status, ru = os.wait4(c.popen.pid, os.WNOHANG)
                if pid:
                    out[i] = _figures(c, status, ru)
        if time.perf_counter() > deadline:
            for i, c in enumerate(children):
                if out[i] is None:
                    c.popen.kill()
                    _, status, ru = os.wait4(c.popen.pid, 0)
                    out[i] = dict(_figures(c, status, ru), timed_out=True)
        time.sleep(0.005)
    return [r for r in out if r is not None]


def _figures(c: Child, status: int, ru) -> dict:
    """wall / CPU / peak RSS / exit status of one reaped child, preferring GNU time's figures."""
    wall = time.perf_counter() - c.t0
    c.popen.returncode = rc = os.waitstatus_to_exitcode(status)   # keep Popen from reaping again
    cpu = ru.ru_utime + ru.ru_stime
    rss = ru.ru_maxrss * (1 if platform.system() == "Darwin" else 1024)
    source = "wait4"
    if c.timefile:
        try:
            fields = Path(c.timefile).read_text().strip().splitlines()[-1].split()
            cpu, rss, rc, source = float(fields[1]) + float(fields[2]), int(fields[3]) * 1024, int(fields[4]), "gnu-time"
        except (OSError, IndexError, ValueError):
            pass   # killed before time wrote its line: keep the wait4 figures
        finally:
            os.unlink(c.timefile)
    c.err.seek(0)
    tail = c.err.read()[-1500:].decode("utf-8", "replace")
    c.err.close()
    return {"rc": rc, "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / MIB, "rss_source": source,
            "stderr_tail": tail, "timed_out": False}


def with_rates(fig: dict, nbytes: int) -> dict:
    """Add MB/s (decimal MB over wall time) and MB per CPU-second."""
    fig = dict(fig)
    fig["mb_per_s"] = nbytes / 1e6 / fig["wall_s"] if fig.get("wall_s") else None
    fig["mb_per_cpu_s"] = nbytes / 1e6 / fig["cpu_s"] if fig.get("cpu_s") else None
    return fig


# ------------------------------------------------------------------------------------------------ rows


def analyze_argv(cmd: list[str], target: str, jobs: int) -> list[str]:
    """One core is ``-j 1``; two are ``-j 2``, which scans one input on a thread beside the reading one
    (compiled scanner) or on two worker processes (the Python fallback) by default."""
    return [*cmd, "analyze", target, "--format", "json", "-j", str(jobs)]


def grep_file(inp: Input, timeout: float, use_time: bool) -> dict:
    """``grep -c LMCache`` on the same bytes: the file itself, or its decompressor piped into grep."""
    assert inp.path is not None
    if inp.compression:
        script = f'{shlex.join(decompress_argv(inp.compression))} "$1" | grep -c LMCache'
        argv = ["sh", "-c", script, "sh", str(inp.path)]
    else:
        argv = ["grep", "-c", "LMCache", str(inp.path)]
    c = start(argv, use_time=use_time)
    count = c.popen.stdout.read()
    c.popen.stdout.close()
    fig = reap_all([c], timeout)[0]
    fig["count"] = _int(count)
    fig["argv"] = argv
    return fig


def _int(raw: bytes) -> int | None:
    try:
        return int(raw.strip() or 0)
    except ValueError:
        return None


def file_row(name: str, what: str, inp: Input, argv: list[str], env: dict, timeout: float,
             use_time: bool, scanner: str) -> Row:
    """specdiag on a file, then grep on the same bytes, in the same run."""
    assert inp.path is not None
    bench.warm(inp.path)
    row = Row(name, what, bytes=int(inp.stats["bytes"]), scanner=scanner)
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "report.json"
        with open(out, "wb") as fh:
            c = start(argv, stdout=fh, env=env, use_time=use_time)
            fig = reap_all([c], timeout)[0]
        row.report, row.incidents = digest(out, inp.stats.get("incidents", []))
    row.analyze = dict(with_rates(fig, row.bytes), argv=argv)
    row.grep = with_rates(grep_file(inp, timeout, use_time), row.bytes)
    if inp.compression:
        row.note = f"{inp.path.stat().st_size / 1e6:.1f} MB compressed; MB/s of the decompressed bytes"
    return row


def stream_pair(gen_argv: list[str], consumer: list[str], consumer_out, env: dict | None, timeout: float,
                use_time: bool) -> tuple[dict, dict, bytes]:
    """generator | consumer, two processes reaped separately; (generator, consumer, consumer stdout)."""
    gen = start(gen_argv, stdout=subprocess.PIPE, use_time=use_time)
    con = start(consumer, stdin=gen.popen.stdout, stdout=consumer_out, env=env, use_time=use_time)
    gen.popen.stdout.close()   # the consumer holds the only read end: the generator sees EPIPE if it quits
    captured = b""
    if consumer_out is subprocess.PIPE:
        captured = con.popen.stdout.read()
        con.popen.stdout.close()
    g, k = reap_all([gen, con], timeout)
    return g, k, captured


def _generator_argv(mib: float, seed: int, incidents: int, side: Path) -> list[str]:
    return [sys.executable, str(GENERATOR), "-", "--size-mb", f"{mib:g}", "--shape", "tp1", "--seed", str(seed),
            "--incidents", str(incidents), "--count-ids", "--stats-json", str(side)]


def stream_row(gib: float, seed: int, incidents: int, cmd: list[str], env: dict, timeout: float,
               use_time: bool, scanner: str, data_dir: Path | None = None) -> Row:
    """The TP=1 stream through a pipe into ``specdiag analyze -``, then the same stream into ``grep -c``.

    The feeder is the generator itself, or (``data_dir`` given) ``cat`` of the same stream generated
    once into a cached file there: the Python generator writes only ≈ 40 MB per CPU-second, which bounds
    both sides of the pipe once the analyzer is faster than that.
    """
    mib = gib * 1024
    feed = "file" if data_dir else "generator"
    row = Row("stream-tp1", f"tp1 {gib:g} GiB, {'cached file (cat)' if data_dir else 'generator'} piped into specdiag analyze - (-j 1)", scanner=scanner)
    with tempfile.TemporaryDirectory() as td:
        sides = [Path(td) / "gen.json", Path(td) / "gen2.json"]
        stats = None
        if data_dir:
            cached = generated(data_dir, "tp1", mib, seed, incidents, False)
            feeders, stats = [["cat", str(cached.path)]] * 2, cached.stats
        else:
            feeders = [_generator_argv(mib, seed, incidents, side) for side in sides]
        out = Path(td) / "report.json"
        argv = analyze_argv(cmd, "-", 1)
        with open(out, "wb") as fh:
            g, fig, _ = stream_pair(feeders[0], argv, fh, env, timeout, use_time)
        if stats is None:
            stats = json.loads(sides[0].read_text(encoding="utf-8")) if sides[0].is_file() else {"bytes": 0}
        row.bytes = int(stats.get("bytes", 0))
        row.report, row.incidents = digest(out, stats.get("incidents", []))
        g2, gfig, count = stream_pair(feeders[1], ["grep", "-c", "LMCache"], subprocess.PIPE, None, timeout, use_time)
    row.analyze = dict(with_rates(fig, row.bytes), argv=[feed, "|", *argv])
    row.grep = dict(with_rates(gfig, row.bytes), count=_int(count), argv=[feed, "|", "grep", "-c", "LMCache"])
    row.generator = {"feed": feed, "with_specdiag": with_rates(g, row.bytes), "with_grep": with_rates(g2, row.bytes),
                     "requests": stats.get("requests"), "distinct_request_ids": stats.get("distinct_request_ids")}
    who = "cat" if data_dir else "generator"
    bound = g["cpu_s"] >= 0.9 * fig["wall_s"]
    row.note = (f"{stats.get('distinct_request_ids')} distinct request ids; {who} CPU {g['cpu_s']:.1f} s "
                f"(not charged to specdiag)" + (f"; wall time bounded by the {who}" if bound else ""))
    return row


# ---------------------------------------------------------------------------------------------- checks


def digest(report: Path, expected: list[str]) -> tuple[dict, dict]:
    """Findings per rule, and which of the generator's incident ids a KV001 finding names."""
    summary = bench.summarize_report(report)
    named: set[str] = set()
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    for f in data.get("findings", []) if isinstance(data, dict) else []:
        if isinstance(f, dict) and f.get("rule") == "KV001":
            named |= _ids_named(f)
    found = [r for r in expected if r in named]
    return summary, {"expected": len(expected), "found": len(found),
                     "missing": [r for r in expected if r not in named]}


def _ids_named(finding: dict) -> set[str]:
    """Request ids a KV001 finding names: its ``request_ids``, its ``per_request`` rows, its evidence text."""
    m = finding.get("measurements") if isinstance(finding.get("measurements"), dict) else {}
    ids = {str(x) for x in m.get("request_ids") or [] if x}
    ids |= {str(p.get("request_id")) for p in m.get("per_request") or [] if isinstance(p, dict)}
    for ev in finding.get("evidence") or []:
        text = ev.get("text", "") if isinstance(ev, dict) else ""
        ids |= {w.strip("{}'\",;") for w in str(text).split() if "cmpl-" in w}
    return ids


def targets(rows: list[Row], stream_gib: float) -> list[dict]:
    """Each of the issue's done-when targets with the figure it was judged on (``met`` None: not run)."""
    by = {r.name: r for r in rows}
    out = []
    for rid, key, limit, text in TARGETS:
        r = by.get(rid)
        v = r.analyze.get(key) if r else None
        cpu = r.analyze.get("mb_per_cpu_s") if r else None
        met = None if r is None else v is not None and v >= limit and r.analyze.get("rc") in (0, 1)
        out.append({"target": text, "row": rid, "figure": v, "mb_per_cpu_s": cpu, "met": met})
    ran = [r for r in rows if r.analyze.get("peak_rss_mib") is not None]
    worst = max(ran, key=lambda r: r.analyze["peak_rss_mib"], default=None)
    out.append({"target": f"peak RSS < {RSS_LIMIT_MIB:g} MiB on every input", "row": worst.name if worst else None,
                "figure": worst.analyze["peak_rss_mib"] if worst else None,
                "met": bool(ran) and worst.analyze["peak_rss_mib"] < RSS_LIMIT_MIB})
    lost = [r.name for r in ran if r.incidents.get("found") != r.incidents.get("expected")]
    out.append({"target": "every incident reported as KV001 in every row", "row": ", ".join(lost) or None,
                "figure": len(ran) - len(lost), "met": bool(ran) and not lost})
    s = by.get("stream-tp1")
    ids = s.generator.get("distinct_request_ids") if s and s.generator else None
    note = None
    if ids is not None and 0 < stream_gib < 10:
        note = f"a {stream_gib:g} GiB stream was run: {ids / stream_gib * 10:,.0f} ids per 10 GiB at this rate"
    out.append({"target": f"stream of >= {STREAM_IDS_TARGET:,} unique request ids (10 GB)", "row": "stream-tp1",
                "figure": ids, "met": None if ids is None else ids >= STREAM_IDS_TARGET, "note": note})
    return out


# ------------------------------------------------------------------------------------------------- run


def scanner_of(cmd: list[str], env: dict) -> str:
    """``scan.IMPLEMENTATION`` as the analyzer's own interpreter sees it under ``env``."""
    code = "from specdiag.ingest import scan; print(scan.IMPLEMENTATION)"
    try:
        r = subprocess.run([bench.analyzer_python(cmd), "-c", code], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return r.stdout.strip() or "?"


def zstd_readable(cmd: list[str]) -> bool:
    """Whether the analyzer's interpreter can read .zst (the optional ``zstandard`` module)."""
    r = subprocess.run([bench.analyzer_python(cmd), "-c", "import zstandard"], capture_output=True, timeout=60)
    return r.returncode == 0


def plan_file_rows(tp8: Input, tp1: Input, cmd: list[str]) -> list[tuple[str, str, Input, list[str], str]]:
    """(name, description, input, argv, scanner env) of every file row, in table order."""
    rows = [("tp8-j1", "tp8 file, -j 1", tp8, analyze_argv(cmd, str(tp8.path), 1), ""),
            ("tp8-j2", "tp8 file, -j 2 (one scan thread)", tp8, analyze_argv(cmd, str(tp8.path), 2), ""),
            ("tp1-j1", "tp1 file, -j 1", tp1, analyze_argv(cmd, str(tp1.path), 1), ""),
            ("tp1-j2", "tp1 file, -j 2 (one scan thread)", tp1, analyze_argv(cmd, str(tp1.path), 2), ""),
            ("tp8-python", "tp8 file, -j 1, SPECDIAG_SCANNER=python", tp8, analyze_argv(cmd, str(tp8.path), 1),
             "python"),
            ("tp1-python", "tp1 file, -j 1, SPECDIAG_SCANNER=python", tp1, analyze_argv(cmd, str(tp1.path), 1),
             "python"),
            ("tp8-python-j2", "tp8 file, -j 2, SPECDIAG_SCANNER=python (scans on 2 worker processes)", tp8,
             analyze_argv(cmd, str(tp8.path), 2), "python"),
            ("tp1-python-j2", "tp1 file, -j 2, SPECDIAG_SCANNER=python (scans on 2 worker processes)", tp1,
             analyze_argv(cmd, str(tp1.path), 2), "python")]
    return rows


def compressed_rows(tp8: Input, tp1: Input, cmd: list[str]) -> tuple[list[tuple], list[Row]]:
    """The gz and zst rows of both shapes, or a skipped Row saying why a variant cannot run."""
    plan, skipped = [], []
    for kind in ("gz", "zst"):
        for src in (tp8, tp1):
            name = f"{src.shape}-{kind}"
            inp, why = compressed(src, kind)
            if inp is None or (kind == "zst" and not zstd_readable(cmd)):
                why = why or "skipped: the analyzer's Python has no zstandard module (pip install zstandard)"
                skipped.append(Row(name, f"{src.shape} .{kind}", note=why))
                continue
            assert inp.path is not None
            plan.append((name, f"{src.shape} .{kind}, -j 1", inp, analyze_argv(cmd, str(inp.path), 1), ""))
    return plan, skipped


ROW_NAMES = ("tp8-j1", "tp8-j2", "tp1-j1", "tp1-j2", "tp8-python", "tp1-python", "tp8-python-j2", "tp1-python-j2", "tp8-gz", "tp1-gz", "tp8-zst", "tp1-zst",
             "stream-tp1")


def run_file_rows(size_mib: float, data_dir: Path, cmd: list[str], only: frozenset[str], seed: int,
                  incidents: int, force: bool, timeout: float, use_time: bool) -> list[Row]:
    """Generate (or reuse) both shapes and their compressed variants; run the selected file rows."""
    tp8 = generated(data_dir, "tp8", size_mib, seed, incidents, force)
    tp1 = generated(data_dir, "tp1", size_mib, seed, incidents, force)
    plan = [p for p in plan_file_rows(tp8, tp1, cmd) if p[0] in only]
    done: list[Row] = []
    if only & {n for n in ROW_NAMES if n.endswith(("-gz", "-zst"))}:
        more, skipped = compressed_rows(tp8, tp1, cmd)
        plan += [p for p in more if p[0] in only]
        done += [r for r in skipped if r.name in only]
    scanners: dict[str, str] = {}
    for name, what, inp, argv, forced in plan:
        env = {k: v for k, v in os.environ.items() if k != "SPECDIAG_SCANNER"}
        if forced:
            env["SPECDIAG_SCANNER"] = forced
        scanner = scanners.setdefault(forced, scanner_of(cmd, env))
        print(f"running {name} …", file=sys.stderr)
        done.append(file_row(name, what, inp, argv, env, timeout, use_time, scanner))
    order = {n: i for i, n in enumerate(ROW_NAMES)}
    return sorted(done, key=lambda r: order[r.name])


def run_suite(size_mib: float, stream_gib: float, data_dir: Path, cmd: list[str], *, seed: int = 7,
              incidents: int = 5, force: bool = False, timeout: float = 1800.0,
              use_time: bool | None = None, only: tuple[str, ...] | None = None,
              stream_feed: str = "generator") -> dict:
    """Run the selected rows (``only``: row names, default all), judge the targets; one result dict."""
    if use_time is None:
        use_time = bench.has_gnu_time()
    chosen = frozenset(only or ROW_NAMES)
    load0 = list(os.getloadavg())
    commit = _commit()   # before the runs: what was measured, not what was committed meanwhile
    bytecode = bench.compile_bytecode(cmd)
    done: list[Row] = []
    if chosen - {"stream-tp1"}:
        done = run_file_rows(size_mib, data_dir, cmd, chosen, seed, incidents, force, timeout, use_time)
    if stream_gib > 0 and "stream-tp1" in chosen:
        env = {k: v for k, v in os.environ.items() if k != "SPECDIAG_SCANNER"}
        print(f"running stream-tp1 ({stream_gib:g} GiB) …", file=sys.stderr)
        done.append(stream_row(stream_gib, seed, incidents, cmd, env, timeout, use_time, scanner_of(cmd, env),
                               data_dir if stream_feed == "file" else None))
    return {"schema": "specdiag.bench-suite/1", "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit, "bytecode_compiled": bytecode, "load_average_start": load0, "load_average": list(os.getloadavg()),
            "size_mib": size_mib, "stream_gib": stream_gib, "rss_measured_by": "gnu-time" if use_time else "wait4",
            "host": {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                     "system": platform.platform()},
            "rows": [_row_dict(r) for r in done], "targets": targets(done, stream_gib)}


def _commit() -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (r.stdout.strip() + ("+dirty" if dirty else "")) or None


def _row_dict(r: Row) -> dict:
    strip = ("stderr_tail",)
    d = {"name": r.name, "what": r.what, "bytes": r.bytes, "scanner": r.scanner, "note": r.note,
         "analyze": {k: v for k, v in r.analyze.items() if k not in strip},
         "grep": {k: v for k, v in r.grep.items() if k not in strip},
         "report": r.report, "incidents": r.incidents}
    if r.analyze.get("rc") not in (0, 1, None):
        d["analyze_stderr_tail"] = r.analyze.get("stderr_tail", "")
    if r.generator is not None:
        d["generator"] = {k: ({kk: vv for kk, vv in v.items() if kk not in strip} if isinstance(v, dict) else v)
                          for k, v in r.generator.items()}
    return d


# ---------------------------------------------------------------------------------------------- output


def _f(v, fmt: str = ".1f") -> str:
    return "—" if v is None else format(v, fmt)


def _verdict(met: bool | None) -> str:
    return "not run" if met is None else "met" if met else "NOT met"


def table(result: dict) -> str:
    """The rows and targets as Markdown tables (what docs/benchmark.md records)."""
    head = ("| row | input | MB | specdiag wall s | MB/s | CPU s | MB per CPU-s | peak RSS MiB | rc | scanner "
            "| grep MB/s | grep CPU s | grep count | findings by rule | KV001 incidents | note |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        a, g = r["analyze"], r["grep"]
        inc = r["incidents"]
        found = f"{inc['found']} / {inc['expected']}" if inc else "—"
        rules = ", ".join(f"{k} {v}" for k, v in sorted((r["report"] or {}).get("by_rule", {}).items())) or "—"
        lines.append(
            f"| {r['name']} | {r['what']} | {_f(r['bytes'] / 1e6 if r['bytes'] else None)} | {_f(a.get('wall_s'), '.2f')} "
            f"| {_f(a.get('mb_per_s'))} | {_f(a.get('cpu_s'), '.2f')} | {_f(a.get('mb_per_cpu_s'))} "
            f"| {_f(a.get('peak_rss_mib'))} | {a.get('rc', '—')} | {r['scanner']} | {_f(g.get('mb_per_s'))} "
            f"| {_f(g.get('cpu_s'), '.2f')} | {g.get('count', '—')} | {rules} | {found} | {r['note']} |")
    lines += ["", "| target | figure | met |", "|---|---|---|"]
    for t in result["targets"]:
        fig = t["figure"]
        shown = _f(fig) if isinstance(fig, float) else ("—" if fig is None else f"{fig:,}")
        extra = f" ({_f(t['mb_per_cpu_s'])} MB per CPU-s)" if t.get("mb_per_cpu_s") is not None else ""
        note = f"; {t['note']}" if t.get("note") else ""
        where = f" [{t['row']}]" if t.get("row") else ""
        lines.append(f"| {t['target']} | {shown}{extra}{where}{note} | {_verdict(t['met'])} |")
    lines.append("")
    lines.append(f"{result['when']}, commit {result['commit']}, load average "
                 f"{' '.join(f'{x:.2f}' for x in result['load_average_start'])} at the start, "
                 f"{' '.join(f'{x:.2f}' for x in result['load_average'])} at the end, {result['host']['cpus']} CPUs, "
                 f"Python {result['host']['python']}; MB = 10^6 bytes; peak RSS via {result['rss_measured_by']}")
    return "\n".join(lines)


def main(args) -> int:
    """``bench.py --suite``: run it, print the Markdown table (stderr with --json) and JSON; exit 1 when an
    analyze run failed or lost an incident (a fast wrong answer is a failed benchmark)."""
    cmd = shlex.split(args.cmd) if args.cmd else [bench.default_cmd()]
    data_dir = Path(args.data_dir) if args.data_dir else bench.BENCH_DIR
    use_time = None if not args.no_gnu_time else False
    only = tuple(n.strip() for n in args.only.split(",") if n.strip()) if args.only else None
    unknown = sorted(set(only or ()) - set(ROW_NAMES))
    if unknown:
        print(f"error: --only: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROW_NAMES)}", file=sys.stderr)
        return 2
    result = run_suite(args.size_mb, args.stream_gb, data_dir, cmd, seed=args.seed, incidents=args.incidents,
                       force=args.force, timeout=args.timeout, use_time=use_time, only=only,
                       stream_feed=args.stream_feed)
    text = table(result)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(result, indent=2))
    else:
        print(text)
    failed = [r["name"] for r in result["rows"] if r["analyze"].get("rc") not in (0, 1, None)]
    lost = [r["name"] for r in result["rows"] if r["incidents"] and r["incidents"]["found"] != r["incidents"]["expected"]]
    for what, names in (("analyze failed", failed), ("incidents not reported as KV001", lost)):
        if names:
            print(f"error: {what}: {', '.join(names)}", file=sys.stderr)
    return 1 if failed or lost else 0
