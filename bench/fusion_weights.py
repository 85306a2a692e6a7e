"""Choose the embedded store's fusion weights and tokenizer on corpora generated here.

The seed-000 generator writes corpora with seeds other than the shipped benchmark's (42); the
store is run on each with a grid of ``text_weight`` (vector weight 1) and the weight with the best
mean nDCG@10 (then recall@10) over the seeds is the one to ship as :class:`Fusion`'s default. The
text side's tokenizer is measured the same way: FTS5 ``unicode61`` against ``porter unicode61``,
each with and without stop-word removal in the query. Nothing here reads a public benchmark.

    .venv/bin/python bench/fusion_weights.py [--seeds 1 2 3] [--weeks 4]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics

from evalloop.memory.textsearch import STOPWORDS, quoted_or
from evalloop.retrieval.dataset import Dataset
from evalloop.retrieval.fts import tokens
from evalloop.retrieval.generator import generate_corpus, to_dataset
from evalloop.retrieval.retrievers import retriever_factory
from evalloop.retrieval.runner import run_retriever
from evalloop.retrieval.types import Doc

TEXT_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr")


class FtsOnly:
    """FTS5 alone with a given tokenizer, the query's words OR-ed (stop words optionally out)."""

    def __init__(self, tokenize: str, stopwords: bool) -> None:
        self.tokenize, self.stopwords = tokenize, stopwords
        self.name = f"fts5[{tokenize}{', stop words out' if stopwords else ''}]"
        self._conn = sqlite3.connect(":memory:")

    def build_index(self, corpus: list[Doc]) -> None:
        self._conn.execute(f"CREATE VIRTUAL TABLE d USING fts5(id UNINDEXED, body, tokenize='{self.tokenize}')")
        self._conn.executemany("INSERT INTO d VALUES (?, ?)", [(x.key, x.content) for x in corpus])

    def retrieve(self, query: str, k: int) -> list[str]:
        words = list(dict.fromkeys(w.lower() for w in tokens(query)))
        if self.stopwords:
            words = [w for w in words if w not in STOPWORDS] or words
        if not words:
            return []
        rows = self._conn.execute("SELECT id FROM d WHERE d MATCH ? ORDER BY rank LIMIT ?",
                                  (quoted_or(words), k))
        return [r[0] for r in rows]


def datasets(seeds: list[int], weeks: int) -> list[Dataset]:
    return [to_dataset(generate_corpus(weeks=weeks, seed=s)) for s in seeds]


def mean_metrics(make, data: list[Dataset]) -> dict[str, float]:  # noqa: ANN001
    runs = [run_retriever(make(), ds, k=20).overall for ds in data]
    return {m: statistics.fmean(r[m] for r in runs) for m in METRICS}


def row(label: str, values: dict[str, float]) -> str:
    return f"| {label} | " + " | ".join(f"{values[m]:.3f}" for m in METRICS) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--weeks", type=int, default=4)
    args = parser.parse_args()
    if 42 in args.seeds:
        parser.error("seed 42 is the shipped benchmark's; choose weights on other seeds")
    data = datasets(args.seeds, args.weeks)
    head = "| {} | " + " | ".join(METRICS) + " |\n|---|" + "---|" * len(METRICS)
    print(f"generated corpora: seeds {args.seeds}, {args.weeks} weeks, "
          f"{sum(len(d.queries) for d in data)} queries in all (means over seeds)\n")
    print(head.format("tokenizer (FTS5 alone)"))
    for tokenize in ("unicode61", "porter unicode61 remove_diacritics 2"):
        for stop in (False, True):
            print(row(FtsOnly(tokenize, stop).name, mean_metrics(lambda t=tokenize, s=stop: FtsOnly(t, s), data)))
    print("\n" + head.format("store fusion (text : vector)"))
    scored: list[tuple[float, float, float]] = []
    for tw in TEXT_WEIGHTS:
        opts = {"text_weight": tw, "vector_weight": 1.0}
        values = mean_metrics(lambda o=opts: retriever_factory("memory", options=o)(), data)
        scored.append((values["ndcg@10"], values["recall@10"], tw))
        print(row(f"{tw:g} : 1", values))
    text_only = mean_metrics(lambda: retriever_factory("memory", options={"vector_weight": 0.0})(), data)
    print(row("1 : 0 (text side alone)", text_only))
    for name in ("bm25", "hybrid"):
        print(row(f"{name} (reference)", mean_metrics(retriever_factory(name), data)))
    best = max(scored)
    print(f"\nchosen: text_weight {best[2]:g}, vector_weight 1 "
          f"(mean nDCG@10 {best[0]:.3f}, recall@10 {best[1]:.3f})")


if __name__ == "__main__":
    main()
