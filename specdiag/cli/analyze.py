"""``specdiag analyze LOG...``: the diagnosis of one deployment's logs."""

from __future__ import annotations

import os
import sys

import typer

from specdiag.cli.common import EXIT_NO_RECOGNISED, exit_code_for, fail, read_inputs_or_stdin


def register(app: typer.Typer) -> None:
    app.command("analyze", help="Diagnose vLLM/LMCache logs: root causes ranked by evidence.")(analyze_cmd)


def analyze_cmd(
    paths: list[str] = typer.Argument(None, help="Log files, folders, globs or '-' for stdin.", show_default=False),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | markdown"),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by the deployment."),
    fail_on: str = typer.Option("error", "--fail-on", help="error | warning | info | never: exit 1 at or above it."),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes."),
    html: str = typer.Option(None, "--html", help="Also write a self-contained HTML report to this file."),
    redact: bool = typer.Option(False, "--redact", help="Replace prompt and completion text in every output."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every cause and all evidence lines."),
    stdin_name: str = typer.Option("-", "--stdin-name", help="Name to show for stdin in reports."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Worker processes across deployments (0: all cores)."),
) -> None:
    from specdiag.engine import ConfigError, analyze
    from specdiag.ingest import InputError

    if fmt not in ("text", "json", "markdown"):
        fail(f"unknown --format {fmt!r} (text, json, markdown)")
    if fail_on not in ("error", "warning", "info", "never"):
        fail(f"unknown --fail-on {fail_on!r} (error, warning, info, never)")
    inputs = read_inputs_or_stdin(paths)
    try:
        report = analyze(inputs, lmcache_config=lmcache_config, select=select or None, ignore=ignore or None,
                         stdin_name=stdin_name, jobs=jobs)
    except (InputError, ConfigError) as e:
        fail(str(e))
    if redact:
        from specdiag.redact import redact_report

        report = redact_report(report)
    if fmt == "json":
        from specdiag.report.json_report import render_json

        sys.stdout.write(render_json(report))
    elif fmt == "markdown":
        from specdiag.report.markdown import render_markdown

        sys.stdout.write(render_markdown(report))
    else:
        from specdiag.report.terminal import render_terminal

        render_terminal(report, verbose=verbose, color=None if not os.environ.get("NO_COLOR") else False)
    if html:
        try:
            from specdiag.report.html import write_html
        except ImportError:
            fail("the HTML report is not available in this build")
        try:
            write_html(report, html)
        except OSError as e:
            fail(f"{html}: cannot write ({e.strerror or e})")
    if report.recognized_lines == 0:
        sys.stderr.write("specdiag: no line of the input was recognised as vLLM or LMCache output\n")
        raise typer.Exit(EXIT_NO_RECOGNISED)
    raise typer.Exit(exit_code_for(report, fail_on))
