"""The Messages-API client on ``anthropic.AsyncAnthropic``, with the shared retry policy.

Every way a reply can fail maps to a typed error: transport faults and retryable statuses are
retried, a rejected key is a configuration error, other statuses :class:`LLMCallFailed`, and a
body that is not a Messages-API reply (HTML, truncated JSON, ``{}``, a message without content
or usage, blocks of the wrong types) :class:`MalformedReply` — an infrastructure fault, never
passed to the target as a reply.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import anthropic

from evalloop.errors import ConfigError
from evalloop.llm.errors import LLMCallFailed, MalformedReply
from evalloop.llm.pricing import Price, PriceInput, cost_usd, price_table
from evalloop.llm.retry import RETRYABLE_STATUS, RetryPolicy, TransientError, send
from evalloop.llm.retry import parse_retry_after as _retry_after
from evalloop.llm.types import DEFAULT_MODEL, LLMRequest, LLMResponse, TokenUsage


class AnthropicClient:
    """An :class:`~evalloop.llm.types.LLMClient` for the Anthropic Messages API.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.
    The SDK's own retries are off: :func:`~evalloop.llm.retry.call_with_retries` retries, so
    both clients share one policy. At most ``concurrency`` calls are in flight at once.
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
        self._semaphore = asyncio.Semaphore(concurrency)
        self._sdk = anthropic.AsyncAnthropic(api_key=api_key, base_url=self.base_url, timeout=timeout, max_retries=0)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request``; retry transient failures; record usage and cost."""
        return await send(lambda: self._attempt(request), self.policy, semaphore=self._semaphore,
                          where=f"Anthropic API at {self.base_url}", url_setting="ANTHROPIC_BASE_URL")

    async def aclose(self) -> None:
        """Close the underlying HTTP connections."""
        await self._sdk.close()

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [m.model_dump() for m in request.messages],
        }
        if request.system is not None:
            params["system"] = request.system
        if request.temperature is not None:
            params["extra_body"] = {"temperature": request.temperature}
        if request.tool is not None:
            params["tools"] = [request.tool.model_dump()]
            params["tool_choice"] = {"type": "tool", "name": request.tool.name}
        return params

    async def _attempt(self, request: LLMRequest) -> LLMResponse:
        params = self._params(request)
        try:
            message = await self._sdk.messages.create(**params)
        except anthropic.APITimeoutError as error:
            raise TransientError("timeout", f"no reply within {self.policy.timeout:g} s") from error
        except anthropic.APIConnectionError as error:
            cause = error.__cause__ or error
            raise TransientError("connection", f"{type(cause).__name__}: {cause}") from error
        except anthropic.AuthenticationError as error:
            raise ConfigError(
                "the Anthropic API rejected the key (401)",
                where=f"Anthropic API at {self.base_url}",
                hint="check ANTHROPIC_API_KEY",
            ) from error
        except anthropic.APIStatusError as error:
            text = f"HTTP {error.status_code} {error.type or ''}: {error.api_message or error.message}"
            if error.status_code in RETRYABLE_STATUS:
                retry_after = _retry_after(error.response.headers)
                raise TransientError("status", text, status=error.status_code, retry_after=retry_after) from error
            raise LLMCallFailed(text, status=error.status_code, where=f"Anthropic API at {self.base_url}") from error
        except anthropic.APIResponseValidationError as error:
            raise self._malformed(f"{error.message}") from error
        except json.JSONDecodeError as error:
            raise self._malformed(f"the body is not JSON ({error})") from error
        except (ValueError, TypeError, AttributeError, KeyError) as error:  # the SDK could not read the body
            raise self._malformed(f"unreadable body ({type(error).__name__}: {error})") from error
        try:
            message = _checked(message)
        except TypeError as error:
            raise self._malformed(str(error)) from error
        try:
            return self._response(request, message)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            raise self._malformed(f"{type(error).__name__}: {error}") from error

    def _malformed(self, why: str) -> MalformedReply:
        return MalformedReply(f"not a Messages-API reply: {why}", where=f"Anthropic API at {self.base_url}",
                              hint="check ANTHROPIC_BASE_URL points at the Messages API (not a proxy's page)")

    def _response(self, request: LLMRequest, message: anthropic.types.Message) -> LLMResponse:
        texts: list[str] = []
        tool_input: dict | None = None
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif (
                block.type == "tool_use"
                and tool_input is None
                and isinstance(block.input, dict)
                and (request.tool is None or block.name == request.tool.name)
            ):
                tool_input = dict(block.input)
        usage = TokenUsage(input_tokens=message.usage.input_tokens, output_tokens=message.usage.output_tokens)
        model = message.model or request.model
        return LLMResponse(
            text="".join(texts),
            tool_input=tool_input,
            usage=usage,
            model=model,
            stop_reason=message.stop_reason,
            id=message.id,
            cost_usd=cost_usd(model, usage, self.prices),
        )


def _checked(message: object) -> anthropic.types.Message:
    """``message`` if it has a Messages-API reply's shape; TypeError naming what is wrong if not.

    The SDK builds its models without validation, so ``{}`` arrives as a Message full of None
    and a non-JSON body (an HTML page) as a string.
    """
    if not isinstance(message, anthropic.types.Message):
        shown = message if isinstance(message, str) else type(message).__name__
        raise TypeError(f"got {str(shown)[:80]!r}")
    if not isinstance(message.content, list):
        raise TypeError("the message has no content list")
    for block in message.content:
        kind = getattr(block, "type", None)
        if not isinstance(kind, str):
            raise TypeError(f"a content block without a type: {str(block)[:80]}")
        if kind == "text" and not isinstance(getattr(block, "text", None), str):
            raise TypeError("a text block without text")
        if kind == "tool_use" and not isinstance(getattr(block, "name", None), str):
            raise TypeError("a tool_use block without a name")
    usage = message.usage
    if usage is None or not isinstance(usage.input_tokens, int) or not isinstance(usage.output_tokens, int):
        raise TypeError("the message has no token usage")
    return message
