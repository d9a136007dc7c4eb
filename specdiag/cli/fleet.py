"""``specdiag fleet ROOT...``: every deployment under the roots, analysed and compared."""

from __future__ import annotations

import sys

import typer

from specdiag.cli.common import fail


def register(app: typer.Typer) -> None:
    app.command("fleet", help="Analyse many deployments (one folder per pod) and say what the affected ones share.")(
        fleet_cmd)


def fleet_cmd(
    roots: list[str] = typer.Argument(None, help="Folders with one sub-folder per pod (or merged stream files)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | markdown"),
    executor: str = typer.Option("local", "--executor", help="local (process pool) | ray"),
    ray_address: str = typer.Option(None, "--ray-address", help="Ray cluster address (default: start a local one)."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Local worker processes (0: all cores)."),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by every deployment."),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes."),
    fail_on: str = typer.Option("error", "--fail-on", help="error | warning | info | never: exit 1 at or above it."),
    from_events: str = typer.Option(None, "--from-events", help="Re-analyse an events store (specdiag events) instead."),
    html_out: str = typer.Option(None, "--html", help="Also write the heat-map page (deployments × time) to this file."),
) -> None:
    from specdiag.engine import AnalyzeOptions, ConfigError, select_rules
    from specdiag.fleet.run import run_fleet
    from specdiag.ingest import InputError
    from specdiag.report.fleet import render_fleet_json, render_fleet_markdown, render_fleet_text

    renderers = {"text": render_fleet_text, "json": render_fleet_json, "markdown": render_fleet_markdown}
    if fmt not in renderers:
        fail(f"unknown --format {fmt!r} (text, json, markdown)")
    if executor not in ("local", "ray"):
        fail(f"unknown --executor {executor!r} (local, ray)")
    if fail_on not in ("error", "warning", "info", "never"):
        fail(f"unknown --fail-on {fail_on!r} (error, warning, info, never)")
    opts = AnalyzeOptions(paths=(), lmcache_config=lmcache_config, select=tuple(select) if select else None,
                          ignore=tuple(ignore) if ignore else None, jobs=jobs)
    try:
        select_rules(opts.select, opts.ignore)
        if from_events:
            from specdiag.fleet.run import run_fleet_from_events

            report = run_fleet_from_events(from_events, opts)
        elif roots:
            report = run_fleet(list(roots), opts, executor=executor, ray_address=ray_address)
        else:
            fail("give fleet roots (folders) or --from-events DIR")
    except (InputError, ConfigError, RuntimeError, ValueError) as e:
        fail(str(e))
    sys.stdout.write(renderers[fmt](report))
    if html_out:
        from specdiag.outfile import OutputError, write_output
        from specdiag.report.fleet_html import render_fleet_html

        try:
            write_output(html_out, render_fleet_html(report))
        except OutputError as e:
            fail(str(e))
        sys.stderr.write(f"specdiag: wrote {html_out}\n")
    raise typer.Exit(report.exit_code(fail_on))
