"""The ``evalloop`` command line: a thin Typer app that parses, calls the API, and prints."""

from __future__ import annotations

import sys

import typer

try:  # recent Typer vendors Click under typer._click; older ones use Click itself
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover
    import click.exceptions as _click_errors

from evalloop.cli import (  # noqa: F401  (they register commands)
    benchmarks,
    calibrate,
    catalog,
    compare,
    doctor,
    history,
    learn,
    memories,
    report,
    run,
    scaffold,
    schedule,
    show,
)
from evalloop.cli.app import app
from evalloop.errors import EvalloopError

__all__ = ["app", "main"]


def _normalise(argv: list[str]) -> list[str]:
    """``evalloop run … --json PATH`` (a path after the flag) means ``--json-out PATH``."""
    if not argv or argv[0] != "run":
        return argv
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--json" and not out[i + 1].startswith("-"):
            out[i] = "--json-out"
    return out


def main() -> None:
    """Console-script entry point: user errors become one line on stderr and an exit code.

    As the program's own entry point, the process then ends without the interpreter's teardown
    (see :mod:`evalloop.cli.lifecycle`); called in-process, it raises ``SystemExit`` as usual.
    """
    from evalloop.cli import lifecycle

    if not lifecycle.is_program(main):
        return _main()
    lifecycle.PROGRAM = True
    try:
        _main()
    except SystemExit as exc:
        lifecycle.leave(exc.code)
    lifecycle.leave(0)


def _main() -> None:
    args = _normalise(sys.argv[1:])
    try:
        code = app(args=args, standalone_mode=False)
    except _click_errors.UsageError as exc:  # Typer/Click usage errors, as one line too
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            print(exc.ctx.get_help())
            sys.exit(0)
        command = exc.ctx.command_path if exc.ctx else "evalloop"
        print(f"error: {exc.format_message()} — see `{command} --help`", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except EvalloopError as exc:  # raised outside a command's own handling
        print(f"error: {exc.one_line()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
