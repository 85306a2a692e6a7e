"""The case id → score view of a score vector behaves as the Mapping its type says."""

from __future__ import annotations

import math

import numpy as np

from evalloop.run.runner import ScorerResult


def test_a_scorer_results_scores_are_a_whole_mapping():
    result = ScorerResult(scorer="exact", kind="exact", threshold=0.5, pass_mark=0.5, policy={},
                          ids=["a", "b", "c"], vector=[1.0, math.nan, 0.5])
    scores = result.scores
    assert dict(scores) == {"a": 1.0, "c": 0.5}
    assert list(scores.keys()) == ["a", "c"]
    assert list(scores.values()) == [1.0, 0.5]  # was TypeError: an array attribute hid Mapping.values()
    assert list(scores.items()) == [("a", 1.0), ("c", 0.5)]
    assert "b" not in scores and len(scores) == 2


def test_the_items_view_reads_the_vector_once_and_is_a_real_view():
    scores = ScorerResult(scorer="exact", kind="exact", threshold=0.5, pass_mark=0.5, policy={},
                          ids=["a", "b", "c"], vector=[0.25, math.nan, 1.0]).scores
    items = scores.items()
    assert len(items) == 2 and ("a", 0.25) in items and ("b", 0.0) not in items
    assert list(items) == list(items) == [("a", 0.25), ("c", 1.0)]  # iterable again, not a one-shot generator


def test_the_array_behind_the_scores_is_their_vector():
    scores = ScorerResult(scorer="exact", kind="exact", threshold=0.5, pass_mark=0.5, policy={},
                          ids=["a", "b"], vector=[0.25, math.nan]).scores
    assert scores.vector.dtype == np.float64 and scores.vector[0] == 0.25 and np.isnan(scores.vector[1])
