"""The run summary is one model (issue #43): ``evalloop run --json`` prints its dump, and a
scheduled fire's scheduler reads the child's output back with the same model; output that is
not a summary ends the fire in one clear line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalloop.cli import app
from evalloop.config import load_settings
from evalloop.loop.pipeline import run_suite
from evalloop.report.summary import RunSummary, SummaryError, run_summary
from evalloop.scheduling.fire import _result, run_fire
from support.project import make_project

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)]}
CHATTY = '''
def echo(input):
    print("{ not json, a target's own print")
    return input
'''


def test_the_summary_round_trips_through_its_json(tmp_path):
    root = make_project(tmp_path, {"s": SUITE})
    run_suite("s", settings=load_settings(root))
    summary = run_summary(run_suite("s", settings=load_settings(root)))
    text = json.dumps(summary.dump(), indent=2)  # as `evalloop run --json` prints it
    assert RunSummary.from_output("a target's print\n" + text) == summary
    assert summary.outcome == "steady" and summary.scorers[0].scorer == "equals"


def test_the_cli_prints_the_models_dump(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"s": SUITE})
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    result = CliRunner().invoke(app, ["run", "-s", "s", "-C", str(root), "--json", "--no-cases"])
    assert result.exit_code == 0, result.output
    summary = RunSummary.model_validate_json(result.stdout)
    assert json.loads(result.stdout) == summary.dump()  # nothing printed that the model does not hold
    assert summary.verdict == "no baseline yet" and summary.n_cases == 3 and summary.cases is None


def test_a_fire_reads_its_childs_summary_past_the_targets_prints(tmp_path):
    root = make_project(tmp_path, {"s": SUITE}, target=CHATTY)
    result = run_fire(str(root), "s", timeout=120)
    assert result.status == "completed", result.detail
    assert isinstance(result.summary, RunSummary) and result.summary.run_id == result.run_id
    assert result.verdict == "no baseline yet"


def test_output_that_is_not_a_summary_ends_the_fire_in_one_line():
    for out, said in [("", "no JSON summary in the output (it is empty)"),
                      ("Traceback: boom\n", "no JSON summary in the output (it begins 'Traceback: boom')"),
                      ('{"run_id": "r1", "suite": "s"}',
                       "the JSON summary is not a run summary: status: Field required"),
                      ('{"run_id": ', "the JSON summary is not a run summary")]:
        fire = _result(0, out, "", None, None)
        assert fire.status == "error" and fire.exit_code == 0
        assert fire.detail is not None and "\n" not in fire.detail
        assert fire.detail.startswith(f"the fire process exited 0 without a run summary: {said}"), fire.detail
        assert "evalloop run --suite SUITE --json" in fire.detail


def test_summary_error_is_one_line():
    try:
        RunSummary.from_output('{"run_id": 3}')
    except SummaryError as exc:
        assert "\n" not in str(exc) and "problems" in str(exc)
    else:
        raise AssertionError("not a summary")


def test_a_fire_uses_only_documented_options_of_run():
    """The scheduler's command line is one a user could type: every flag it passes is in
    ``evalloop run --help`` (no hidden flag only the scheduler knows)."""
    import typer

    from evalloop.scheduling.fire import fire_argv

    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    shown = {name for p in command.params if not getattr(p, "hidden", False) for name in p.opts + p.secondary_opts}
    argvs = (fire_argv("/p", "s", {"batch": True, "max_cost": 1.0}), fire_argv("/p", "s", {"resume": "r1"}))
    flags = {a for argv in argvs for a in argv[argv.index("run") + 1:] if a.startswith("-")}
    assert flags - shown == set()
    assert "--notify" in flags
