"""Seed 000's graded answer judge (0–3 rubric) on the real anthropic SDK against a loopback
Messages-API server: grades become grade / 3, failures are errored or skipped, never a real 0."""

from __future__ import annotations

import os
import re

import pytest

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.loop.pipeline import arun_suite
from evalloop.suites.models import Suite
from support.messages_server import LLMServer, Reply, Seen

CASES = [
    {"id": "right", "input": {"question": "Where does Ingrid live?", "answer": "She lives in Halifax."},
     "expected": {"answer": "Halifax"}},
    {"id": "vague", "input": {"question": "What does Ingrid do?", "answer": "Something with the sea."},
     "expected": {"answer": "marine biologist"}},
    {"id": "wrong", "input": {"question": "Where does Walter live?", "answer": "Tucson"},
     "expected": {"answer": "Duluth"}},
    {"id": "empty", "input": {"question": "Who teaches piano?", "answer": ""}, "expected": {"answer": "Beatriz"}},
]
GRADES = {"She lives in Halifax.": 3, "Something with the sea.": 1, "Tucson": 0}


def fenced(text: str, name: str) -> str:
    found = re.search(rf"<<<{name} ([0-9a-f]+)>>>\n(.*?)\n<<<END {name} \1>>>", text, re.DOTALL)
    assert found, f"no {name} in the prompt"
    return found.group(2)


def grader(seen: Seen) -> Reply:
    assert seen.forced_tool is not None
    prompt = str(seen.body["messages"][0]["content"])
    # the rubric is the stable prefix, marked for prompt caching; the case's texts are the message
    assert "3 = correct and complete" in seen.system_text and seen.cache_marked and fenced(prompt, "REFERENCE")
    answer = fenced(prompt, "ANSWER")
    if answer == "Tucson" and os.environ.get("BREAK_JUDGE"):
        return Reply.of_tool({"grade": 7, "reason": "out of range"})
    return Reply.of_tool({"grade": GRADES[answer], "reason": "scripted"})


def suite() -> Suite:
    return Suite.model_validate({"name": "answers", "target": "sut:answer", "scorers": ["answer-grade"],
                                 "cases": CASES})


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "sut.py").write_text("def answer(input):\n    return input['answer']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    return tmp_path


async def test_answers_are_graded_zero_to_three_and_scored_grade_over_three(project, monkeypatch):
    with LLMServer(grader) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(suite(), RunOptions(cache="off"), settings=load_settings(project))
        assert server.count == 3  # the empty answer is a 0 without asking
    summary = report.executed.summaries["answer-grade"]
    assert summary.mean == pytest.approx((3 + 1 + 0 + 0) / 3 / 4)
    from evalloop.history.store import HistoryStore

    store = HistoryStore(load_settings(project).database_url)
    scores = store.case_scores(report.executed.run.id, "answer-grade")
    assert scores == {"right": 1.0, "vague": pytest.approx(1 / 3), "wrong": 0.0, "empty": 0.0}
    assert "grade 1: scripted" in store.case_messages(report.executed.run.id, "answer-grade", ["vague"])["vague"]


async def test_a_grade_off_the_rubric_is_errored_and_no_judge_is_skipped(project, monkeypatch):
    monkeypatch.setenv("BREAK_JUDGE", "1")
    with LLMServer(grader) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(suite(), RunOptions(cache="off"), settings=load_settings(project))
    summary = report.executed.summaries["answer-grade"]
    assert summary.errored == 1 and summary.mean == pytest.approx((3 + 1 + 0) / 3 / 3)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    skipped = await arun_suite(suite(), RunOptions(cache="off"), settings=load_settings(project))
    assert skipped.executed.summaries["answer-grade"].n <= 1  # only the empty answer is graded offline


RESULTS = {"Halifax harbour": 5, "Ingrid is a marine biologist": 4, "Dad is a carpenter": 1}


def relevance_grader(seen: Seen) -> Reply:
    prompt = str(seen.body["messages"][0]["content"])
    assert "5 = directly answers the query" in seen.system_text and "memory system" not in prompt.split("QUERY")[0]
    texts, i = [], 1
    while f"RESULT {i}" in prompt:
        texts.append(fenced(prompt, f"RESULT {i}"))
        i += 1
    grades = [RESULTS[t] for t in texts]
    if "short" in fenced(prompt, "QUERY"):
        grades = grades[:-1]  # one grade too few
    return Reply.of_tool({"grades": grades})


async def test_search_results_are_graded_one_to_five_as_graded_precision(project, monkeypatch):
    (project / "sut.py").write_text("def results(input):\n    return input['results']\n")
    cases = [{"id": "good", "input": {"query": "Where does Ingrid live?",
                                     "results": ["Halifax harbour", "Ingrid is a marine biologist"]}},
             {"id": "late", "input": {"query": "What does Ingrid do?",
                                     "results": ["Dad is a carpenter", "Ingrid is a marine biologist"]}},
             {"id": "short", "input": {"query": "short", "results": ["Halifax harbour", "Dad is a carpenter"]}},
             {"id": "none", "input": {"query": "anything", "results": []}}]
    suite = Suite.model_validate({"name": "relevance", "target": "sut:results", "cases": cases,
                                  "scorers": [{"name": "result-relevance", "params": {"k": 2}}]})
    with LLMServer(relevance_grader) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(suite, RunOptions(cache="off"), settings=load_settings(project))
    from evalloop.history.store import HistoryStore

    store = HistoryStore(load_settings(project).database_url)
    scores = store.case_scores(report.executed.run.id, "result-relevance")
    assert scores == {"good": pytest.approx(9 / 10), "late": pytest.approx(5 / 10), "none": 0.0}
    assert report.executed.summaries["result-relevance"].errored == 1  # 'short': one grade missing
