"""``specdiag analyze LOG...``: the diagnosis of one deployment's logs.

Reads the same project configuration as ``check`` (``specdiag.yaml`` or ``[tool.specdiag]``; ``--config``,
``--no-config``) so that a typo in it is an error here too, not something only CI discovers. An input that
cannot be read is listed and the others are still analysed (exit 2 after the report: the diagnosis is
partial).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import typer

from specdiag.cli.common import (
    EXIT_NO_RECOGNISED,
    EXIT_OK,
    EXIT_USAGE,
    RANK_OPTION,
    REQUEST_OPTION,
    SCAN_THREADS_OPTION,
    SINCE_OPTION,
    UNTIL_OPTION,
    Progress,
    exit_code_for,
    fail,
    line_filter,
    note,
    note_filter,
    read_inputs_or_stdin,
    readable_inputs,
    render_format,
    split_list,
    write_file,
)
from specdiag.report.formats import FORMATS, draws_timeline, format_names

FORMAT_HELP = (f"{' | '.join(FORMATS)} (the same formats as 'check'; text: the full report). With -o the "
               "report goes to that file.")


def register(app: typer.Typer) -> None:
    app.command("analyze", help="Diagnose vLLM/LMCache logs: root causes ranked by evidence.")(analyze_cmd)


def _suspects(names: list[str]) -> tuple[str, ...]:
    """The ``--suspect`` names (comma lists too), each a known suspect or cause id; else a usage error."""
    from specdiag.analyzers.base import all_rules
    from specdiag.analyzers.causes import CATALOG as CAUSES
    from specdiag.report.verdict import SUSPECTS

    known = {*SUSPECTS, *CAUSES, *(c for rule in all_rules().values() for c in rule.cause_ids)}
    out = tuple(n.strip() for name in names for n in name.split(",") if n.strip())
    unknown = [n for n in out if n not in known]
    if unknown:
        fail(f"unknown --suspect {', '.join(unknown)} (settings: {', '.join(SUSPECTS)}; or a cause id, "
             "'specdiag explain')")
    return out


def _render(report, fmt: str, verbose: bool, quiet: bool, output: str | None, fail_on: str,
            brief: bool = False) -> str | None:
    """The report as text for a file or a pipe, through the format table; ``None`` when it was printed to
    the terminal directly (``text`` on stdout: Rich needs the real stream for its width and colour)."""
    if fmt == "text" and not output:
        from specdiag.report.terminal import render_terminal

        render_terminal(report, verbose=verbose, color=None if not os.environ.get("NO_COLOR") else False,
                        quiet=quiet, brief=brief)
        return None
    hint = output or "the full report (specdiag analyze --format markdown or json)"
    return render_format(fmt, report, verbose=verbose, quiet=quiet, fail_on=fail_on, summary_hint=hint,
                         brief=brief)

def analyze_cmd(
    paths: list[str] = typer.Argument(None, help="Log files, folders, globs or '-' for stdin.", show_default=False),
    fmt: str = typer.Option("text", "--format", "-f", help=FORMAT_HELP),
    output: str = typer.Option(None, "--output", "-o", help="Write the report to this file instead of stdout "
                                                            "(folders are created)."),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by the deployment."),
    fail_on: str = typer.Option(None, "--fail-on", help="error | warning | info | never: exit 1 at or above it "
                                                        "(default: from the configuration, else error).",
                                show_default=False),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes (comma list or "
                                                            "repeated)."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes (comma list or "
                                                            "repeated)."),
    config: str = typer.Option(None, "--config", help="Configuration file (specdiag.yaml or TOML); default: "
                                                      "found by walking up from the working directory."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    html: str = typer.Option(None, "--html", help="Also write a self-contained HTML report to this file."),
    redact: bool = typer.Option(False, "--redact", help="Replace prompt and completion text in every output."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every cause and reason in full and up to 40 "
                                                                "evidence lines (terminal, markdown and --html alike)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the verdict lines; no progress bar or notes."),
    brief: bool = typer.Option(False, "--brief", help="Between -q and the full report: the verdict, then each "
                               "finding's head, leading cause, fix and two evidence lines."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings reach --fail-on (usage, "
                                   "input and nothing-recognised exits 2 and 3 stay)."),
    suspect: list[str] = typer.Option(None, "--suspect", help="A setting or cause you suspect (repeatable): "
                                      "save_decode_cache, enable_async_loading, dynamic-k, chunk-size, "
                                      "pin_timeout_sec, hashing, or a cause id ('specdiag explain'); the verdict "
                                      "says whether the evidence rejects, allows or supports it."),
    stdin_name: str = typer.Option("-", "--stdin-name", help="Name to show for stdin in reports."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Worker processes across deployments (0: all cores); without the compiled scanner also the block scans of one input."),
    scan_threads: int | None = SCAN_THREADS_OPTION,
    since: str = SINCE_OPTION,
    until: str = UNTIL_OPTION,
    request: list[str] = REQUEST_OPTION,
    rank: list[int] = RANK_OPTION,
    follow: bool = typer.Option(False, "--follow", "-F", help="Follow one growing log or pipe: 'specdiag watch' "
                                "(its options: --interval, --baseline, --before, --clean-after)."),
) -> None:
    from specdiag.config import resolve
    from specdiag.engine import ConfigError, analyze
    from specdiag.ingest import InputError

    flt = line_filter(since, until, request, rank)
    if follow:
        from specdiag.cli.watch import watch_cmd

        if len(paths or ["-"]) != 1:
            fail("--follow reads one log file or '-'")
        raise typer.Exit(watch_cmd(path=(paths or ["-"])[0], lmcache_config=lmcache_config, select=select,
                                   ignore=ignore, config=config, no_config=no_config, since=since, until=until,
                                   request=request, rank=rank, stdin_name=stdin_name))
    if brief and (quiet or verbose):
        fail("--brief is a level between -q and the full report: give one of -q, --brief, -v")
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r} (one of: {format_names()})")
    try:
        cfg = resolve(config, no_config=no_config, select=split_list(select), ignore=split_list(ignore),
                      fail_on=fail_on, lmcache_config=lmcache_config)
    except ConfigError as e:
        fail(str(e))
    inputs = read_inputs_or_stdin(paths)
    good, tool_errors = readable_inputs(inputs, stdin_name)
    if not good:
        fail("; ".join(str(e["message"]) for e in tool_errors))
    try:
        with Progress(good, stdin_name, quiet=quiet) as bar:
            report = analyze(good, lmcache_config=cfg.lmcache_config, select=cfg.select, ignore=cfg.ignore or None,
                             rule_options=cfg.rule_options, severity_overrides=cfg.severity, stdin_name=stdin_name,
                             progress=bar.callback, jobs=jobs, scan_threads=scan_threads, line_filter=flt,
                             timeline=draws_timeline(fmt) or bool(html))
    except (InputError, ConfigError) as e:
        fail(str(e))
    report = report.with_tool_errors(tool_errors)
    if suspect:
        report = replace(report, suspects=_suspects(suspect))
    if redact:
        from specdiag.redact import redact_report

        report = redact_report(report)
    text = _render(report, fmt, verbose, quiet, output, cfg.fail_on, brief)
    if output:
        write_file(output, text or "", f"the {fmt} report", quiet)
    elif text is not None:
        sys.stdout.write(text)
    if html:  # --html FILE: the html format beside the one chosen by --format
        write_file(html, render_format("html", report, verbose=verbose), "the HTML report", quiet)
    if flt is not None and not quiet:
        note_filter(report.inputs)
    for e in tool_errors:
        sys.stderr.write(f"specdiag: error: {e['message']} (the report covers the other inputs)\n")
    if tool_errors:
        raise typer.Exit(EXIT_USAGE)
    if report.recognized_lines == 0:
        if not quiet:
            note("no line of the input was recognised as vLLM or LMCache output")
        raise typer.Exit(EXIT_NO_RECOGNISED)
    raise typer.Exit(EXIT_OK if exit_zero else exit_code_for(report, cfg.fail_on))
