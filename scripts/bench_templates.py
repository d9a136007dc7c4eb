#!/usr/bin/env python3
"""Per-template rows: ``specdiag analyze -j 1`` on a log where one high-volume message dominates, beside grep.

    python scripts/bench.py --per-template [--template-mb 50] [--templates L1,S1] [--shape-mb 100] [--json]

Why: the goal is every line at grep-class speed, and a mixed log can hide a slow template behind fast
ones. Each row generates (``gen_template_logs.generate_template``) a log where one template the catalog
rule selects is ≈90 % of the lines, runs ``specdiag analyze FILE --format json -j 1`` and ``grep -c
LMCache FILE`` alternately ``--repeat`` times on the same warm file (so both see the same neighbours on
a shared machine), reports min / median MB/s, the median wall-time ratio to grep and the highest peak
RSS, then deletes the file (disk is limited; ``--keep`` keeps them). A foreign-noise row (lines no
template reads, around one incident that must still be found) and the TP=8 / TP=1 shapes give the
references the targets are judged against. The TP=1 shape is measured again as collectors hand a log over
(without colour, ``kubectl logs --prefix``, journald, docker's json-file; ``--no-wrappers`` skips them).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench  # noqa: E402
import bench_suite  # noqa: E402
import gen_template_logs as gtl  # noqa: E402

#: the targets of the work (grep-relative ones are on median wall time)
TEMPLATE_MBPS = 200.0
NOISE_X_GREP = 3.0
MIXED_X_GREP = 6.0
TP8_X_GREP = 2.5


def measure(name: str, what: str, inp: bench_suite.Input, cmd: list[str], repeat: int, timeout: float,
            use_time: bool) -> dict:
    """``repeat`` alternating analyze / grep runs on one file; min and median of each, one dict."""
    argv = bench_suite.analyze_argv(cmd, str(inp.path), 1)
    env = {k: v for k, v in os.environ.items() if k != "SPECDIAG_SCANNER"}
    rows = [bench_suite.file_row(name, what, inp, argv, env, timeout, use_time, "")
            for _ in range(max(1, repeat))]
    an = [r.analyze for r in rows]
    gr = [r.grep for r in rows]
    a_wall = statistics.median(a["wall_s"] for a in an)
    g_wall = statistics.median(g["wall_s"] for g in gr)
    return {
        "name": name, "what": what, "bytes": rows[0].bytes, "runs": len(rows),
        "mb_per_s_min": min(a["mb_per_s"] for a in an), "mb_per_s_median": statistics.median(a["mb_per_s"] for a in an),
        "mb_per_cpu_s_median": statistics.median(a["mb_per_cpu_s"] for a in an),
        "wall_s": [round(a["wall_s"], 3) for a in an], "peak_rss_mib": max(a["peak_rss_mib"] for a in an),
        "rc": sorted({a["rc"] for a in an}), "grep_mb_per_s_median": statistics.median(g["mb_per_s"] for g in gr),
        "grep_wall_s": [round(g["wall_s"], 3) for g in gr], "grep_count": gr[0].get("count"),
        "x_grep": a_wall / g_wall if g_wall else None, "report": rows[-1].report, "incidents": rows[-1].incidents,
    }


def scanner_path(spec: gtl.Spec) -> str:
    """Whether the compiled scanner's grammar takes this template's lines as hot (counted) or rare."""
    from specdiag.ingest.scan import scan_block_py

    res = scan_block_py("".join(gtl.dominant_lines(spec, 8)).encode(), 0)
    hot = sum(res.counts.values())
    return "hot" if hot == 8 else "rare" if hot == 0 else f"hot {hot}/8"


def template_rows(specs: list[gtl.Spec], mib: float, data_dir: Path, cmd: list[str], repeat: int, timeout: float,
                  use_time: bool, keep: bool) -> list[dict]:
    """One row per spec: generate its log, measure it, delete it."""
    out = []
    for spec in specs:
        path = data_dir / f"tmpl-{spec.name.replace(':', '-')}-{mib:g}mib.log"
        with open(path, "wb", buffering=8 << 20) as fh:
            st = gtl.generate_template(fh, spec, int(mib * 2**20))
        print(f"running {spec.name} …", file=sys.stderr)
        try:
            row = measure(spec.name, spec.fmt[:60], bench_suite.Input("template", path, st), cmd, repeat, timeout,
                          use_time)
        finally:
            if not keep:
                path.unlink()
        row.update(project=spec.project, level=spec.level, location=f"{spec.module}:{spec.line}",
                   release=spec.release, why=spec.why, scanner=scanner_path(spec),
                   share=st["dominant_lines"] / max(1, st["dominant_lines"] + st["other_lines"]))
        out.append(row)
    return out


def noise_row(mib: float, data_dir: Path, cmd: list[str], repeat: int, timeout: float, use_time: bool,
              keep: bool) -> dict:
    """The foreign-noise log: its speed beside grep, and whether its one incident is still reported."""
    path = data_dir / f"noise-{mib:g}mib.log"
    with open(path, "wb", buffering=8 << 20) as fh:
        st = gtl.generate_noise(fh, int(mib * 2**20))
    print("running noise …", file=sys.stderr)
    try:
        return measure("noise", "NCCL, app logger, vLLM DEBUG, other routes, warnings; 1 shortfall",
                       bench_suite.Input("noise", path, st), cmd, repeat, timeout, use_time)
    finally:
        if not keep:
            path.unlink()


def shape_rows(mib: float, data_dir: Path, cmd: list[str], repeat: int, timeout: float, use_time: bool,
               keep: bool) -> list[dict]:
    """The suite's TP=8 and TP=1 shapes at ``mib`` MiB, measured the same way, for reference."""
    rows = []
    for shape in ("tp8", "tp1"):
        inp = bench_suite.generated(data_dir, shape, mib, 7, 5, False)
        print(f"running {shape} …", file=sys.stderr)
        try:
            rows.append(measure(shape, f"{shape} shape (5 incidents)", inp, cmd, repeat, timeout, use_time))
        finally:
            if not keep and inp.path is not None:
                inp.path.unlink()
                inp.path.with_suffix(".stats.json").unlink(missing_ok=True)
    return rows


#: how collectors hand a server's log over: colour gone (a file, not a terminal), ``kubectl logs --prefix``,
#: ``journalctl`` (short format), docker's json-file; each applied to every line of the TP=1 shape
_ESC = re.compile(r"\x1b\[[0-9;]*m")


def _plain(line: str, i: int) -> str:
    return _ESC.sub("", line)


def _pod(line: str, i: int) -> str:
    return "[pod/vllm-0/vllm] " + line


def _journald(line: str, i: int) -> str:
    return f"May  6 {i // 3_600_000 % 24:02d}:{i // 60_000 % 60:02d}:{i // 1000 % 60:02d} gpu-node-3 vllm[4242]: {line}"


def _docker(line: str, i: int) -> str:
    text = json.dumps(line + "\n", ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):  # as Go's encoder writes them
        text = text.replace(char, escaped)
    return f'{{"log":{text},"stream":"stdout","time":"2026-05-06T08:{i // 60_000 % 60:02d}:' \
           f'{i // 1000 % 60:02d}.{i % 1000:03d}000000Z"}}'


WRAPPERS = {"tp1-plain": ("TP=1 shape without colour", _plain), "tp1-kubectl-prefix": ("TP=1 shape, kubectl --prefix", _pod),
            "tp1-journald": ("TP=1 shape, journald short", _journald), "tp1-docker-json": ("TP=1 shape, docker json-file", _docker)}


def wrapper_rows(mib: float, data_dir: Path, cmd: list[str], repeat: int, timeout: float, use_time: bool,
                 keep: bool) -> list[dict]:
    """The TP=1 shape as each collector in :data:`WRAPPERS` hands it over (same lines, same incidents)."""
    src = bench_suite.generated(data_dir, "tp1", mib, 7, 5, False)
    rows = []
    for name, (what, wrap) in WRAPPERS.items():
        path = data_dir / f"{name}-{mib:g}mib.log"
        with open(src.path, encoding="utf-8", errors="surrogateescape") as fin, \
                open(path, "w", encoding="utf-8", errors="surrogateescape") as fout:
            fout.writelines(wrap(line.rstrip("\n"), i) + "\n" for i, line in enumerate(fin))
        print(f"running {name} …", file=sys.stderr)
        try:
            stats = dict(src.stats, bytes=path.stat().st_size)  # the same incidents, in more bytes
            rows.append(measure(name, what, bench_suite.Input("tp1", path, stats), cmd, repeat, timeout, use_time))
        finally:
            if not keep:
                path.unlink()
    return rows


def _f(v: float | None, fmt: str = ",.0f") -> str:
    return "—" if v is None else format(v, fmt)


def table(result: dict) -> str:
    """The rows as Markdown: per template, then noise and shapes, then the targets' verdicts."""
    head = ("| template | level | project, location (release) | scanner | MB | MB/s min / median | grep MB/s "
            "| × grep (median wall) | peak RSS MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["templates"]:
        lines.append(f"| `{r['name']}` {r['what'][:40]!r} | {r['level']} | {r['project']} {r['location']} "
                     f"({r['release']}) | {r['scanner']} | {r['bytes'] / 1e6:.1f} | {_f(r['mb_per_s_min'])} / "
                     f"{_f(r['mb_per_s_median'])} | {_f(r['grep_mb_per_s_median'])} | {_f(r['x_grep'], '.1f')} "
                     f"| {r['peak_rss_mib']:.1f} |")
    lines += ["", "| row | MB | MB/s min / median | grep MB/s | × grep (median wall) | peak RSS MiB | KV001 incidents |",
              "|---|---|---|---|---|---|---|"]
    for r in result["references"]:
        inc = r["incidents"]
        lines.append(f"| {r['name']} | {r['bytes'] / 1e6:.1f} | {_f(r['mb_per_s_min'])} / {_f(r['mb_per_s_median'])} "
                     f"| {_f(r['grep_mb_per_s_median'])} | {_f(r['x_grep'], '.1f')} | {r['peak_rss_mib']:.1f} "
                     f"| {inc.get('found')} / {inc.get('expected')} |")
    lines += ["", "| target | figure | met |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['figure']} | {'met' if t['met'] else 'NOT met'} |" for t in result["targets"]]
    return "\n".join(lines)


def targets(result: dict) -> list[dict]:
    """Each target of the work with the figure it is judged on."""
    refs = {r["name"]: r for r in result["references"]}
    slow = [r for r in result["templates"] if r["mb_per_s_median"] < TEMPLATE_MBPS]
    out = [{"target": f"each high-volume template >= {TEMPLATE_MBPS:g} MB/s at -j 1 (median)",
            "figure": f"{len(result['templates']) - len(slow)} of {len(result['templates'])}; below: "
                      + (", ".join(f"{r['name']} {r['mb_per_s_median']:.0f}" for r in slow) or "none"),
            "met": not slow}]
    for name, limit, text in (("noise", NOISE_X_GREP, "lines no template matches (noise row)"),
                              ("tp1", MIXED_X_GREP, "mixed log (TP=1 shape)"), ("tp8", TP8_X_GREP, "TP=8 shape")):
        r = refs.get(name)
        if r is not None:
            out.append({"target": f"{text} <= {limit:g}x grep's time", "figure": f"{r['x_grep']:.1f}x",
                        "met": r["x_grep"] <= limit})
    return out


def main(args) -> int:
    """``bench.py --per-template``: run the rows, print the tables (stderr with --json) and JSON."""
    cmd = shlex.split(args.cmd) if args.cmd else [bench.default_cmd()]
    data_dir = Path(args.data_dir) if args.data_dir else bench.BENCH_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    use_time = bench.has_gnu_time() and not args.no_gnu_time
    specs = list(gtl.iter_specs(args.templates))
    repeat = max(1, args.repeat)

    load0 = list(os.getloadavg())
    commit = bench_suite._commit()
    bytecode = bench.compile_bytecode(cmd)
    t = time.perf_counter()
    rows = template_rows(specs, args.template_mb, data_dir, cmd, repeat, args.timeout, use_time, args.keep)
    refs = [] if args.no_noise else [noise_row(args.template_mb, data_dir, cmd, repeat, args.timeout, use_time,
                                               args.keep)]
    if args.shape_mb > 0:
        refs += shape_rows(args.shape_mb, data_dir, cmd, repeat, args.timeout, use_time, args.keep)
    if args.shape_mb > 0 and not args.no_wrappers:
        refs += wrapper_rows(args.shape_mb, data_dir, cmd, repeat, args.timeout, use_time, args.keep)
    result = {"schema": "specdiag.bench-templates/1", "commit": commit, "bytecode_compiled": bytecode,
              "load_average_start": load0, "load_average": list(os.getloadavg()), "cpus": os.cpu_count(),
              "seconds": round(time.perf_counter() - t, 1), "repeat": repeat, "templates": rows, "references": refs}
    result["targets"] = targets(result)
    text = table(result)
    print(text, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result, indent=1))
    bad = [r["name"] for r in rows + refs if any(rc not in (0, 1) for rc in r["rc"])]
    lost = [r["name"] for r in refs if r["incidents"].get("found") != r["incidents"].get("expected")]
    for what, names in (("analyze failed", bad), ("incidents not reported as KV001", lost)):
        if names:
            print(f"error: {what}: {', '.join(names)}", file=sys.stderr)
    return 1 if bad or lost else 0
