"""Embedders: the shipped static model (offline, semantic), hashing, optional ones, HTTP."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from evalloop.errors import ConfigError, ConnectionFailed
from evalloop.memory import (
    Embedder,
    HashingEmbedder,
    HTTPEmbedder,
    StaticEmbedder,
    default_embedder,
    resolve_embedder,
)
from evalloop.memory.embedders import MODEL_DIR
from support.embeddings_server import EmbeddingsServer, embeddings_server  # noqa: F401

PARAPHRASES = [
    ("JWT refresh needs 5 minute buffer before expiry", "OAuth tokens should refresh 5min before expiration"),
    ("How do I reset my password?", "I forgot my login credentials and need to change them"),
    ("Database connection pool exhausted under load", "Too many concurrent DB connections caused timeouts"),
    ("The cat sat on the mat", "A kitten was resting on the rug"),
]
UNRELATED = [
    ("Next.js caching strategies", "OAuth token refresh patterns"),
    ("The cat sat on the mat", "Quarterly revenue grew by 8 percent"),
    ("How do I reset my password?", "Best hiking trails in the Alps"),
    ("Database connection pool exhausted under load", "Recipe for chocolate chip cookies"),
]


def cosine(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


def test_default_embedder_is_semantic_normalised_and_cached() -> None:
    emb = default_embedder()
    assert emb is default_embedder()
    assert isinstance(emb, Embedder)
    assert emb.dim == 256 and emb.name == "model2vec:minilm-l6-v2-static-256"
    vectors = emb.embed(["one", "two words", ""])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, 256)
    para = [cosine(emb, a, b) for a, b in PARAPHRASES]
    unrel = [cosine(emb, a, b) for a, b in UNRELATED]
    assert min(para) > max(unrel) + 0.15, (para, unrel)


def test_semantic_where_hashing_is_only_lexical() -> None:
    a, b = "The cat sat on the mat", "A kitten was resting on the rug"
    assert cosine(default_embedder(), a, b) > 0.4
    assert cosine(HashingEmbedder(256), a, b) < 0.3


def test_shipped_model_has_its_licence_notice() -> None:
    notice = (MODEL_DIR / "NOTICE").read_text()
    assert "all-MiniLM-L6-v2" in notice and "Apache" in notice and "MIT" in notice
    assert (MODEL_DIR / "model.safetensors").stat().st_size < 20_000_000


def test_default_embedder_loads_without_network_or_torch() -> None:
    script = textwrap.dedent(
        """
        import socket, sys
        def refuse(*args, **kwargs):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from evalloop.memory import default_embedder
        vec = default_embedder().embed(["offline check"])
        assert vec.shape == (1, 256)
        assert "torch" not in sys.modules, "PyTorch was imported"
        print("ok")
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "HF_HUB_OFFLINE": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_static_embedder_reports_missing_model(tmp_path) -> None:
    with pytest.raises(ConfigError, match="model files are missing"):
        StaticEmbedder(tmp_path)


def test_hashing_embedder_is_deterministic_across_processes() -> None:
    here = HashingEmbedder(64).embed(["eval failure in similarity"])[0]
    code = (
        "from evalloop.memory import HashingEmbedder;"
        "print(','.join(map(repr, HashingEmbedder(64).embed(['eval failure in similarity'])[0].tolist())))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    there = np.array([float(x) for x in out.stdout.strip().split(",")], dtype=np.float32)
    assert np.array_equal(here, there)
    assert np.linalg.norm(here) == pytest.approx(1.0)
    assert cosine(HashingEmbedder(64), "flaky retry test", "flaky retry test") == pytest.approx(1.0)


def test_sentence_transformers_is_optional() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install sentence-transformers"):
            resolve_embedder("sentence-transformers:all-MiniLM-L6-v2")
    else:  # pragma: no cover - only where the optional package is installed
        pytest.skip("sentence-transformers is installed here")


def test_resolve_embedder_specs(embeddings_server: EmbeddingsServer) -> None:  # noqa: F811
    assert resolve_embedder(None) is default_embedder()
    assert resolve_embedder("static") is default_embedder()
    assert resolve_embedder("hashing:32").dim == 32
    assert resolve_embedder(f"static:{MODEL_DIR}").dim == 256
    http = resolve_embedder(f"ollama:nomic@{embeddings_server.url}")
    assert http.name == "ollama:nomic" and http.dim == 64
    for bad in ("nope", "hashing:x", "openai:no-url"):
        with pytest.raises(ConfigError):
            resolve_embedder(bad)


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_http_embedder_against_loopback_server(
    embeddings_server: EmbeddingsServer,  # noqa: F811
    api: str,
) -> None:
    base = embeddings_server.url + ("/v1" if api == "openai" else "")
    emb = HTTPEmbedder(base, "test-model", api=api, api_key="sk-test", batch_size=2)
    texts = ["alpha beta", "gamma delta", "alpha beta gamma"]
    vectors = emb.embed(texts)
    assert vectors.shape == (3, 64) and emb.dim == 64
    assert np.allclose(vectors, HashingEmbedder(64).embed(texts), atol=1e-6)  # order, normalised
    assert [r["input"] for r in embeddings_server.requests] == [texts[:2], texts[2:]]
    assert all(r["model"] == "test-model" for r in embeddings_server.requests)
    auth = embeddings_server.headers[0].get("Authorization")
    assert auth == ("Bearer sk-test" if api == "openai" else None)


def test_http_embedder_errors(embeddings_server: EmbeddingsServer) -> None:  # noqa: F811
    emb = HTTPEmbedder(embeddings_server.url, "m", dim=64)
    embeddings_server.status = 401
    with pytest.raises(ConfigError, match="HTTP 401"):
        emb.embed(["x"])
    embeddings_server.status = 500
    with pytest.raises(ConnectionFailed, match="HTTP 500"):
        emb.embed(["x"])
    with pytest.raises(ConnectionFailed, match="cannot reach the embeddings server") as err:
        HTTPEmbedder("http://127.0.0.1:9", "m", timeout=2).embed(["x"])
    assert "127.0.0.1:9/v1/embeddings" in str(err.value)
