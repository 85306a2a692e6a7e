"""Embedders: the protocol every text embedder follows, and the built-in implementations.

``default_embedder()`` is a static model2vec model distilled from all-MiniLM-L6-v2 and shipped
in ``evalloop/memory/model`` (see the NOTICE there): semantic, offline, read with ``tokenizers``
and ``safetensors`` (model2vec itself only for models evalloop does not pool itself).
``HashingEmbedder`` is a cheap lexical fallback; sentence-transformers and HTTP endpoints
(``embedders_http``) are optional.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evalloop.environ import restore_env
from evalloop.errors import ConfigError
from evalloop.memory import wordcache
from evalloop.memory.vectors import normalise_rows
from evalloop.memory.wordcache import ChunkPooler

MODEL_DIR = Path(__file__).resolve().parent / "model"
DEFAULT_EMBEDDER_NAME = "model2vec:minilm-l6-v2-static-256"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    name: str

    @property
    def dim(self) -> int:
        """The vector dimension (an attribute, or a property that may probe the model once)."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), dtype float32, rows L2-normalised."""
        ...


class StaticEmbedder:
    """A model2vec static model loaded from a local directory (the shipped one by default).

    A plain model whose tokenizer works word by word (the shipped one) is loaded from its files
    directly (:mod:`evalloop.memory.static_model`); any other needs the ``model2vec`` package."""

    def __init__(self, path: str | Path | None = None, name: str | None = None) -> None:
        folder = Path(path) if path is not None else MODEL_DIR
        if not (folder / "model.safetensors").is_file():
            raise ConfigError(
                "static embedding model files are missing",
                where=str(folder),
                hint="reinstall evalloop, or pass a model2vec model directory",
            )
        self._model = _load_static(folder)
        if name is None:
            name = DEFAULT_EMBEDDER_NAME if path is None else f"model2vec:{folder.name}"
        self.name = name
        self.dim = int(self._model.dim)
        self._pooler = ChunkPooler(self._model) if wordcache.supports(self._model) else None

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._pooler is not None:  # same vectors, tokenizing each distinct word once
            return self._pooler.embed(list(texts))
        out = self._model.encode(list(texts), use_multiprocessing=False)
        return normalise_rows(out)


def _load_static(folder: Path) -> Any:
    """The files of a plain, word-by-word model; else model2vec's ``StaticModel`` of the folder."""
    from evalloop.memory.static_model import has_extra_tensors, load_static_model

    if not has_extra_tensors(folder):
        try:
            files = load_static_model(folder)
        except ValueError:
            files = None
        if files is not None and wordcache.supports_spec(files.spec):
            return files
    try:
        from model2vec import StaticModel
    except ImportError:
        raise ConfigError("this static model needs the model2vec package (its tokenizer or vocabulary "
                          "is not one evalloop pools itself)", where=str(folder),
                          hint="pip install model2vec, or use the default static embedder") from None
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})  # a local folder: never the network
    try:
        return StaticModel.from_pretrained(folder, force_download=False)
    finally:
        restore_env(saved)


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Deterministic lexical embedder: hashed words and word bigrams, signed, L2-normalised.

    No model, no randomness across processes; similar only where words overlap.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigError(f"hashing embedder dimension {dim} is too small", hint="use ≥ 8")
        self.dim = dim
        self.name = f"hashing:{dim}"

    def _features(self, text: str) -> list[str]:
        words = _TOKEN.findall(text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return normalise_rows(out)


class SentenceTransformerEmbedder:
    """A sentence-transformers model (optional: needs ``pip install sentence-transformers``)."""

    def __init__(self, model: str, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                f"embedder 'sentence-transformers:{model}' needs the sentence-transformers package",
                where="memory embedder",
                hint="pip install sentence-transformers, or use the default static embedder",
            ) from exc
        self._model = SentenceTransformer(model, device=device)
        self.name = f"sentence-transformers:{model}"
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise_rows(self._model.encode(list(texts), convert_to_numpy=True))


def default_embedder_dim() -> int:
    """The shipped model's dimension, read from its config without loading it."""
    try:
        config = json.loads((MODEL_DIR / "config.json").read_text())
        return int(config["hidden_dim"])
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(
            "static embedding model config is missing or unreadable",
            where=str(MODEL_DIR / "config.json"),
            hint="reinstall evalloop",
        ) from exc


@lru_cache(maxsize=1)
def default_embedder() -> StaticEmbedder:
    """The shipped static embedder, loaded once per process."""
    return StaticEmbedder()


def resolve_embedder(spec: str | None) -> Embedder:
    """Build an embedder from a short spec, as used in config files and on the command line.

    ``default`` | ``static[:<dir>]`` | ``hashing[:<dim>]`` | ``sentence-transformers:<model>`` |
    ``openai:<model>@<base_url>`` | ``ollama:<model>@<base_url>``.
    """
    spec = (spec or "default").strip()
    kind, _, arg = spec.partition(":")
    if kind in ("default", "static") and not arg:
        return default_embedder()
    if kind == "static":
        return StaticEmbedder(arg)
    if kind == "hashing":
        try:
            return HashingEmbedder(int(arg) if arg else 256)
        except ValueError as exc:
            raise ConfigError(f"bad hashing dimension {arg!r}", where="embedder spec") from exc
    if kind == "sentence-transformers" and arg:
        return SentenceTransformerEmbedder(arg)
    if kind in ("openai", "ollama") and "@" in arg:
        from evalloop.memory.embedders_http import HTTPEmbedder

        model, _, base_url = arg.partition("@")
        return HTTPEmbedder(base_url=base_url, model=model, api="openai" if kind == "openai" else "ollama")
    raise ConfigError(
        f"unknown embedder {spec!r}",
        where="embedder spec",
        hint="use default, hashing[:dim], static:<dir>, sentence-transformers:<model>, "
        "openai:<model>@<url> or ollama:<model>@<url>",
    )
