"""Suite targets for memory benchmarks: a retriever, a QA memory, and a memory-backed chat.

Each is a class a suite names with params (``target: {ref: evalloop.retrieval.suite_targets:RetrieverTarget,
params: {retriever: bm25, k: 20}}``); it loads the suite's dataset folder from the first case
(or from a ``dataset`` param: absolute, or relative to the working directory), builds its index
once, and reports what it measured through ``run_stats()`` (index build seconds, index bytes,
per-query latency p50/p95), which :func:`record_target_stats` stores in the run's notes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from sqlalchemy import select, update

from evalloop.errors import TargetError
from evalloop.history.details import json_object, jsonable
from evalloop.history.models import Run
from evalloop.history.store import HistoryStore
from evalloop.retrieval.retriever_eval import build_index
from evalloop.retrieval.retrievers import (
    ALIASES,
    MemoryStoreRetriever,
    ScopedIndex,
    _Corpus,
    retriever_factory,
)
from evalloop.retrieval.suite_data import qa_dataset, retrieval_corpus
from evalloop.retrieval.types import Doc, Retriever, retriever_name

__all__ = ["ALIASES", "MemoryStoreRetriever", "QATarget", "RetrieverTarget", "ScenarioTarget",
           "_Corpus", "record_target_stats", "retriever_factory", "target_stats"]

def _dataset_folder(param: str | None, ctx: Any) -> Path:
    if param is not None:
        return Path(param).expanduser().resolve()
    folder = getattr(getattr(ctx, "case", None), "metadata", {}).get("dataset")
    if not folder:
        raise TargetError("this target needs a dataset folder",
                          hint="use it in a suite with 'dataset:', or give the target a "
                               "'dataset' param")
    return Path(folder)


def _percentiles(latencies: Sequence[float]) -> dict[str, float | None]:
    lat = np.asarray(latencies, dtype=np.float64)
    if not lat.size:
        return {"latency_p50_ms": None, "latency_p95_ms": None}
    p50, p95 = np.percentile(lat, [50, 95])
    return {"latency_p50_ms": round(float(p50), 4), "latency_p95_ms": round(float(p95), 4)}


class _Measured:
    """Shared bookkeeping: retriever spec, lazy one-time setup under a lock, timings."""

    def __init__(self, retriever: str, k: int, embedder: str | None,
                 options: Mapping[str, Any] | None, dataset: str | None) -> None:
        if k < 1:
            raise TargetError(f"k must be at least 1, got {k}")
        self.spec, self.k, self.embedder, self.options = retriever, k, embedder, dict(options or {})
        self.factory = retriever_factory(retriever, embedder=embedder, options=options)
        self.dataset = dataset
        self.build_s: float | None = None
        self.index_bytes: int | None = None
        self.n_docs = 0
        self.latencies: list[float] = []
        self._lock = threading.Lock()
        self._ready = False
        self.label = retriever

    def fingerprint(self, _params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        out = {"retriever": self.spec, "k": self.k, "embedder": self.embedder,
               "options": self.options, "kind": type(self).__name__}
        if ALIASES.get(self.spec) == "hybrid":  # its defaults changed: runs before are another system
            out["preset"] = "calibrated"
        return out

    def ensure(self, ctx: Any) -> None:
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                self.setup(_dataset_folder(self.dataset, ctx))
                self._ready = True

    def setup(self, folder: Path) -> None:  # overridden
        raise NotImplementedError

    def timed(self, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        self.latencies.append((time.perf_counter() - start) * 1000.0)
        return out

    def run_stats(self) -> dict[str, Any]:
        """What this run measured: build time, index size, per-query latency percentiles."""
        return {"retriever": self.label, "build_s": None if self.build_s is None
                else round(self.build_s, 4), "index_bytes": self.index_bytes,
                "n_docs": self.n_docs, "n_queries": len(self.latencies),
                **_percentiles(self.latencies)}


class RetrieverTarget(_Measured):
    """A Retriever over the suite's corpus: the case's query in, ranked doc ids (or texts) out."""

    def __init__(self, retriever: str = "bm25", k: int = 20, dataset: str | None = None,
                 embedder: str | None = None, returns: Literal["ids", "texts"] = "ids",
                 options: Mapping[str, Any] | None = None) -> None:
        super().__init__(retriever, k, embedder, options, dataset)
        if returns not in ("ids", "texts"):
            raise TargetError(f"returns must be 'ids' or 'texts', not {returns!r}")
        self.returns = returns
        self.index: ScopedIndex | None = None
        self._spent: list[tuple[str | None, float, float | None]] = []  # (set, tokens, density)
        if dataset is not None:
            self.ensure(None)

    def fingerprint(self, _params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**super().fingerprint(), "returns": self.returns}

    def setup(self, folder: Path) -> None:
        corpus = retrieval_corpus(folder)
        self.index = ScopedIndex(self.factory, corpus)  # one index per scope, or one in all
        self.label = retriever_name(self.index.first(), self.spec)
        self.build_s, self.index_bytes = self.index.build_s, self.index.index_bytes
        self.n_docs = len(corpus)
        self.n_scopes = len(self.index.parts) if self.index.scoped else 0

    @property
    def retriever(self) -> Retriever | None:
        """The retriever of an unscoped corpus (the first scope's of a scoped one)."""
        return self.index.first() if self.index is not None else None

    def __call__(self, input: Any, ctx: Any = None) -> list[str]:
        self.ensure(ctx)
        index = self.index
        assert index is not None
        query = input.get("query", "") if isinstance(input, Mapping) else str(input)
        scope = input.get("scope") if isinstance(input, Mapping) else None
        if self.returns == "texts":
            texts = list(self.timed(lambda: index.texts(query, self.k, scope)))
            self._account(texts, getattr(getattr(ctx, "case", None), "expected", None))
            return texts
        ids = self.timed(lambda: index.retrieve(query, self.k, scope))
        return list(dict.fromkeys(str(i) for i in ids))[: self.k]

    def _account(self, texts: list[str], expected: Any) -> None:
        """Token spend and, for a substring-judged query (seed 000), relevance density."""
        from evalloop.retrieval.substring import relevant_density, token_spend

        if not isinstance(expected, Mapping) or "set" not in expected:
            self._spent.append((None, token_spend(texts), None))
            return
        wanted = list(expected.get("expected") or []) or [
            *expected.get("old_keywords", []), *expected.get("new_keywords", [])]
        self._spent.append((str(expected["set"]), token_spend(texts), relevant_density(texts, wanted)))

    def run_stats(self) -> dict[str, Any]:
        """Also tokens per query and relevance density (texts only; for substring-judged suites
        means over the ranked query sets, as ``substring.score_results`` reports them)."""
        from evalloop.retrieval.substring import RANKED_SETS

        stats = super().run_stats()
        if getattr(self, "n_scopes", 0):
            stats["n_scopes"] = self.n_scopes
        if not self._spent:
            return stats
        judged = any(s is not None for s, _, _ in self._spent)
        rows = [r for r in self._spent if not judged or r[0] in RANKED_SETS]
        tokens = [t for _, t, _ in rows]
        dens = [d for _, _, d in rows if d is not None]
        stats["tokens_per_query"] = round(float(np.mean(tokens)), 4) if tokens else None
        if judged:
            stats["relevance_density"] = round(float(np.mean(dens)), 4) if dens else None
        return stats


class TextMemory:
    """A growing list of texts searched through any Retriever (re-indexed when texts change)."""

    def __init__(self, factory: Callable[[], Retriever]) -> None:
        self.factory = factory
        self.docs: list[Doc] = []
        self._retriever: Retriever | None = None
        self._search: Callable[[str, int], Sequence[str]] | None = None
        self.build_s = 0.0

    def reset(self) -> None:
        self.docs, self._retriever, self._search = [], None, None

    def add(self, text: str, metadata: Mapping[str, Any] | None = None) -> None:
        self.docs.append(Doc(id=str(len(self.docs)), content=text))
        self._search = None

    def search(self, query: str, k: int) -> list[str]:
        if not self.docs:
            return []
        if self._search is None:
            from evalloop.retrieval.substring import text_search

            retriever = self.factory()
            start = time.perf_counter()
            build_index(retriever, _Corpus(self.docs))
            self.build_s += time.perf_counter() - start
            self._retriever, self._search = retriever, text_search(retriever, self.docs)
        return list(self._search(query, k))


class QATarget(_Measured):
    """A memory answering seed-002 questions: returns the top-k texts for the case's question.

    ``mode: accumulate`` writes every conversation of the dataset once, then asks (the published
    LoCoMo / LongMemEval protocol); ``mode: reset`` gives each question a fresh memory holding
    only its own conversation (isolated, order-independent).
    """

    def __init__(self, retriever: str = "memory", k: int = 5,
                 mode: Literal["accumulate", "reset"] = "accumulate", dataset: str | None = None,
                 embedder: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(retriever, k, embedder, options, dataset)
        if mode not in ("accumulate", "reset"):
            raise TargetError(f"mode must be 'accumulate' or 'reset', not {mode!r}")
        self.mode = mode
        self.conversations: dict[str, list[str]] = {}
        self.shared: TextMemory | None = None

    def fingerprint(self, _params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**super().fingerprint(), "mode": self.mode}

    def setup(self, folder: Path) -> None:
        data = qa_dataset(folder)
        self.conversations = {cid: c.turns for cid, c in data.conversations.items()}
        if self.mode == "accumulate":
            self.shared = TextMemory(self.factory)
            for turns in self.conversations.values():
                for turn in turns:
                    self.shared.add(turn)
            self.n_docs = len(self.shared.docs)
            self.shared.search("warm-up", 1)  # build the index now, timed apart from queries
            self.build_s = self.shared.build_s
            self.index_bytes = _size(self.shared._retriever)

    def __call__(self, input: Any, ctx: Any = None) -> list[str]:
        self.ensure(ctx)
        question = input.get("question", "") if isinstance(input, Mapping) else str(input)
        memory = self.shared
        if memory is None:
            cid = input.get("conversation_id") if isinstance(input, Mapping) else None
            if cid not in self.conversations:
                raise TargetError(f"unknown conversation_id {cid!r}")
            memory = TextMemory(self.factory)
            for turn in self.conversations[cid]:
                memory.add(turn)
        return self.timed(lambda: memory.search(question, self.k))


def _size(retriever: Any) -> int | None:
    hook = getattr(retriever, "index_size_bytes", None)
    return int(hook()) if callable(hook) else None


class ScenarioTarget(_Measured):
    """A memory-backed chat for seed-003 scenarios: the case's turns in, one reply per turn out.

    With ``chat: module:Class`` the turns go to your own ChatTarget (``send(message)``, and
    ``reset()`` before each scenario). Without it, a reference assistant answers offline:
    statements are remembered ("Noted."), questions are answered with the best ``k`` memories.
    """

    def __init__(self, retriever: str = "memory", k: int = 1, chat: str | None = None,
                 embedder: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(retriever, k, embedder, options, dataset=None)
        self.chat = chat
        self._ready = True  # needs no dataset: every case holds its whole conversation

    def fingerprint(self, _params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**super().fingerprint(), "chat": self.chat}

    def __call__(self, input: Any, ctx: Any = None) -> list[str]:
        turns = input.get("turns", []) if isinstance(input, Mapping) else list(input)
        if self.chat:
            return self._user_chat([str(t) for t in turns])
        memory = TextMemory(self.factory)
        replies = []
        for text in map(str, turns):
            if _is_question(text):
                replies.append(" ".join(self.timed(partial(memory.search, text, self.k))))
            else:
                memory.add(text)
                replies.append("Noted.")
        return replies

    def _user_chat(self, turns: list[str]) -> list[str]:
        from evalloop.run.targets import _import

        obj = _import(self.chat or "", Path.cwd())
        bot = obj() if isinstance(obj, type) else obj
        if callable(getattr(bot, "reset", None)):
            bot.reset()
        send = getattr(bot, "send", None) or bot
        return [str(self.timed(partial(send, t))) for t in turns]


_QUESTION_WORDS = ("what", "which", "who", "whom", "where", "when", "why", "how", "do", "does",
                   "did", "is", "are", "was", "can", "should", "remind", "tell")


def _is_question(text: str) -> bool:
    words = text.strip().lower().split()
    return text.strip().endswith("?") or bool(words and words[0] in _QUESTION_WORDS)


def target_stats(target: Any) -> dict[str, Any] | None:
    """The ``run_stats()`` of a resolved target's object (``Target.fn``), if it has one."""
    hook = getattr(getattr(target, "fn", target), "run_stats", None)
    return dict(hook()) if callable(hook) else None


def record_target_stats(store: HistoryStore, run_id: str, stats: Mapping[str, Any] | None) -> None:
    """Merge a target's measurements into the run's notes under ``target_stats``."""
    if not stats:
        return
    runs = Run.__table__
    with store.engine.begin() as conn:
        stored = conn.execute(select(runs.c.notes).where(runs.c.id == run_id)).scalar_one_or_none()
        if stored is None:
            return
        notes = json_object(stored)
        notes["target_stats"] = jsonable(stats)
        conn.execute(update(runs).where(runs.c.id == run_id).values(notes=notes))
