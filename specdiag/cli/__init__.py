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


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("specdiag: interrupted\n")
        sys.exit(130)
