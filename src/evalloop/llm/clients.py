"""Choosing an LLM client from the environment."""

from __future__ import annotations

import os

from evalloop.errors import ConfigError
from evalloop.llm.anthropic_client import DEFAULT_MODEL, AnthropicClient
from evalloop.llm.openai_client import OpenAICompatClient
from evalloop.llm.types import LLMClient

MISSING = "set ANTHROPIC_API_KEY, or EVALLOOP_LLM_BASE_URL and EVALLOOP_LLM_MODEL, or use --engine local"


def client_from_env(model: str | None = None, **options: object) -> LLMClient | None:
    """The client the environment configures, or ``None`` when none is.

    ``EVALLOOP_LLM_BASE_URL`` (with ``EVALLOOP_LLM_MODEL`` and optional ``EVALLOOP_LLM_API_KEY``)
    selects an OpenAI-compatible server; otherwise ``ANTHROPIC_API_KEY`` (and
    ``ANTHROPIC_BASE_URL``) selects Anthropic with ``model`` or ``claude-haiku-4-5``.
    ``options`` go to the client's constructor (timeout, max_retries, concurrency, prices, ...).
    """
    base_url = os.environ.get("EVALLOOP_LLM_BASE_URL")
    if base_url:
        return OpenAICompatClient(
            base_url,
            model or os.environ.get("EVALLOOP_LLM_MODEL", ""),
            api_key=os.environ.get("EVALLOOP_LLM_API_KEY"),
            **options,  # type: ignore[arg-type]
        )
    if os.environ.get("ANTHROPIC_API_KEY"):
        return AnthropicClient(model or DEFAULT_MODEL, **options)  # type: ignore[arg-type]
    return None


def require_client(model: str | None = None, **options: object) -> LLMClient:
    """Like :func:`client_from_env`, but a missing configuration raises :class:`ConfigError`."""
    client = client_from_env(model, **options)
    if client is None:
        raise ConfigError("no LLM configured", where="environment", hint=MISSING)
    return client
