"""The Typer application object, shared options, and the one-line error handling."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from evalloop.errors import EvalloopError, is_db_error, store_error

if TYPE_CHECKING:  # the commands import what they use: `evalloop --help` imports no more than Typer
    from rich.console import Console

    from evalloop.config import Settings

app = typer.Typer(
    name="evalloop",
    help="Evaluate an LLM-powered system, compare each run with a rolling baseline, and "
         "feed regressions back as memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
suites_app = typer.Typer(help="List and validate suites.", no_args_is_help=True)
scorers_app = typer.Typer(help="List registered scorers.", no_args_is_help=True)
app.add_typer(suites_app, name="suites")
app.add_typer(scorers_app, name="scorers")

ProjectOpt = Annotated[
    Path | None,
    typer.Option("--project", "-C", help="Project directory (default: current directory).",
                 envvar="EVALLOOP_PROJECT", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

F = TypeVar("F", bound=Callable[..., Any])


def out() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    return console


def err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def settings_for(project: Path | None, **overrides: Any) -> Settings:
    from evalloop.config import load_settings

    return load_settings(project, **overrides)


def friendly(fn: F) -> F:
    """Turn a user error raised inside a command into one line on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EvalloopError as exc:
            print(f"error: {exc.one_line()}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # a path the user gave that cannot be read or written
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc} — check the path and its permissions", file=sys.stderr)
            raise typer.Exit(2) from None
        except Exception as exc:  # a database (history, locks, memory, cache) failed under us
            if not is_db_error(exc):
                raise
            print(f"error: {store_error(exc, store='database', where=None).one_line()}", file=sys.stderr)
            raise typer.Exit(1) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (signals.Terminated, exit 143)
            print("interrupted: the run was marked 'interrupted' and is kept out of baselines",
                  file=sys.stderr)
            raise typer.Exit(getattr(exc, "exit_code", 130)) from None

    return wrapper  # type: ignore[return-value]
