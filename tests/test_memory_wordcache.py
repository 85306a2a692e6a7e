"""The static embedder's chunk-cached pooling gives model2vec's own vectors."""

from __future__ import annotations

import numpy as np

from evalloop.memory import StaticEmbedder, default_embedder, wordcache
from evalloop.memory.vectors import normalise_rows
from evalloop.memory.wordcache import ChunkPooler

ODD_TEXTS = [
    "Hello, World!", "naïve café Ünïcödé", "ΑΣ Βς σ", "東京は 日本の首都", "İstanbul I ı", "ﬁ ligature",
    "tabs\tand\nnewlines  double  space", " leading", "trailing ", "", " ", "emoji 😀 ok",
    "ctrl\x00\x1f\x7f chars", "foo_bar-baz's (x) [UNK] ¤¤", "x" * 300, "word " * 700,
    "JWT refresh needs 5 minute buffer before expiry", "JWT refresh needs 5 minute buffer",
]


def _model2vec(emb: StaticEmbedder, texts: list[str]) -> np.ndarray:
    return normalise_rows(emb._model.encode(texts, use_multiprocessing=False))


def test_the_shipped_model_takes_the_cached_path_and_gets_model2vecs_vectors() -> None:
    emb = default_embedder()
    assert wordcache.supports(emb._model) and emb._pooler is not None
    texts = ODD_TEXTS + [f"ticket {i} regressed after the {i % 7}th retry" for i in range(2500)]
    for _ in range(2):  # cold cache, then warm
        np.testing.assert_allclose(emb.embed(texts), _model2vec(emb, texts), atol=1e-6)


def test_a_full_cache_is_replaced_and_vectors_stay_the_same(monkeypatch) -> None:
    monkeypatch.setattr(wordcache, "MAX_CHUNKS", 10)
    pooler = ChunkPooler(default_embedder()._model)
    first = pooler.embed(ODD_TEXTS)
    assert len(pooler._ids) <= 10 + len(ODD_TEXTS) * 2
    np.testing.assert_allclose(pooler.embed(ODD_TEXTS), first, atol=1e-7)
    np.testing.assert_allclose(first, _model2vec(default_embedder(), ODD_TEXTS), atol=1e-6)


def test_models_that_are_not_word_by_word_keep_model2vecs_encode() -> None:
    model = default_embedder()._model

    class Weighted:
        token_mapping = None
        weights = np.ones(3)
        tokenizer = model.tokenizer

    class ByteLevel:
        token_mapping = None
        weights = None

        class tokenizer:  # noqa: N801 - stands in for a tokenizers.Tokenizer
            @staticmethod
            def to_str() -> str:
                return '{"normalizer": null, "pre_tokenizer": {"type": "ByteLevel"}}'

    assert not wordcache.supports(Weighted())
    assert not wordcache.supports(ByteLevel())
    assert not wordcache.supports(object())
