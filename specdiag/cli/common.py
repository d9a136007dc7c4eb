"""Helpers shared by commands: exit codes of the report contract, one-line errors, stdin handling."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

from specdiag.findings import severity_at_least

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_NO_RECOGNISED = 3

#: ``--scan-threads`` of ``analyze`` and ``check`` (one definition: the same words and bounds in both)
SCAN_THREADS_OPTION = typer.Option(
    None, "--scan-threads", min=0, max=64, show_default="1 when -j leaves a core to spare, else 0",
    help="Threads that scan the blocks of one input while the main thread reads and analyses them (0: none; "
         "the compiled scanner only); see docs/benchmark.md.")


#: the line filters of ``analyze`` and ``watch`` (one definition: the same words in both)
SINCE_OPTION = typer.Option(None, "--since", help="Only lines at or after this log time: HH:MM[:SS], MM-DD HH:MM[:SS] "
                            "or YYYY-MM-DD HH:MM[:SS] (a time of day alone needs a log of one date; docs/watch.md).")
UNTIL_OPTION = typer.Option(None, "--until", help="Only lines at or before this log time (as --since).")
REQUEST_OPTION = typer.Option(None, "--request", help="Only lines of this request id, and lines that name no request "
                              "(repeatable).")
RANK_OPTION = typer.Option(None, "--rank", min=0, help="Only lines of this TP rank, and of processes that name no rank "
                           "(repeatable).")


def line_filter(since: str | None, until: str | None, requests: list[str] | None, ranks: list[int] | None):
    """The ``LineFilter`` of the filter options (None when none is given); a bad time is a usage error."""
    if not (since or until or requests or ranks):
        return None  # the filter module (2 ms of a start) is imported only where a filter is given
    from specdiag.ingest.linefilter import FilterError, LineFilter, TimeSpec

    try:
        flt = LineFilter(since=TimeSpec.parse(since, "--since") if since else None,
                         until=TimeSpec.parse(until, "--until") if until else None,
                         requests=tuple(r.strip() for r in requests or () if r.strip()), ranks=tuple(ranks or ()))
    except FilterError as e:
        fail(str(e))
    return flt if flt.active else None


def note_filter(inputs: list[dict]) -> None:
    """One note per filtered input: what the filter was and how many lines it excluded."""
    for i in inputs:
        if i.get("filter"):
            f = i["filter"]
            note(f"{i['path']}: {f['applied']} excluded {f['excluded_lines']:,} of {i['lines']:,} lines")


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """A clear one-line error on stderr and the contract's exit code — never a traceback."""
    from specdiag.sanitize import one_line

    sys.stderr.write(f"specdiag: error: {one_line(message)}\n")  # a file name may hold escapes or newlines
    raise typer.Exit(code)


def read_inputs_or_stdin(paths: list[str] | None) -> list[str]:
    if paths:
        if "-" in paths and sys.stdin.isatty():  # a terminal waiting for a paste looks hung without this
            print("specdiag: reading the log from the terminal: paste it, then press Ctrl-D on an empty line",
                  file=sys.stderr)
        return list(paths)
    if not sys.stdin.isatty():
        return ["-"]
    fail("no input: give log files, folders or globs, or pipe a log into stdin")


def exit_code_for(report, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    for f in report.findings:
        if severity_at_least(f.severity, fail_on):
            return EXIT_FINDINGS
    return EXIT_OK


def split_list(values: list[str] | None) -> list[str] | None:
    """``--select KV001,KV007 --select SD`` → ``["KV001", "KV007", "SD"]`` (repeated flags and comma lists)."""
    if not values:
        return None
    out = [v.strip() for item in values for v in item.replace(" ", ",").split(",") if v.strip()]
    return out or None


def note(message: str) -> None:
    """A one-line note on stderr (kept off stdout so that piped reports stay clean)."""
    sys.stderr.write(f"specdiag: {message}\n")


def write_file(path: str, data: str | bytes, what: str, quiet: bool = False) -> None:
    """Write an output file atomically (``specdiag.outfile``; parent folders are created) and say so on
    stderr; an unwritable path is a one-line error and exit 2."""
    from specdiag.outfile import OutputError, write_output

    try:
        written = write_output(path, data)
    except OutputError as e:
        fail(str(e))
    if not quiet:
        note(f"wrote {what} to {written}")


def render_format(name: str, report, **options) -> str:
    """The report in the table's format ``name`` (``specdiag.report.formats``), the one path every command
    renders through; a format whose code this build lacks (the HTML assets) is a one-line error, exit 2."""
    from specdiag.report.formats import FORMATS

    try:
        return FORMATS[name].render(report, **options)
    except ImportError:
        fail(f"the {name} report is not available in this build")


def readable_inputs(inputs: list[str], stdin_name: str) -> tuple[list[str], list[dict[str, str | None]]]:
    """Split the inputs into those that can be opened and one error per input that cannot (reported, and
    the rest still analysed: a missing rank file must not hide what the others say)."""
    from specdiag.ingest import InputError, expand_inputs

    good: list[str] = []
    errors: list[dict[str, str | None]] = []
    from specdiag.ingest.remote import is_url

    for p in inputs:
        if p == "-" or is_url(p):  # stdin cannot be probed; a remote object is checked when it is listed
            good.append(p)
            continue
        try:
            for s in expand_inputs([p], stdin_name=stdin_name):
                s.probe()  # never opens a FIFO (it could be read only once); walked files note their own errors
        except InputError as e:
            errors.append({"path": p, "message": str(e)})
            continue
        except OSError as e:
            errors.append({"path": p, "message": f"{p}: cannot read ({e.strerror or e})"})
            continue
        good.append(p)
    return good, errors


PROGRESS_MIN_BYTES = 50 * 1024 * 1024


def _input_sizes(paths: list[str], stdin_name: str) -> dict[str, int]:
    from specdiag.ingest import InputError, expand_inputs

    try:
        sources = expand_inputs([p for p in paths if p != "-"], stdin_name=stdin_name)
    except InputError:
        return {}
    sizes: dict[str, int] = {}
    for s in sources:
        try:
            sizes[s.display] = os.path.getsize(s.path)
        except (OSError, TypeError):
            continue
    return sizes


class Progress:
    """A Rich progress bar on stderr for long inputs (bytes, MB/s, ETA), driven by the engine's
    ``progress(display, bytes_read)`` callback. Off for small inputs, with ``-q``, and when stderr is not
    a terminal (CI logs and redirected output stay clean)."""

    def __init__(self, paths: list[str], stdin_name: str = "-", quiet: bool = False,
                 min_bytes: int = PROGRESS_MIN_BYTES, force: bool = False) -> None:
        self.callback = None
        self._bar = None
        if quiet or not (force or sys.stderr.isatty()):
            return
        self._sizes = _input_sizes(paths, stdin_name)
        total = sum(self._sizes.values())
        if total < min_bytes:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(TextColumn("reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                 TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True)
        self._task = self._bar.add_task("read", total=total)
        self._done: dict[str, int] = {}
        self.callback = self._update

    def _update(self, display: str, bytes_read: int) -> None:
        self._done[display] = min(bytes_read, self._sizes.get(display, bytes_read))
        self._bar.update(self._task, completed=sum(self._done.values()))

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
