"""A memory-QA run's benchmark card and the table's columns beside the scores.

The card says what a figure was measured with, so it can stand beside a published table: the
protocol (how questions were asked and scored), the answer model and the judge, each as asked
and as it answered (the snapshots the API reported), the retriever and its embedder, the dataset file
(its SHA-256 from ``import.json``), how many of its questions and conversations the run asked,
and that intervals resample whole conversations. It is part of the target's ``run_stats()``
(``card``), so it is in the run's notes, ``run --json`` and ``compare-targets --json``, and the
terminal report prints it under the run table.

The columns: per category, total latency p50/p95 (retrieval + answer) and tokens per question;
the memory's size (tokens it holds, per conversation: characters / 4, as
:func:`evalloop.retrieval.substring.token_spend` counts them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalloop.retrieval.types import Doc

JUDGE_SNAPSHOTS = "judge_snapshots"
"""The key of ``Services.extras`` under which the QA judges note the snapshots their replies report."""


class _Over:
    """An object that is ``inner`` except for the attributes given."""

    def __init__(self, inner: Any, **over: Any) -> None:
        self._inner = inner
        self.__dict__.update(over)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Noting(_Over):
    """A client that notes the model snapshot each reply reports, and is otherwise the client."""

    def __init__(self, client: Any, seen: set[str]) -> None:
        super().__init__(client)
        self._seen = seen

    async def complete(self, request: Any) -> Any:
        response = await self._inner.complete(request)
        self._seen.add(str(response.model))
        return response


def noting_judge(ctx: Any) -> Any:
    """``ctx`` with its judge client noting the snapshots it answers with into the run's services
    (``extras[JUDGE_SNAPSHOTS]``), so the card names the judge as it answered, not only as asked."""
    services = getattr(ctx, "services", None)
    client = getattr(services, "judge", None)
    extras = getattr(services, "extras", None)
    if client is None or not isinstance(extras, dict):
        return ctx
    seen = extras.setdefault(JUDGE_SNAPSHOTS, set())
    return _Over(ctx, services=_Over(services, judge=_Noting(client, seen)))


def per_category(rows: Mapping[str, Sequence[tuple[float, int]]]) -> dict[str, dict[str, float | int]]:
    """Per category: questions, total latency p50 / p95 (ms), tokens per question (in + out)."""
    out: dict[str, dict[str, float | int]] = {}
    for category in sorted(rows):
        ms = np.asarray([r[0] for r in rows[category]], dtype=np.float64)
        tokens = [r[1] for r in rows[category]]
        p50, p95 = np.percentile(ms, [50, 95]) if ms.size else (0.0, 0.0)
        out[category] = {"n": len(tokens), "total_p50_ms": round(float(p50), 3),
                         "total_p95_ms": round(float(p95), 3),
                         "tokens_per_question": round(float(np.mean(tokens)), 1) if tokens else 0.0}
    return out


def _tokens(texts: Sequence[str]) -> float:
    return sum(len(t) for t in texts) / 4.0


def memory_size(index: Any, turns: Mapping[str | None, list[Doc]]) -> dict[str, float | int]:
    """What the memory holds: tokens in all and per conversation, and memories per conversation.
    A retriever that keeps something other than the documents (mem0 with extraction: the facts
    it extracted) says so with ``memory_texts()``, and what building it spent with
    ``build_stats()`` (summed over conversations); any other holds the documents it was given."""
    per_scope: list[tuple[float, int]] = []
    spent: dict[str, float] = {}
    parts = getattr(index, "parts", None) or {}
    for scope, docs in turns.items():
        retriever = parts[scope][0] if scope in parts else None
        hook = getattr(retriever, "memory_texts", None)
        texts = list(hook()) if callable(hook) else [d.content for d in docs]
        per_scope.append((_tokens(texts), len(texts)))
        built = getattr(retriever, "build_stats", None)  # what building it spent (mem0's extraction)
        for key, value in (built() if callable(built) else {}).items():
            spent[key] = spent.get(key, 0) + value
    if not per_scope:
        return {}
    return {"memory_tokens": round(sum(t for t, _ in per_scope), 1),
            "memory_tokens_per_scope": round(float(np.mean([t for t, _ in per_scope])), 1),
            "memories_per_scope": round(float(np.mean([n for _, n in per_scope])), 1),
            **{k: round(v, 6) for k, v in spent.items()}}


def embedder_card(retriever: Any) -> dict[str, Any] | None:
    """The retriever's embedder: its name and dimension (``describe_embedder()`` when it has one)."""
    hook = getattr(retriever, "describe_embedder", None)
    if callable(hook):
        return dict(hook())
    embedder = getattr(retriever, "embedder", None)
    if embedder is None:
        return None
    return {"name": getattr(embedder, "name", type(embedder).__name__), "dim": getattr(embedder, "dim", None)}


def _dataset(folder: Path | None) -> dict[str, Any] | None:
    record = folder / "import.json" if folder is not None else None
    if record is None or not record.is_file():
        return None
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: data.get(k) for k in ("source", "format", "sha256", "n_qa") if data.get(k) is not None}


def benchmark_card(target: Any) -> dict[str, Any]:
    """The card of a memory-QA target after its run (:class:`~evalloop.retrieval.answer_target.AnswerTarget`)."""
    index = getattr(target, "index", None)
    first = index.first() if index is not None else None
    scopes = len(getattr(target, "turns", {}) or {})
    return {
        "protocol": target.protocol,
        "answerer": {"model": target.model, "snapshots": sorted(target.snapshots),
                     "engine": "llm" if target.snapshots else "local"},
        "judge": None if target.judge_model is None else {
            "model": target.judge_model, "snapshots": sorted(target.extras.get(JUDGE_SNAPSHOTS, ()))},
        "retriever": target.label, "k": target.k,
        "embedder": embedder_card(first) if first is not None else None,
        "dataset": _dataset(target.folder),
        "split": {"questions": len(target.questions), "conversations": len(target.asked), "of_conversations": scopes},
        "intervals": "95% bootstrap, whole conversations resampled" if scopes > 1 else "95% bootstrap over questions",
    }


def epoch_spread(rows: Sequence[Any], scorers: Sequence[str]) -> dict[str, tuple[float, float, int]]:
    """Per scorer, the mean and standard deviation (n − 1) of its per-epoch means, and how many
    epochs: J mean ± std over repeated runs, as the mem0 table reports it. ``rows`` are a run's
    score rows (:meth:`~evalloop.history.store.HistoryStore.score_rows`); errored and skipped
    grades are left out of an epoch's mean, as they are of a run's."""
    by: dict[str, dict[int, list[float]]] = {s: {} for s in scorers}
    for row in rows:
        if row.scorer in by and not row.errored and not row.skipped:
            by[row.scorer].setdefault(int(row.epoch), []).append(float(row.value))
    out: dict[str, tuple[float, float, int]] = {}
    for scorer, epochs in by.items():
        means = [float(np.mean(v)) for _, v in sorted(epochs.items()) if v]
        if means:
            std = float(np.std(means, ddof=1)) if len(means) > 1 else 0.0
            out[scorer] = (float(np.mean(means)), std, len(means))
    return out


def sample_scopes(scopes: Mapping[str, str], limit: int, seed: int) -> set[str]:
    """Whole conversations drawn at random (seeded) until they hold at least ``limit`` cases:
    what ``--limit`` keeps of a scoped suite, so a quick run still samples across conversations."""
    import random

    counts: dict[str, int] = {}
    for scope in scopes.values():
        counts[scope] = counts.get(scope, 0) + 1
    order = sorted(counts)
    random.Random(seed).shuffle(order)
    chosen: set[str] = set()
    held = 0
    for scope in order:
        if held >= limit:
            break
        chosen.add(scope)
        held += counts[scope]
    return chosen
