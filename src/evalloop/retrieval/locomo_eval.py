"""LoCoMo's own QA protocol: how its evaluation asks a question and scores the answer.

These are the rules of LoCoMo's ``task_eval`` code (Maharana et al., 2024), written anew here so a
run's figures stand beside LoCoMo's published tables; the tests check them case by case against
what the official rules give.

Scoring, per question, by category (LoCoMo's numbering):

- the answer and the gold are **normalised**: commas deleted (``2,022`` is ``2022``), lower
  case, ASCII punctuation deleted, the words ``a``, ``an``, ``the`` and ``and`` dropped, runs of
  white space joined; each word is then stemmed by NLTK's Porter stemmer;
- **token F1** over the stems (multiset overlap); no overlap scores 0, also when both sides
  normalise to nothing (``The`` against ``a``);
- categories 2, 3 and 4 score the whole answer; category 3 golds keep only the text before their
  first ``;``;
- category 1 (multi-hop) splits both sides at commas: each gold part takes its best answer part,
  and the score is the mean over gold parts (an empty part counts, as a 0);
- category 5 (adversarial) scores 1 when the answer contains ``no information available`` or
  ``not mentioned`` (any case), else 0.

Asking: category 2 questions carry a hint to answer with a date from the conversation's dates;
category 5 questions are a two-way choice between the trap answer and "Not mentioned in the
conversation", in an order drawn per question, and a reply of just the option's letter is read as
that option.
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from collections import Counter
from typing import Any

from pydantic import BaseModel

ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
"""The two strings LoCoMo's scoring accepts as declining an adversarial (category 5) question."""
NOT_MENTIONED = "Not mentioned in the conversation"
"""The abstaining option of LoCoMo's two-way category-5 question."""
DATE_HINT = "Answer with an approximate date, using the dates of the conversation."
"""What LoCoMo adds to a temporal (category 2) question."""

_WORDS = re.compile(r"\b(?:a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@functools.cache
def _stemmer() -> Any:
    """NLTK's Porter stemmer (its default, NLTK-extensions mode), built once; it needs no data."""
    try:
        from nltk.stem import PorterStemmer
    except ImportError:
        from evalloop.errors import ConfigError

        raise ConfigError("LoCoMo's scoring stems words with NLTK's Porter stemmer, and nltk is not "
                          "installed", hint="pip install 'evalloop[benchmarks]'") from None

    return PorterStemmer()


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of one word, as NLTK gives it."""
    return str(_stemmer().stem(word))


def normalise(text: object) -> str:
    """LoCoMo's answer normalisation (see the module docstring), before stemming."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_WORDS.sub(" ", text).split())


def stems(text: object) -> list[str]:
    """The stemmed words of a normalised answer."""
    return [stem(w) for w in normalise(text).split()]


def token_f1(prediction: object, gold: object) -> float:
    """LoCoMo's token F1 of one answer against one gold: 0 without overlap (both empty too)."""
    p, g = stems(prediction), stems(gold)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: object, gold: object) -> float:
    """Category 1: both split at commas; the mean over gold parts of the best part's F1."""
    parts = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)


def declines(prediction: object) -> bool:
    """Whether an answer to an adversarial question says LoCoMo's words for "not in the conversation"."""
    said = str(prediction).lower()
    return any(phrase in said for phrase in ADVERSARIAL_PHRASES)


def category_of(category: object) -> int | None:
    """A LoCoMo category number (an int, or a digit string), else None."""
    if isinstance(category, bool):
        return None
    if isinstance(category, int):
        return category
    text = str(category).strip() if category is not None else ""
    return int(text) if text.isdigit() else None


def score(prediction: object, gold: object, category: object) -> float:
    """One question's score as LoCoMo's evaluation gives it (see the module docstring)."""
    cat = category_of(category)
    if cat == 5:
        return float(declines(prediction))
    gold = str(gold)
    if cat == 3:
        gold = gold.split(";")[0].strip()
    if cat == 1:
        return multi_answer_f1(prediction, gold)
    if cat in (2, 3, 4):
        return token_f1(prediction, gold)
    raise ValueError(f"LoCoMo has no QA category {category!r} (it numbers them 1 to 5)")


# -- asking ------------------------------------------------------------------------------------

class Choice(BaseModel):
    """A category-5 question as LoCoMo asks it: two options, (a) and (b)."""

    question: str
    a: str
    b: str


def two_way_choice(question: str, trap: str | None, key: str) -> Choice:
    """The two-way question of an adversarial one. The order of the two options is drawn per
    question from ``key`` (the case id), so it is fixed across runs and about even over a set."""
    heads = hashlib.sha256(key.encode("utf-8")).digest()[0] < 128
    first, second = (NOT_MENTIONED, trap or "") if heads else (trap or "", NOT_MENTIONED)
    return Choice(question=f"{question} Choose the correct answer: (a) {first} (b) {second}.", a=first, b=second)


def read_choice(reply: str, choice: Choice) -> str:
    """The answer a reply to a two-way question gives: a reply of one character is the option it
    names (``a``, else ``b``), of three characters likewise (``(a)``, else ``b``); any other
    reply is the answer as it stands (LoCoMo's reading)."""
    said = reply.strip().lower()
    if len(said) == 1:
        return choice.a if "a" in said else choice.b
    if len(said) == 3:
        return choice.a if "(a)" in said else choice.b
    return said


def question_text(question: str, category: object, *, trap: str | None = None,
                  key: str = "") -> tuple[str, Choice | None]:
    """The question as LoCoMo asks it, and the choice to read the reply with (category 5)."""
    cat = category_of(category)
    if cat == 2:
        return f"{question} {DATE_HINT}", None
    if cat == 5:
        choice = two_way_choice(question, trap, key)
        return choice.question, choice
    return question, None
