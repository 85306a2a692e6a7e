"""Choosing an LLM client from the environment."""

from __future__ import annotations

import os
from typing import Any

from evalloop.environ import Environment, environment
from evalloop.errors import ConfigError
from evalloop.llm.types import DEFAULT_MODEL, LLMClient

MISSING = "set ANTHROPIC_API_KEY, or EVALLOOP_LLM_BASE_URL and EVALLOOP_LLM_MODEL, or use --engine local"

def env_options(env: Environment | None = None) -> dict[str, Any]:
    """Client options from ``EVALLOOP_LLM_MAX_RETRIES``, ``_BACKOFF``, ``_CONCURRENCY``, ``_TIMEOUT``,
    ``_RATE_LIMITS`` (``env``: the settings' environment; default: the process's)."""
    env = env or environment()
    knobs = {"max_retries": env.llm_max_retries, "backoff_base": env.llm_backoff,
             "concurrency": env.llm_concurrency, "timeout": env.llm_timeout,
             "rate_limits": env.llm_rate_limits}  # rate_limits off: no adaptive limits (llm.ratelimit)
    return {option: value for option, value in knobs.items() if value is not None}


def client_from_env(model: str | None = None, env: Environment | None = None, **options: Any) -> LLMClient | None:
    """The client the environment configures, or ``None`` when none is.

    ``EVALLOOP_LLM_BASE_URL`` (with ``EVALLOOP_LLM_MODEL`` and optional ``EVALLOOP_LLM_API_KEY``)
    selects an OpenAI-compatible server; otherwise ``ANTHROPIC_API_KEY`` (and
    ``ANTHROPIC_BASE_URL``) selects Anthropic with ``model`` or ``claude-haiku-4-5``.
    ``options`` go to the client's constructor (timeout, max_retries, concurrency, prices, ...:
    typed there, hence ``Any`` here);
    the ``EVALLOOP_LLM_*`` knobs of :func:`env_options` fill those not given. ``env``: the
    settings' environment (``settings.env``); default: the process's.
    """
    env = env or environment()
    options = {**env_options(env), **options}
    if env.llm_base_url:
        from evalloop.llm.openai_client import OpenAICompatClient

        return OpenAICompatClient(env.llm_base_url, model or env.llm_model or "", api_key=env.llm_api_key,
                                  **options)
    if os.environ.get("ANTHROPIC_API_KEY"):  # the Anthropic SDK's own variable
        from evalloop.llm.anthropic_client import AnthropicClient

        if env.llm_prompt_cache is not None:
            options.setdefault("prompt_cache", env.llm_prompt_cache)
        return AnthropicClient(model or DEFAULT_MODEL, **options)
    return None


def judge_from_env(model: str | None = None, env: Environment | None = None, **options: Any) -> LLMClient | None:
    """A judge on its own server, when ``EVALLOOP_JUDGE_BASE_URL`` names an OpenAI-compatible one
    (with ``EVALLOOP_JUDGE_MODEL`` and optional ``EVALLOOP_JUDGE_API_KEY``); ``None`` otherwise."""
    env = env or environment()
    if not env.judge_base_url:
        return None
    from evalloop.llm.openai_client import OpenAICompatClient

    options = {**env_options(env), **options}
    return OpenAICompatClient(env.judge_base_url, model or env.judge_model or "",
                              api_key=env.judge_api_key, **options)


def require_client(model: str | None = None, **options: Any) -> LLMClient:
    """Like :func:`client_from_env`, but a missing configuration raises :class:`ConfigError`."""
    client = client_from_env(model, **options)
    if client is None:
        raise ConfigError("no LLM configured", where="environment", hint=MISSING)
    return client
