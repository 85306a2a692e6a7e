"""The global ``-C DIR`` reaches a command through the invocation's context, never through
``os.environ`` (issue #43): two commands in one process with different ``-C`` do not see each
other's directory, and the environment is the same during and after a command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalloop.cli import app
from evalloop.cli.app import settings_for
from support.project import make_project

ECHO = {"name": "echo", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}


@pytest.fixture
def probe():
    """A command that records the project it resolves and the environment it runs in."""
    seen: list[tuple[Path, str | None]] = []

    @app.command("probe-project", hidden=True)
    def probe_project() -> None:
        seen.append((settings_for(None).project_dir, os.environ.get("EVALLOOP_PROJECT")))

    yield seen
    app.registered_commands[:] = [c for c in app.registered_commands if c.name != "probe-project"]


def test_two_commands_with_different_projects_do_not_leak_into_each_other(tmp_path, monkeypatch, probe):
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)
    first, second = make_project(tmp_path / "first"), make_project(tmp_path / "second")
    before = dict(os.environ)
    for argv in (["-C", str(first), "probe-project"], ["-C", str(second), "probe-project"], ["probe-project"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
        assert dict(os.environ) == before
    assert probe == [(first.resolve(), None), (second.resolve(), None), (tmp_path.resolve(), None)]


def test_the_command_line_precedence_of_the_project(tmp_path, monkeypatch, probe):
    """A command's own -C, then the global -C, then EVALLOOP_PROJECT, then the current directory."""
    env, glob = make_project(tmp_path / "env"), make_project(tmp_path / "global")
    monkeypatch.setenv("EVALLOOP_PROJECT", str(env))
    assert CliRunner().invoke(app, ["-C", str(glob), "probe-project"]).exit_code == 0
    assert CliRunner().invoke(app, ["probe-project"]).exit_code == 0
    assert [p for p, _ in probe] == [glob.resolve(), env.resolve()]
    assert [e for _, e in probe] == [str(env), str(env)]  # as set: the global -C never wrote it


def test_a_command_run_inside_another_does_not_inherit_its_project(tmp_path, monkeypatch):
    """An embedding program (here: a command's own code) calling the command line again."""
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)
    outer = make_project(tmp_path / "outer", {"echo": ECHO})
    inner_results = []

    @app.command("probe-nested", hidden=True)
    def probe_nested() -> None:
        inner_results.append(CliRunner().invoke(app, ["suites", "list", "--json"]))

    try:
        assert CliRunner().invoke(app, ["-C", str(outer), "probe-nested"]).exit_code == 0
    finally:
        app.registered_commands[:] = [c for c in app.registered_commands if c.name != "probe-nested"]
    (inner,) = inner_results
    assert inner.exit_code == 0, inner.output
    assert '"echo"' not in inner.output  # the outer project's suite: not in the cwd's list
