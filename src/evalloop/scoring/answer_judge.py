"""Seed 000's graded LLM judge for answers: 0–3 against a reference, with its rubric.

Exact match and token F1 miss paraphrases and reward answers that merely share words; a judge
reads the question, the reference answer and the system's answer (or, for a memory that returns
texts, the retrieved texts it would answer from) and gives a grade on a four-point rubric. The
score is ``grade / 3``; the grade itself is kept in the score's metadata, so per-grade counts
come from history. It runs on the judge machinery of :mod:`evalloop.scoring.llm`: no judge
configured is *skipped*, an unparseable reply or failed call is *errored*, never a real 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from evalloop.score import Score
from evalloop.scoring.heuristic import as_text
from evalloop.scoring.llm import HARSH, ask_judge
from evalloop.scoring.registry import scorer
from evalloop.untrusted import fence

ANSWER_RUBRIC = """\
3 = correct and complete: states what the reference states (any wording), nothing that contradicts it.
2 = mostly correct: the key fact is right, but a detail is missing, vague or slightly off.
1 = partially relevant: related information, but the key fact is missing or only hinted at.
0 = wrong, contradicting the reference, unrelated, or no answer ("I don't know" when the
    reference has an answer)."""
"""The four grades, as the judge reads them."""


class AnswerGrade(BaseModel):
    """The judge's grade of one answer on the 0–3 rubric, and why."""

    grade: int = Field(ge=0, le=3, description="0, 1, 2 or 3 per the rubric")
    reason: str = Field(default="", description="one sentence: what is right or missing")


def _question(input: Any) -> str:
    if isinstance(input, Mapping):
        return str(input.get("question", input.get("query", input.get("text", ""))))
    return as_text(input)


def _reference(expected: Any) -> str | None:
    if isinstance(expected, Mapping):
        value = expected.get("answer", expected.get("reference"))
        return None if value is None else str(value)
    return None if expected is None else str(expected)


def _answer(output: Any, k: int) -> str:
    if isinstance(output, Mapping):
        output = output.get("answer", output.get("texts", output))
    if isinstance(output, list | tuple):
        return "\n---\n".join(as_text(t) for t in list(output)[:k])
    return as_text(output)


@scorer("answer-grade", kind="llm_judge")
async def answer_grade(input: Any, output: Any, expected: Any, k: int = 5, rubric: str = ANSWER_RUBRIC,
                       model: str | None = None, ctx: Any = None) -> Score:
    """LLM judge: the answer graded 0–3 against the reference (seed 000's rubric); score grade / 3."""
    reference = _reference(expected)
    if not reference:
        return Score.error("answer-grade needs the reference answer: expected.answer")
    answer = _answer(output, k)
    if not answer.strip():
        return Score(value=0.0, message="grade 0: no answer", metadata={"grade": 0})
    prompt = (
        "Grade how well the ANSWER answers the QUESTION, judged against the REFERENCE answer. "
        "If the ANSWER is a set of retrieved texts, grade what a reader could answer from them.\n\n"
        f"Rubric:\n{rubric}\n\n{fence('QUESTION', _question(input))}\n\n"
        f"{fence('REFERENCE', reference)}\n\n{fence('ANSWER', answer)}\n\n"
        f"Give the grade (0, 1, 2 or 3) and one sentence of reason. {HARSH}"
    )
    verdict = await ask_judge(ctx, AnswerGrade, prompt, model=model)
    if isinstance(verdict, Score):
        return verdict
    return Score(value=verdict.grade / 3, message=f"grade {verdict.grade}: {verdict.reason}",
                 metadata={"grade": verdict.grade})
