"""mem0's evaluation of LoCoMo: its J judge and its BLEU-1, as its evaluation code defines them.

- **J (mem0's judge)**: one user message holds the whole task (no system prompt), temperature 0:
  label the generated answer CORRECT or WRONG, generously — CORRECT as long as it *touches on the
  same topic* as the gold answer; a time question is CORRECT when the answer points to the same
  date or period in any format. The reply is JSON with the key ``label``: exactly ``CORRECT``
  scores 1, any other label 0. evalloop's wording of those rules is ``prompts/j-mem0.md``; a
  reply with no JSON ``label`` is an errored grade here (mem0's script would stop).
- **BLEU-1**: NLTK's sentence BLEU with unigram weights ``(1, 0, 0, 0)`` and smoothing method 1,
  over the lower-cased words of the answer against the gold's; 0 when either is empty. mem0
  tokenises with NLTK's ``word_tokenize``, which first splits sentences with the Punkt model
  (a data download); here NLTK's Treebank word tokenizer alone does it, the same words for an
  answer of one sentence.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from evalloop.score import Score

_JSON = re.compile(r"\{.*\}", re.S)


@functools.cache
def _tokenizer() -> Any:
    try:
        from nltk.tokenize import NLTKWordTokenizer
    except ImportError:
        from evalloop.errors import ConfigError

        raise ConfigError("BLEU-1 is NLTK's sentence BLEU, and nltk is not installed",
                          hint="pip install 'evalloop[benchmarks]'") from None

    return NLTKWordTokenizer()


def words(text: str) -> list[str]:
    """The lower-cased NLTK word tokens of ``text``."""
    return list(_tokenizer().tokenize(text.lower()))


def bleu1(prediction: object, gold: object) -> float:
    """BLEU-1 of an answer against its gold, as mem0's evaluation computes it."""
    answer, reference = str(prediction or "").strip(), str(gold or "").strip()
    if not answer or not reference:
        return 0.0
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    value = sentence_bleu([words(reference)], words(answer), weights=(1, 0, 0, 0),
                          smoothing_function=SmoothingFunction().method1)
    return float(value)


def judge_prompt(question: str, gold: str, answer: str) -> str:
    """mem0's judge task with the case's texts in place."""
    from evalloop.retrieval.answers import prompt_text

    return prompt_text("j-mem0").format(question=question, gold=gold, answer=answer)


def read_label(text: str) -> str | None:
    """The ``label`` of the JSON object in a judge's reply, or None when there is none."""
    for candidate in (text.strip(), *(m.group(0) for m in _JSON.finditer(text))):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("label"), str):
            return str(data["label"]).strip()
    return None


async def mem0_judge(ctx: Any, question: str, gold: str, answer: str, model: str | None = None) -> Score:
    """mem0's J judge on one answer through the run's judge client (skipped without one)."""
    from evalloop.errors import EvalloopError
    from evalloop.llm.errors import is_case_level
    from evalloop.llm.types import LLMRequest, Message
    from evalloop.scoring.llm import NO_JUDGE

    client = getattr(getattr(ctx, "services", None), "judge", None)
    if client is None:
        return Score.skip(NO_JUDGE)
    request = LLMRequest(model=model or client.model, temperature=0.0, max_tokens=256,
                         messages=[Message(role="user", content=judge_prompt(question, gold, answer))])
    try:
        reply = await client.complete(request)
    except EvalloopError as exc:
        if not is_case_level(exc):
            raise
        return Score.error(f"LLM judge error: {exc.one_line()}")
    label = read_label(reply.text)
    if label is None:
        return Score.error(f"the judge's reply has no JSON label: {reply.text[:80]!r}")
    return Score(value=float(label == "CORRECT"), message=f"{label} (mem0's judge)")
