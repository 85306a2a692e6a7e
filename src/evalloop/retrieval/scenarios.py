"""Multi-turn memory scenarios: turns fed to a chat target, graded turns scored by keywords.

A graded turn scores 1.0 when the normalised reply holds every required keyword within the
word limit, 0.5 when it holds them but is too long, else 0.0. With an embedder, similarity to
the expected answer is ``(cos + 1) / 2``; a 0.0 turn whose similarity is at least 0.75 is
raised to 0.5 partial credit.
"""

from __future__ import annotations

import asyncio
import string
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from evalloop.retrieval._calls import maybe_await

if TYPE_CHECKING:
    from evalloop.memory.embedders import Embedder

PARTIAL_CREDIT = 0.5
SIMILARITY_THRESHOLD = 0.75
_PUNCT = str.maketrans("", "", string.punctuation)


class Turn(BaseModel):
    """One user message; it is graded when it names keywords."""

    text: str
    expected: str | None = None
    keywords: list[str] = Field(default_factory=list)
    max_words: int | None = None

    @property
    def graded(self) -> bool:
        return bool(self.keywords)


class Scenario(BaseModel):
    """An ordered conversation testing one memory capability."""

    id: str
    turns: list[Turn]
    category: str = "all"
    description: str = ""


@runtime_checkable
class ChatTarget(Protocol):
    """A memory-backed assistant: ``send(message) -> reply`` (sync or async); ``reset`` optional.

    A bare callable ``(message) -> reply`` also works.
    """

    def send(self, message: str) -> Any: ...


class TurnGrade(BaseModel):
    """The grade of one turn."""

    turn: int
    response: str
    accuracy: float | None
    keyword_accuracy: float | None
    similarity: float | None
    latency_ms: float


class ScenarioResult(BaseModel):
    """One scenario: the mean accuracy and similarity of its graded turns."""

    id: str
    category: str
    accuracy: float
    mean_similarity: float | None
    mean_latency_ms: float
    turns: list[TurnGrade]


class ScenarioReport(BaseModel):
    """All scenarios, with means over scenarios overall and per category."""

    accuracy: float
    mean_similarity: float | None
    per_category: dict[str, float]
    scenarios: list[ScenarioResult]


def normalize_text(text: str) -> str:
    """Lower case, punctuation removed, whitespace collapsed."""
    return " ".join(text.lower().translate(_PUNCT).split())


def word_count(text: str) -> int:
    return len(normalize_text(text).split())


def keyword_grade(response: str, keywords: Sequence[str], max_words: int | None) -> float:
    """1.0 all keywords and concise, 0.5 all keywords but verbose, else 0.0."""
    norm = normalize_text(response)
    wanted = [normalize_text(k) for k in keywords if k.strip()]
    if not all(k in norm for k in wanted):
        return 0.0
    if max_words is not None and word_count(response) > max_words:
        return PARTIAL_CREDIT
    return 1.0


def similarity(embedder: Embedder, a: str, b: str) -> float | None:
    """Cosine similarity mapped to [0, 1] by ``(cos + 1) / 2``; None for a zero vector."""
    vecs = np.asarray(embedder.embed([a, b]), dtype=np.float64)
    norms = np.linalg.norm(vecs, axis=1)
    if not np.all(norms > 0):
        return None
    cos = float(vecs[0] @ vecs[1] / (norms[0] * norms[1]))
    return max(0.0, min(1.0, (cos + 1.0) / 2.0))


def grade_turn(
    response: str,
    turn: Turn,
    embedder: Embedder | None = None,
    threshold: float = SIMILARITY_THRESHOLD,
) -> tuple[float | None, float | None, float | None]:
    """``(accuracy, keyword_accuracy, similarity)``; all None for an ungraded turn."""
    if not turn.graded:
        return None, None, None
    kw = keyword_grade(response, turn.keywords, turn.max_words)
    sim = None
    if embedder is not None and turn.expected:
        sim = similarity(embedder, response, turn.expected)
    acc = kw
    if acc == 0.0 and sim is not None and sim >= threshold:
        acc = PARTIAL_CREDIT
    return acc, kw, sim


async def arun_scenario(
    target: Any, scenario: Scenario, embedder: Embedder | None = None, *, reset: bool = True
) -> ScenarioResult:
    """Send each turn in order, timing replies, and grade the graded turns."""
    hook = getattr(target, "reset", None)
    if reset and callable(hook):
        await maybe_await(hook())
    send = getattr(target, "send", None) or target
    grades: list[TurnGrade] = []
    for i, turn in enumerate(scenario.turns):
        start = time.perf_counter()
        reply = await maybe_await(send(turn.text))
        latency = (time.perf_counter() - start) * 1000.0
        text = "" if reply is None else str(reply)
        acc, kw, sim = grade_turn(text, turn, embedder)
        grades.append(
            TurnGrade(
                turn=i,
                response=text,
                accuracy=acc,
                keyword_accuracy=kw,
                similarity=sim,
                latency_ms=latency,
            )
        )
    graded = [g for g in grades if g.accuracy is not None]
    sims = [g.similarity for g in graded if g.similarity is not None]
    return ScenarioResult(
        id=scenario.id,
        category=scenario.category,
        accuracy=float(np.mean([g.accuracy for g in graded])) if graded else 0.0,
        mean_similarity=float(np.mean(sims)) if sims else None,
        mean_latency_ms=float(np.mean([g.latency_ms for g in grades])) if grades else 0.0,
        turns=grades,
    )


async def arun_scenarios(
    target: Any, scenarios: Sequence[Scenario], embedder: Embedder | None = None
) -> ScenarioReport:
    """Run every scenario (the target is reset before each, when it can be)."""
    results = [await arun_scenario(target, s, embedder) for s in scenarios]
    sims = [r.mean_similarity for r in results if r.mean_similarity is not None]
    cats = sorted({r.category for r in results})
    return ScenarioReport(
        accuracy=float(np.mean([r.accuracy for r in results])) if results else 0.0,
        mean_similarity=float(np.mean(sims)) if sims else None,
        per_category={c: float(np.mean([r.accuracy for r in results if r.category == c])) for c in cats},
        scenarios=results,
    )


def run_scenarios(target: Any, scenarios: Sequence[Scenario], embedder: Embedder | None = None) -> ScenarioReport:
    """Synchronous :func:`arun_scenarios` (not for use inside a running event loop)."""
    return asyncio.run(arun_scenarios(target, scenarios, embedder))
