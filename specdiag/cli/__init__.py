"""Typer command-line interface. Commands live one per module; heavy imports happen inside commands.

Each module in ``COMMAND_MODULES`` exposes ``register(app)``. Keep module import cheap: ``--help`` and
``--version`` must stay fast (no pandas, no vllm).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import typer

from specdiag import __version__

COMMAND_MODULES = ["analyze", "metrics", "check", "fleet", "events", "rules", "config", "repro"]

app = typer.Typer(
    name="specdiag",
    help="Diagnose vLLM / LMCache / speculative-decoding incidents from their logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specdiag {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Diagnose vLLM / LMCache / speculative-decoding incidents from their logs."""


for _name in COMMAND_MODULES:
    if importlib.util.find_spec(f"specdiag.cli.{_name}") is not None:
        importlib.import_module(f"specdiag.cli.{_name}").register(app)


def _usage_error(e) -> int:
    """Click's usage errors in the one style every specdiag error has: ``specdiag: error: …`` on one line
    (plus the command's ``-h`` hint), exit 2."""
    from specdiag.sanitize import one_line

    cmd = e.ctx.command_path if getattr(e, "ctx", None) is not None else "specdiag"
    sys.stderr.write(f"specdiag: error: {one_line(e.format_message())} (see '{cmd} -h')\n")
    return e.exit_code if isinstance(getattr(e, "exit_code", None), int) else 2


def _click_errors() -> tuple[type[BaseException], type[BaseException], tuple[type[BaseException], ...]]:
    """(UsageError, ClickException, abort types) of the click that this Typer uses (vendored since 0.2x)."""
    try:
        from typer._click.exceptions import ClickException, UsageError  # type: ignore[import-not-found]
        from typer.exceptions import Abort  # type: ignore[attr-defined]

        return UsageError, ClickException, (Abort,)
    except ImportError:  # older Typer on top of click
        import click

        return click.UsageError, click.ClickException, (click.Abort,)


def main() -> None:
    usage_error, click_exception, aborts = _click_errors()
    try:
        rv = app(standalone_mode=False)
    except usage_error as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `specdiag`: the help is the answer
            sys.stdout.write(e.format_message().rstrip() + "\n")
            sys.exit(0)
        sys.exit(_usage_error(e))
    except click_exception as e:
        from specdiag.sanitize import one_line

        sys.stderr.write(f"specdiag: error: {one_line(e.format_message())}\n")
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, *aborts):
        sys.stderr.write("specdiag: interrupted\n")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)
