"""IR metrics agree with trec_eval (pytrec_eval) on randomised runs, binary and graded."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval

from evalloop.retrieval.metrics import evaluate, metric_names

KS = (1, 3, 5, 10, 20)
TREC = {"recall": "recall_{k}", "precision": "P_{k}", "ndcg": "ndcg_cut_{k}", "hit": "success_{k}"}


def random_case(seed: int, graded: bool, n_queries: int = 150, n_docs: int = 400):
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.choice(n_docs, size=int(rng.integers(1, 25)), replace=False)
        grades = rng.integers(0, 4 if graded else 2, size=judged.size)
        grades[0] = max(int(grades[0]), 1)  # at least one relevant document
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(judged, grades, strict=True)}
        n_ret = int(rng.integers(1, 60))
        pool = np.concatenate([judged, rng.choice(n_docs, size=n_ret, replace=False)])
        docs = list(dict.fromkeys(pool[rng.permutation(pool.size)].tolist()))[:n_ret]
        scores = rng.permutation(len(docs)).astype(float) + rng.random()  # distinct scores
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs, scores, strict=True)}
    return run, qrels


def trec_values(run, qrels):
    cuts = ",".join(str(k) for k in KS)
    measures = {f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}", f"success.{cuts}", "recip_rank"}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def assert_agrees(table, trec):
    assert set(table.query_ids) == set(trec)
    checked = 0
    for name, values in table.values.items():
        if name == "mrr":
            trec_name = "recip_rank"
        else:
            fam, k = name.split("@")
            trec_name = TREC[fam].format(k=k)
        ours = np.asarray(values)
        theirs = np.array([trec[q][trec_name] for q in table.query_ids])
        np.testing.assert_allclose(ours, theirs, atol=1e-6, err_msg=name)
        checked += 1
    assert checked == len(metric_names(KS))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("graded", [False, True])
def test_agrees_with_trec_eval_on_scored_runs(seed: int, graded: bool) -> None:
    run, qrels = random_case(seed, graded)
    table = evaluate(run, qrels, KS)
    assert_agrees(table, trec_values(run, qrels))
    # the random runs are not trivial: some metrics are strictly between 0 and 1
    assert 0.05 < table.mean()["ndcg@10"] < 0.95


def test_ranked_lists_equal_score_dicts() -> None:
    run, qrels = random_case(7, graded=True)
    ranked = {q: sorted(docs, key=lambda d: -docs[d]) for q, docs in run.items()}
    a, b = evaluate(run, qrels, KS), evaluate(ranked, qrels, KS)
    for name in a.values:
        np.testing.assert_array_equal(a.values[name], b.values[name])


def test_hand_computed_values() -> None:
    qrels = {"q": {"a": 2, "b": 1, "c": 0, "z": 1}}
    table = evaluate({"q": ["c", "a", "x", "b"]}, qrels, ks=(1, 2, 4))
    v = {m: float(arr[0]) for m, arr in table.values.items()}
    assert v["mrr"] == pytest.approx(0.5)
    assert v["recall@4"] == pytest.approx(2 / 3)  # denominator: all 3 relevant docs
    assert v["precision@4"] == pytest.approx(0.5)
    assert v["hit@1"] == 0.0 and v["hit@2"] == 1.0
    dcg = 2 / np.log2(3) + 1 / np.log2(5)
    idcg = 2 + 1 / np.log2(3) + 1 / np.log2(4)
    assert v["ndcg@4"] == pytest.approx(dcg / idcg)


def test_missing_short_and_duplicate_runs() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    table = evaluate({"q1": ["a", "a", "x"]}, qrels, ks=(5,))
    assert table.per_query("precision@5") == {"q1": 0.2, "q2": 0.0}  # duplicate counted once
    assert table.per_query("mrr") == {"q1": 1.0, "q2": 0.0}
    assert table.mean()["recall@5"] == 0.5


def test_by_group_macro_averages() -> None:
    qrels = {"a": {"x": 1}, "b": {"y": 1}, "c": {"z": 1}}
    run = {"a": ["x"], "b": ["n", "y"], "c": []}
    groups = {"a": "exact", "b": "exact", "c": "paraphrase"}
    by = evaluate(run, qrels).by_group(groups)
    assert by["exact"]["mrr"] == pytest.approx(0.75)
    assert by["paraphrase"]["mrr"] == 0.0
    assert metric_names((5,)) == ["recall@5", "precision@5", "hit@5", "ndcg@5", "mrr"]
