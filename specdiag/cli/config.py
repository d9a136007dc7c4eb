"""``specdiag config show``: the resolved configuration and where each value came from."""

from __future__ import annotations

import json
import sys

import typer

from specdiag.cli.common import fail, split_list

config_app = typer.Typer(help="Inspect specdiag's configuration ([tool.specdiag] or specdiag.yaml).",
                         no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")


def _fmt(v) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, (list, dict, bool, int, float)):
        return json.dumps(v)
    return str(v)


@config_app.command("show", help="Print the configuration 'check' resolves (and 'analyze', except check's "
                                  "own defaults) and the source of every value.")
def show_cmd(
    config: str = typer.Option(None, "--config", help="Configuration file instead of the discovered one."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    select: list[str] = typer.Option(None, "--select", help="As for 'check': overrides the file."),
    ignore: list[str] = typer.Option(None, "--ignore", help="As for 'check': overrides the file."),
    fail_on: str = typer.Option(None, "--fail-on", help="As for 'check': overrides the file."),
    baseline: str = typer.Option(None, "--baseline", help="As for 'check': overrides the file."),
    severity: list[str] = typer.Option(None, "--severity", help="As for 'check': CODE=LEVEL."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json"),
) -> None:
    from specdiag.config import describe, resolve
    from specdiag.engine import ConfigError

    if fmt not in ("text", "json"):
        fail(f"unknown --format {fmt!r} (text, json)")
    try:
        cfg = resolve(config, no_config=no_config, select=split_list(select), ignore=split_list(ignore),
                      fail_on=fail_on, baseline=baseline, severity=severity or None, gate=True)
    except ConfigError as e:
        fail(str(e))
    rows = describe(cfg)
    if fmt == "json":
        sys.stdout.write(json.dumps({"config_file": cfg.config_file,
                                     "values": [{"key": k, "value": v, "source": s} for k, v, s in rows]},
                                    indent=2, default=str) + "\n")
        return
    sys.stdout.write(f"config file: {cfg.config_file or '(none found)'}\n")
    width = max(len(k) for k, _, _ in rows)
    vw = min(40, max(len(_fmt(v)) for _, v, _ in rows))
    for k, v, s in rows:
        sys.stdout.write(f"{k:<{width}}  {_fmt(v):<{vw}}  # {s}\n")
