"""The memory-QA suite target: retrieve top-k from the system under test, answer with a model.

``target: {ref: evalloop.retrieval.answer_target:AnswerTarget, params: {retriever: memory, k: 10}}``
in a suite whose ``dataset:`` folder holds ``corpus.jsonl`` and ``answers.jsonl`` (see
:mod:`evalloop.retrieval.answers`). The retriever is any evalloop knows (``bm25``, ``hybrid``,
``memory``, ``mem0``, ``module:Class``) or ``full-context``: every turn of the question's
conversation in the prompt, the reference row of the published tables. The answer model is the
run's LLM client (``--model``, or the target's ``model`` param). Without one (no API key, or
``--engine local``) the local engine answers offline with the best memory's text: what
retrieval alone gives, graded by F1 and abstention (the J judge is skipped with no judge).
What it measures per question,
retrieval and total latency, tokens in and out, cost, goes into the run's notes (p50/p95, means,
totals, and the same per category), with the memory's size and the run's benchmark card
(:mod:`evalloop.retrieval.card`), and is printed under the run's table.

``protocol`` says how a question is asked: ``evalloop`` (the prompt ``prompts/answer.md``, every
question open-ended) or ``locomo`` (LoCoMo's own: ``prompts/answer-locomo.md``, temporal questions
with its date hint, adversarial ones as its two-way choice, the reply to a choice read as LoCoMo
reads it; :mod:`evalloop.retrieval.locomo_eval`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evalloop.errors import ConfigError, TargetError
from evalloop.retrieval import locomo_eval
from evalloop.retrieval.answers import FULL_CONTEXT, answer_prompt, prompt_text
from evalloop.retrieval.retrievers import ScopedIndex
from evalloop.retrieval.suite_targets import _Measured
from evalloop.retrieval.types import Doc, retriever_name
from evalloop.suites.models import SCOPE_TAG


class AnswerTarget(_Measured):
    """Retrieve ``k`` memories of the question's scope, answer from them with the answer model."""

    def __init__(self, retriever: str = "memory", k: int = 10, model: str | None = None,
                 max_tokens: int = 200, dataset: str | None = None, embedder: str | None = None,
                 options: Mapping[str, Any] | None = None, engine: str | None = None,
                 protocol: str = "evalloop") -> None:
        if engine not in (None, "auto", "local", "llm"):
            raise TargetError(f"engine must be auto, local or llm, not {engine!r}")
        if protocol not in PROTOCOLS:
            raise TargetError(f"protocol must be {' or '.join(PROTOCOLS)}, not {protocol!r}")
        self.protocol = protocol
        self.engine = None if engine == "auto" else engine
        self.full_context = retriever == FULL_CONTEXT
        super().__init__("bm25" if self.full_context else retriever, k, embedder, options, dataset)
        self.spec = retriever
        self.label = retriever
        self.model, self.max_tokens = model, max_tokens
        self.index: ScopedIndex | None = None
        self.turns: dict[str | None, list[Doc]] = {}
        self.total_ms: list[float] = []
        self.tokens_in: list[int] = []
        self.tokens_out: list[int] = []
        self.cost_usd = 0.0
        self.by_category: dict[str, list[tuple[float, int]]] = {}  # category -> (total ms, tokens)
        self.snapshots: set[str] = set()
        self.judge_model: str | None = None
        self.extras: dict[str, Any] = {}
        self.asked: set[str | None] = set()  # the conversations asked
        self.questions: set[str] = set()  # the questions asked (once each, whatever the epochs)
        self.folder: Path | None = None

    def fingerprint(self, _params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        from evalloop.reference.memory_ops import prompt_hash

        return {**super().fingerprint(), "model": self.model, "max_tokens": self.max_tokens,
                "prompt": prompt_hash(prompt_text(PROTOCOLS[self.protocol])), "engine": self.engine,
                **({"protocol": self.protocol} if self.protocol != "evalloop" else {})}

    def setup(self, folder: Path) -> None:
        from evalloop.retrieval.suite_data import load_corpus

        corpus = load_corpus(folder)
        self.folder = folder
        self.n_docs = len(corpus)
        for doc in corpus:
            self.turns.setdefault(doc.scope, []).append(doc)
        if not self.full_context:
            self.index = ScopedIndex(self.factory, corpus)
            self.label = retriever_name(self.index.first(), self.spec)
            self.build_s, self.index_bytes = self.index.build_s, self.index.index_bytes

    def memories(self, question: str, scope: str | None) -> list[str]:
        """What the answer model is shown: the top ``k`` of the scope, or all of its turns."""
        if self.full_context:
            if scope not in self.turns:
                raise TargetError(f"the question names scope {scope!r}, which has no documents")
            return [d.content for d in self.turns[scope]]
        assert self.index is not None
        return list(self.index.texts(question, self.k, scope))

    async def __call__(self, input: Any, ctx: Any = None) -> dict[str, Any]:
        from evalloop.llm.types import LLMRequest, Message

        self.ensure(ctx)
        services = getattr(ctx, "services", None)
        client = getattr(services, "llm", None)
        engine = self.engine or getattr(services, "engine", "local")
        if engine == "llm" and client is None:
            raise ConfigError("engine llm needs an answer model, and none is configured",
                              where="memory QA target",
                              hint="set ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL), or use engine local")
        judge = getattr(services, "judge", None)
        self.judge_model = self.judge_model or getattr(judge, "model", None)
        if isinstance(extras := getattr(services, "extras", None), dict):  # the judges note snapshots there
            self.extras = extras
        data: Mapping[str, Any] = input if isinstance(input, Mapping) else {"question": str(input)}
        question, scope = str(data.get("question", "")), data.get("scope")
        category = _category(ctx, data)
        case_id = str(getattr(getattr(ctx, "case", None), "id", "") or question)
        self.asked.add(scope)
        self.questions.add(case_id)
        start = time.perf_counter()
        memories = self.timed(lambda: self.memories(question, scope))
        if engine != "llm" or client is None:  # the local engine: the best memory, as it is
            self._measured(category, start, 0)
            return {"answer": local_answer(memories), "memories": len(memories), "engine": "local"}
        asked, choice = question, None
        if self.protocol == "locomo":
            asked, choice = locomo_eval.question_text(question, data.get("category"), trap=data.get("choice"),
                                                      key=case_id)
        request = LLMRequest(model=self.model or client.model, system=prompt_text(PROTOCOLS[self.protocol]),
                             messages=[Message(role="user", content=answer_prompt(
                                 asked, memories, date=data.get("date"),
                                 cue="Short answer:" if self.protocol == "locomo" else "Answer:"))],
                             max_tokens=self.max_tokens)
        response = await client.complete(request)
        self.tokens_in.append(response.usage.input_tokens)
        self.tokens_out.append(response.usage.output_tokens)
        self._measured(category, start, response.usage.input_tokens + response.usage.output_tokens)
        self.cost_usd += response.cost_usd
        self.snapshots.add(response.model)
        said = response.text.strip()
        out: dict[str, Any] = {"answer": said if choice is None else locomo_eval.read_choice(said, choice),
                               "memories": len(memories)}
        if choice is not None:
            out["reply"] = said
        return out

    def _measured(self, category: str, start: float, tokens: int) -> None:
        elapsed = (time.perf_counter() - start) * 1000.0
        self.total_ms.append(elapsed)
        self.by_category.setdefault(category, []).append((elapsed, tokens))

    def run_stats(self) -> dict[str, Any]:
        """Retrieval latency (p50/p95), total latency per question (retrieval + answer),
        tokens per question and the answer model's cost."""
        stats = super().run_stats()
        stats.pop("latency_p50_ms", None), stats.pop("latency_p95_ms", None)
        lat = np.asarray(self.latencies or [0.0])
        total = np.asarray(self.total_ms or [0.0])
        stats.update({
            "search_p50_ms": round(float(np.percentile(lat, 50)), 3),
            "search_p95_ms": round(float(np.percentile(lat, 95)), 3),
            "total_p50_ms": round(float(np.percentile(total, 50)), 3),
            "total_p95_ms": round(float(np.percentile(total, 95)), 3),
            "tokens_per_question": round(float(np.mean(self.tokens_in)) + float(np.mean(self.tokens_out)), 1)
            if self.tokens_in else None,
            "answer_cost_usd": round(self.cost_usd, 6),
        })
        from evalloop.retrieval.card import benchmark_card, memory_size, per_category

        stats["per_category"] = per_category(self.by_category)
        stats.update(memory_size(self.index, self.turns))
        stats["card"] = benchmark_card(self)
        return stats


PROTOCOLS = {"evalloop": "answer", "locomo": "answer-locomo"}
"""How a question is asked: the protocol's name and its answer prompt."""


def _category(ctx: Any, data: Mapping[str, Any]) -> str:
    """The case's stratum (its first tag that is not a scope), else its category, else ``all``."""
    tags = getattr(getattr(ctx, "case", None), "tags", None) or []
    stratum = next((t for t in tags if not str(t).startswith(SCOPE_TAG)), None)
    if stratum is not None:
        return str(stratum)
    return "all" if data.get("category") is None else str(data["category"])


_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*)?(?:[^:\n]{1,40}:\s*)?")


def local_answer(memories: list[str]) -> str:
    """The offline answer: the best memory's text without its date and speaker prefix, or
    LoCoMo's abstention phrase when nothing was retrieved."""
    if not memories:
        return "No information available."
    return _PREFIX.sub("", memories[0].strip(), count=1) or memories[0]
