"""``specdiag watch LOG|-`` (also ``analyze --follow``): follow a rollout in a growing log.

Each finding is printed once, as soon as the lines read complete it; a status line every ``--interval``
seconds; Ctrl-C prints the summary so far (exit 130). With ``--baseline``/``--before``/``--clean-after``
the rollout gate ends the watch: exit 1 when the incident recurs after the change, 0 once
``--clean-after N`` requests passed without it, 5 when the input ended undecided (``specdiag/watch.py``,
docs/watch.md).
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import typer

from specdiag.cli.common import (
    RANK_OPTION,
    REQUEST_OPTION,
    SINCE_OPTION,
    UNTIL_OPTION,
    exit_code_for,
    fail,
    line_filter,
    note_filter,
    split_list,
)


def register(app: typer.Typer) -> None:
    app.command("watch", help="Follow a growing log or a pipe: findings as they complete, a status line, and a "
                              "rollout gate (--baseline/--before, --clean-after).")(_watch_cli)


def _watch_cli(
    path: str = typer.Argument("-", help="The log file to follow (reopened on rotation), or '-' for stdin."),
    interval: float = typer.Option(10.0, "--interval", min=0.1, help="Seconds between status lines."),
    baseline: str = typer.Option(None, "--baseline", help="A previous 'analyze --format json' report: the rates "
                                 "before the change."),
    before: str = typer.Option(None, "--before", help="The restart time inside this log: lines before it are "
                               "'before the change' (times as --since)."),
    clean_after: int = typer.Option(None, "--clean-after", min=1, help="Stop with exit 0 once this many requests "
                                    "passed after the change without a shortfall (KV001)."),
    lmcache_config: str = typer.Option(None, "--lmcache-config", help="LMCache YAML used by the deployment."),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes."),
    config: str = typer.Option(None, "--config", help="Configuration file (specdiag.yaml or TOML)."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    since: str = SINCE_OPTION,
    until: str = UNTIL_OPTION,
    request: list[str] = REQUEST_OPTION,
    rank: list[int] = RANK_OPTION,
    stdin_name: str = typer.Option("-", "--stdin-name", help="Name to show for stdin in reports."),
) -> None:
    raise typer.Exit(watch_cmd(path, interval=interval, baseline=baseline, before=before, clean_after=clean_after,
                               lmcache_config=lmcache_config, select=select, ignore=ignore, config=config,
                               no_config=no_config, since=since, until=until, request=request, rank=rank,
                               stdin_name=stdin_name))


def _gate(baseline: str | None, before: str | None, clean_after: int | None) -> tuple[Any, Any, Any]:
    """(Gate or None, the baseline's Tally or None, the ``--before`` TimeSpec or None); bad input: exit 2."""
    from specdiag.ingest.linefilter import FilterError, TimeSpec
    from specdiag.watch import Gate, tally

    if baseline and before:
        fail("give one of --baseline and --before")
    if baseline:
        try:
            with open(baseline, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            fail(f"--baseline {baseline}: cannot read it as a JSON report ({getattr(e, 'strerror', None) or e})")
        if not isinstance(data, dict) or data.get("schema") != "specdiag.report/1":
            fail(f"--baseline {baseline}: not a specdiag report (schema specdiag.report/1): write one with "
                 "'specdiag analyze --format json'")
        return Gate("baseline", f"baseline {baseline}", "this stream", clean_after), tally(data), None
    if before:
        try:
            spec = TimeSpec.parse(before, "--before")
        except FilterError as e:
            fail(str(e))
        return Gate("before", f"before {before}", f"since {before}", clean_after), None, spec
    if clean_after is not None:
        return Gate("none", "", "this stream", clean_after), None, None
    return None, None, None


def _finding_text(f: Any) -> str:
    """A finding as two lines: where, severity, rule and title; then its headline (log text made one line,
    no escape sequence reaches the terminal)."""
    from specdiag.report.text import display_path
    from specdiag.report.verdict import headline
    from specdiag.sanitize import one_line

    ev = f.evidence[0] if f.evidence else None
    loc = f"{display_path(ev.path)}:{ev.line}: " if ev else ""
    return one_line(f"{loc}{f.severity} {f.rule} {f.title}") + "\n    " + one_line(headline(f))


def watch_cmd(path: str, *, interval: float = 10.0, baseline: str | None = None, before: str | None = None,
              clean_after: int | None = None, lmcache_config: str | None = None, select: list[str] | None = None,
              ignore: list[str] | None = None, config: str | None = None, no_config: bool = False,
              since: str | None = None, until: str | None = None, request: list[str] | None = None,
              rank: list[int] | None = None, stdin_name: str = "-") -> int:
    """Run the watch; returns the exit code (``specdiag/watch.py``)."""
    from specdiag.config import resolve
    from specdiag.engine import AnalyzeOptions, ConfigError, StreamAnalysis

    flt = line_filter(since, until, request, rank)
    gate, base, boundary = _gate(baseline, before, clean_after)
    try:
        cfg = resolve(config, no_config=no_config, select=split_list(select), ignore=split_list(ignore),
                      lmcache_config=lmcache_config)
        opts = AnalyzeOptions(paths=(path,), lmcache_config=cfg.lmcache_config, select=cfg.select,
                              ignore=cfg.ignore or None, rule_options=cfg.rule_options,
                              severity_overrides=cfg.severity, stdin_name=stdin_name, jobs=1, scan_threads=0)
        analysis = StreamAnalysis(opts, path)
    except ConfigError as e:
        fail(str(e))
    return _run(analysis, path, stdin_name, flt, gate, base, boundary, interval, cfg.fail_on)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _run(analysis: Any, path: str, stdin_name: str, flt: Any, gate: Any, base: Any, boundary: Any,
         interval: float, fail_on: str) -> int:
    """Follow the input to its end (its writer closed it, the gate decided, or Ctrl-C); the summary."""
    from specdiag.ingest import InputError, Source
    from specdiag.ingest.follow import follower
    from specdiag.ingest.linefilter import FilteredStream
    from specdiag.watch import Watcher

    stream = follower(path, sys.stdin.fileno())
    src = Source(path, stdin_name if path == "-" else path, stream=None)
    src._stream = FilteredStream(stream, flt, boundary, stats=src.stats) if flt or boundary else stream  # noqa: SLF001
    watcher = Watcher(lambda: analysis.snapshot(stream.lines), lambda: stream.lines, _out, _finding_text,
                      interval, gate, base, stop=stream.stop)
    if boundary is not None:
        src._stream.on_boundary = watcher.at_boundary  # noqa: SLF001
    stream.on_read = stream.on_wait = watcher.tick
    interrupted = []

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(True)
        stream.stop()

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        analysis.read(src)
    except InputError as e:
        fail(str(e))
    finally:
        signal.signal(signal.SIGINT, old)
        stream.close()
    return _summary(analysis.finish(), watcher, stream.lines, bool(interrupted), fail_on)


def _summary(report: Any, watcher: Any, lines: int, interrupted: bool, fail_on: str) -> int:
    """The findings not printed yet, the counts, the gate's comparison; the exit code."""
    from specdiag.report.text import status_line
    from specdiag.watch import EXIT_INTERRUPTED, EXIT_UNDECIDED, status_text, tally

    watcher.report, watcher.tally = report, tally(report.to_dict())
    for f in report.findings:
        if f.fingerprint not in watcher.printed:
            watcher.printed.add(f.fingerprint)
            _out(_finding_text(f))
    why = "interrupted" if interrupted else "decided" if watcher.decision is not None else "input ended"
    _out(f"specdiag: watch {why}: {status_line(report)}")
    _out(f"specdiag: {status_text(lines, watcher.tally)}")
    note_filter(report.inputs)
    gate = watcher.gate
    after = watcher.after()
    if gate is not None and after is not None:
        _out(f"specdiag: {gate.comparison(watcher.before, after)}")
    elif gate is not None:
        _out(f"specdiag: {gate.after_label}: not reached: no line at or after that time was read")
    if interrupted:
        return EXIT_INTERRUPTED
    if gate is None:
        return exit_code_for(report, fail_on)
    decision = watcher.decision if watcher.decision is not None else gate.decide(after) if after else None
    return EXIT_UNDECIDED if decision is None else decision
