"""Fast pooling for the static (model2vec) embedder: token ids cached per space-separated
chunk, so a batch only sends the tokenizer the chunks it has not seen.

Tokenizing dominates a static model's cost (tens of µs per sentence in ``tokenizers``; the
pooling is a gather and a sum). A BERT-style pipeline (``BertNormalizer`` or none, then a
whitespace pre-tokenizer) works word by word, so the ids of ``"a b"`` are the ids of ``"a"``
followed by those of ``"b"``; the tokenizer itself still tokenizes every chunk, once. Models
this does not hold for (byte-level or metaspace pre-tokenizers, token mappings or weights)
keep model2vec's own ``encode``. Truncation follows model2vec: the text is cut to
``max_length × median_token_length`` characters, the ids to ``max_length``, then unknown
tokens are dropped. Vectors are the normalised sums of the token rows (model2vec's mean,
normalised, points the same way), one gather per distinct text length as model2vec does.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np

#: Distinct chunks remembered; the cache is emptied when it grows past this.
MAX_CHUNKS = 200_000
_WORDWISE_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_WORDWISE_NORMALIZERS = {None, "BertNormalizer", "Lowercase", "NFD", "NFC", "NFKC", "NFKD", "StripAccents"}
_POOL_ROWS = 1024  # texts pooled per gather (bounds the float32 scratch matrix)


def supports(model: Any) -> bool:
    """Whether ``model`` (a loaded static model) tokenizes word by word with plain pooling."""
    if getattr(model, "token_mapping", None) is not None or getattr(model, "weights", None) is not None:
        return False
    spec = getattr(model, "spec", None)
    if spec is None:
        try:
            spec = json.loads(model.tokenizer.to_str())
        except Exception:  # not a tokenizers.Tokenizer
            return False
    return supports_spec(spec)


def supports_spec(spec: dict[str, Any]) -> bool:
    """Whether a tokenizer (its parsed JSON) splits words before tokenizing them, and normalises
    each word on its own."""
    pre = (spec.get("pre_tokenizer") or {}).get("type")
    norm = (spec.get("normalizer") or {}).get("type")
    return pre in _WORDWISE_PRE_TOKENIZERS and norm in _WORDWISE_NORMALIZERS


class ChunkPooler:
    """Embeds texts with ``model``'s table and tokenizer, caching token ids per chunk."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.table = np.asarray(model.embedding)
        self.max_length: int | None = model.max_length
        self.max_chars = None if self.max_length is None else self.max_length * int(model.median_token_length)
        self.unk: int | None = model.unk_token_id
        # integer tables (int8 quantised) sum exactly in int32; float tables in float32
        self._acc = np.int32 if np.issubdtype(self.table.dtype, np.integer) else np.float32
        self._ids: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        chunked = [(t if self.max_chars is None else t[: self.max_chars]).split(" ") for t in texts]
        known = self._ids
        missing = list({c for chunks in chunked for c in chunks if c not in known})
        if missing:
            encodings = self.model.tokenizer.encode_batch_fast(missing, add_special_tokens=False)
            fresh = {c: tuple(e.ids) for c, e in zip(missing, encodings, strict=True)}
            with self._lock:  # a full cache is replaced, never cleared: ``known`` stays whole
                if len(self._ids) + len(fresh) > MAX_CHUNKS:
                    self._ids = {}
                self._ids.update(fresh)
        else:
            fresh = {}
        out: list[list[int]] = []
        for chunks in chunked:
            ids: list[int] = []
            for c in chunks:
                part = known.get(c)
                ids.extend(part if part is not None else fresh[c])
            if self.max_length is not None and len(ids) > self.max_length:
                del ids[self.max_length :]
            if self.unk is not None and self.unk in ids:
                ids = [i for i in ids if i != self.unk]
            out.append(ids)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 rows, L2-normalised (all-zero for a text without known tokens)."""
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), _POOL_ROWS):
            ids = self._token_ids(texts[start : start + _POOL_ROWS])
            lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter((t for i in ids for t in i), dtype=np.int64, count=int(lengths.sum()))
            starts = np.cumsum(lengths) - lengths
            # one gather per text length (a set, not np.unique: that imports numpy.ma, ≈ 12 ms of a run)
            for length in sorted(set(lengths[lengths > 0].tolist())):
                rows = np.flatnonzero(lengths == length)
                tokens = flat[starts[rows, None] + np.arange(length)]
                out[start + rows] = self.table[tokens].sum(axis=1, dtype=self._acc)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms
