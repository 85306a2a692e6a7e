"""Built-in retrieval scorers: IR metrics per query, QA answer grades, substring and scenario grades.

IR scorers (``recall``, ``precision``, ``ndcg``, ``mrr``, ``hit``, and the fixed-cutoff
``recall@5``, ``recall@10``, ``ndcg@10``, ``mrr@10``, ``mrr@20`` so one suite can list several
and every name says its cut; ``mrr`` alone ranks as deep as the target answers) read a ranked list of
doc ids (a list, or ``{"ids": [...]}``) and ``expected = {"relevance": {doc_id: grade}}``
(or ``{"relevant_ids": [...]}``); they use :func:`evalloop.retrieval.metrics.evaluate`, so
per-case values are exactly the per-query metrics (trec_eval conventions, graded nDCG).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# metrics, qa and substring load when a scorer of theirs first grades: registering these scorers
# is part of every run's start-up, using them is not (≈ 20 ms of a run that does not)
from evalloop.retrieval.scenarios import SIMILARITY_THRESHOLD, Turn, grade_turn
from evalloop.score import Score
from evalloop.scoring.registry import scorer

__all__ = ["ranked_ids", "relevance", "result_texts"]


def ranked_ids(output: Any) -> list[str]:
    """Doc ids from a target's output: a list of ids, ``{"ids": [...]}``, or hits with ``id``."""
    if isinstance(output, Mapping):
        output = output.get("ids", output.get("results", []))
    if not isinstance(output, list | tuple):
        raise ValueError(f"output is not a ranked list of ids ({type(output).__name__})")
    ids = [str(o.get("id") if isinstance(o, Mapping) else o) for o in output]
    return list(dict.fromkeys(ids))


def result_texts(output: Any) -> list[str]:
    """Result texts from a target's output: a list of strings or ``{"texts": [...]}``."""
    if isinstance(output, Mapping):
        output = output.get("texts", [])
    if isinstance(output, str):
        return [output]
    return ["" if t is None else str(t) for t in output or []]


def relevance(expected: Any) -> dict[str, int]:
    """Graded judgments from ``expected``: ``{"relevance": {...}}`` or ``{"relevant_ids": [...]}``."""
    if not isinstance(expected, Mapping):
        raise ValueError("expected must hold 'relevance' {doc_id: grade} or 'relevant_ids'")
    grades = {str(d): 1 for d in expected.get("relevant_ids", [])}
    grades.update({str(d): int(g) for d, g in (expected.get("relevance") or {}).items()})
    if not grades:
        raise ValueError("expected has no relevance judgments")
    return grades


def _ir(output: Any, expected: Any, metric: str, k: int | None, level: int) -> Score:
    ids = ranked_ids(output)
    grades = relevance(expected)
    if metric == "mrr" and k:
        ids = ids[:k]  # mrr@k: a first relevant document below rank k counts nothing
    ks = [k] if k else [max(1, len(ids))]
    from evalloop.retrieval.metrics import evaluate

    table = evaluate({"q": ids}, {"q": grades}, ks, families=[metric], relevance_level=level)
    name = metric if metric == "mrr" else f"{metric}@{ks[0]}"
    value = float(table.values[name][0])
    n_rel = sum(1 for g in grades.values() if g >= level)
    first = next((i + 1 for i, d in enumerate(ids) if grades.get(d, 0) >= level), None)
    where = f"first relevant at rank {first}" if first else "no relevant doc retrieved"
    return Score(value=value, message=f"{name} {value:.3f} ({n_rel} relevant; {where})")


def _ir_scorer(metric: str, default_k: int | None, name: str, fixed: bool) -> Callable[..., Any]:
    doc = {"recall": "Share of relevant docs in the top k", "precision": "Relevant docs in the top k / k",
           "ndcg": "nDCG of the top k (graded gains, log2 discount)", "hit": "1 if any relevant doc "
           "is in the top k", "mrr": "Reciprocal rank of the first relevant doc"}[metric]
    if fixed:
        def fn(input: Any, output: Any, expected: Any, relevance_level: int = 1) -> Score:
            return _ir(output, expected, metric, default_k, relevance_level)
    else:
        def fn(input: Any, output: Any, expected: Any, k: int | None = default_k,
               relevance_level: int = 1) -> Score:
            return _ir(output, expected, metric, k, relevance_level)
    fn.__name__ = fn.__qualname__ = name.replace("@", "_at_").replace("-", "_")
    fn.__doc__ = (doc.replace("top k", f"top {default_k}") if fixed else doc) + " (per query)."
    return scorer(name, description=fn.__doc__, binary=metric == "hit", min_score=0)(fn)


recall = _ir_scorer("recall", 5, "recall", fixed=False)
precision = _ir_scorer("precision", 5, "precision", fixed=False)
ndcg = _ir_scorer("ndcg", 10, "ndcg", fixed=False)
hit = _ir_scorer("hit", 5, "hit", fixed=False)
mrr = _ir_scorer("mrr", None, "mrr", fixed=False)
recall_at_5 = _ir_scorer("recall", 5, "recall@5", fixed=True)
recall_at_10 = _ir_scorer("recall", 10, "recall@10", fixed=True)
ndcg_at_10 = _ir_scorer("ndcg", 10, "ndcg@10", fixed=True)
mrr_at_10 = _ir_scorer("mrr", 10, "mrr@10", fixed=True)
mrr_at_20 = _ir_scorer("mrr", 20, "mrr@20", fixed=True)


# -- QA (seed 002): exact match, token F1, recall@k over the retrieved texts ----------------

def _qa(input: Any, output: Any, expected: Any, k: int) -> Any:
    truth = expected.get("answer") if isinstance(expected, Mapping) else expected
    if not isinstance(truth, str) or not truth.strip():
        raise ValueError("expected must be the answer text or {answer: ...}")
    question = input.get("question", "") if isinstance(input, Mapping) else str(input)
    from evalloop.retrieval.qa import QAPair, score_pair

    pair = QAPair(id="q", question=question, ground_truth=truth)
    return score_pair(pair, result_texts(output), k)


@scorer("qa-exact-match", binary=True, min_score=0)
def qa_exact_match(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """The best top-k candidate (by token F1) contains the answer, ignoring case (oracle EM)."""
    r = _qa(input, output, expected, k)
    return Score(value=float(r.exact_match), message=f"best: {r.retrieved[:80]!r}")


@scorer("qa-token-f1", min_score=0)
def qa_token_f1(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """Highest token F1 between a top-k result and the answer."""
    r = _qa(input, output, expected, k)
    return Score(value=r.f1, message=f"F1 {r.f1:.3f} vs {r.ground_truth!r}")


@scorer("qa-recall", binary=True, min_score=0)
def qa_recall(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """Any of the top-k results contains the answer (recall@k)."""
    r = _qa(input, output, expected, k)
    return Score(value=float(r.recalled), message="answer in top k" if r.recalled else "answer not found")


# -- substring relevance (seed 000) ---------------------------------------------------------

def _substring(input: Any, output: Any, expected: Any, k: int) -> Any:
    data = dict(expected) if isinstance(expected, Mapping) else {"expected": list(expected or [])}
    data.setdefault("set", (input or {}).get("set", "standard") if isinstance(input, Mapping) else "standard")
    from evalloop.retrieval.substring import SubstringQuery, score_query

    query = SubstringQuery(query_id="q", text="", **data)
    return query, score_query(query, result_texts(output)[:k], ks=(1, 3, 5, k))


@scorer("substring-hit", binary=True, min_score=0)
def substring_hit(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """A top-k result contains an expected substring (null queries are skipped)."""
    q, r = _substring(input, output, expected, k)
    if q.set == "null":
        return Score.skip("null query: see null-rejection")
    rank = f"first hit at {r.first_hit_rank}" if r.first_hit_rank else "no hit"
    return Score(value=r.hit_at[k], message=rank)


@scorer("substring-mrr", min_score=0)
def substring_mrr(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """Reciprocal rank of the first result containing an expected substring."""
    q, r = _substring(input, output, expected, k)
    if q.set == "null":
        return Score.skip("null query: see null-rejection")
    return Score(value=r.rr, message=f"rr {r.rr:.3f}")


@scorer("relevance-density", min_score=0)
def relevance_density(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """Share of a relevant result's text that is expected substrings (mean over hits; seed 000)."""
    q, r = _substring(input, output, expected, k)
    if q.set == "null":
        return Score.skip("null query: see null-rejection")
    if r.density is None:
        return Score.skip("no relevant result to measure")
    return Score(value=r.density, message=f"density {r.density:.3f} over "
                 f"{r.n_results} result(s), {r.tokens:.0f} tokens")


@scorer("change-detection", binary=True, min_score=0)
def change_detection(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """Current state ranks above stale facts; change queries see both old and new facts."""
    q, r = _substring(input, output, expected, k)
    if q.set == "current_state":
        return Score(value=float(bool(r.current_correct)), message="current state first"
                     if r.current_correct else "stale or missing current state")
    if q.set == "change_awareness":
        return Score(value=float(bool(r.change_aware)), message="old and new both found"
                     if r.change_aware else "old or new state missing")
    return Score.skip(f"not a change query ({q.set})")


@scorer("null-rejection", binary=True, min_score=0)
def null_rejection(input: Any, output: Any, expected: Any, k: int = 5) -> Score:
    """A query about nothing stored returns nothing (1 − false-positive rate)."""
    q, r = _substring(input, output, expected, k)
    if q.set != "null":
        return Score.skip(f"not a null query ({q.set})")
    return Score(value=float(not r.false_positive), message=f"{r.n_results} result(s) returned")


# -- multi-turn scenarios (seed 003) --------------------------------------------------------

@scorer("scenario-accuracy", min_score=0)
def scenario_accuracy(input: Any, output: Any, expected: Any, similarity: bool = True,
                      similarity_threshold: float = SIMILARITY_THRESHOLD) -> Score:
    """Mean over graded turns: keywords + word limit (1 / 0.5 / 0), similarity partial credit."""
    replies = result_texts(output)
    turns = [Turn.model_validate(t) for t in (expected or {}).get("turns", [])]
    embedder = None
    if similarity:
        from evalloop.memory.embedders import default_embedder

        embedder = default_embedder()
    grades, notes = [], []
    for i, turn in enumerate(turns):
        if not turn.graded:
            continue
        reply = replies[i] if i < len(replies) else ""
        acc, kw, sim = grade_turn(reply, turn, embedder, similarity_threshold)
        grades.append(acc or 0.0)
        notes.append(f"t{i}={acc:g}" + (f" (sim {sim:.2f})" if sim is not None and acc != kw else ""))
    if not grades:
        raise ValueError("the scenario has no graded turn (a turn with keywords)")
    value = sum(grades) / len(grades)
    return Score(value=value, message=", ".join(notes))
