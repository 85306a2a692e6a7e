"""The LLM layer's boundary types: requests, responses, token usage and the client protocol."""

from __future__ import annotations

from typing import Literal, Protocol, Self, runtime_checkable

from pydantic import BaseModel, Field


class Message(BaseModel):
    """One conversation turn (text only)."""

    role: Literal["user", "assistant"]
    content: str


class ToolSpec(BaseModel):
    """A tool the model is forced to call; its input is the structured reply."""

    name: str
    description: str
    input_schema: dict


class LLMRequest(BaseModel):
    """One completion request; ``tool`` set means the reply is forced through that tool.

    ``temperature`` is sent only when set: the current Messages API (and SDK) has no sampling
    parameters, so for Anthropic it goes in the request body as an extra field.
    """

    model: str
    system: str | None = None
    messages: list[Message]
    max_tokens: int = 1024
    temperature: float | None = None
    tool: ToolSpec | None = None
    cache_prefix: bool = False
    """Mark the stable prefix (the tool and the system prompt) for prompt caching: a caller sets
    it when the system prompt is the same for every case (instructions, rubric, examples,
    injected lessons) and only the messages change."""


class TokenUsage(BaseModel):
    """Tokens billed for one call.

    ``input_tokens`` are the input tokens billed at the plain input price; the prompt-caching
    ones are apart (the Messages API's own split): ``cache_creation_input_tokens`` written to the
    cache (1.25x the input price), ``cache_read_input_tokens`` read from it (0.1x).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class LLMResponse(BaseModel):
    """One completion: the text, the forced tool's input if any, usage and cost.

    ``stop_reason`` uses the Messages-API words (``end_turn``, ``max_tokens``, ``tool_use``,
    ``refusal``); OpenAI-compatible finish reasons are mapped onto them. ``cached`` replies were
    served from the response cache and cost nothing; ``batched`` ones came through a batch API
    (half price). ``uncached_prefix`` is set when the request marked a prefix for prompt caching
    and the reply shows neither a cache write nor a read: what it says, in one line.
    """

    text: str
    tool_input: dict | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str
    stop_reason: str | None = None
    id: str | None = None
    cached: bool = False
    batched: bool = False
    cost_usd: float = 0.0
    retries: int = 0
    uncached_prefix: str | None = None


@runtime_checkable
class LLMClient(Protocol):
    """Anything that turns an :class:`LLMRequest` into an :class:`LLMResponse`."""

    name: str
    model: str

    async def complete(self, request: LLMRequest) -> LLMResponse: ...


class ClosingClient:
    """A client used as ``async with client:`` closes its connections when the block ends (what
    ``await client.aclose()`` does; an HTTP session left open is reported by aiohttp at exit)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client's connections (nothing to close here)."""


DEFAULT_MODEL = "claude-haiku-4-5"
"""The model evalloop asks when none is named (fast, cheap, good enough for grading)."""
