"""Loading a model2vec static model's files without model2vec: the embedding table (safetensors),
the tokenizer (``tokenizers``) and the two numbers pooling needs from the config.

model2vec's ``StaticModel.from_pretrained`` reaches the same three files through its persistence
layer, which imports the Hugging Face hub client and its HTTP stack (≈ 0.45 s of a process that
never downloads anything). The tokenizer's JSON is read once: the ``tokenizers`` package builds
the tokenizer from the text, and the parsed spec says whether the model tokenizes word by word
(:func:`evalloop.memory.wordcache.supports_spec`), its unknown token and its median token length,
all as model2vec derives them, so the vectors are the same (tests/test_memory_embedders.py checks
them against model2vec's own ``encode``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalloop.errors import ConfigError


@dataclass
class StaticModelFiles:
    """What a static model's pooling reads: its table, tokenizer and truncation limits."""

    embedding: np.ndarray
    tokenizer: Any  # tokenizers.Tokenizer
    spec: dict[str, Any]  # the tokenizer's JSON, parsed
    max_length: int | None
    median_token_length: int
    unk_token_id: int | None
    normalize: bool
    token_mapping: None = None  # vocabulary-quantised models (mapping, weights) are model2vec's to load
    weights: None = None

    @property
    def dim(self) -> int:
        return int(self.embedding.shape[1])


def has_extra_tensors(folder: Path) -> bool:
    """Whether the model's safetensors file holds more than the plain table (a token mapping or
    per-token weights of a vocabulary-quantised model)."""
    with (folder / "model.safetensors").open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    return bool(set(header) - {"embeddings", "__metadata__"})


def load_static_model(folder: Path) -> StaticModelFiles:
    """The table, tokenizer and config of the model2vec model in ``folder`` (plain layout)."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        text = (folder / "tokenizer.json").read_text(encoding="utf-8")
        spec = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the static model's files are unreadable ({exc})", where=str(folder),
                          hint="reinstall evalloop, or pass a model2vec model directory") from None
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as tensors:
        embedding = tensors.get_tensor("embeddings")
    tokenizer = Tokenizer.from_str(text)
    if tokenizer.padding is not None:  # ids only: a batch is never padded (as model2vec disables it)
        tokenizer.no_padding()
    vocab = _vocab(spec)
    if len(vocab) != len(embedding):
        raise ConfigError(f"the static model has {len(vocab)} tokens but {len(embedding)} vectors",
                          where=str(folder), hint="reinstall evalloop, or pass a model2vec model directory")
    unk = (spec.get("model") or {}).get("unk_token")
    return StaticModelFiles(
        embedding=embedding, tokenizer=tokenizer, spec=spec, max_length=config.get("max_length", 512),
        median_token_length=median_length(vocab),
        unk_token_id=None if unk is None else vocab.get(unk), normalize=bool(config.get("normalize", False)))


def median_length(vocab: dict[str, int]) -> int:
    """The median token length, truncated to an integer, as model2vec takes it
    (``int(statistics.median(...))``), from one array (30,000 tokens: ≈ 1 ms instead of ≈ 6)."""
    lengths = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
    return int(np.median(lengths)) if lengths.size else 0


def _vocab(spec: dict[str, Any]) -> dict[str, int]:
    """token → id, the added tokens included (as ``Tokenizer.get_vocab()`` gives it)."""
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):  # not WordPiece / WordLevel / BPE: model2vec's to load
        raise ValueError("vocabulary is not a token → id mapping")
    return {**vocab, **{t["content"]: t["id"] for t in spec.get("added_tokens") or []}}
