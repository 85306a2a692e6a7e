"""The static embedder (its files read without model2vec, its pooling chunk-cached) gives
model2vec's own vectors."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys

import numpy as np

from evalloop.memory import StaticEmbedder, default_embedder, wordcache
from evalloop.memory.embedders import MODEL_DIR
from evalloop.memory.vectors import normalise_rows
from evalloop.memory.wordcache import ChunkPooler

ODD_TEXTS = [
    "Hello, World!", "naïve café Ünïcödé", "ΑΣ Βς σ", "東京は 日本の首都", "İstanbul I ı", "ﬁ ligature",
    "tabs\tand\nnewlines  double  space", " leading", "trailing ", "", " ", "emoji 😀 ok",
    "ctrl\x00\x1f\x7f chars", "foo_bar-baz's (x) [UNK] ¤¤", "x" * 300, "word " * 700,
    "JWT refresh needs 5 minute buffer before expiry", "JWT refresh needs 5 minute buffer",
]


@functools.cache
def shipped_by_model2vec():  # model2vec itself (a test dependency only)
    from model2vec import StaticModel

    return StaticModel.from_pretrained(MODEL_DIR, force_download=False)


def _model2vec(emb: StaticEmbedder, texts: list[str]) -> np.ndarray:
    return normalise_rows(shipped_by_model2vec().encode(texts, use_multiprocessing=False))


def test_the_shipped_model_is_read_as_model2vec_reads_it_without_importing_it() -> None:
    ours, theirs = default_embedder()._model, shipped_by_model2vec()
    assert np.array_equal(ours.embedding, theirs.embedding) and ours.embedding.dtype == theirs.embedding.dtype
    assert (ours.median_token_length, ours.unk_token_id, ours.max_length, ours.normalize) == \
        (theirs.median_token_length, theirs.unk_token_id, theirs.max_length, theirs.normalize)
    assert ours.tokenizer.get_vocab() == theirs.tokenizer.get_vocab()
    code = ("import sys; from evalloop.memory.embedders import default_embedder; "
            "v = default_embedder().embed(['offline check']); "
            "heavy = ('model2vec', 'huggingface_hub', 'httpx', 'joblib'); "
            "print(v.shape, sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(1, 256) []"


def test_a_model_that_is_not_word_by_word_is_model2vecs_to_load(tmp_path) -> None:
    folder = tmp_path / "metaspace"
    shutil.copytree(MODEL_DIR, folder)
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    emb = StaticEmbedder(folder)
    assert emb._pooler is None and type(emb._model).__name__ == "StaticModel"
    np.testing.assert_allclose(emb.embed(ODD_TEXTS), normalise_rows(emb._model.encode(ODD_TEXTS)), atol=1e-6)


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
