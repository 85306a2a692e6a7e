"""The cost budget (``--max-cost``, ``max_cost`` in a suite): a run stops starting LLM calls once
the estimate would pass it, finishes what is in flight, stops within one in-flight window of the
budget, is marked invalid with one line saying what it spent, and never becomes a baseline — on
the real anthropic SDK against the loopback Messages-API server."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import arun_suite
from evalloop.suites.models import Suite
from support.cli import cli
from support.messages_server import LLMServer, Reply, Seen

CALL_USD = (1000 * 1.0 + 100 * 5.0) / 1e6  # Haiku 4.5: 1,000 tokens in, 100 out
CONCURRENCY = 4


def judged(n: int, **extra) -> dict:
    cases = [{"id": f"c{i:02d}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(n)]
    return {"name": "judged", "target": "sut:echo", "cases": cases,
            "scorers": [{"name": "llm-rubric", "params": {"rubric": "Is it right?"}}], **extra}


def grade(seen: Seen) -> Reply:
    return Reply.of_tool({"score": 90, "issues": [], "strengths": []}, input_tokens=1000, output_tokens=100,
                         delay=0.01)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "sut.py").write_text("def echo(input):\n    return 'said ' + input\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    return tmp_path


async def test_a_run_stops_within_one_in_flight_window_of_its_budget(project, monkeypatch):
    budget = 20.5 * CALL_USD
    with LLMServer(grade) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        settings = load_settings(project)
        options = RunOptions(cache="off", concurrency=CONCURRENCY, max_cost=budget)
        report = await arun_suite(Suite.model_validate(judged(60)), options, settings=settings)
        calls = server.count
    run = report.executed.run
    assert run.llm_calls == calls and run.cost_usd == pytest.approx(calls * CALL_USD)
    assert budget - (CONCURRENCY + 1) * CALL_USD <= run.cost_usd <= budget  # one in-flight window
    assert not run.valid and run.partial
    assert run.invalid_reason.startswith(f"stopped at the cost budget: spent ${run.cost_usd:.4f} of "
                                         f"--max-cost ${budget:.4f}")
    stored = HistoryStore(settings.database_url).case_results(run.id)
    assert len(stored) == calls  # every case whose judge was asked is kept; no case ran unjudged
    assert run.status == "completed" and report.comparison.invalid

    # never a baseline: the next run (no budget) has none
    with LLMServer(grade) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        after = await arun_suite(Suite.model_validate(judged(60)), RunOptions(cache="off"), settings=settings)
    assert after.executed.run.valid and all(s.baseline is None for s in after.comparison.scorers)


def test_max_cost_in_the_suite_and_on_the_command_line(project):
    (project / "fixtures").mkdir()
    (project / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(judged(30, max_cost=5 * CALL_USD)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    with LLMServer(grade) as server:
        env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.url, PYTHONPATH=str(project))
        from_suite = cli(project, "run", "--suite", "judged", "--no-cache", "--json", env=env)
        assert from_suite.returncode == 1, from_suite.stderr  # an invalid run fails
        doc = json.loads(from_suite.stdout)
        assert not doc["valid"] and doc["cost_usd"] <= 5 * CALL_USD + 1e-9
        assert doc["invalid_reason"].startswith("stopped at the cost budget: spent $")
        seen = server.count
        # the command line wins over the suite: a budget big enough for every case
        wide = cli(project, "run", "--suite", "judged", "--no-cache", "--json", "--max-cost", "1", env=env)
        assert wide.returncode == 0, wide.stderr
        assert json.loads(wide.stdout)["valid"] and server.count == seen + 30
