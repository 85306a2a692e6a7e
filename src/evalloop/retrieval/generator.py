"""Deterministic synthetic memory corpus: weeks of templated facts, duplicates, contradictions,
evolution chains, and the query sets that probe them (standard, old memory, adversarial,
change detection, null). Delivered as one fact per memory or as markdown journals.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Literal

from pydantic import BaseModel

from evalloop.retrieval import corpus_templates as T
from evalloop.retrieval.dataset import Dataset
from evalloop.retrieval.facts import START, Fact
from evalloop.retrieval.journal import journal_files
from evalloop.retrieval.substring import SubstringQuery, is_relevant
from evalloop.retrieval.types import Doc, Query

Mode = Literal["fast", "full"]
PER_WEEK: dict[str, dict[str, int]] = {
    "fast": {"facts": 36, "preferences": 8, "entities": 1, "decisions": 1},
    "full": {"facts": 60, "preferences": 12, "entities": 2, "decisions": 2},
}
JOURNAL_DAYS = (0, 2, 4)  # Mon, Wed, Fri


class SyntheticCorpus(BaseModel):
    """The generated facts and the query sets, reproducible from (weeks, mode, seed)."""

    weeks: int
    mode: Mode
    seed: int
    facts: list[Fact]
    queries: list[SubstringQuery]

    def facts_up_to(self, week: int) -> list[Fact]:
        return [f for f in self.facts if f.week <= week]

    def queries_for(self, max_week: int | None = None) -> list[SubstringQuery]:
        """Queries whose needed facts exist by ``max_week`` (default: the last week)."""
        limit = self.weeks - 1 if max_week is None else max_week
        return [q for q in self.queries if q.min_week <= limit]


def _fill(template: str, rng: random.Random, week: int, day: int) -> str:
    date = START + dt.timedelta(days=7 * week + day)

    def sub(m: re.Match[str]) -> str:
        slot = m.group(1)
        if slot == "DATE":
            return date.strftime("%B %d")
        if slot == "WEEK":
            return str(week)
        return rng.choice(T.VOCAB[slot])

    return re.sub(r"\{([A-Z]+)\}", sub, template)


def _fill_pair(pair: tuple[str, str], rng: random.Random, week: int, day: int) -> tuple[str, str]:
    """Fill two templates with the same slot values."""
    state = rng.getstate()
    a = _fill(pair[0], rng, week, day)
    rng.setstate(state)
    return a, _fill(pair[1], rng, week, day)


def generate_corpus(weeks: int = 4, mode: Mode = "fast", seed: int = 42) -> SyntheticCorpus:
    """Generate ``weeks`` weeks of facts and the matching query sets, deterministically."""
    if weeks < 1:
        raise ValueError("weeks must be >= 1")
    counts = PER_WEEK[mode]
    facts: list[Fact] = []

    def add(content: str, category: str, week: int, day: int, kind: str, **extra: object) -> None:
        facts.append(
            Fact(
                id=len(facts) + 1,
                content=content,
                category=category,
                week=week,
                day=day,
                kind=kind,
                **extra,
            )
        )  # type: ignore[arg-type]

    fact_templates = [(topic, t) for topic, (_, ts) in T.TOPICS.items() for t in ts]
    for week in range(weeks):
        pick = random.Random(f"{seed}:select:{week}")
        if week == 0:
            for i, (group, text) in enumerate(T.EDGE_FACTS):
                add(text, "entities", 0, 0, "edge", group=group, topic=f"edge{i}")
        for chain, versions in T.EVOLUTION.items():
            for version, (v_week, text) in enumerate(versions):
                if v_week == week:
                    add(
                        text,
                        "facts",
                        week,
                        pick.choice(JOURNAL_DAYS),
                        "evolution",
                        chain=chain,
                        version=version,
                    )
        pools = {
            "facts": fact_templates,
            "preferences": [(None, t) for t in T.PREFERENCES],
            "entities": [(None, t) for t in T.ENTITIES],
            "decisions": [(None, t) for t in T.DECISIONS],
        }
        for category, pool in pools.items():
            chosen = pick.sample(pool, min(counts[category], len(pool)))
            for idx, (topic, template) in enumerate(chosen):
                day = JOURNAL_DAYS[idx % len(JOURNAL_DAYS)]
                rng = random.Random(f"{seed}:fill:{week}:{template}")
                add(_fill(template, rng, week, day), category, week, day, "template", topic=topic)
        if week >= 1:
            for n, pair in enumerate(pick.sample(T.DUPLICATES, pick.randint(3, 6))):
                day = JOURNAL_DAYS[n % 3]
                a, b = _fill_pair(pair, random.Random(f"{seed}:dup:{week}:{pair[0]}"), week, day)
                add(a, "facts", week, day, "duplicate", group=f"dup{week}.{n}")
                add(b, "facts", week, day, "duplicate", group=f"dup{week}.{n}")
        if week >= 2:
            for n, pair in enumerate(pick.sample(T.CONTRADICTIONS, pick.randint(2, 4))):
                day = JOURNAL_DAYS[n % 3]
                a, b = _fill_pair(pair, random.Random(f"{seed}:con:{week}:{pair[0]}"), week, day)
                add(a, "facts", week, day, "contradiction", group=f"con{week}.{n}")
                add(b, "facts", week, day, "contradiction", group=f"con{week}.{n}")
    return SyntheticCorpus(weeks=weeks, mode=mode, seed=seed, facts=facts, queries=build_queries())


def build_queries() -> list[SubstringQuery]:
    """Every query set; change-detection queries carry the week their facts appear."""
    qs: list[SubstringQuery] = []
    for topic, texts in T.TOPIC_QUERIES.items():
        slot = T.TOPICS[topic][0]
        for i, text in enumerate(texts):
            qs.append(
                SubstringQuery(
                    query_id=f"std_{topic}_{i}",
                    text=text,
                    set="standard",
                    expected=list(T.VOCAB[slot]),
                    kind=topic,
                )
            )
    for i, (text, expected) in enumerate(T.OLD_MEMORY_QUERIES):
        qs.append(SubstringQuery(query_id=f"old_{i:02d}", text=text, set="old_memory", expected=expected))
    for i, (text, expected, difficulty, kind) in enumerate(T.ADVERSARIAL_QUERIES):
        qs.append(
            SubstringQuery(
                query_id=f"adv_{i:02d}",
                text=text,
                set="adversarial",
                expected=expected,
                difficulty=difficulty,
                kind=kind,
            )
        )
    for i, (text, chain, kind, new, old) in enumerate(T.CHANGE_QUERIES):
        min_week = max(w for w, _ in T.EVOLUTION[chain])
        qs.append(
            SubstringQuery(
                query_id=f"chg_{i:02d}",
                text=text,
                set=kind,  # type: ignore[arg-type]
                expected=new if kind == "current_state" else old + new,
                old_keywords=old,
                new_keywords=new,
                kind=chain,
                min_week=min_week,
            )
        )
    for i, text in enumerate(T.NULL_QUERIES):
        qs.append(SubstringQuery(query_id=f"null_{i:02d}", text=text, set="null"))
    return qs


def fact_grades(corpus: SyntheticCorpus, q: SubstringQuery, facts: list[Fact]) -> dict[str, int]:
    """Substring-relevant facts get grade 1; the fact a query is really about gets grade 2."""
    grades: dict[str, int] = {}
    for f in facts:
        if not is_relevant(f.content, q.expected):
            continue
        target = (
            (q.set == "old_memory" and f.kind == "edge")
            or (q.set == "current_state" and f.chain == q.kind and f.version == len(T.EVOLUTION[f.chain]) - 1)
            or (q.set == "change_awareness" and f.chain == q.kind)
        )
        grades[str(f.id)] = 2 if target else 1
    return grades


def to_dataset(
    corpus: SyntheticCorpus,
    delivery: Literal["facts", "journal"] = "facts",
    max_week: int | None = None,
) -> Dataset:
    """The corpus as a 001-style dataset (strata = query sets; null and N/A queries left out).

    ``facts`` makes one document per fact; ``journal`` one per journal file (plus MEMORY.md),
    a file being as relevant as its most relevant fact.
    """
    week = corpus.weeks - 1 if max_week is None else max_week
    facts = corpus.facts_up_to(week)
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    if delivery == "facts":
        docs = [
            Doc(
                id=f.id,
                content=f.content,
                category=f.category,
                week=f.week,
                kind=f.kind,
                tags=f.topic or "",
            )
            for f in facts
        ]
    else:
        files = journal_files(facts)
        docs = [Doc(id=path, content=text, category="journal") for path, (text, _) in files.items()]
        owner: dict[int, list[str]] = {}
        for path, (_, ids) in files.items():
            for fid in ids:
                owner.setdefault(fid, []).append(path)
    for q in corpus.queries_for(week):
        if q.set == "null" or not q.expected:
            continue
        grades = fact_grades(corpus, q, facts)
        if delivery == "journal":
            by_file: dict[str, int] = {}
            for fid, g in grades.items():
                for path in owner[int(fid)]:
                    by_file[path] = max(g, by_file.get(path, 0))
            grades = by_file
        if not grades:
            continue
        queries.append(
            Query(
                query_id=q.query_id,
                text=q.text,
                stratum=q.set,
                relevant_ids=[int(i) if i.isdigit() else i for i, g in grades.items() if g > 0],
            )
        )
        qrels[q.query_id] = grades
    name = f"synthetic-{delivery}-{corpus.mode}-w{week + 1}-s{corpus.seed}"
    return Dataset(corpus=docs, queries=queries, qrels=qrels, name=name)
