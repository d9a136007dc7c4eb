"""``specdiag metrics LOG...``: the stats / SpecDecoding time series as a table, CSV, JSON or Parquet."""

from __future__ import annotations

import sys

import typer

from specdiag.cli.common import (
    EXIT_NO_RECOGNISED,
    EXIT_USAGE,
    Progress,
    fail,
    read_inputs_or_stdin,
    readable_inputs,
    write_file,
)

FORMATS = ("table", "csv", "json", "parquet")


def register(app: typer.Typer) -> None:
    app.command("metrics", help="Export per-interval vLLM stats and SpecDecoding metrics (table|csv|json|parquet).")(
        metrics_cmd)


def metrics_cmd(
    paths: list[str] = typer.Argument(None, help="Log files, folders, globs or '-' for stdin.", show_default=False),
    fmt: str = typer.Option("table", "--format", "-f", help="table | csv | json | parquet (parquet needs -o)."),
    output: str = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    engine: str = typer.Option(None, "--engine", help="Only the engine whose label contains this text."),
    bench: bool = typer.Option(False, "--bench", help="Export `vllm bench serve` result blocks instead (one row each)."),
    stdin_name: str = typer.Option("-", "--stdin-name", help="Name to show for stdin."),
    config: str = typer.Option(None, "--config", help="Configuration file to validate (as for 'check'); "
                                                      "default: found by walking up from the working directory."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes on stderr."),
) -> None:
    from specdiag.config import resolve
    from specdiag.engine import ConfigError

    try:  # nothing in it changes the export, but a broken configuration is an error in every command
        resolve(config, no_config=no_config)
    except ConfigError as e:
        fail(str(e))
    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r} ({', '.join(FORMATS)})")
    if fmt == "parquet" and not output:
        fail("--format parquet needs -o FILE")
    from specdiag.ingest import InputError
    from specdiag.metrics.collect import collect

    inputs, unread = readable_inputs(read_inputs_or_stdin(paths), stdin_name)
    if not inputs:
        fail("; ".join(str(e["message"]) for e in unread))
    if bench:
        _bench(inputs, fmt, output, stdin_name)
        return
    try:
        with Progress(inputs, stdin_name, quiet=quiet) as bar:
            col = collect(inputs, stdin_name=stdin_name, progress=bar.callback)
    except InputError as e:
        fail(str(e))
    engines = col.engines()
    if engine:
        engines = [(label, items) for label, items in engines if engine in label]
    from specdiag.metrics.frames import to_frame, write_frame

    df = to_frame(engines)
    if fmt == "table":
        data: str | bytes = _table(df, engines)
    else:
        import io

        buf = io.BytesIO() if fmt == "parquet" else None
        try:
            data = write_frame(df, fmt, buf) if buf is not None else write_frame(df, fmt, None)
        except ValueError as e:
            fail(str(e))
        if buf is not None:
            data = buf.getvalue()
    if output:
        write_file(output, data, f"the {fmt} export", quiet)
    else:
        sys.stdout.write(data if isinstance(data, str) else data.decode())
    for e in unread:  # the export covers the other inputs; a missing rank file is still an I/O error
        sys.stderr.write(f"specdiag: error: {e['message']} (the export covers the other inputs)\n")
    if unread:
        raise typer.Exit(EXIT_USAGE)
    if df.empty:
        sys.stderr.write("specdiag: no stats or SpecDecoding line found in the input\n")
        raise typer.Exit(EXIT_NO_RECOGNISED)


def _table(df, engines) -> str:
    from specdiag.metrics.sparkline import sparkline

    if df.empty:
        return "no stats or SpecDecoding lines\n"
    show = ["time", "engine", "running_reqs", "waiting_reqs", "kv_cache_usage", "prefix_cache_hit_rate",
            "external_prefix_cache_hit_rate", "drafted_tokens", "accepted_tokens", "draft_acceptance_rate",
            "mean_acceptance_length"]
    view = df[[c for c in show if c in df.columns]].copy()
    for c in ("kv_cache_usage", "prefix_cache_hit_rate", "external_prefix_cache_hit_rate", "draft_acceptance_rate"):
        view[c] = view[c].map(lambda x: "" if x != x else f"{x:.1%}")
    for c in ("running_reqs", "waiting_reqs", "drafted_tokens", "accepted_tokens"):
        view[c] = view[c].map(lambda x: "" if x != x else f"{int(x)}")
    view["mean_acceptance_length"] = view["mean_acceptance_length"].map(lambda x: "" if x != x else f"{x:.2f}")
    view.columns = ["time", "engine", "run", "wait", "kv", "prefix", "ext", "drafted", "accepted", "accept", "mal"]
    lines = [view.to_string(index=False), ""]
    for label, items in engines:
        acc = [iv.acceptance for iv in items]
        if any(a is not None for a in acc):
            acc_tot = sum(iv.acc or 0 for iv in items)
            dr_tot = sum(iv.dr or 0 for iv in items)
            lines.append(f"{label}: acceptance {sparkline(acc, 60, 0.0, 1.0)}  "
                         f"{acc_tot}/{dr_tot} = {acc_tot / dr_tot:.1%} over {sum(1 for a in acc if a is not None)} intervals"
                         if dr_tot else f"{label}: no drafts")
    lines.append("acceptance = Accepted/Drafted draft tokens; mal = mean acceptance length = 1 + Accepted/num_drafts")
    return "\n".join(lines) + "\n"


def _bench(inputs: list[str], fmt: str, output: str | None, stdin_name: str) -> None:
    import pandas as pd

    from specdiag.ingest import InputError
    from specdiag.metrics.bench import parse_bench_sources

    try:
        rows = parse_bench_sources(inputs, stdin_name=stdin_name)
    except InputError as e:
        fail(str(e))
    df = pd.DataFrame(rows)
    if fmt == "table":
        text = (df.T.to_string(header=False) + "\n") if len(df) else "no `vllm bench serve` result block\n"
    elif fmt == "csv":
        from specdiag.metrics.frames import csv_text

        text = csv_text(df)
    elif fmt == "json":
        text = df.to_json(orient="records", indent=1) + "\n"
    else:
        import io

        buf = io.BytesIO()
        try:
            df.to_parquet(buf, index=False)
        except ImportError:
            fail("parquet output needs pyarrow: pip install pyarrow")
        write_file(output, buf.getvalue(), "the parquet export")
        text = None
    if text is not None:
        if output:
            write_file(output, text, f"the {fmt} export")
        else:
            sys.stdout.write(text)
    if df.empty:
        raise typer.Exit(EXIT_NO_RECOGNISED)
