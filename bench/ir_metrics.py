"""Benchmark: evalloop's IR metrics vs pytrec_eval on the same 10,000 queries x 100 results.

Prints both times, the ratio, and the largest disagreement. Run:
    .venv/bin/python bench/ir_metrics.py [--queries 10000] [--depth 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pytrec_eval

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from evalloop.retrieval.metrics import evaluate  # noqa: E402

KS = (1, 5, 10, 20, 100)
TREC = {"recall": "recall_{k}", "precision": "P_{k}", "ndcg": "ndcg_cut_{k}", "hit": "success_{k}"}


def make_run(n_queries: int, depth: int, n_docs: int = 5000, seed: int = 0):
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run_scores: dict[str, dict[str, float]] = {}
    run_lists: dict[str, list[str]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.choice(n_docs, size=int(rng.integers(1, 30)), replace=False)
        grades = rng.integers(0, 4, size=judged.size)
        grades[0] = max(int(grades[0]), 1)
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(judged, grades, strict=True)}
        others = np.setdiff1d(rng.choice(n_docs, size=depth + 30, replace=False), judged)
        docs = np.concatenate([judged[:5], others])[:depth]
        docs = docs[rng.permutation(docs.size)]
        ids = [f"d{d}" for d in docs]
        run_lists[qid] = ids
        run_scores[qid] = {d: float(depth - i) for i, d in enumerate(ids)}  # distinct scores
    return run_lists, run_scores, qrels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args()
    run_lists, run_scores, qrels = make_run(args.queries, args.depth)

    start = time.perf_counter()
    ours = evaluate(run_lists, qrels, KS)
    t_ours = time.perf_counter() - start

    cuts = ",".join(str(k) for k in KS)
    measures = {f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}", f"success.{cuts}", "recip_rank"}
    start = time.perf_counter()
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run_scores)
    t_trec = time.perf_counter() - start

    worst = 0.0
    for name, values in ours.values.items():
        fam, _, k = name.partition("@")
        key = "recip_rank" if name == "mrr" else TREC[fam].format(k=k)
        ref = np.array([theirs[q][key] for q in ours.query_ids])
        worst = max(worst, float(np.max(np.abs(ref - values))))

    n_metrics = len(ours.values)
    print(f"{args.queries} queries x {args.depth} results, {n_metrics} metrics per query")
    print(f"evalloop.retrieval.evaluate : {t_ours:8.3f} s")
    print(f"pytrec_eval (build + eval)  : {t_trec:8.3f} s")
    print(f"ratio evalloop / pytrec_eval: {t_ours / t_trec:8.2f}")
    print(f"max |difference|            : {worst:.2e}")
    print(f"target under 1 s            : {'met' if t_ours < 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
