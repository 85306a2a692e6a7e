"""The ``evalloop`` command line: a thin Typer app that parses, calls the API, and prints."""
# ruff: noqa: E402  (the collector is held before Typer and the commands load: lifecycle.hold_collector)

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from evalloop.cli import lifecycle

lifecycle.hold_collector()  # the program: no collections while its modules load (before Typer's)

import typer

if TYPE_CHECKING:  # checked against the Typer this project installs
    from typer._click import exceptions as _click_errors
else:
    try:  # recent Typer vendors Click under typer._click; older ones use Click itself
        from typer._click import exceptions as _click_errors
    except ImportError:  # pragma: no cover
        import click.exceptions as _click_errors

from evalloop.cli import (  # noqa: F401  (they register commands)
    accept,
    benchmarks,
    calibrate,
    catalog,
    compare,
    doctor,
    failures,
    history,
    learn,
    lessons,
    memories,
    report,
    revise,
    run,
    scaffold,
    schedule,
    show,
    view,
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
    import time

    lifecycle.CALLED = time.monotonic()
    if not lifecycle.is_program(main):
        lifecycle.release_collector()
        return _main()
    lifecycle.PROGRAM = True
    lifecycle.one_blas_thread()
    try:
        _main()
    except SystemExit as exc:  # _main always ends with one
        lifecycle.leave(exc.code)


def _command_of(args: list[str]) -> str | None:
    """The command (or command group) the arguments name, past the global ``-C/--project DIR``."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "--project"):
            skip = True
        elif arg.startswith(("--project=", "-C")):  # the directory in the same argument
            continue
        elif arg.startswith("-"):
            return None  # --help, or a usage error the whole app reports
        else:
            return arg
    return None


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command the arguments name: Typer builds every command's parameters
    on each start, and a run needs one. Help, an unknown command or a usage error get the whole
    app (its command list, its suggestions)."""
    import copy

    name = _command_of(args)
    if name is None:
        return app
    commands = [c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__ if c.callback else "")) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def _main() -> None:
    args = _normalise(sys.argv[1:])
    command = _command_of(args)
    lifecycle.starting(command)
    if lifecycle.PROGRAM and command == "run":  # a scheduled fire is a run (scheduling.fire)
        lifecycle.die_with_the_scheduler()
    try:
        code = _app_for(args)(args=args, standalone_mode=False)
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
