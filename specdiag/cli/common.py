"""Helpers shared by commands: exit codes of the report contract, one-line errors, stdin handling."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from specdiag.findings import severity_at_least

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_NO_RECOGNISED = 3


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """A clear one-line error on stderr and the contract's exit code — never a traceback."""
    from specdiag.sanitize import one_line

    sys.stderr.write(f"specdiag: error: {one_line(message)}\n")  # a file name may hold escapes or newlines
    raise typer.Exit(code)


def read_inputs_or_stdin(paths: list[str] | None) -> list[str]:
    if paths:
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
