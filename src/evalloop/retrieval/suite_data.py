"""Reading a ``dataset:`` folder: which kind of benchmark it holds, and its corpus, queries, QA
pairs and scenarios, validated and cached per folder (until its files change).

The kinds and their files are listed in :mod:`evalloop.retrieval.dataset_cases`, which turns them into
cases; the targets (:mod:`evalloop.retrieval.suite_targets`) read the same data from here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from evalloop.errors import FixtureError
from evalloop.retrieval.answers import ANSWERS_FILE, AnswerLine
from evalloop.retrieval.dataset import (
    CORPUS_FILE,
    QRELS_FILE,
    Dataset,
    _jsonl,
    _parse,
    load_dataset,
    read_corpus,
)
from evalloop.retrieval.qa import QAPair
from evalloop.retrieval.scenarios import Scenario
from evalloop.retrieval.substring import SubstringQuery
from evalloop.retrieval.types import Doc

DatasetKind = Literal["retrieval", "substring", "qa", "scenarios", "answers"]
SUBSTRING_FILE = "substring.jsonl"
QUESTIONS_FILE = "questions.jsonl"
CONVERSATIONS_FILE = "conversations.jsonl"
SCENARIOS_FILE = "scenarios.jsonl"


class Conversation(BaseModel):
    """One ``conversations.jsonl`` line: the turns (or facts) a QA pair's answer hides in."""

    id: str
    turns: list[str] = Field(min_length=1)


class QuestionLine(BaseModel):
    """One ``questions.jsonl`` line; ``answer`` (or ``ground_truth``) is the expected substring."""

    id: str
    question: str
    answer: str = Field(min_length=1)
    category: str = "all"
    conversation_id: str

    @model_validator(mode="before")
    @classmethod
    def _ground_truth(cls, data: object) -> object:
        if isinstance(data, dict) and "answer" not in data and "ground_truth" in data:
            return {**data, "answer": data["ground_truth"]}
        return data


class QADataset(BaseModel):
    """Validated QA data: every question's conversation exists."""

    conversations: dict[str, Conversation]
    pairs: list[QAPair]


def dataset_kind(folder: Path) -> DatasetKind:
    """Which benchmark a dataset folder holds, from the files in it."""
    if not folder.is_dir():
        raise FixtureError("dataset folder not found", where=str(folder),
                           hint="'dataset:' is a folder relative to the suite file")
    if (folder / ANSWERS_FILE).is_file():
        return "answers"
    if (folder / QUESTIONS_FILE).is_file():
        return "qa"
    if (folder / SCENARIOS_FILE).is_file():
        return "scenarios"
    if (folder / SUBSTRING_FILE).is_file() and not (folder / QRELS_FILE).is_file():
        return "substring"
    return "retrieval"


def _stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """A cache key that changes when any JSONL file of the folder changes."""
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.jsonl")))


@lru_cache(maxsize=8)
def _retrieval(folder: Path, _stamp: object) -> Dataset:
    return load_dataset(folder)


def retrieval_dataset(folder: str | Path) -> Dataset:
    """The validated seed-001 dataset of a folder (loaded once while its files are unchanged)."""
    path = Path(folder).resolve()
    return _retrieval(path, _stamp(path))


def load_corpus(folder: str | Path) -> list[Doc]:
    """The documents of ``corpus.jsonl`` (ids unique), for suites judged without qrels."""
    return read_corpus(Path(folder) / CORPUS_FILE)


def retrieval_corpus(folder: str | Path) -> list[Doc]:
    """The corpus of any retrieval-kind folder (with or without qrels)."""
    path = Path(folder).resolve()
    if dataset_kind(path) == "retrieval":
        return retrieval_dataset(path).corpus
    return load_corpus(path)


def load_substring_queries(folder: str | Path) -> list[SubstringQuery]:
    """The seed-000 queries of ``substring.jsonl`` (ids unique)."""
    path = Path(folder) / SUBSTRING_FILE
    seen: dict[str, int] = {}
    out: list[SubstringQuery] = []
    for lineno, obj in _jsonl(path):
        q = _parse(SubstringQuery, obj, f"{path}:{lineno}")
        if q.query_id in seen:
            raise FixtureError(f"duplicate query_id {q.query_id!r} (first on line {seen[q.query_id]})",
                               where=f"{path}:{lineno}", hint="query ids must be unique")
        seen[q.query_id] = lineno
        out.append(q)
    return out


@lru_cache(maxsize=8)
def _qa(folder: Path, _stamp: object) -> QADataset:
    conv_path, q_path = folder / CONVERSATIONS_FILE, folder / QUESTIONS_FILE
    conversations: dict[str, Conversation] = {}
    for lineno, obj in _jsonl(conv_path):
        conv = _parse(Conversation, obj, f"{conv_path}:{lineno}")
        if conv.id in conversations:
            raise FixtureError(f"duplicate conversation id {conv.id!r}", where=f"{conv_path}:{lineno}",
                               hint="conversation ids must be unique")
        conversations[conv.id] = conv
    pairs: list[QAPair] = []
    seen: set[str] = set()
    for lineno, obj in _jsonl(q_path):
        line = _parse(QuestionLine, obj, f"{q_path}:{lineno}")
        if line.conversation_id not in conversations:
            raise FixtureError(f"conversation_id {line.conversation_id!r} is not in {CONVERSATIONS_FILE}",
                               where=f"{q_path}:{lineno}", hint="add the conversation or fix the id")
        if line.id in seen:
            raise FixtureError(f"duplicate question id {line.id!r}", where=f"{q_path}:{lineno}",
                               hint="question ids must be unique")
        seen.add(line.id)
        pairs.append(QAPair(id=line.id, question=line.question, ground_truth=line.answer,
                            category=line.category, conversation_id=line.conversation_id,
                            conversation=conversations[line.conversation_id].turns))
    return QADataset(conversations=conversations, pairs=pairs)


def qa_dataset(folder: str | Path) -> QADataset:
    """The validated seed-002 QA data of a folder."""
    path = Path(folder).resolve()
    return _qa(path, _stamp(path))


def load_answers(folder: str | Path) -> list[AnswerLine]:
    """The questions of ``answers.jsonl`` (ids unique, every scope in ``corpus.jsonl``)."""
    path = Path(folder) / ANSWERS_FILE
    scopes = {d.scope for d in load_corpus(folder)}
    seen: set[str] = set()
    out: list[AnswerLine] = []
    for lineno, obj in _jsonl(path):
        line = _parse(AnswerLine, obj, f"{path}:{lineno}")
        if line.id in seen:
            raise FixtureError(f"duplicate question id {line.id!r}", where=f"{path}:{lineno}",
                               hint="question ids must be unique")
        if line.scope not in scopes:
            raise FixtureError(f"question {line.id!r} names scope {line.scope!r}, which no document has",
                               where=f"{path}:{lineno}", hint="a question is asked of its own conversation")
        seen.add(line.id)
        out.append(line)
    return out


def load_scenarios(folder: str | Path) -> list[Scenario]:
    """The seed-003 scenarios of ``scenarios.jsonl`` (ids unique, at least one graded turn)."""
    path = Path(folder) / SCENARIOS_FILE
    out: dict[str, Scenario] = {}
    for lineno, obj in _jsonl(path):
        where = f"{path}:{lineno}"
        scenario = _parse(Scenario, obj, where)
        if scenario.id in out:
            raise FixtureError(f"duplicate scenario id {scenario.id!r}", where=where,
                               hint="scenario ids must be unique")
        if not any(t.graded for t in scenario.turns):
            raise FixtureError(f"scenario {scenario.id!r} has no graded turn", where=where,
                               hint="give at least one turn 'keywords'")
        out[scenario.id] = scenario
    return list(out.values())
