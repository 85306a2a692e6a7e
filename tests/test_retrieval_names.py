"""Retrieval's modules are named for what they are, never for a concept of the loop (issue #43):
what was ``retrieval.runner`` evaluates one retriever, ``retrieval.baselines`` holds the reference
retrievers and ``retrieval.suite`` the ``dataset:`` case source; a suite naming an old target ref
still runs."""

from __future__ import annotations

from pathlib import Path

from evalloop.suites.models import TargetRef

RETRIEVAL = Path(__file__).resolve().parents[1] / "src" / "evalloop" / "retrieval"
#: the loop's own concepts: a run and its runner, a suite, a baseline (run/, suites/, verdicts/)
LOOP_WORDS = {"run", "runner", "runs", "suite", "suites", "baseline", "baselines", "verdict", "verdicts"}


def test_no_retrieval_module_is_named_for_a_concept_of_the_loop():
    stems = {p.stem for p in RETRIEVAL.glob("*.py")}
    assert sorted(stems & LOOP_WORDS) == []


def test_a_suite_naming_a_moved_target_still_finds_it():
    assert TargetRef(ref="evalloop.retrieval.suite:RetrieverTarget").ref == \
        "evalloop.retrieval.suite_targets:RetrieverTarget"
    assert TargetRef(ref="evalloop.retrieval.suite:AnswerTarget").ref == "evalloop.retrieval.answer_target:AnswerTarget"
    assert TargetRef(ref="sut:answer").ref == "sut:answer"
