"""``evalloop init``: scaffold fixtures/, scorers/, history/ and a config in a user's project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalloop.cli.app import app, friendly, out
from evalloop.errors import EvalloopError

CONFIG = """\
# evalloop settings (every key: docs/configuration.md). Environment variables EVALLOOP_* override.
window = 5              # runs in the rolling baseline
concurrency = 16        # cases in flight at once (a sync target that blocks: on threads)
errored_limit = 0.2     # a run with more errored scores than this is invalid
# history_url = "sqlite:///history/evalloop.db"   # or postgresql://user@host/db

[thresholds]            # relative drop that counts as a regression, per scorer or kind
# heuristic = 0.10
# llm_operation = 0.15
# llm_judge = 0.20
"""

SUITE = """\
# An example suite: a target in this project graded by a built-in and a project scorer.
name: greeting
description: The greeter says hello by name, briefly.
target: greeter:greet          # module:function, found from the project directory
scorers:
  - name: keywords
    params: {max_words: 6}
  - polite
cases:
  - id: ada
    input: {name: Ada}
    expected: {keywords: [hello, ada]}
  - id: grace
    input: {name: Grace}
    expected: {keywords: [hello, grace]}
  - id: rude-control           # a negative control: it tests the scorers, not the greeter
    input: {name: Linus}
    output: What do you want?  # a fixed, known-bad output: the target is not called for it
    expected: {keywords: [hello, linus]}
    expect: fail               # a correct scorer fails it; one that passes it is "scorer broken"
"""

SCORER = '''\
"""Project scorers: every @scorer function in scorers/*.py is registered at run time."""

from evalloop import Score, scorer


@scorer("polite", kind="heuristic", threshold=0.10)
def polite(input, output, expected) -> Score:
    """The reply greets the user politely."""
    ok = str(output).lower().startswith(("hello", "hi"))
    return Score(value=1.0 if ok else 0.0, message="polite" if ok else "not a greeting")
'''

TARGET = '''\
"""The system under test of the example suite."""


def greet(input: dict) -> str:
    return f"Hello, {input['name']}!"
'''

FILES = {
    "evalloop.toml": CONFIG,
    "fixtures/greeting.yaml": SUITE,
    "scorers/example.py": SCORER,
    "greeter.py": TARGET,
    "history/.gitignore": "*.db\n*.db-*\n",
}


@app.command()
@friendly
def init(
    directory: Annotated[Path, typer.Argument(help="Project directory to scaffold.")] = Path("."),
    force: Annotated[bool, typer.Option(help="Overwrite files that exist.")] = False,
) -> None:
    """Scaffold fixtures/, scorers/, history/ and evalloop.toml, with an example suite.

    Then try: [bold]evalloop run --suite greeting[/bold]
    """
    directory = directory.resolve()
    clashes = [p for p in FILES if (directory / p).exists()]
    if clashes and not force:
        raise EvalloopError(f"{', '.join(clashes)} already exist", where=str(directory),
                            hint="use --force to overwrite, or init another directory")
    for rel, text in FILES.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out().print(f"wrote {path}")
    out().print(f"next: cd {directory} && evalloop run --suite greeting")
