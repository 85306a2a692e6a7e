"""Seed 000's graded LLM judges: answers 0–3 against a reference, search results 1–5 for relevance.

Exact match and token F1 miss paraphrases and reward answers that merely share words; a judge
reads the question, the reference answer and the system's answer (or, for a memory that returns
texts, the retrieved texts it would answer from) and gives a grade on a four-point rubric. The
score is ``grade / 3``; the grade itself is kept in the score's metadata, so per-grade counts
come from history. It runs on the judge machinery of :mod:`evalloop.scoring.llm`: no judge
configured is *skipped*, an unparseable reply or failed call is *errored*, never a real 0.

``result-relevance`` is the seed's graded retrieval judge: a query's top ``k`` results (500
characters each) go to the judge in one call, graded 1–5 each (5 directly answers … 1 not
relevant), with a neutral prompt that never names the system. The score is the seed's graded
precision@k (sum of grades / 5k; a missing result counts 0); graded MRR (first grade ≥ 4) and the
mean grade are in the metadata.
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
    instructions = (
        "Grade how well the ANSWER answers the QUESTION, judged against the REFERENCE answer. "
        "If the ANSWER is a set of retrieved texts, grade what a reader could answer from them.\n\n"
        f"Rubric:\n{rubric}\n\nGive the grade (0, 1, 2 or 3) and one sentence of reason. {HARSH}"
    )
    data = f"{fence('QUESTION', _question(input))}\n\n{fence('REFERENCE', reference)}\n\n{fence('ANSWER', answer)}"
    verdict = await ask_judge(ctx, AnswerGrade, instructions, data, model=model)
    if isinstance(verdict, Score):
        return verdict
    return Score(value=verdict.grade / 3, message=f"grade {verdict.grade}: {verdict.reason}",
                 metadata={"grade": verdict.grade})


RELEVANCE_SCALE = """\
5 = directly answers the query
4 = highly relevant
3 = partially relevant
2 = tangentially related
1 = not relevant"""
"""Seed 000's five relevance grades for one search result."""
RESULT_CHARS = 500
RELEVANCE_INSTRUCTIONS = (f"Grade each search result's relevance to the QUERY on a 1-5 scale:\n{RELEVANCE_SCALE}\n\n"
                          f"Give one grade per result, in order. {HARSH}")


class ResultGrades(BaseModel):
    """One 1–5 grade per numbered search result, in order."""

    grades: list[int] = Field(description="one grade (1-5) per result, in the order given")


@scorer("result-relevance", kind="llm_judge")
async def result_relevance(input: Any, output: Any, expected: Any, k: int = 5, model: str | None = None,
                           ctx: Any = None) -> Score:
    """LLM judge: each of the top-k results graded 1–5 for relevance; score = graded precision@k."""
    texts = [as_text(t)[:RESULT_CHARS] for t in (output if isinstance(output, list | tuple) else [output])
             if as_text(t).strip()][:k]
    if not texts:
        return Score(value=0.0, message="no results", metadata={"grades": []})
    results = "\n\n".join(fence(f"RESULT {i + 1}", t) for i, t in enumerate(texts))
    data = (f"{fence('QUERY', _question(input))}\n\n{results}\n\n"
            f"Give exactly {len(texts)} grades, one per result, in order.")
    verdict = await ask_judge(ctx, ResultGrades, RELEVANCE_INSTRUCTIONS, data, model=model)
    if isinstance(verdict, Score):
        return verdict
    grades = verdict.grades
    if len(grades) != len(texts) or any(not 1 <= g <= 5 for g in grades):
        return Score.error(f"judge gave grades {grades} for {len(texts)} result(s) (want 1-5 each)")
    first = next((i + 1 for i, g in enumerate(grades) if g >= 4), None)
    meta = {"grades": grades, "graded_mrr": 1.0 / first if first else 0.0,
            "mean_grade": sum(grades) / len(grades)}
    return Score(value=sum(grades) / (5 * k), message=f"grades {grades}", metadata=meta)
