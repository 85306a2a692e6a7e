"""The Messages-API client on ``anthropic.AsyncAnthropic``, with the shared retry policy.

Every way a reply can fail maps to a typed error: transport faults and retryable statuses are
retried, a rejected key is a configuration error, other statuses :class:`LLMCallFailed`, and a
body that is not a Messages-API reply (HTML, truncated JSON, ``{}``, a message without content
or usage, blocks of the wrong types) :class:`MalformedReply` — an infrastructure fault, never
passed to the target as a reply.

The per-call CPU on the event loop is what caps an LLM-bound run once cores are busy, so a call
does only what it needs: one SDK client and one HTTP connection pool (keep-alive sized to the
concurrency) per event loop, the reply read raw (``with_raw_response``) and validated straight
into :class:`LLMResponse` by :mod:`evalloop.llm.anthropic_reply` instead of through the SDK's
model tree, and the retry machinery entered only after a first attempt fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anthropic

from evalloop.errors import ConfigError
from evalloop.llm.anthropic_reply import read_reply
from evalloop.llm.budget import within_budget
from evalloop.llm.endpoint import split_credentials
from evalloop.llm.errors import LLMCallFailed, MalformedReply
from evalloop.llm.pricing import Price, PriceInput, price_table
from evalloop.llm.prompt_cache import system_blocks
from evalloop.llm.ratelimit import limiter_for
from evalloop.llm.retry import RETRYABLE_STATUS, RetryPolicy, TransientError, send
from evalloop.llm.retry import parse_retry_after as _retry_after
from evalloop.llm.types import DEFAULT_MODEL, ClosingClient, LLMRequest, LLMResponse
from evalloop.redact import redact_url


@dataclass(frozen=True, slots=True)
class _Bound:
    """What one event loop's calls share: the SDK client (with its connection pool) and the
    semaphore; both belong to the loop they were made in, so another loop gets its own."""

    loop: asyncio.AbstractEventLoop
    sdk: anthropic.AsyncAnthropic
    semaphore: asyncio.Semaphore


class AnthropicClient(ClosingClient):
    """An :class:`~evalloop.llm.types.LLMClient` for the Anthropic Messages API.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.
    The SDK's own retries are off: :func:`~evalloop.llm.retry.call_with_retries` retries, so
    both clients share one policy. At most ``concurrency`` calls are in flight at once, fewer when
    the provider's rate limits say so (``rate_limits``: :mod:`evalloop.llm.ratelimit`). With
    ``prompt_cache`` (the default) a request's ``cache_prefix`` marks its system prompt for
    prompt caching (:mod:`evalloop.llm.prompt_cache`).
    """

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        concurrency: int = 8,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        prices: Mapping[str, PriceInput] | None = None,
        prompt_cache: bool = True,
        rate_limits: bool = True,
    ) -> None:
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ConfigError(
                "no Anthropic API key",
                where="LLM client",
                hint="set ANTHROPIC_API_KEY or use --engine local",
            )
        self.model = model
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        self.policy = RetryPolicy(
            max_retries=max_retries,
            timeout=timeout,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
        )
        self.prices: dict[str, Price] = price_table(prices)
        self.concurrency = concurrency
        self.prompt_cache = prompt_cache
        self._api_key = api_key
        # user:pass@ in the URL is sent as Basic auth, which the aiohttp transport refuses to
        # combine with the SDK's own Authorization header: the key then travels as x-api-key
        self._endpoint, self._headers = split_credentials(
            self.base_url, setting="ANTHROPIC_BASE_URL",
            authorization_taken=bool(os.environ.get("ANTHROPIC_AUTH_TOKEN")))
        if self._headers:
            self._headers["X-Api-Key"] = api_key
        self._where = f"Anthropic API at {redact_url(self.base_url)}"
        self._bound: _Bound | None = None
        # the provider's limits, shared with every client of this key and endpoint in the process
        self.limiter = limiter_for(self.name, self.base_url, api_key, concurrency) if rate_limits else None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request``; retry transient failures; record usage and cost."""
        bound = self._bind()
        request = self.prepared(request)
        params = self._params(request)
        return await within_budget(request, self.prices, lambda: send(
            lambda: self._attempt(bound.sdk, request, params), self.policy, semaphore=bound.semaphore,
            where=self._where, url_setting="ANTHROPIC_BASE_URL", limiter=self.limiter))

    async def aclose(self) -> None:
        """Close the HTTP connections of the running loop's SDK client (one of a finished loop
        cannot be closed from another and is dropped)."""
        bound, self._bound = self._bound, None
        if bound is not None and bound.loop is asyncio.get_running_loop():
            await bound.sdk.close()

    def _bind(self) -> _Bound:
        """The running loop's SDK client and semaphore, made on its first call."""
        loop = asyncio.get_running_loop()
        bound = self._bound
        if bound is None or bound.loop is not loop:
            http = _http_client(self.concurrency)
            sdk = anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self._endpoint, http_client=http,
                                           default_headers=self._headers,
                                           timeout=self.policy.timeout, max_retries=0,
                                           open_telemetry=_open_telemetry())
            bound = self._bound = _Bound(loop, sdk, asyncio.Semaphore(self.concurrency))
        return bound

    def prepared(self, request: LLMRequest) -> LLMRequest:
        """``request`` as this client sends it: without the prompt-cache mark when ``prompt_cache``
        is off (``EVALLOOP_LLM_PROMPT_CACHE=0``)."""
        if request.cache_prefix and not self.prompt_cache:
            return request.model_copy(update={"cache_prefix": False})
        return request

    def params(self, request: LLMRequest) -> dict[str, Any]:
        """The Messages-API parameters of ``request`` (a live call's and a batch request's)."""
        return self._params(request)

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [m.model_dump() for m in request.messages],
        }
        if request.system is not None:
            params["system"] = system_blocks(request)
        if request.temperature is not None:
            params["extra_body"] = {"temperature": request.temperature}
        if request.tool is not None:
            params["tools"] = [request.tool.model_dump()]
            params["tool_choice"] = {"type": "tool", "name": request.tool.name}
        return params

    async def _attempt(self, sdk: anthropic.AsyncAnthropic, request: LLMRequest, params: dict[str, Any]) -> LLMResponse:
        with self.api_errors():
            raw = await sdk.messages.with_raw_response.create(**params)
        if self.limiter is not None:
            self.limiter.observe(raw.headers)
        try:
            return read_reply(raw.http_response.content, raw.headers.get("content-type", ""), request, self.prices)
        except TypeError as error:
            raise self._malformed(str(error)) from error

    @contextlib.contextmanager
    def api_errors(self) -> Iterator[None]:
        """The SDK's errors inside as evalloop's: retryable ones :class:`TransientError`, a rejected
        key :class:`ConfigError`, other statuses :class:`LLMCallFailed` (live and batch calls alike)."""
        try:
            yield
        except anthropic.APITimeoutError as error:
            raise TransientError("timeout", f"no reply within {self.policy.timeout:g} s") from error
        except anthropic.APIConnectionError as error:
            cause = error.__cause__ or error
            raise TransientError("connection", f"{type(cause).__name__}: {cause}") from error
        except anthropic.AuthenticationError as error:
            raise ConfigError(
                "the Anthropic API rejected the key (401)",
                where=self._where,
                hint="check ANTHROPIC_API_KEY",
            ) from error
        except anthropic.APIStatusError as error:
            if self.limiter is not None:
                self.limiter.observe(error.response.headers)
            text = f"HTTP {error.status_code} {error.type or ''}: {error.api_message or error.message}"
            if error.status_code in RETRYABLE_STATUS:
                retry_after = _retry_after(error.response.headers)
                raise TransientError("status", text, status=error.status_code, retry_after=retry_after) from error
            raise LLMCallFailed(text, status=error.status_code, where=self._where) from error

    def sdk(self) -> anthropic.AsyncAnthropic:
        """The running loop's SDK client (the batch backend calls the Message Batches API on it)."""
        return self._bind().sdk

    def _malformed(self, why: str) -> MalformedReply:
        return MalformedReply(f"not a Messages-API reply: {why}", where=self._where,
                              hint="check ANTHROPIC_BASE_URL points at the Messages API (not a proxy's page)")


def _http_client(concurrency: int) -> Any:
    """The SDK's HTTP client for ``concurrency`` calls at once, with a connection each kept alive.

    The SDK's aiohttp transport (``anthropic[aiohttp]``) costs ≈ 0.6 ms less CPU per call on the
    event loop than its default httpx one (``bench/run_throughput.py``), which is what caps an
    LLM-bound run on a busy machine; without aiohttp the default one is used.
    """
    limits = type(anthropic.DEFAULT_CONNECTION_LIMITS)(  # the Limits of the SDK's own HTTP library
        max_connections=concurrency, max_keepalive_connections=concurrency)
    try:
        return anthropic.DefaultAioHttpClient(limits=limits)
    except (AttributeError, RuntimeError):  # an SDK without it, or aiohttp not installed
        return anthropic.DefaultAsyncHttpxClient(limits=limits)


def _open_telemetry() -> Literal[False] | None:
    """The SDK's ``open_telemetry`` option: its own (``None``) when spans can go somewhere — an
    OpenTelemetry tracer provider is set, or an ``ANTHROPIC_OPEN_TELEMETRY*`` variable says what to
    do — and ``False`` (no spans) otherwise, where the SDK would build each call's span attributes
    for a tracer that drops them (≈ 0.1 ms of CPU per call)."""
    if any(name.startswith("ANTHROPIC_OPEN_TELEMETRY") for name in os.environ):
        return None
    try:
        from opentelemetry import trace
    except ImportError:  # an SDK without tracing
        return None
    return False if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) else None
