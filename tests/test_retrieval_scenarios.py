"""Multi-turn scenarios: keyword + conciseness grading and embedding partial credit."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from evalloop.retrieval.scenarios import (
    Scenario,
    Turn,
    arun_scenarios,
    grade_turn,
    keyword_grade,
    normalize_text,
    run_scenarios,
    similarity,
)


class WordHashEmbedder:
    """Deterministic bag-of-words embedder for tests (positive buckets, so cos >= 0)."""

    name = "test-wordhash-pos"
    dim = 256

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


class RecallBot:
    """A memory-backed bot: remembers statements, answers questions with stored keywords."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.facts: list[str] = []

    def reset(self) -> None:
        self.facts = []

    def send(self, message: str) -> str:
        if not message.rstrip().endswith("?"):
            self.facts.append(message)
            return "Noted."
        wanted = set(re.findall(r"\w+", message.lower()))
        best = max(self.facts, key=lambda f: len(wanted & set(re.findall(r"\w+", f.lower()))))
        if self.verbose:
            return best
        return " ".join(w for w in re.findall(r"\w+", best) if w[0].isupper() and w != "My")


def name_city() -> Scenario:
    return Scenario(
        id="cross_session",
        category="recall",
        turns=[
            Turn(text="My name is Ottoline and my city is Tromsø."),
            Turn(text="I prefer trains over planes."),
            Turn(
                text="What is my name and city?",
                expected="Ottoline Tromsø",
                keywords=["ottoline", "tromsø"],
                max_words=6,
            ),
        ],
    )


def test_keyword_grade_levels() -> None:
    assert normalize_text("Hello, World!  It's") == "hello world its"
    assert keyword_grade("Ottoline, Tromsø.", ["ottoline", "tromsø"], 6) == 1.0
    verbose = "Your name is Ottoline and you live in Tromsø, Norway."
    assert keyword_grade(verbose, ["ottoline", "tromsø"], 6) == 0.5
    assert keyword_grade("I don't know.", ["ottoline", "tromsø"], 6) == 0.0
    assert keyword_grade("Anything at all here", ["ottoline"], None) == 0.0
    assert keyword_grade("ottoline " * 50, ["ottoline"], None) == 1.0


def test_similarity_partial_credit() -> None:
    emb = WordHashEmbedder()
    turn = Turn(
        text="?", expected="Ottoline Vance Tromsø", keywords=["ottoline", "tromsø"], max_words=6
    )
    sim_near = similarity(emb, "Ottoline Vance, Tromso", turn.expected)
    assert sim_near == pytest.approx((2 / 3 + 1) / 2, abs=1e-6)
    acc, kw, sim = grade_turn("Ottoline Vance, Tromso", turn, emb)
    assert (acc, kw) == (0.5, 0.0) and sim == pytest.approx(sim_near)
    acc, kw, sim = grade_turn("Marriott", turn, emb)
    assert acc == 0.0 and sim == pytest.approx(0.5)  # orthogonal vectors map to 0.5
    assert grade_turn("Ottoline Tromsø", turn, emb)[0] == 1.0
    assert grade_turn("x", Turn(text="hello"), emb) == (None, None, None)
    assert similarity(emb, "", "Ottoline") is None


def test_run_scenarios_concise_vs_verbose() -> None:
    tasks = Scenario(
        id="task_continuity",
        category="tasks",
        turns=[
            Turn(text="Rollout steps are Select tech, then Pilot property, then Full deploy."),
            Turn(
                text="What is the rollout plan?",
                expected="Select Pilot Full",
                keywords=["select", "pilot", "full"],
                max_words=10,
            ),
        ],
    )
    concise = run_scenarios(RecallBot(), [name_city(), tasks], WordHashEmbedder())
    assert [s.accuracy for s in concise.scenarios] == [1.0, 1.0]
    assert concise.scenarios[0].turns[0].accuracy is None  # storing turns are not graded
    verbose = run_scenarios(RecallBot(verbose=True), [name_city(), tasks])
    assert [s.accuracy for s in verbose.scenarios] == [0.5, 0.5]
    assert verbose.mean_similarity is None and verbose.per_category == {"recall": 0.5, "tasks": 0.5}


async def test_async_callable_target() -> None:
    async def forgetful(message: str) -> str:
        return "I am not sure."

    report = await arun_scenarios(forgetful, [name_city()], WordHashEmbedder())
    assert report.accuracy == 0.0
    assert report.scenarios[0].mean_latency_ms >= 0
    assert report.mean_similarity is not None and report.mean_similarity < 0.75
