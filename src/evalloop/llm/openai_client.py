"""A client for OpenAI-compatible ``/chat/completions`` servers (Ollama, vLLM, llama.cpp).

A body that is not a chat completion (HTML, truncated JSON, ``{}``, wrong types) raises
:class:`~evalloop.llm.errors.MalformedReply`: an infrastructure fault, like a failed call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx

from evalloop.errors import ConfigError
from evalloop.llm.budget import within_budget
from evalloop.llm.endpoint import split_credentials
from evalloop.llm.errors import LLMCallFailed, MalformedReply
from evalloop.llm.pricing import Price, PriceInput, cost_usd, price_table
from evalloop.llm.ratelimit import limiter_for
from evalloop.llm.retry import (
    RETRYABLE_STATUS,
    RetryPolicy,
    TransientError,
    parse_retry_after,
    send,
)
from evalloop.llm.types import ClosingClient, LLMRequest, LLMResponse, TokenUsage
from evalloop.redact import redact_url

_MALFORMED_HINT = "check EVALLOOP_LLM_BASE_URL points at the API root with /v1 (not a web page)"
FINISH_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


class OpenAICompatClient(ClosingClient):
    """An :class:`~evalloop.llm.types.LLMClient` for an OpenAI-compatible chat endpoint.

    ``base_url`` is the API root including ``/v1`` (e.g. ``http://localhost:11434/v1`` for
    Ollama). A forced tool is sent as function calling (``tools`` + ``tool_choice``); servers
    that answer in text instead leave ``tool_input`` empty and the text is parsed as JSON.
    Retries, timeout, concurrency and rate limits follow the same policy as the Anthropic client.
    """

    name = "openai-compat"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        concurrency: int = 8,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        prices: Mapping[str, PriceInput] | None = None,
        rate_limits: bool = True,
    ) -> None:
        if not model:
            raise ConfigError(
                "no model named for the OpenAI-compatible server",
                where=base_url,
                hint="set EVALLOOP_LLM_MODEL (e.g. llama3.1:8b)",
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.cache_namespace = f"openai-compat@{self.base_url}"
        self.policy = RetryPolicy(
            max_retries=max_retries,
            timeout=timeout,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
        )
        self.prices: dict[str, Price] = price_table(prices)
        self._semaphore = asyncio.Semaphore(concurrency)
        # user:pass@ in the URL is sent as Basic auth: one Authorization header, not two
        endpoint, headers = split_credentials(self.url, setting="the LLM server URL", authorization_taken=bool(api_key))
        self.url = endpoint
        if api_key:
            headers = {"authorization": f"Bearer {api_key}"}
        # the provider's limits, shared with every client of this key and endpoint in the process
        self.limiter = limiter_for(self.name, self.base_url, api_key, concurrency) if rate_limits else None
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=max(concurrency, 1) * 2),
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request``; retry transient failures; record usage and cost."""
        return await within_budget(request, self.prices, lambda: send(
            lambda: self._attempt(request), self.policy, semaphore=self._semaphore,
            where=f"LLM server at {redact_url(self.url)}", url_setting="EVALLOOP_LLM_BASE_URL",
            limiter=self.limiter))

    async def aclose(self) -> None:
        """Close the underlying HTTP connections."""
        await self._http.aclose()

    def _body(self, request: LLMRequest) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system is not None:
            messages.append({"role": "system", "content": request.system})
        messages += [m.model_dump() for m in request.messages]
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tool is not None:
            function = {
                "name": request.tool.name,
                "description": request.tool.description,
                "parameters": request.tool.input_schema,
            }
            body["tools"] = [{"type": "function", "function": function}]
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool.name}}
        return body

    async def _attempt(self, request: LLMRequest) -> LLMResponse:
        answered = await self.http("POST", self.url, json=self._body(request))
        if self.limiter is not None:
            self.limiter.observe(answered.headers)
        reply = self.checked(answered)
        try:
            data = reply.json()
        except ValueError as error:
            raise MalformedReply(f"not a chat completion: the body is not JSON ({reply.text[:60]!r})",
                                 status=reply.status_code, where=self.url, hint=_MALFORMED_HINT) from error
        return self.read(request, data, status=reply.status_code)

    async def http(self, method: str, url: str, **kw: Any) -> httpx.Response:
        """One HTTP request to the server; a transport failure or timeout as a :class:`TransientError`."""
        try:
            return await self._http.request(method, url, **kw)
        except httpx.TimeoutException as error:
            raise TransientError("timeout", f"no reply within {self.policy.timeout:g} s") from error
        except httpx.TransportError as error:
            raise TransientError("connection", f"{type(error).__name__}: {error}") from error

    def checked(self, reply: httpx.Response) -> httpx.Response:
        """``reply`` if it succeeded; a retryable status as a :class:`TransientError`, a rejected key
        as a :class:`ConfigError`, another failure as :class:`LLMCallFailed`."""
        if reply.status_code in RETRYABLE_STATUS:
            raise TransientError(
                "status",
                f"HTTP {reply.status_code}: {_error_text(reply)}",
                status=reply.status_code,
                retry_after=parse_retry_after(reply.headers),
            )
        if reply.status_code in (401, 403):
            raise ConfigError(
                f"the server rejected the key ({reply.status_code})",
                where=str(reply.request.url),
                hint="check EVALLOOP_LLM_API_KEY",
            )
        if reply.status_code >= 400:
            raise LLMCallFailed(
                f"HTTP {reply.status_code}: {_error_text(reply)}",
                status=reply.status_code,
                where=str(reply.request.url),
            )
        return reply

    def read(self, request: LLMRequest, data: Any, *, status: int = 200, batch: bool = False) -> LLMResponse:
        """The :class:`LLMResponse` of a chat completion (a live reply's or a batch line's body)."""
        try:
            return self._response(request, data, batch)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise MalformedReply(f"not a chat completion: {type(error).__name__}: {error}",
                                 status=status, where=self.url, hint=_MALFORMED_HINT) from error

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat-completion body of ``request`` (a live call's and a batch line's)."""
        return self._body(request)

    def _response(self, request: LLMRequest, data: dict[str, Any], batch: bool = False) -> LLMResponse:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        if not isinstance(text, str):
            raise TypeError(f"message content is a {type(text).__name__}, not text")
        tool_input: dict | None = None
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments")
            parsed = _arguments(arguments)
            if parsed is not None:
                tool_input = parsed
                break
            if isinstance(arguments, str) and not text:
                text = arguments  # unparseable arguments: leave them to the text fallback
        stop_reason = FINISH_REASONS.get(choice.get("finish_reason") or "", choice.get("finish_reason"))
        if message.get("refusal"):
            stop_reason, text = "refusal", text or str(message["refusal"])
        usage = _usage(data.get("usage") or {})
        model = data.get("model") or request.model
        return LLMResponse(
            text=text,
            tool_input=tool_input,
            usage=usage,
            model=model,
            stop_reason=stop_reason,
            id=data.get("id"),
            batched=batch,
            cost_usd=cost_usd(model, usage, self.prices, batch=batch),
        )


def _usage(raw: dict[str, Any]) -> TokenUsage:
    """OpenAI usage in the Messages API's split: ``prompt_tokens`` include the cached ones
    (``prompt_tokens_details.cached_tokens``, automatic caching), which are apart here."""
    prompt = int(raw.get("prompt_tokens") or 0)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return TokenUsage(input_tokens=max(prompt - cached, 0), cache_read_input_tokens=min(cached, prompt),
                      output_tokens=int(raw.get("completion_tokens") or 0))


def _arguments(arguments: object) -> dict | None:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def _error_text(reply: httpx.Response) -> str:
    try:
        data = reply.json()
    except ValueError:
        return reply.text[:200]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or data)[:200]
