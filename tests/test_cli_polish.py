"""The small things a user expects of the command line: --version, `compare last`, `history SUITE`,
a top-level --help in the order a user needs it, help texts without hard line breaks or RST,
"did you mean" for an unknown suite field, messages without pydantic's prefixes, and `report`
failing on a regression by default, like `run`."""

from __future__ import annotations

import inspect
import json
import re
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from evalloop.cli import app
from support.project import controlled_suite, make_project, write_answers

ECHO = {"name": "echo", "target": "sut:echo", "scorers": ["equals"],
        "cases": [{"id": f"c{i}", "input": 1, "expected": 1} for i in range(3)]}


def invoke(root, *args, env=None):
    return CliRunner().invoke(app, [*args, "-C", str(root)], env={"NO_COLOR": "1", "COLUMNS": "200", **(env or {})})


def test_version_prints_the_installed_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"evalloop {version('evalloop')}"


@pytest.fixture
def two_runs(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO, "echo2": {**ECHO, "name": "echo2"}})
    ids = []
    for suite in ("echo", "echo2", "echo"):
        result = invoke(root, "run", "-s", suite, "--json")
        assert result.exit_code == 0, result.output
        ids.append(json.loads(result.stdout)["run_id"])
    return root, ids


def test_compare_last_compares_the_newest_run_with_the_run_before_it(two_runs):
    root, (first, _, third) = two_runs
    result = invoke(root, "compare", "last", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["run_a"], doc["run_b"]) == (first, third)  # the run before it of the same suite
    explicit = invoke(root, "compare", first, "last", "--json")
    assert explicit.exit_code == 0 and json.loads(explicit.stdout)["run_b"] == third
    one = invoke(root, "compare", third, "--json")
    assert one.exit_code == 0 and json.loads(one.stdout)["run_a"] == first


def test_history_takes_the_suite_as_a_positional_argument(two_runs):
    root, (first, second, third) = two_runs
    for args in (["history", "echo"], ["history", "--suite", "echo"], ["history", "echo", "--json"]):
        result = invoke(root, *args)
        assert result.exit_code == 0, (args, result.output)
        assert first in result.stdout and third in result.stdout and second not in result.stdout, args
    export = invoke(root, "history", "export", "--suite", "echo")  # a subcommand is still one
    assert export.exit_code == 0, export.output
    clash = invoke(root, "history", "echo", "--suite", "echo2")
    assert clash.exit_code == 2 and "either" in clash.output


def test_top_level_help_lists_commands_in_the_order_a_user_needs_them():
    result = CliRunner().invoke(app, ["--help"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0
    names = re.findall(r"^│ ([a-z][a-z-]+) ", result.stdout, flags=re.M)
    assert names[:6] == ["init", "run", "show", "compare", "history", "report"], names
    assert {"doctor", "schedule", "suites", "scorers", "memories", "bench"} <= set(names[6:])
    for line in result.stdout.splitlines():  # one line per command at 200 columns: no hard breaks
        if line.startswith("│ ") and not re.match(r"^│ [a-z-]", line):
            pytest.fail(f"a command's help continues on a second line: {line!r}")


def _commands(command, path=()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_help_texts_have_no_hard_line_breaks_and_no_rst_markup():
    root = typer.main.get_command(app)
    problems = []
    for path, command in _commands(root):
        texts = [("help", command.help or ""), ("short_help", command.short_help or "")]
        texts += [(f"--{p.name}", getattr(p, "help", None) or "") for p in command.params]
        for what, text in texts:
            for paragraph in inspect.cleandoc(text).split("\n\n"):
                if "\n" in paragraph.strip():
                    problems.append(f"{' '.join(path) or 'evalloop'} {what}: a hard line break in {paragraph!r}")
            if re.search(r"``|:(func|class|mod|meth|attr):`|^\.\. ", text, flags=re.M):
                problems.append(f"{' '.join(path) or 'evalloop'} {what}: RST markup in {text!r}")
    assert not problems, "\n".join(problems)


def test_help_shows_examples_on_lines_of_their_own():
    result = CliRunner().invoke(app, ["run", "--help"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert re.search(r"^ Example: evalloop run --suite exact-match", result.stdout, flags=re.M), result.stdout


@pytest.mark.parametrize(("where", "wrong", "right"), [("case", "expectd", "expected"),
                                                       ("suite", "scorer", "scorers")])
def test_an_unknown_suite_field_gets_a_did_you_mean(tmp_path, where, wrong, right):
    suite = {**ECHO, "cases": [dict(c) for c in ECHO["cases"]]}
    if where == "case":
        suite["cases"][1][wrong] = suite["cases"][1].pop("expected")
    else:
        suite[wrong] = suite.pop("scorers")
    root = make_project(tmp_path, {"echo": suite})
    result = invoke(root, "suites", "validate", "echo")
    assert result.exit_code == 2
    line = result.output.strip()
    assert f"{wrong}: unknown field — did you mean '{right}'?" in line, line
    assert len(line.splitlines()) == 1


@pytest.mark.parametrize("case", ["suite", "case-id", "config"])
def test_messages_carry_no_pydantic_value_error_prefix(tmp_path, case):
    suite = {**ECHO, "cases": [dict(c) for c in ECHO["cases"]]}
    if case == "suite":
        suite["thresholds"] = {"nope": 0.1}
    elif case == "case-id":
        suite["cases"][0]["id"] = " "
    root = make_project(tmp_path, {"echo": suite})
    if case == "config":
        (root / "evalloop.toml").write_text("[verdict]\nrequire_significance = true\n")
    result = invoke(root, "run", "-s", "echo")
    assert result.exit_code == 2, result.output
    assert "Value error" not in result.output and "Assertion failed" not in result.output, result.output
    expected = {"suite": "thresholds names 'nope'", "case-id": "case id must not be empty",
                "config": "require_significance is retired"}[case]
    assert expected in result.output


def test_report_fails_on_a_regression_by_default_like_run(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", {"controlled": controlled_suite(8)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    assert invoke(root, "run", "-s", "controlled").exit_code == 0
    write_answers(answers, {f"c{i}": 0.0 for i in range(8)})
    assert invoke(root, "run", "-s", "controlled").exit_code == 1
    assert invoke(root, "report").exit_code == 1
    assert invoke(root, "report", "--fail-on-regression").exit_code == 1
    assert invoke(root, "report", "--no-fail-on-regression").exit_code == 0


@pytest.mark.parametrize(("toml", "expected"), [
    ("windw = 5\n", "setting 'windw': unknown field — did you mean 'window'?"),
    ("[verdict]\nrulle = 'paired'\n", "setting 'verdict.rulle': unknown field — did you mean 'rule'?"),
])
def test_an_unknown_setting_gets_a_did_you_mean(tmp_path, toml, expected):
    root = make_project(tmp_path, {"echo": ECHO})
    (root / "evalloop.toml").write_text(toml)
    result = invoke(root, "run", "-s", "echo")
    assert result.exit_code == 2 and expected in result.output, result.output


def test_the_global_project_option_holds_for_its_command_only(tmp_path, monkeypatch):
    """`evalloop -C DIR COMMAND` points the command at DIR; a process that calls the command
    line again (a test, an embedding program) is not left pointing there."""
    import os

    root = make_project(tmp_path / "p", {"echo": ECHO})
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    result = CliRunner().invoke(app, ["-C", str(root), "suites", "list"])
    assert result.exit_code == 0, result.output
    assert "echo" in result.output
    assert "EVALLOOP_PROJECT" not in os.environ
    monkeypatch.setenv("EVALLOOP_PROJECT", str(tmp_path / "elsewhere"))
    assert CliRunner().invoke(app, ["-C", str(root), "suites", "list"]).exit_code == 0
    assert os.environ["EVALLOOP_PROJECT"] == str(tmp_path / "elsewhere")  # as it was before the call
