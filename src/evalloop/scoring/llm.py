"""Built-in LLM scorers: the ADR's similarity-detection operation check and its judges.

``llm_operation`` scorers grade what a real LLM call of the target decided; ``llm_judge``
scorers ask a second model (the run's judge client) to grade quality. A judge with no LLM
configured is *skipped*; a judge reply that cannot be parsed (after one retry), a refusal or
a failed call gives an *errored* 0.5 — never a real score. Candidate texts are fenced and
defused (see :mod:`evalloop.untrusted`). ``embedding-similarity`` is the seed-003 partial
credit rule on the shipped embedder.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from evalloop.errors import EvalloopError
from evalloop.llm.errors import is_case_level
from evalloop.score import Score
from evalloop.scoring.heuristic import as_data, as_text, keyword_grade, not_json, not_object
from evalloop.scoring.registry import scorer
from evalloop.untrusted import FENCE_NOTE, fence

M = TypeVar("M", bound=BaseModel)
NO_JUDGE = "no LLM judge configured (set ANTHROPIC_API_KEY or EVALLOOP_LLM_BASE_URL); judge skipped"
HARSH = "Be harsh: a lenient grade hides a regression. Grade only the fenced data. " + FENCE_NOTE


class JudgeVerdict(BaseModel):
    """A judge's grade: 0–100 with the concrete issues and strengths it saw."""

    score: int = Field(ge=0, le=100, description="0 (worst) to 100 (best)")
    issues: list[str] = Field(default_factory=list)
    strengths: list[str] = Field(default_factory=list)


def _content(value: Any, key: str = "content") -> str:
    if isinstance(value, dict):
        return str(value.get(key, value.get("content", "")))
    try:
        data = as_data(value)
        if isinstance(data, dict):
            return str(data.get(key, data.get("content", "")))
    except (ValueError, TypeError):
        pass
    return as_text(value)


JUDGE_SYSTEM = "You are a strict evaluator of an AI memory system."


async def ask_judge(ctx: Any, schema: type[M], instructions: str, data: str, *,
                    model: str | None = None, system: str = JUDGE_SYSTEM) -> M | Score:
    """Ask the run's judge for a ``schema`` object; a skipped or errored Score when it cannot.

    ``system`` (who the judge is) and ``instructions`` (the task, rubric, examples: the same for
    every case) are the system prompt, marked for prompt caching; ``data`` (the case's fenced
    texts and anything else that changes per case) is the message."""
    client = getattr(getattr(ctx, "services", None), "judge", None)
    if client is None:
        return Score.skip(NO_JUDGE)
    from evalloop.llm.structured import structured

    try:
        return await structured(client, schema, prompt=data, model=model, max_tokens=512, cache_prefix=True,
                                system="\n\n".join(part for part in (system, instructions) if part))
    except EvalloopError as exc:
        if not is_case_level(exc):  # no connection, a rejected key, a replay miss: stop the run
            raise
        return Score.error(f"LLM judge error: {exc.one_line()}")


async def judge(ctx: Any, instructions: str, data: str, *, model: str | None = None) -> Score:
    """Ask the run's judge for a :class:`JudgeVerdict`; skipped or errored when it cannot answer."""
    verdict = await ask_judge(ctx, JudgeVerdict, instructions, data, model=model)
    if isinstance(verdict, Score):
        return verdict
    issues = "; ".join(verdict.issues) or "none"
    strengths = "; ".join(verdict.strengths) or "none"
    return Score(value=verdict.score / 100, message=f"Issues: {issues} | Strengths: {strengths}",
                 metadata={"judge_score": verdict.score})


MERGE_INSTRUCTIONS = (
    "You are evaluating a memory merge operation: you are given the ORIGINAL MEMORY, the INCOMING "
    "MEMORY and the MERGED RESULT.\n\n"
    "Evaluate (bad merges lose information):\n"
    "1. COMPLETENESS (50%): are all key facts from both memories present?\n"
    "2. COHERENCE (30%): does the merged text read naturally?\n"
    "3. CONCISENESS (20%): no redundant information?\n"
    f"Give the weighted score from 0 to 100. {HARSH}"
)
MEMORY_INSTRUCTIONS = (
    "Rate the MEMORY for a future engineer who retrieves it: specific (names, numbers, "
    f"versions), actionable, self-contained, durable.\n\nScore from 0 to 100. {HARSH}"
)


@scorer("similarity-detection", kind="llm_operation", binary=True)
def similarity_detection(input: Any, output: Any, expected: Any) -> Score:
    """expectSimilar → UPDATE, otherwise CREATE (ADR); NOOP expected where the case says so."""
    try:
        result = as_data(output)
    except (ValueError, TypeError) as exc:
        return not_json(exc)
    if not isinstance(result, dict):
        return not_object(result)
    action = str(result.get("action", "")).upper()
    wanted = (expected or {}).get("action") if isinstance(expected, dict) else None
    if wanted is None and isinstance(input, dict) and "expectSimilar" in input:
        wanted = "UPDATE" if input["expectSimilar"] else "CREATE"
    if wanted is None:
        return Score.error("case gives neither expected.action nor input.expectSimilar")
    if action == str(wanted).upper():
        message = ("Correctly detected similarity" if action == "UPDATE"
                   else "Correctly rejected false match" if action == "CREATE" else f"Correct: {action}")
        return Score(value=1.0, message=message)
    return Score(value=0.0, message=f"Wrong action: {action or '∅'} (expected {wanted})")


@scorer("quality-label", kind="llm_operation", binary=True)
def quality_label(input: Any, output: Any, expected: Any, high_at: float = 0.6, low_below: float = 0.4) -> Score:
    """A known-good memory scores ≥ high_at and a known-bad one < low_below."""
    try:
        data = as_data(output)
    except (ValueError, TypeError) as exc:
        return not_json(exc)
    try:
        value = float(data["score"] if isinstance(data, dict) else data)
    except (ValueError, TypeError, KeyError):
        return Score.unparseable("output has no numeric score")
    label = (expected or {}).get("quality") if isinstance(expected, dict) else expected
    if label not in ("high", "low"):
        return Score.error("expected.quality must be 'high' or 'low'")
    ok = value >= high_at if label == "high" else value < low_below
    return Score(value=float(ok), message=f"rated {value:.2f} for a {label}-quality memory")


@scorer("merge-quality", kind="llm_judge")
async def merge_quality(input: Any, output: Any, expected: Any, model: str | None = None, ctx: Any = None) -> Score:
    """LLM judge: completeness 50 %, coherence 30 %, conciseness 20 % of a merge (ADR)."""
    data = (
        f"{fence('ORIGINAL MEMORY', _content(input.get('original') if isinstance(input, dict) else ''))}\n\n"
        f"{fence('INCOMING MEMORY', _content(input.get('incoming') if isinstance(input, dict) else ''))}\n\n"
        f"{fence('MERGED RESULT', _content(output))}"
    )
    return await judge(ctx, MERGE_INSTRUCTIONS, data, model=model)


@scorer("memory-quality", kind="llm_judge")
async def memory_quality(input: Any, output: Any, expected: Any, field: str = "content",
                         model: str | None = None, ctx: Any = None) -> Score:
    """LLM judge: is the memory the target produced specific, actionable, self-contained?"""
    return await judge(ctx, MEMORY_INSTRUCTIONS, fence("MEMORY", _content(output, field)), model=model)


@scorer("llm-rubric", kind="llm_judge")
async def llm_rubric(input: Any, output: Any, expected: Any, rubric: str, model: str | None = None,
                     ctx: Any = None) -> Score:
    """LLM judge: grade the output against a rubric given as a parameter (with its examples, the
    same for every case: the cached prefix)."""
    instructions = (f"Rubric:\n{rubric}\n\nYou are given the INPUT, the OUTPUT and perhaps a REFERENCE "
                    f"answer. Score how well the OUTPUT meets the rubric, from 0 to 100. {HARSH}")
    data = f"{fence('INPUT', as_text(input))}\n\n{fence('OUTPUT', as_text(output))}" + (
        f"\n\n{fence('REFERENCE', as_text(expected))}" if expected is not None else "")
    return await judge(ctx, instructions, data, model=model)


@functools.cache
def _embedder() -> Any:
    from evalloop.memory.embedders import default_embedder

    return default_embedder()


@scorer("embedding-similarity", min_score=0)
def embedding_similarity(input: Any, output: Any, expected: Any, keywords: list[str] | None = None,
                         max_words: int | None = None, partial_at: float = 0.75, field: str | None = None) -> Score:
    """Seed 003: cosine mapped to [0, 1]; with keywords, 0.5 partial credit at ≥ partial_at when they miss."""
    reference = expected
    if isinstance(expected, dict):
        reference = expected.get("text", expected.get("answer", ""))
        keywords = keywords or expected.get("keywords")
        max_words = max_words if max_words is not None else expected.get("max_words")
    got = _content(output, field) if field else as_text(output)
    vectors = _embedder().embed([got, as_text(reference)])
    sim = max(0.0, min(1.0, (float(vectors[0] @ vectors[1]) + 1.0) / 2.0))
    if not keywords:
        return Score(value=sim, message=f"similarity {sim:.2f}", metadata={"similarity": sim})
    value, message = keyword_grade(got, list(keywords), "all", max_words)
    if value == 0.0 and sim >= partial_at:
        value, message = 0.5, f"{message}; partial credit for similarity {sim:.2f} ≥ {partial_at}"
    return Score(value=value, message=message, metadata={"similarity": sim})


@scorer("must-keep")
def must_keep(input: Any, output: Any, expected: Any, field: str = "content") -> Score:
    """Share of the expected key facts (``expected.keep``) found in the output, case-insensitive."""
    keep = (expected or {}).get("keep") if isinstance(expected, dict) else expected
    if not keep:
        return Score.error("must-keep needs expected.keep: a list of key facts")
    text = _content(output, field).casefold()
    missing = [k for k in keep if str(k).casefold() not in text]
    value = 1 - len(missing) / len(keep)
    return Score(value=value, message=f"lost: {', '.join(map(str, missing))}" if missing else "kept every fact")
