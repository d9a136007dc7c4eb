"""``specdiag check LOG...``: the analyze engine tuned for CI — no colour, no pager, deterministic order,
several output formats at once, project configuration, baselines, and the report contract's exit codes.

Exit codes: 0 nothing at or above ``--fail-on`` (after the baseline) · 1 findings at or above it · 2 usage,
configuration or I/O error (an unreadable input still gets reported in every format first) · 3 no line of
any input was recognised as vLLM or LMCache output. ``--exit-zero`` turns 1 into 0 (2 and 3 stay).
"""

from __future__ import annotations

import os
import sys

import typer

from specdiag.cli.common import (
    EXIT_NO_RECOGNISED,
    EXIT_OK,
    EXIT_USAGE,
    SCAN_THREADS_OPTION,
    Progress,
    exit_code_for,
    fail,
    note,
    read_inputs_or_stdin,
    readable_inputs,
    render_format,
    split_list,
    write_file,
)
from specdiag.report.formats import FORMATS as RENDERERS
from specdiag.report.formats import draws_timeline, format_names

#: the table's formats, plus ``auto`` (an alias this command resolves: lines, and github annotations on Actions)
FORMATS = (*RENDERERS, "auto")
STRUCTURED = tuple(n for n, r in RENDERERS.items() if r.structured)  # machine-readable: alone on stdout, or to a file
FORMAT_HELP = (f"Output format, repeatable: {' | '.join(FORMATS)}; FORMAT:PATH writes to a file (e.g. "
               "sarif:specdiag.sarif), otherwise stdout. 'text' is the analyze report without colour plus the gate "
               "line; 'lines' one line per finding; 'auto' is lines, plus GitHub annotations when "
               "GITHUB_ACTIONS=true. Default: lines.")


def register(app: typer.Typer) -> None:
    app.command("check", help="CI gate: analyse logs, emit CI formats, exit non-zero on findings.")(check_cmd)


def parse_formats(specs: list[str] | None) -> list[tuple[str, str | None]]:
    """``["github", "sarif:out.sarif"]`` → ``[("github", None), ("sarif", "out.sarif")]``."""
    out: list[tuple[str, str | None]] = []
    seen_paths: set[str] = set()
    for spec in specs or ["lines"]:
        name, sep, path = spec.partition(":")
        name = name.strip().lower()
        if name not in FORMATS:
            fail(f"unknown --format {name!r} (one of: {format_names()}, auto)")
        if sep and not path:
            fail(f"--format {spec!r}: missing file name after ':'")
        if name == "auto":
            if path:
                fail("--format auto writes to stdout; give a concrete format for a file")
            out.append(("lines", None))
            if os.environ.get("GITHUB_ACTIONS") == "true":
                out.append(("github", None))
            continue
        if path:
            key = os.path.abspath(path)
            if key in seen_paths:
                fail(f"--format: {path} is named twice")
            seen_paths.add(key)
        out.append((name, path or None))
    out = list(dict.fromkeys(out))  # 'auto' plus 'github' must not annotate twice
    on_stdout = [n for n, p in out if p is None]
    structured = [n for n in on_stdout if n in STRUCTURED]
    if structured and len(on_stdout) > 1:
        fail(f"--format {structured[0]} on stdout cannot be mixed with other stdout formats "
             f"({', '.join(on_stdout)}); write it to a file: --format {structured[0]}:PATH")
    return out


def _render(name: str, report, fail_on: str, summary_hint: str) -> str:
    """One output through the format table, as ``analyze`` renders it; ``gate``: ``text`` ends with the gate line."""
    return render_format(name, report, fail_on=fail_on, summary_hint=summary_hint, gate=True)


def write_step_summary(markdown_for, path: str) -> str | None:
    """Append the summary to ``$GITHUB_STEP_SUMMARY`` within the 1 MiB per-step limit (minus what the step
    already wrote). ``markdown_for(max_bytes)`` renders it. Returns an error message or None."""
    from specdiag.report.markdown import STEP_SUMMARY_LIMIT

    try:
        existing = os.path.getsize(path) if os.path.exists(path) else 0
        budget = STEP_SUMMARY_LIMIT - existing
        if budget < 2048:
            return f"{path}: the step summary already uses {existing:,} bytes; nothing added"
        text = markdown_for(budget - 1)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as e:
        return f"{path}: cannot write the step summary ({e.strerror or e})"
    return None


def check_cmd(  # noqa: PLR0915 - predates the 60-statement limit (pyproject): options, baseline, analysis and outputs in one command; to be split
    paths: list[str] = typer.Argument(None, help="Log files, folders, globs or '-' for stdin.", show_default=False),
    formats: list[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP, show_default=False),
    fail_on: str = typer.Option(None, "--fail-on", help="error | warning | info | never: exit 1 at or above it "
                                                        "(default: from the configuration, else error).",
                                show_default=False),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings reach --fail-on "
                                                              "(report-only jobs); errors still exit 2."),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes, comma list or "
                                                            "repeated (replaces the configuration's select)."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes, comma list or "
                                                            "repeated (replaces the configuration's ignore)."),
    severity: list[str] = typer.Option(None, "--severity", help="Override a rule's severity: CODE=LEVEL "
                                                                "(code or prefix), repeatable."),
    config: str = typer.Option(None, "--config", help="Configuration file (specdiag.yaml or a TOML file); "
                                                      "default: found by walking up from the working directory."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    baseline: str = typer.Option(None, "--baseline", help="Suppress findings whose fingerprint is in this file."),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Write every current finding to the "
                                                                          "baseline file, then check against it."),
    summary: bool = typer.Option(False, "--summary", help="Append a Markdown summary to $GITHUB_STEP_SUMMARY "
                                                          "(within GitHub's 1 MiB limit)."),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by the deployment."),
    stdin_name: str = typer.Option("-", "--stdin-name", help="Path to show for stdin in annotations."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Worker processes across deployments (0: all cores); without the compiled scanner also the block scans of one input."),
    scan_threads: int | None = SCAN_THREADS_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, status line or notes on stderr "
                                                            "(errors still)."),
) -> None:
    from specdiag.baseline import BaselineError, apply_baseline, load_baseline, write_baseline
    from specdiag.config import resolve
    from specdiag.engine import ConfigError, analyze
    from specdiag.ingest import InputError
    from specdiag.report.model import Report

    outputs = parse_formats(formats)
    try:
        cfg = resolve(config, no_config=no_config, select=split_list(select), ignore=split_list(ignore),
                      fail_on=fail_on, baseline=baseline, lmcache_config=lmcache_config, severity=severity or None,
                      gate=True)
    except ConfigError as e:
        fail(str(e))
    if update_baseline and not cfg.baseline:
        fail("--update-baseline needs a baseline file: --baseline FILE or 'baseline' in the configuration")
    inputs = read_inputs_or_stdin(paths)
    good, tool_errors = readable_inputs(inputs, stdin_name)

    report = None
    if good:
        try:
            with Progress(good, stdin_name, quiet=quiet) as bar:
                report = analyze(good, lmcache_config=cfg.lmcache_config, select=cfg.select,
                                 ignore=cfg.ignore or None, rule_options=cfg.rule_options,
                                 severity_overrides=cfg.severity, stdin_name=stdin_name, progress=bar.callback,
                                 jobs=jobs, scan_threads=scan_threads,
                                 timeline=any(draws_timeline(name) for name, _ in outputs))
        except ConfigError as e:
            fail(str(e))
        except InputError as e:
            tool_errors.append({"path": None, "message": str(e)})
    if report is None:
        from specdiag.config import enabled_codes
        from specdiag.ruledocs import rule_table

        report = Report(inputs=[], context={}, findings=[], rules_run=enabled_codes(cfg), rules=rule_table())
    report = report.with_tool_errors(tool_errors)

    try:
        if update_baseline:
            if tool_errors:
                fail("not updating the baseline: some inputs could not be read")
            write_baseline(cfg.baseline, report.findings)
            if not quiet:
                note(f"wrote {len(report.findings)} finding(s) to the baseline {cfg.baseline}")
        if cfg.baseline:
            report = apply_baseline(report, load_baseline(cfg.baseline))
    except BaselineError as e:
        fail(str(e))

    file_outputs = [p for _, p in outputs if p]
    if summary:
        hint = "the job summary"
    elif file_outputs:
        hint = ", ".join(file_outputs)
    else:
        hint = "the full report (specdiag check --format markdown or json)"
    rendered = [(name, path, _render(name, report, cfg.fail_on, hint)) for name, path in outputs]
    for name, path, text in rendered:
        if path:
            write_file(path, text, f"the {name} report", quiet)
    for _name, path, text in rendered:
        if not path:
            sys.stdout.write(text)
    sys.stdout.flush()

    if summary:
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if target:
            from specdiag.report.markdown import render_markdown

            err = write_step_summary(
                lambda n: render_markdown(report, max_bytes=n, fail_on=cfg.fail_on,
                                          artifact_hint=", ".join(file_outputs) or "the JSON or SARIF report"),
                target)
            if err:
                sys.stderr.write(f"specdiag: warning: {err}\n")
        elif not quiet:
            note("note: --summary ignored: GITHUB_STEP_SUMMARY is not set")

    if not quiet and not any(name in ("text", "lines") and not path for name, path in outputs):
        from specdiag.report.text import status_line

        sys.stderr.write(f"specdiag: {status_line(report)}\n")
    if tool_errors:
        for e in tool_errors:
            sys.stderr.write(f"specdiag: error: {e['message']}\n")
        raise typer.Exit(EXIT_USAGE)
    if report.recognized_lines == 0:
        if not quiet:
            note("no line of the input was recognised as vLLM or LMCache output")
        raise typer.Exit(EXIT_NO_RECOGNISED)
    code = exit_code_for(report, cfg.fail_on)
    raise typer.Exit(EXIT_OK if exit_zero else code)
