"""The ``evalloop`` command line: a thin Typer app that parses, calls the API, and prints."""

from __future__ import annotations

import sys

from evalloop.cli import (  # noqa: F401  (they register commands)
    benchmarks,
    calibrate,
    catalog,
    compare,
    history,
    memories,
    report,
    run,
    scaffold,
    schedule,
)
from evalloop.cli.app import app
from evalloop.errors import EvalloopError

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: user errors become one line on stderr and an exit code."""
    try:
        app(standalone_mode=True)
    except EvalloopError as exc:  # raised outside a command's own handling
        print(f"error: {exc.one_line()}", file=sys.stderr)
        sys.exit(exc.exit_code)
