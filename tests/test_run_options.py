"""RunOptions: a run's options travel as one frozen value from the CLI through the pipeline to the
runner, so a new option is one field and the line that reads it, not four signatures."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from evalloop import RunOptions, load_settings, run_suite
from evalloop.loop import pipeline
from evalloop.run import runner
from support.project import make_project

OPTION_NAMES = set(RunOptions.model_fields)


@pytest.mark.parametrize("fn", [pipeline.arun_suite, pipeline.run_suite, pipeline._run, runner.execute],
                         ids=lambda fn: fn.__name__)
def test_no_signature_takes_an_option_one_at_a_time(fn):
    params = inspect.signature(fn).parameters
    assert "options" in params
    assert not OPTION_NAMES & set(params), f"{fn.__name__} takes options one by one: {OPTION_NAMES & set(params)}"


def test_arun_suite_takes_at_most_eight_parameters():
    assert len(inspect.signature(pipeline.arun_suite).parameters) <= 8


def test_options_are_a_frozen_value_that_names_a_misspelt_option():
    options = RunOptions(epochs=3, cache="off")
    with pytest.raises(ValidationError):
        options.epochs = 4  # type: ignore[misc]
    with pytest.raises(ValidationError, match="epoch"):
        RunOptions(epoch=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        RunOptions(cache="sometimes")  # type: ignore[arg-type]
    assert options == RunOptions(epochs=3, cache="off") and hash(options) == hash(RunOptions(epochs=3, cache="off"))
    # the predicate is no data: it is left out of the dump
    assert "select" not in RunOptions(select=lambda case: True).model_dump()


def test_the_options_reach_the_runner(tmp_path):
    suite = {"name": "o", "target": "sut:echo", "scorers": ["json-valid"],
             "cases": [{"id": f"c{i}", "input": {"i": i}, "tags": ["odd"] if i % 2 else []} for i in range(10)]}
    root = make_project(tmp_path, {"o": suite})
    report = run_suite("o", RunOptions(epochs=2, select=lambda case: "odd" in case.tags, concurrency=1),
                       settings=load_settings(root))
    run = report.executed.run
    assert run.epochs == 2 and run.n_cases == 5 and run.partial
