"""Memory QA as the published tables score it: retrieve, answer with a model, grade the answer.

The protocol is the mem0 evaluation of LoCoMo (and the same for LongMemEval): for each question
the system under test retrieves its top-k memories from the question's own conversation, an
answer model answers from them alone, and the answer is graded by

- the **J judges** (``j-judge``): a binary CORRECT/WRONG from an LLM judge, mem0's generous one
  (``judge: mem0``, the same topic; :mod:`evalloop.retrieval.mem0_eval`) or evalloop's strict
  one (``judge: strict``, the same fact; ``prompts/j-judge.md``), see
  :mod:`evalloop.retrieval.answer_scorers`; and mem0's **BLEU-1** (``bleu-1``);
- **LoCoMo's token F1** (``locomo-f1``), exactly as LoCoMo's own evaluation scores it
  (:mod:`evalloop.retrieval.locomo_eval`), and evalloop's corrected token F1 (``evalloop-f1``,
  below: commas separate words, two empty answers agree);
- **abstention** (``abstention``) for adversarial questions (LoCoMo category 5, LongMemEval
  ``_abs``), which have no answer in the conversation: correct only when the system says so
  (``locomo-adversarial``: with LoCoMo's two accepted strings only).
  J and F1 skip them and abstention skips every other question, so the headline J is over
  categories 1–4 only, as published.

A dataset folder of this kind holds ``corpus.jsonl`` (the turns, with ``scope``) and
``answers.jsonl`` (one :class:`AnswerLine` per question). :class:`AnswerTarget` answers it with
any retriever evalloop knows, or ``full-context`` (the whole conversation in the prompt: the
reference row).
"""

from __future__ import annotations

import functools
import re
import string
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

ANSWERS_FILE = "answers.jsonl"
FULL_CONTEXT = "full-context"
PROMPTS = Path(__file__).parent / "prompts"
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
ABSTAIN_PHRASES = ("no information available", "not mentioned", "no information", "not enough information",
                   "does not mention", "doesn't mention", "not stated", "unknown", "cannot be determined",
                   "can't be determined", "i don't know", "i do not know", "no record", "never mentioned",
                   "no mention", "not provided", "not specified", "not enough to", "is not enough",
                   "are not enough", "insufficient information", "not available in")
"""What counts as declining to answer (LoCoMo's own check looks for the first two only:
:data:`evalloop.retrieval.locomo_eval.ADVERSARIAL_PHRASES`)."""
_DECLINES = re.compile(
    r"\b(?:you|i|we|they|he|she)\s+(?:did\s*n[o']?t|do\s*n[o']?t|have\s*n[o']?t|has\s*n[o']?t|never)\s+"
    r"(?:\w+\s+)?(?:mention(?:ed)?|say|said|shared?|tell|told|specif(?:y|ied)|provided?)\b")
"""A sentence that declines by saying who never said it: "You didn't mention a cat", "you have not
shared that" (LongMemEval's abstention answers)."""


class AnswerLine(BaseModel):
    """One ``answers.jsonl`` line: a question asked of its scope's conversation."""

    id: str
    question: str
    answer: str | None = Field(default=None, description="the truth; the trap answer of an adversarial one")
    scope: str
    stratum: str = "all"
    category: int | str | None = None
    adversarial: bool = False
    evidence: list[str] = Field(default_factory=list)
    date: str | None = None


# -- evalloop's token F1 ---------------------------------------------------------------------------

@functools.cache
def _stemmer() -> tuple[Any, threading.Lock]:
    """An in-memory FTS5 table with the Porter tokenizer: SQLite's own stemmer, no new package."""
    from evalloop.memory.sqlite_ext import _plain_connection

    conn = _plain_connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE words USING fts5(w, tokenize='porter ascii')")
    conn.execute("CREATE VIRTUAL TABLE stems USING fts5vocab(words, instance)")
    return conn, threading.Lock()


@functools.lru_cache(maxsize=65536)
def porter(word: str) -> str:
    """The Porter stem of one lower-case word (the word itself when it has no ASCII token)."""
    conn, lock = _stemmer()
    with lock:
        conn.execute("DELETE FROM words")
        conn.execute("INSERT INTO words(w) VALUES (?)", (word,))
        row = conn.execute("SELECT term FROM stems ORDER BY offset LIMIT 1").fetchone()
    return row[0] if row else word


def normalise_answer(text: str) -> list[str]:
    """evalloop's answer normalisation: lower case, commas and other punctuation out (a comma
    separates words), no articles, SQLite's Porter stems."""
    text = _ARTICLES.sub(" ", str(text).lower().replace(",", " ").translate(_PUNCT))
    return [porter(w) for w in text.split()]


def _f1(prediction: str, truth: str) -> float:
    p, t = normalise_answer(prediction), normalise_answer(truth)
    common = sum((Counter(p) & Counter(t)).values())
    if not p or not t or common == 0:
        return float(p == t)
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def evalloop_f1(prediction: str, truth: str, category: int | str | None = None) -> float:
    """evalloop's corrected token F1, per LoCoMo category: as LoCoMo's rules
    (:func:`evalloop.retrieval.locomo_eval.score`) except that commas separate words
    (``August,2023`` is ``august 2023``), two answers that normalise to nothing agree (1.0), empty
    comma parts are ignored, and stems are SQLite's Porter stemmer. Multi-hop (1) answers are
    split at commas and each truth part takes its best predicted part; open-domain (3) keeps the
    truth before the first ``;``; the others compare whole answers."""
    truth = str(truth)
    if category == 3:
        truth = truth.split(";")[0]
    if category == 1:
        preds = [p for p in str(prediction).split(",") if p.strip()] or [""]
        parts = [t for t in truth.split(",") if t.strip()] or [""]
        return sum(max(_f1(p, t) for p in preds) for t in parts) / len(parts)
    return _f1(prediction, truth)


def abstains(answer: str) -> bool:
    """Whether an answer declines to answer (says the conversation does not tell)."""
    text = " ".join(str(answer).lower().replace("\u2019", "'").split())
    return any(phrase in text for phrase in ABSTAIN_PHRASES) or _DECLINES.search(text) is not None


# -- the answer prompt -------------------------------------------------------------------------

@functools.cache
def prompt_text(name: str) -> str:
    """A shipped prompt (``answer``, ``answer-locomo``, ``j-judge``, ``j-mem0``), read once."""
    return (PROMPTS / f"{name}.md").read_text(encoding="utf-8")


def answer_prompt(question: str, memories: list[str], *, date: str | None = None, cue: str = "Answer:") -> str:
    """The answer model's user message: the memories, fenced as data, then the question."""
    from evalloop.untrusted import fence

    listed = "\n".join(f"- {m}" for m in memories) or "(no memories were found)"
    when = f"\nThe question is asked on {date}." if date else ""
    return f"{fence('MEMORIES', listed)}\n\nQuestion: {question}{when}\n{cue}"


# -- writing a QA dataset folder ----------------------------------------------------------------

def write_answers(folder: Path, docs: list[Any], questions: list[Any]) -> dict[str, int]:
    """Write ``corpus.jsonl`` and ``answers.jsonl`` for the QA suite; return the questions left
    out, by reason (a non-adversarial question without an answer cannot be graded)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    skipped: Counter[str] = Counter()
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps(doc.model_dump(mode="json"), ensure_ascii=False) + "\n")
    with (folder / ANSWERS_FILE).open("w", encoding="utf-8") as fh:
        for q in questions:
            if not q.adversarial and not (q.answer or "").strip():
                skipped["no answer"] += 1
                continue
            line = AnswerLine(id=q.id, question=q.question, answer=q.answer, scope=q.scope,
                              stratum=q.stratum, category=q.category, adversarial=q.adversarial,
                              evidence=q.evidence, date=q.date)
            fh.write(line.model_dump_json(exclude_defaults=True) + "\n")
    return dict(skipped)
