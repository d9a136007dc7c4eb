"""Typer command-line interface. Commands live one per module; heavy imports happen inside commands.

Each module in ``COMMAND_MODULES`` exposes ``register(app)``. Keep module import cheap: ``--help`` and
``--version`` must stay fast (no pandas, no vllm).
"""

from __future__ import annotations

import errno
import functools
import gc
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import typer

from specdiag import __version__
from specdiag.outfile import OutputError

#: each command module (``register`` adds its commands, in this order) and the commands it adds:
#: ``specdiag NAME …`` imports and builds only that module, so a run does not pay for the other eight (≈ 6 ms
#: of every start); a test holds this table to the full app
COMMAND_OF_MODULE = {"analyze": ("analyze",), "watch": ("watch",), "metrics": ("metrics",), "check": ("check",),
                     "fleet": ("fleet",), "events": ("events",), "rules": ("rules", "explain"),
                     "config": ("config",), "repro": ("repro",)}
COMMAND_MODULES = tuple(COMMAND_OF_MODULE)
_MODULE_OF_COMMAND = {c: m for m, cs in COMMAND_OF_MODULE.items() for c in cs}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specdiag {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Diagnose vLLM / LMCache / speculative-decoding incidents from their logs."""


def make_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    """The Typer app with the commands of these modules, each guarded (``_guard``)."""
    new = typer.Typer(
        name="specdiag",
        help="Diagnose vLLM / LMCache / speculative-decoding incidents from their logs.",
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    new.callback()(_root)
    for name in modules:
        if importlib.util.find_spec(f"specdiag.cli.{name}") is not None:
            importlib.import_module(f"specdiag.cli.{name}").register(new)
    for cmd in new.registered_commands:
        if cmd.callback is not None:
            cmd.callback = _guard(cmd.callback)
    return new


def app_for(argv: list[str]) -> typer.Typer:
    """The app ``main`` runs: only the named command's module when ``argv[1]`` names one, else every command
    (help, completion, a misspelt command's suggestions need them all)."""
    module = _MODULE_OF_COMMAND.get(argv[1]) if len(argv) > 1 else None
    return make_app((module,)) if module is not None else make_app()


def __getattr__(name: str) -> Any:
    """``specdiag.cli.app``: the app with every command, built on first use (tests, entry points)."""
    if name == "app":
        full = make_app()
        globals()["app"] = full
        return full
    raise AttributeError(name)


#: the contract's code for "specdiag itself failed" (a bug): never 1, which means "findings present"
EXIT_INTERNAL = 4
EXIT_WRITE = 2
_WRITE_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT, errno.EROFS}


def _debug() -> bool:
    return os.environ.get("SPECDIAG_DEBUG", "") not in ("", "0")


def _silence_stdout() -> None:
    """After EPIPE/ENOSPC on stdout, point fd 1 at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _one_line(text: str) -> str:
    from specdiag.sanitize import one_line

    return one_line(text)[:300]


def _guard(callback: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command so that a write error is one line and exit 2, and a bug is one line and exit 4."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return callback(*args, **kwargs)
            finally:
                sys.stdout.flush()  # a full disk or closed pipe shows here, not in the interpreter's exit
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except OutputError as e:  # an output file (report, export) that could not be written: its own message
            sys.stderr.write(f"specdiag: error: {_one_line(e)}\n")
            raise typer.Exit(EXIT_WRITE) from None
        except OSError as e:
            if _debug():
                raise
            if e.errno in _WRITE_ERRNOS:
                _silence_stdout()
                sys.stderr.write(f"specdiag: error: cannot write output: {e.strerror or e}\n")
            else:
                name = f"{e.filename}: " if e.filename else ""
                sys.stderr.write(f"specdiag: error: {_one_line(name + (e.strerror or str(e)))}\n")
            raise typer.Exit(EXIT_WRITE) from None
        except Exception as e:
            if _debug():
                import traceback

                traceback.print_exc()
            sys.stderr.write(f"specdiag: internal error ({type(e).__name__}: {_one_line(e)}); please report it "
                             "(run with --debug for the traceback)\n")
            raise typer.Exit(EXIT_INTERNAL) from None

    return run


def _take_debug_flag(argv: list[str]) -> list[str]:
    """``--debug`` anywhere before ``--``: show tracebacks instead of the one-line internal error."""
    cut = argv.index("--") if "--" in argv else len(argv)
    if "--debug" in argv[:cut]:
        os.environ["SPECDIAG_DEBUG"] = "1"
        return [a for i, a in enumerate(argv) if not (a == "--debug" and i < cut)]
    return argv


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


def _tune_gc() -> None:
    """An analysis allocates millions of short-lived, acyclic objects (records, intervals, tuples) while it
    holds long-lived ones (the interval series, caches). At the default threshold (700 allocations) the
    cyclic collector walks those over and over: a quarter of the CPU time of a metric-dense log. What is
    loaded at start is frozen out of its reach and the young generation collected every 50,000
    allocations instead; reference counting still frees all the rest at once, so memory stays flat."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def main() -> None:
    _tune_gc()
    sys.argv = _take_debug_flag(sys.argv)
    usage_error, click_exception, aborts = _click_errors()
    try:
        rv = app_for(sys.argv)(standalone_mode=False)
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
    except OSError as e:  # outside any command (option parsing, help output)
        if _debug():
            raise
        if e.errno in _WRITE_ERRNOS:
            _silence_stdout()
        sys.stderr.write(f"specdiag: error: cannot write output: {e.strerror or e}\n")
        sys.exit(EXIT_WRITE)
    except Exception as e:
        if _debug():
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"specdiag: internal error ({type(e).__name__}); please report it "
                         "(run with --debug for the traceback)\n")
        sys.exit(EXIT_INTERNAL)
    sys.exit(rv if isinstance(rv, int) else 0)


def _alone() -> bool:
    """Nothing but this thread runs and no child process of ``multiprocessing`` is left: what the
    interpreter's own exit would wait for or clean up beyond ``atexit`` (a Ray driver, a pool not yet shut
    down, a watcher's reader) is absent."""
    import threading

    if threading.active_count() != 1:
        return False
    mp = sys.modules.get("multiprocessing")
    return mp is None or not mp.active_children()


def _exit_now(stop: SystemExit) -> None:
    """Leave with ``stop``'s status without the interpreter's teardown, where that is safe; else return.

    Why: after an analysis the interpreter's exit walks every object once more (the catalog, the rules'
    tables, the compiled patterns) to free memory the process is about to give back anyway: 14 % of a
    1-line paste's 0.2 s and 15 % of a 100 MB noise log's run (the 2-vCPU machine). What that exit does
    that matters is done here: the ``atexit`` callbacks (temporary folders, logging, pools) and the flush
    of both streams. A stream that cannot be flushed, a status that is not a number, a thread or child
    process still alive: the ordinary exit, with its own reporting."""
    code = 0 if stop.code is None else stop.code
    if not isinstance(code, int) or not _alone():
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code & 0xFF)


def entry() -> None:
    """The ``specdiag`` console script and ``python -m specdiag``: :func:`main`, then :func:`_exit_now`.
    ``main`` itself ends in an ordinary ``SystemExit``, so a caller in the same process (tests, a wrapper
    that reports after it) keeps control."""
    try:
        main()
    except SystemExit as stop:
        _exit_now(stop)
        raise
