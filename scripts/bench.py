#!/usr/bin/env python3
"""Benchmark `specdiag analyze` throughput and peak memory against `grep -c` on the same log.

    python scripts/bench.py LOG [--cmd specdiag] [--repeat 3] [--json]
    python scripts/bench.py --generate 1024            # writes bench-data/bench-1024mb-seed7.log first
    python scripts/bench.py --generate 1024 --json > bench-data/result.json
    python scripts/bench.py --generate 256 --shape tp1   # lookup-heavy, metric-dense TP=1 shape
    python scripts/bench.py --suite --size-mb 200 --stream-gb 2 [--json]   # every row of issue 9, item 7
    python scripts/bench.py --per-template --repeat 3 [--template-mb 50] [--shape-mb 100]   # one row per template

For each tool the child process is started with `subprocess.Popen` and reaped with `os.wait4`, which
returns the resource usage of exactly that child (wall time, user+sys CPU seconds, peak RSS incl. its
own waited-for children). The file is read once beforehand so both tools see a warm page cache
(`--no-warm` to skip). MB are decimal (10^6 bytes); MiB are 2^20.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "bench-data"        # git-ignored


def default_cmd() -> str:
    venv = REPO / ".venv" / "bin" / "specdiag"
    if venv.exists():
        return str(venv)
    return shutil.which("specdiag") or "specdiag"


def analyzer_python(cmd: list[str]) -> str:
    """The interpreter beside the analyzer's entry point (a venv's ``bin/python``), else this one."""
    py = Path(cmd[0]).with_name("python") if os.sep in cmd[0] else None
    return str(py) if py and py.exists() else sys.executable


def compile_bytecode(cmd: list[str]) -> bool:
    """Write the analyzer package's bytecode, as ``pip install`` does for a wheel: an editable install run
    with ``PYTHONDONTWRITEBYTECODE=1`` (as on these machines) otherwise compiles ~70 modules from source
    on every start, ~0.15 s that no installed copy pays. True when it ran."""
    code = "import compileall, os, specdiag; compileall.compile_dir(os.path.dirname(specdiag.__file__), quiet=1)"
    try:
        r = subprocess.run([analyzer_python(cmd), "-c", code], capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def warm(path: Path) -> float:
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        while fh.read(1 << 20):
            pass
    return time.perf_counter() - t


GNU_TIME = "/usr/bin/time"


def has_gnu_time() -> bool:
    if not os.access(GNU_TIME, os.X_OK):
        return False
    try:
        r = subprocess.run([GNU_TIME, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return "GNU" in (r.stdout + r.stderr)


def measure(argv: list[str], stdout_path: Path | None, timeout: float, use_time: bool) -> dict:
    """Run argv once; return wall/cpu/peak-RSS of that child and its exit status.

    With GNU time the numbers come from `/usr/bin/time -f` (accurate peak RSS of the command itself).
    Without it they come from os.wait4 on the child; then peak RSS cannot be lower than this
    script's own RSS at fork time (Linux carries the pre-exec high-water mark over) -- see
    `rss_floor_bytes` in the output.
    """
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    err = tempfile.TemporaryFile()
    tfile = tempfile.NamedTemporaryFile(prefix="bench-time-", suffix=".txt", delete=False)
    tfile.close()
    full = [GNU_TIME, "-f", "%e %U %S %M %x", "-o", tfile.name, *argv] if use_time else argv
    try:
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except FileNotFoundError as e:
            return {"argv": argv, "error": f"cannot start: {e}", "rc": None}
        deadline = t0 + timeout
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)   # keep Popen from reaping again
        err.seek(0)
        tail = err.read()[-2000:].decode("utf-8", "replace")
        cpu = ru.ru_utime + ru.ru_stime
        # ru_maxrss is KiB on Linux, bytes on macOS
        rss = ru.ru_maxrss * (1 if platform.system() == "Darwin" else 1024)
        source = "wait4"
        rc = p.returncode
        if use_time:
            try:
                fields = Path(tfile.name).read_text().strip().splitlines()[-1].split()
                _, user, sys_, maxkb, xrc = fields[:5]
                cpu, rss, rc, source = float(user) + float(sys_), int(maxkb) * 1024, int(xrc), "gnu-time"
            except (OSError, IndexError, ValueError):
                pass   # command killed / time output missing: keep the wait4 figures
    finally:
        if stdout_path:
            out.close()
        err.close()
        os.unlink(tfile.name)
    return {
        "argv": argv,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_bytes": rss,
        "rss_source": source,
        "stderr_tail": tail,
    }


def best_of(argv: list[str], repeat: int, stdout_path: Path | None, timeout: float, use_time: bool) -> dict:
    runs = [measure(argv, stdout_path, timeout, use_time) for _ in range(max(1, repeat))]
    ok = [r for r in runs if "wall_s" in r]
    if not ok:
        return runs[0]
    best = min(ok, key=lambda r: r["wall_s"])
    best = dict(best)
    best["runs_wall_s"] = [round(r["wall_s"], 3) for r in ok]
    best["peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in ok)
    return best


def summarize_report(path: Path) -> dict:
    """Small digest of the analyzer's JSON output (findings per rule) without trusting its shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return {"valid_json": False, "error": str(e)[:200]}
    rules: dict[str, int] = {}
    findings = data.get("findings", []) if isinstance(data, dict) else []
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, dict):
            code = str(f.get("rule") or f.get("code") or "?")
            rules[code] = rules.get(code, 0) + 1
    return {"valid_json": True, "findings": sum(rules.values()), "by_rule": rules}


def generate(mb: float, seed: int, incidents: int, force: bool, shape: str = "tp8",
             kubectl_from: float | None = None) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_bench_log

    BENCH_DIR.mkdir(exist_ok=True)
    tag = "" if shape == "tp8" else f"-{shape}" + ("" if kubectl_from is None else f"-kubectl{kubectl_from:g}")
    path = BENCH_DIR / f"bench-{mb:g}mb{tag}-seed{seed}.log"
    if path.exists() and not force:
        print(f"reusing {path} (use --force to regenerate)", file=sys.stderr)
        return path
    t = time.perf_counter()
    tmp = path.with_suffix(".log.part")
    with open(tmp, "wb", buffering=8 << 20) as fh:
        if shape == "tp1":
            st = gen_bench_log.generate_tp1(fh, int(mb * 2**20), seed, incidents, kubectl_from)
        else:
            st = gen_bench_log.generate(fh, int(mb * 2**20), seed, incidents)
    tmp.replace(path)
    print(f"generated {path}: {st['bytes'] / 2**20:.1f} MiB, {st['requests']} requests in "
          f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def row(name: str, r: dict, size: int) -> str:
    if "wall_s" not in r:
        return f"{name:<34} {'—':>8} {'—':>9} {'—':>8} {'—':>9} {'—':>12} {'—':>4}  {r.get('error', '')}"
    mbps = size / 1e6 / r["wall_s"] if r["wall_s"] else float("inf")
    cpu_mbps = size / 1e6 / r["cpu_s"] if r["cpu_s"] else float("inf")
    return (f"{name:<34} {r['wall_s']:8.2f} {mbps:9.1f} {r['cpu_s']:8.2f} {cpu_mbps:9.1f} "
            f"{r['peak_rss_bytes'] / 2**20:12.1f} {r['rc']!s:>4}")


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - predates the 60-statement limit (pyproject); argument parsing and the run in one main
    ap = argparse.ArgumentParser(description="specdiag analyze throughput / peak RSS vs grep -c")
    ap.add_argument("log", nargs="?", type=Path, help="log file (omit with --generate)")
    ap.add_argument("--cmd", default=None, help="analyzer command (default: .venv/bin/specdiag or specdiag on PATH)")
    ap.add_argument("--generate", type=float, metavar="MB", help="first generate a MiB-sized log in bench-data/")
    ap.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    ap.add_argument("--incidents", type=int, default=5, help="shortfall incidents in the generated log")
    ap.add_argument("--shape", choices=("tp8", "tp1"), default="tp8",
                    help="generated shape: tp8 (busy TP=8 server) or tp1 (lookup-heavy, metric-dense TP=1)")
    ap.add_argument("--kubectl-from", type=float, default=None, metavar="FRACTION",
                    help="tp1: lines after this fraction of the file carry kubectl --timestamps")
    ap.add_argument("--force", action="store_true", help="regenerate even if the file exists")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool; best wall time is reported")
    ap.add_argument("--timeout", type=float, default=1800.0, help="per-run limit in seconds")
    ap.add_argument("--no-warm", action="store_true", help="do not pre-read the file into the page cache")
    ap.add_argument("--no-grep", action="store_true", help="skip the grep -c comparison")
    ap.add_argument("--no-analyze", action="store_true", help="skip specdiag (e.g. to time grep alone)")
    ap.add_argument("--no-gnu-time", action="store_true", help="measure with os.wait4 even if /usr/bin/time exists")
    ap.add_argument("--json", action="store_true", help="print a JSON object instead of the table")
    ap.add_argument("--suite", action="store_true",
                    help="run the whole suite of issue 9 (both shapes, -j 1/-j 2, Python fallback, gz, zst, a "
                         "stream) beside grep; see scripts/bench_suite.py")
    ap.add_argument("--size-mb", type=float, default=200.0, help="--suite: MiB per generated file (default 200)")
    ap.add_argument("--stream-gb", type=float, default=2.0, help="--suite: GiB streamed through a pipe (0: none)")
    ap.add_argument("--data-dir", default=None, help="--suite: where generated files are cached (bench-data/)")
    ap.add_argument("--stream-feed", choices=("generator", "file"), default="generator",
                    help="--suite: feed the stream from the generator (default) or from the same stream "
                         "generated once into --data-dir and read by cat (beyond the generator's ~40 MB/s)")
    ap.add_argument("--only", default=None, metavar="ROWS",
                    help="--suite: comma-separated row names to run (default all; e.g. stream-tp1)")
    ap.add_argument("--per-template", action="store_true",
                    help="one row per high-volume template (a log where it is ~90 %% of the lines), a foreign-noise "
                         "row and the TP=8 / TP=1 shapes, each beside grep -c; see scripts/bench_templates.py")
    ap.add_argument("--templates", default=None, metavar="NAMES",
                    help="--per-template: only the templates whose name contains one of these (comma-separated)")
    ap.add_argument("--template-mb", type=float, default=50.0, help="--per-template: MiB per template log (50)")
    ap.add_argument("--shape-mb", type=float, default=100.0, help="--per-template: MiB of the TP shapes (0: none)")
    ap.add_argument("--no-noise", action="store_true", help="--per-template: skip the foreign-noise row")
    ap.add_argument("--no-wrappers", action="store_true",
                    help="--per-template: skip the TP=1 shape as collectors wrap it (no colour, kubectl --prefix, "
                         "journald, docker json-file)")
    ap.add_argument("--keep", action="store_true", help="--per-template: keep the generated logs")
    args = ap.parse_args(argv)
    if args.per_template:
        import bench_templates

        return bench_templates.main(args)
    if args.suite:
        import bench_suite

        return bench_suite.main(args)

    if args.generate:
        log = generate(args.generate, args.seed, args.incidents, args.force, args.shape, args.kubectl_from)
        if args.log and args.log != log:
            print(f"note: --generate given, benchmarking {log} instead of {args.log}", file=sys.stderr)
    elif args.log:
        log = args.log
    else:
        ap.error("give LOG or --generate MB")
    if not log.is_file():
        print(f"error: {log}: no such file", file=sys.stderr)
        return 2
    size = log.stat().st_size
    warm_s = None if args.no_warm else warm(log)

    use_time = not args.no_gnu_time and has_gnu_time()
    floor = None
    if not use_time:
        floor = measure(["true"], None, 30, False).get("peak_rss_bytes")
    cmd = shlex.split(args.cmd) if args.cmd else [default_cmd()]
    analyze_argv = cmd + ["analyze", str(log), "--format", "json"]
    res_an: dict = {"argv": analyze_argv, "error": "skipped (--no-analyze)", "rc": 0}
    digest: dict = {}
    bytecode = None
    if not args.no_analyze:
        bytecode = compile_bytecode(cmd)
        with tempfile.TemporaryDirectory() as td:
            out_json = Path(td) / "report.json"
            res_an = best_of(analyze_argv, args.repeat, out_json, args.timeout, use_time)
            digest = summarize_report(out_json) if "wall_s" in res_an else {}
    res_grep = None
    if not args.no_grep:
        # stdout must be a real file: GNU grep stops at the first match when stdout is /dev/null
        with tempfile.TemporaryDirectory() as td:
            gout = Path(td) / "grep.out"
            res_grep = best_of(["grep", "-c", "LMCache", str(log)], args.repeat, gout, args.timeout, use_time)
            try:
                res_grep["count"] = int(gout.read_text().strip() or 0)
            except (OSError, ValueError):
                res_grep["count"] = None

    def pack(r: dict | None) -> dict | None:
        if r is None:
            return None
        d = {k: v for k, v in r.items() if k != "stderr_tail"}
        if "wall_s" in r:
            d["mb_per_s"] = size / 1e6 / r["wall_s"] if r["wall_s"] else None
            d["mb_per_cpu_s"] = size / 1e6 / r["cpu_s"] if r["cpu_s"] else None
            d["peak_rss_mib"] = r["peak_rss_bytes"] / 2**20
        return d

    result = {
        "file": str(log),
        "bytes": size,
        "mib": size / 2**20,
        "warm_read_s": warm_s,
        "bytecode_compiled": bytecode,
        "rss_measured_by": "gnu-time" if use_time else "wait4",
        "rss_floor_bytes": floor,
        "host": {"python": platform.python_version(), "machine": platform.machine(),
                 "cpus": os.cpu_count(), "system": platform.platform()},
        "analyze": pack(res_an),
        "analyze_report": digest,
        "grep": pack(res_grep),
    }
    if res_an.get("rc") not in (0, 1):
        result["analyze_stderr_tail"] = res_an.get("stderr_tail", "")

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"file: {log}  {size / 2**20:.1f} MiB ({size} bytes)"
              + (f", warm read {warm_s:.2f} s" if warm_s is not None else ""))
        print(f"{'tool':<34} {'wall s':>8} {'MB/s':>9} {'CPU s':>8} {'MB/CPU-s':>9} {'peak RSS MiB':>12} {'rc':>4}")
        print(row("specdiag analyze --format json", res_an, size))
        if res_grep is not None:
            print(row("grep -c LMCache", res_grep, size) + f"  count={res_grep.get('count')}")
        if digest:
            print(f"analyze report: {json.dumps(digest)}")
        how = "/usr/bin/time" if use_time else f"os.wait4 (floor {floor / 2**20:.1f} MiB = this script's RSS)"
        print(f"MB = 10^6 bytes; best of {max(1, args.repeat)} run(s); peak RSS via {how}")
        if res_an.get("rc") not in (0, 1):
            print(f"analyze exited with {res_an.get('rc')}; stderr tail:\n{res_an.get('stderr_tail', '')}")
    return 0 if res_an.get("rc") in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
