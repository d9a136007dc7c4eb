"""``specdiag events ROOT... --out DIR``: the parsed event stream of every deployment, as Parquet."""

from __future__ import annotations

import sys

import typer

from specdiag.cli.common import fail


def register(app: typer.Typer) -> None:
    app.command("events", help="Write every deployment's events, counts and series as a Parquet store.")(events_cmd)


def events_cmd(
    roots: list[str] = typer.Argument(..., help="Log folders (one sub-folder per pod) or files."),
    out: str = typer.Option(..., "--out", "-o", help="Folder of the store (created; partitions are replaced)."),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by every deployment."),
) -> None:
    from specdiag.engine import AnalyzeOptions, ConfigError
    from specdiag.fleet.run import write_events
    from specdiag.ingest import InputError

    try:
        import pyarrow  # noqa: F401
    except ImportError:
        fail("the events store needs pyarrow: pip install pyarrow")
    try:
        ids = write_events(list(roots), out, AnalyzeOptions(paths=(), lmcache_config=lmcache_config))
    except (InputError, ConfigError, OSError) as e:
        fail(str(e))
    sys.stderr.write(f"specdiag: wrote the events of {len(ids)} deployment(s) to {out}\n")
