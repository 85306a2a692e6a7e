"""The Typer application object, shared options, and the one-line error handling."""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer

from evalloop.cli.help import RootGroup
from evalloop.errors import EvalloopError, is_db_error, store_error

if TYPE_CHECKING:  # the commands import what they use: `evalloop --help` imports no more than Typer
    from rich.console import Console

    from evalloop.config import Settings

app = typer.Typer(
    name="evalloop",
    cls=RootGroup,
    help="Evaluate an LLM-powered system, compare each run with a rolling baseline, and "
         "feed regressions back as memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
suites_app = typer.Typer(help="List and validate suites.", no_args_is_help=True,
                         context_settings={"help_option_names": ["-h", "--help"]})
scorers_app = typer.Typer(help="List registered scorers.", no_args_is_help=True,
                          context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(suites_app, name="suites")
app.add_typer(scorers_app, name="scorers")

ProjectOpt = Annotated[
    Path | None,
    typer.Option("--project", "-C", metavar="DIR", show_default=False,
                 help="Project directory (default: the global -C, else $EVALLOOP_PROJECT, else the current "
                      "directory)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
#: whether a failing verdict exits 1: the default of `run`, `report` (and the pytest plugin)
FailOpt = Annotated[bool, typer.Option(
    "--fail-on-regression", help="Exit 1 when a scorer regressed, a scorer is broken, or a run is invalid: "
                                 "the default (accepted for older scripts).")]
NoFailOpt = Annotated[bool, typer.Option(
    "--no-fail-on-regression", help="Exit 0 whatever the verdicts (only bad input exits non-zero).")]


def fails_on_regression(fail: bool, no_fail: bool) -> bool:
    """What --fail-on-regression / --no-fail-on-regression ask for (failing is the default)."""
    if fail and no_fail:
        raise EvalloopError("--fail-on-regression and --no-fail-on-regression exclude each other",
                            hint="give one of them (failing on a regression is the default)")
    return not no_fail

P = ParamSpec("P")
R = TypeVar("R")


def _plain_metavars() -> None:
    """Help without type placeholders: Typer ≥ 0.2x prints ``<bool>`` beside every flag and
    ``<list[str]>``/``<int range>`` beside values; flags get none, values a NAME."""
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - an older Typer prints no placeholders
        return
    if getattr(TyperOption, "_evalloop_plain", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if self.metavar is not None:
            return str(self.metavar)
        if self.is_flag or self.count:
            return None
        name = (self.name or "value").upper().replace("_", "-")
        return "N" if getattr(self, "min", None) is not None or getattr(self, "max", None) is not None else name

    # Typer has no hook for its placeholders: its methods are replaced on the class, which mypy
    # forbids (method-assign) for every patch below; the marker attribute is ours (attr-defined)
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    if hasattr(TyperOption, "display_type"):
        TyperOption.display_type = lambda self, ctx: display_type_rich(self, ctx) or ""  # type: ignore[method-assign]
    TyperOption._evalloop_plain = True  # type: ignore[attr-defined]
    try:  # an argument shows its name alone: no `<str>` beside it, no `{RUN}` in the usage line
        from typer.core import TyperArgument
    except ImportError:  # pragma: no cover
        return
    TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]
    if hasattr(TyperArgument, "_usage_display_name"):
        def usage_name(self: Any) -> str:
            name = self.display_name_raw + ("..." if self.nargs != 1 else "")
            return name if self.required else f"[{name}]"

        TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]


_plain_metavars()


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"evalloop {version('evalloop')}")
        raise typer.Exit(0)


@app.callback()
def _global(
    ctx: typer.Context,
    project: Annotated[Path | None, typer.Option(
        "--project", "-C", metavar="DIR", help="Project directory for every command (default: current directory).",
        show_default=False)] = None,
    _show_version: Annotated[bool, typer.Option(
        "--version", help="Print the installed version and exit.", is_eager=True, callback=_version)] = False,
) -> None:
    """Evaluate an LLM-powered system, compare each run with a rolling baseline, and feed
    regressions back as memories."""
    # `evalloop -C DIR run …`: held in this invocation's context (never in os.environ), so a
    # process that calls the command line again (a test, an embedding program) keeps no
    # project of an earlier call; :func:`settings_for` reads it
    ctx.obj = Invocation(project=project)


def out() -> Console:
    """stdout: a terminal's width; piped, the width COLUMNS gives, else wide (160)."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = max(console.width, 160)
    return console


def err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Invocation:
    """What the global options of one ``evalloop`` invocation say (``ctx.obj``)."""

    project: Path | None = None


def project_of(project: Path | None) -> Path | None:
    """The project directory of a command: its own ``-C``, else the global ``-C`` of this
    invocation, else None (:func:`evalloop.config.load_settings` then takes ``EVALLOOP_PROJECT``
    or the current directory)."""
    if project is not None:
        return project
    ctx = _current_context()
    invocation = ctx.find_object(Invocation) if ctx is not None else None
    return invocation.project if invocation is not None else None


def _current_context() -> Any:
    """The Click context of the command being run (None outside one): recent Typer vendors
    Click under ``typer._click``, older ones use Click itself."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - an older Typer
        from click import get_current_context  # type: ignore[no-redef]
    return get_current_context(silent=True)


def settings_for(project: Path | None, **overrides: Any) -> Settings:
    """The settings of a command's project (see :func:`project_of`), CLI ``overrides`` on top."""
    from evalloop.config import load_settings

    return load_settings(project_of(project), **overrides)


def friendly(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a user error raised inside a command into one line on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except EvalloopError as exc:
            print(f"error: {exc.one_line()}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
        except UnicodeDecodeError as exc:  # a file in the wrong encoding (suite, JSONL, config)
            print(f"error: {encoding_error(exc)}", file=sys.stderr)
            raise typer.Exit(2) from None
        except BrokenPipeError:  # `evalloop show … | head`: the reader left; so do we, quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None
        except OSError as exc:  # a path the user gave that cannot be read or written, a full disk
            where = f"{exc.filename}: " if exc.filename else ""
            if exc.errno == errno.ENOSPC:
                from pathlib import Path

                from evalloop.access import space_advice

                advice = space_advice(Path(exc.filename) if exc.filename else None)
                print(f"error: {where}no space left on the device — {advice}", file=sys.stderr)
            else:
                print(f"error: {where}{exc.strerror or exc} — check the path and its permissions", file=sys.stderr)
            raise typer.Exit(2) from None
        except Exception as exc:  # a database (history, locks, memory, cache) failed under us
            if not is_db_error(exc):
                raise
            error = store_error(exc, store='database', where=None)
            print(f"error: {error.one_line()}", file=sys.stderr)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (signals.Terminated, exit 143)
            print("interrupted: the run was marked 'interrupted' and is kept out of baselines",
                  file=sys.stderr)
            raise typer.Exit(getattr(exc, "exit_code", 130)) from None

    return wrapper


def encoding_error(exc: UnicodeDecodeError) -> str:
    """One line for a file that is not UTF-8 (where the decoder saw a file name, it is named)."""
    where = getattr(exc, "evalloop_path", None)
    return (f"{where + ': ' if where else ''}not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
            f"offset {exc.start}) — save the file as UTF-8")
