"""Choosing an LLM client from the environment."""

from __future__ import annotations

import os
from typing import Any

from evalloop.errors import ConfigError
from evalloop.llm.types import DEFAULT_MODEL, LLMClient

MISSING = "set ANTHROPIC_API_KEY, or EVALLOOP_LLM_BASE_URL and EVALLOOP_LLM_MODEL, or use --engine local"

_KNOBS = {  # environment variable -> (client option, type)
    "EVALLOOP_LLM_MAX_RETRIES": ("max_retries", int),
    "EVALLOOP_LLM_BACKOFF": ("backoff_base", float),
    "EVALLOOP_LLM_CONCURRENCY": ("concurrency", int),
    "EVALLOOP_LLM_TIMEOUT": ("timeout", float),
    "EVALLOOP_LLM_RATE_LIMITS": ("rate_limits", int),  # 0: no adaptive rate limits (llm.ratelimit)
}


def env_options() -> dict[str, Any]:
    """Client options from ``EVALLOOP_LLM_MAX_RETRIES``, ``_BACKOFF``, ``_CONCURRENCY``, ``_TIMEOUT``,
    ``_RATE_LIMITS``."""
    options: dict[str, Any] = {}
    for name, (option, kind) in _KNOBS.items():
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            continue
        try:
            options[option] = bool(kind(raw)) if option == "rate_limits" else kind(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number", where="environment",
                              hint=f"set {name} to a {kind.__name__}") from None
    return options


def client_from_env(model: str | None = None, **options: Any) -> LLMClient | None:
    """The client the environment configures, or ``None`` when none is.

    ``EVALLOOP_LLM_BASE_URL`` (with ``EVALLOOP_LLM_MODEL`` and optional ``EVALLOOP_LLM_API_KEY``)
    selects an OpenAI-compatible server; otherwise ``ANTHROPIC_API_KEY`` (and
    ``ANTHROPIC_BASE_URL``) selects Anthropic with ``model`` or ``claude-haiku-4-5``.
    ``options`` go to the client's constructor (timeout, max_retries, concurrency, prices, ...:
    typed there, hence ``Any`` here);
    the ``EVALLOOP_LLM_*`` knobs of :func:`env_options` fill those not given.
    """
    options = {**env_options(), **options}
    base_url = os.environ.get("EVALLOOP_LLM_BASE_URL")
    if base_url:
        from evalloop.llm.openai_client import OpenAICompatClient

        return OpenAICompatClient(
            base_url,
            model or os.environ.get("EVALLOOP_LLM_MODEL", ""),
            api_key=os.environ.get("EVALLOOP_LLM_API_KEY"),
            **options,
        )
    if os.environ.get("ANTHROPIC_API_KEY"):
        from evalloop.llm.anthropic_client import AnthropicClient

        return AnthropicClient(model or DEFAULT_MODEL, **options)
    return None


def judge_from_env(model: str | None = None, **options: Any) -> LLMClient | None:
    """A judge on its own server, when ``EVALLOOP_JUDGE_BASE_URL`` names an OpenAI-compatible one
    (with ``EVALLOOP_JUDGE_MODEL`` and optional ``EVALLOOP_JUDGE_API_KEY``); ``None`` otherwise."""
    base_url = os.environ.get("EVALLOOP_JUDGE_BASE_URL")
    if not base_url:
        return None
    from evalloop.llm.openai_client import OpenAICompatClient

    options = {**env_options(), **options}
    return OpenAICompatClient(base_url, model or os.environ.get("EVALLOOP_JUDGE_MODEL", ""),
                              api_key=os.environ.get("EVALLOOP_JUDGE_API_KEY"), **options)


def require_client(model: str | None = None, **options: Any) -> LLMClient:
    """Like :func:`client_from_env`, but a missing configuration raises :class:`ConfigError`."""
    client = client_from_env(model, **options)
    if client is None:
        raise ConfigError("no LLM configured", where="environment", hint=MISSING)
    return client
