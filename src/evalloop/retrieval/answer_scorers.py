"""Built-in memory-QA scorers: the J judges, LoCoMo's token F1, evalloop's, BLEU-1, and abstention.

They grade the answer a memory-QA target gave (``{"answer": ...}`` or the text) against
``expected = {"answer", "category", "adversarial"}`` (see :mod:`evalloop.retrieval.answers`).
J, the F1s and BLEU-1 skip adversarial questions and ``abstention`` / ``locomo-adversarial``
grade only those, so a suite's J is the published headline (categories 1–4) and abstention
stands beside it, never inside it.

Each is a **measurement** (``min_score`` 0): a benchmark reports where a system stands, so no
absolute floor fails its run; a suite may still set one (``{name: j-judge, min_score: 0.6}``).

Which rules each follows, and where they come from:

- ``j-judge`` with ``judge: strict`` (the default): evalloop's judge — the answer must state the
  reference's fact; hedging is WRONG (``prompts/j-judge.md``). With ``judge: mem0``: mem0's
  LoCoMo judge, generous — CORRECT when the answer touches on the gold's topic
  (:mod:`evalloop.retrieval.mem0_eval`). Imported suites list both, as ``j-strict`` and ``j-mem0``.
- ``locomo-f1``: exactly LoCoMo's own scoring (:mod:`evalloop.retrieval.locomo_eval`); a question
  with no LoCoMo category (LongMemEval's) is scored as a whole answer, as categories 2–4 are.
- ``evalloop-f1``: evalloop's corrected token F1 (:func:`evalloop.retrieval.answers.evalloop_f1`).
- ``bleu-1``: BLEU-1 as mem0's evaluation computes it.
- ``abstention``: evalloop's reading of "declined" (many phrasings); ``locomo-adversarial``:
  LoCoMo's own category-5 rule (only "no information available" or "not mentioned").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from evalloop.score import Score
from evalloop.scoring.registry import scorer

ADVERSARIAL_SKIP = "adversarial question: graded by abstention, not in the headline"
Judge = Literal["strict", "mem0"]


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


def _question(input: Any) -> str:
    return str(input.get("question", "")) if isinstance(input, Mapping) else str(input)


@scorer("j-judge", kind="llm_judge", binary=True, min_score=0)
async def j_judge(input: Any, output: Any, expected: Any, model: str | None = None, ctx: Any = None,
                  judge: Judge = "strict") -> Score:
    """LLM judge, binary CORRECT/WRONG: ``judge: strict`` (evalloop's: the same fact) or
    ``judge: mem0`` (mem0's: the same topic). J = share CORRECT; adversarial questions skipped."""
    from evalloop.retrieval.answers import prompt_text
    from evalloop.scoring.llm import ask_judge
    from evalloop.untrusted import fence

    truth, _, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    question = _question(input)
    from evalloop.retrieval.card import noting_judge

    ctx = noting_judge(ctx)  # the benchmark card names the snapshot the judge answered with
    if judge == "mem0":
        from evalloop.retrieval.mem0_eval import mem0_judge

        return await mem0_judge(ctx, question, truth, _answer(output), model=model)
    if judge != "strict":
        raise ValueError(f"judge must be 'strict' or 'mem0', not {judge!r}")
    prompt = (f"{fence('QUESTION', question)}\n\n{fence('REFERENCE ANSWER', truth)}\n\n"
              f"{fence('ASSISTANT ANSWER', _answer(output))}")
    # its prompt file is the stable prefix (cached); the case's texts are the message
    verdict = await ask_judge(ctx, JLabel, prompt_text("j-judge"), prompt, model=model, system="")
    if isinstance(verdict, Score):
        return verdict
    return Score(value=float(verdict.label == "CORRECT"), message=f"{verdict.label}: {verdict.reason}")


@scorer("locomo-f1", min_score=0)
def locomo_f1(input: Any, output: Any, expected: Any) -> Score:
    """Token F1 exactly as LoCoMo's own evaluation scores it, per category (commas deleted,
    NLTK Porter stems, both-empty 0; adversarial questions are skipped)."""
    from evalloop.retrieval import locomo_eval

    truth, category, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    cat = locomo_eval.category_of(category)
    value = locomo_eval.score(_answer(output), truth, cat if cat in (1, 2, 3, 4) else 4)
    return Score(value=value, message=f"F1 {value:.3f} vs {truth[:60]!r}")


@scorer("evalloop-f1", min_score=0)
def evalloop_f1(input: Any, output: Any, expected: Any) -> Score:
    """evalloop's corrected token F1 (commas separate words, two empty answers agree), per
    LoCoMo category; adversarial questions are skipped."""
    from evalloop.retrieval.answers import evalloop_f1 as f1

    truth, category, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    value = f1(_answer(output), truth, category)
    return Score(value=value, message=f"F1 {value:.3f} vs {truth[:60]!r}")


@scorer("bleu-1", min_score=0)
def bleu_1(input: Any, output: Any, expected: Any) -> Score:
    """BLEU-1 of the answer against the reference, as mem0's evaluation computes it
    (adversarial questions are skipped)."""
    from evalloop.retrieval.mem0_eval import bleu1

    truth, _, adversarial = _expected(expected)
    if adversarial:
        return Score.skip(ADVERSARIAL_SKIP)
    value = bleu1(_answer(output), truth)
    return Score(value=value, message=f"BLEU-1 {value:.3f} vs {truth[:60]!r}")


@scorer("abstention", binary=True, min_score=0)
def abstention(input: Any, output: Any, expected: Any) -> Score:
    """Adversarial questions only: 1 when the answer declines (the conversation does not say),
    0 when it answers, e.g. with the trap answer; other questions are skipped."""
    from evalloop.retrieval.answers import abstains

    return _adversarial(output, expected, abstains)


@scorer("locomo-adversarial", binary=True, min_score=0)
def locomo_adversarial(input: Any, output: Any, expected: Any) -> Score:
    """Adversarial questions only, LoCoMo's own rule: 1 when the answer contains "no information
    available" or "not mentioned", else 0; other questions are skipped."""
    from evalloop.retrieval.locomo_eval import declines

    return _adversarial(output, expected, declines)


def _adversarial(output: Any, expected: Any, declined: Any) -> Score:
    truth, _, adversarial = _expected(expected)
    if not adversarial:
        return Score.skip("not an adversarial question")
    answer = _answer(output)
    if declined(answer):
        return Score(value=1.0, message="abstained")
    trap = " (the trap answer)" if truth and truth.lower() in answer.lower() else ""
    return Score(value=0.0, message=f"answered {answer[:60]!r}{trap}")
