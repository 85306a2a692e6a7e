"""Built-in memory-QA scorers: the J judge, LoCoMo's token F1, and abstention.

They grade the answer a memory-QA target gave (``{"answer": ...}`` or the text) against
``expected = {"answer", "category", "adversarial"}`` (see :mod:`evalloop.retrieval.answers`).
J and F1 skip adversarial questions and ``abstention`` grades only those, so a suite's J is the
published headline (categories 1–4) and abstention stands beside it, never inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from evalloop.score import Score
from evalloop.scoring.registry import scorer

ADVERSARIAL_SKIP = "adversarial question: graded by abstention, not in the headline"


class JLabel(BaseModel):
    """The J judge's verdict on one answer."""

    reason: str = Field(description="one sentence")
    label: Literal["CORRECT", "WRONG"]


def _answer(output: Any) -> str:
    if isinstance(output, Mapping):
        return str(output.get("answer") or "")
    return "" if output is None else str(output)


def _expected(expected: Any) -> tuple[str, Any, bool]:
    if not isinstance(expected, Mapping):
        return str(expected or ""), None, False
    return str(expected.get("answer") or ""), expected.get("category"), bool(expected.get("adversarial"))


@scorer("j-judge", kind="llm_judge", binary=True)
async def j_judge(input: Any, output: Any, expected: Any, model: str | None = None, ctx: Any = None) -> Score:
    """LLM judge, binary and generous (mem0's LoCoMo protocol): does the answer state the
    reference's fact? J = share CORRECT; adversarial questions are skipped."""
    from evalloop.retrieval.answers import prompt_text
    from evalloop.scoring.llm import ask_judge
    from evalloop.untrusted import fence

    truth, _, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    question = input.get("question", "") if isinstance(input, Mapping) else str(input)
    prompt = (f"{fence('QUESTION', question)}\n\n{fence('REFERENCE ANSWER', truth)}\n\n"
              f"{fence('ASSISTANT ANSWER', _answer(output))}")
    # its prompt file is the stable prefix (cached); the case's texts are the message
    verdict = await ask_judge(ctx, JLabel, prompt_text("j-judge"), prompt, model=model, system="")
    if isinstance(verdict, Score):
        return verdict
    return Score(value=float(verdict.label == "CORRECT"), message=f"{verdict.label}: {verdict.reason}")


@scorer("locomo-f1")
def locomo_f1(input: Any, output: Any, expected: Any) -> Score:
    """Token F1 of the answer against the reference, normalised and scored per category as
    LoCoMo's evaluation does (adversarial questions are skipped)."""
    from evalloop.retrieval.answers import locomo_f1 as f1

    truth, category, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    value = f1(_answer(output), truth, category)
    return Score(value=value, message=f"F1 {value:.3f} vs {truth[:60]!r}")


@scorer("abstention", binary=True)
def abstention(input: Any, output: Any, expected: Any) -> Score:
    """Adversarial questions only: 1 when the answer declines (the conversation does not say),
    0 when it answers, e.g. with the trap answer; other questions are skipped."""
    from evalloop.retrieval.answers import abstains

    truth, _, adversarial = _expected(expected)
    if not adversarial:
        return Score.skip("not an adversarial question")
    answer = _answer(output)
    if abstains(answer):
        return Score(value=1.0, message="abstained")
    trap = " (the trap answer)" if truth and truth.lower() in answer.lower() else ""
    return Score(value=0.0, message=f"answered {answer[:60]!r}{trap}")
