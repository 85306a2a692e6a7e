"""Benchmark datasets as suites: the cases of a ``dataset:`` folder (the ``dataset`` case source).

A suite may say ``dataset: <folder>`` instead of ``cases:``. The folder's files decide its kind:

- ``corpus.jsonl`` + ``queries.jsonl`` + ``qrels.jsonl`` (seed 001): one case per query,
  ``input = {query, stratum[, scope]}``, ``expected = {relevance: {doc_id: grade}}``, tagged by
  stratum (and ``scope:<id>`` when documents and queries carry a scope);
- ``corpus.jsonl`` + ``substring.jsonl`` (seed 000): queries judged by expected substrings;
- ``questions.jsonl`` + ``conversations.jsonl`` (seed 002): one case per QA pair;
- ``scenarios.jsonl`` (seed 003): one case per multi-turn scenario;
- ``corpus.jsonl`` + ``answers.jsonl`` (memory QA, LoCoMo / LongMemEval as published tables
  score them): one case per question, ``input = {question, scope}``, ``expected = {answer,
  category, adversarial}`` (the input also carries the category and, for LoCoMo's category 5
  only, the trap answer, which LoCoMo's protocol offers as one of two options), tagged by stratum and
  scope (see :mod:`evalloop.retrieval.answers`).

Every case carries the folder in ``metadata["dataset"]``, so a target (see
:mod:`evalloop.retrieval.suite_targets` and :mod:`evalloop.retrieval.answer_target`) loads the same
data without repeating its path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evalloop.retrieval.locomo_eval import category_of
from evalloop.retrieval.suite_data import (
    dataset_kind,
    load_answers,
    load_corpus,
    load_scenarios,
    load_substring_queries,
    qa_dataset,
    retrieval_dataset,
)
from evalloop.suites.models import SCOPE_TAG, Case


def dataset_cases(folder: str | Path) -> Iterator[Case]:
    """One case per query, QA pair or scenario of a dataset folder (validated first)."""
    path = Path(folder).resolve()
    meta = {"dataset": str(path)}
    kind = dataset_kind(path)
    if kind == "retrieval":
        ds = retrieval_dataset(path)
        for q in ds.queries:
            scope = {} if q.scope is None else {"scope": q.scope}
            yield Case(id=q.query_id, input={"query": q.text, "stratum": q.stratum, **scope},
                       expected={"relevance": ds.qrels[q.query_id]},
                       tags=[q.stratum, *(f"{SCOPE_TAG}{v}" for v in scope.values())], metadata=meta)
    elif kind == "substring":
        load_corpus(path)
        for sq in load_substring_queries(path):
            if not sq.scorable:
                continue
            yield Case(id=sq.query_id, input={"query": sq.text, "set": sq.set},
                       expected=sq.model_dump(include={"set", "expected", "old_keywords", "new_keywords"}),
                       tags=[sq.set], metadata=meta)
    elif kind == "qa":
        for pair in qa_dataset(path).pairs:
            yield Case(id=pair.id, input={"question": pair.question,
                                          "conversation_id": pair.conversation_id},
                       expected={"answer": pair.ground_truth}, tags=[pair.category], metadata=meta)
    elif kind == "answers":
        for a in load_answers(path):
            asked: dict[str, object] = {"date": a.date} if a.date else {}
            if a.category is not None:  # how LoCoMo's protocol asks it (a date hint, a choice)
                asked["category"] = a.category
            if a.adversarial and a.answer and category_of(a.category) == 5:  # LoCoMo's trap, offered
                asked["choice"] = a.answer  # as one of two options (another abstention answer is a gold)
            yield Case(id=a.id, input={"question": a.question, "scope": a.scope, **asked},
                       expected={"answer": a.answer, "category": a.category, "adversarial": a.adversarial},
                       tags=[a.stratum, f"{SCOPE_TAG}{a.scope}"], metadata=meta)
    else:
        for sc in load_scenarios(path):
            yield Case(id=sc.id, input={"turns": [t.text for t in sc.turns]},
                       expected={"turns": [t.model_dump() for t in sc.turns]}, tags=[sc.category],
                       metadata={**meta, "description": sc.description})
