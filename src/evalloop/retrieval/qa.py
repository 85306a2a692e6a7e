"""LoCoMo/LongMemEval-style QA scoring over a memory-backed target.

Each pair's conversation is written into the target, the question is searched, and the top-k
results are scored: recall@k (any result contains the answer), and exact match and token F1 of
the best candidate (the result with the highest token F1 — an oracle, upper-bound choice).
``reset`` mode empties the store before every pair; ``accumulate`` writes every conversation
first and then asks every question, as the published protocols do.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from evalloop.retrieval._calls import hit_text, maybe_await

IngestMode = Literal["reset", "accumulate"]
_TOKEN = re.compile(r"\w+", re.UNICODE)


class QAPair(BaseModel):
    """A question, its ground-truth answer and the conversation that contains it."""

    id: str
    question: str
    ground_truth: str
    category: str = "all"
    conversation_id: str | None = None
    conversation: list[str] = Field(default_factory=list, description="turns or facts to ingest")


@runtime_checkable
class MemoryTarget(Protocol):
    """A memory store under test: ``add`` and ``search`` (sync or async); ``reset`` optional."""

    def add(self, text: str, metadata: dict[str, Any] | None = None) -> Any: ...

    def search(self, query: str, k: int) -> Sequence[Any]: ...


class QAResult(BaseModel):
    """One scored question."""

    id: str
    category: str
    question: str
    ground_truth: str
    retrieved: str = Field(description="the best candidate by token F1 among the top k")
    exact_match: bool
    f1: float
    recalled: bool


class QAReport(BaseModel):
    """Accuracy overall and per category, with every question's result."""

    mode: IngestMode
    k: int
    n: int
    exact_match: float
    f1: float
    recall_at_k: float
    per_category: dict[str, dict[str, float]]
    results: list[QAResult]


def normalise_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped)."""
    return _TOKEN.findall(text.lower())


def exact_match(candidate: str, truth: str) -> bool:
    """Whether the ground truth occurs in the candidate, ignoring case."""
    return truth.strip().lower() in candidate.lower()


def token_f1(candidate: str, truth: str) -> float:
    """Token F1 with multiset overlap between candidate and truth tokens."""
    c, t = normalise_tokens(candidate), normalise_tokens(truth)
    if not c or not t:
        return float(c == t)
    common = sum((Counter(c) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(c), common / len(t)
    return 2 * precision * recall / (precision + recall)


def score_pair(pair: QAPair, texts: Sequence[str], k: int) -> QAResult:
    """Score one question from its ranked result texts."""
    top = list(texts)[:k]
    f1s = [token_f1(t, pair.ground_truth) for t in top]
    best = top[int(np.argmax(f1s))] if top else ""
    return QAResult(
        id=pair.id,
        category=pair.category,
        question=pair.question,
        ground_truth=pair.ground_truth,
        retrieved=best,
        exact_match=bool(top) and exact_match(best, pair.ground_truth),
        f1=max(f1s) if f1s else 0.0,
        recalled=any(exact_match(t, pair.ground_truth) for t in top),
    )


def summarise(results: Sequence[QAResult], mode: IngestMode, k: int) -> QAReport:
    """Aggregate results overall and per category (means over questions)."""

    def agg(rows: Sequence[QAResult]) -> dict[str, float]:
        if not rows:
            return {"n": 0.0, "exact_match": 0.0, "f1": 0.0, "recall_at_k": 0.0}
        return {
            "n": float(len(rows)),
            "exact_match": float(np.mean([r.exact_match for r in rows])),
            "f1": float(np.mean([r.f1 for r in rows])),
            "recall_at_k": float(np.mean([r.recalled for r in rows])),
        }

    overall = agg(results)
    cats = sorted({r.category for r in results})
    return QAReport(
        mode=mode,
        k=k,
        n=len(results),
        exact_match=overall["exact_match"],
        f1=overall["f1"],
        recall_at_k=overall["recall_at_k"],
        per_category={c: agg([r for r in results if r.category == c]) for c in cats},
        results=list(results),
    )


async def _reset(target: Any) -> None:
    hook = getattr(target, "reset", None)
    if callable(hook):
        await maybe_await(hook())


async def _ingest(target: Any, pair: QAPair) -> None:
    for i, turn in enumerate(pair.conversation):
        meta = {"conversation_id": pair.conversation_id or pair.id, "turn": i}
        await maybe_await(target.add(turn, meta))


async def _ask(target: Any, pair: QAPair, k: int) -> QAResult:
    hits = await maybe_await(target.search(pair.question, k))
    return score_pair(pair, [hit_text(h) for h in hits], k)


async def arun_qa(target: MemoryTarget, pairs: Sequence[QAPair], *, mode: IngestMode = "reset", k: int = 5) -> QAReport:
    """Feed conversations to ``target`` in ``mode`` and score every question."""
    results: list[QAResult] = []
    if mode == "reset":
        for pair in pairs:
            await _reset(target)
            await _ingest(target, pair)
            results.append(await _ask(target, pair, k))
    elif mode == "accumulate":
        await _reset(target)
        seen: set[tuple[str, tuple[str, ...]]] = set()
        for pair in pairs:  # a conversation shared by several pairs is written once
            key = (pair.conversation_id or pair.id, tuple(pair.conversation))
            if key not in seen:
                seen.add(key)
                await _ingest(target, pair)
        for pair in pairs:
            results.append(await _ask(target, pair, k))
    else:
        raise ValueError(f"unknown ingestion mode {mode!r}; use 'reset' or 'accumulate'")
    return summarise(results, mode, k)


def run_qa(target: MemoryTarget, pairs: Sequence[QAPair], *, mode: IngestMode = "reset", k: int = 5) -> QAReport:
    """Synchronous :func:`arun_qa` (not for use inside a running event loop)."""
    return asyncio.run(arun_qa(target, pairs, mode=mode, k=k))
