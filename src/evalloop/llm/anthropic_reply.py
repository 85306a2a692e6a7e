"""Reading a Messages-API reply body into evalloop's :class:`~evalloop.llm.types.LLMResponse`.

The body is validated in one pass (pydantic-core parses the JSON) against the few fields evalloop
reads, instead of letting the SDK build its whole ``Message`` model tree without validation and
checking that afterwards: a body that is not a Messages-API reply (HTML, truncated JSON, ``{}``,
a message without content or usage, blocks of the wrong types) raises :class:`TypeError` naming
what is wrong, in words the user can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, StrictInt, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from evalloop.llm.pricing import Price, cost_usd
from evalloop.llm.prompt_cache import uncached_note
from evalloop.llm.types import LLMRequest, LLMResponse, TokenUsage


class _Block(BaseModel):
    """One content block: text, a tool call, or a kind evalloop skips (thinking, ...)."""

    type: str
    text: str | None = None
    name: str | None = None
    input: Any = None

    @model_validator(mode="after")
    def _complete(self) -> _Block:
        if self.type == "text" and self.text is None:
            raise PydanticCustomError("block", "a text block without text")
        if self.type == "tool_use" and self.name is None:
            raise PydanticCustomError("block", "a tool_use block without a name")
        return self


class _Usage(BaseModel):
    input_tokens: StrictInt
    output_tokens: StrictInt
    cache_creation_input_tokens: StrictInt | None = None
    cache_read_input_tokens: StrictInt | None = None


class _Reply(BaseModel):
    """The fields of a Messages-API ``message`` that evalloop reads (the rest is ignored)."""

    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    content: list[_Block]
    usage: _Usage


def read_reply(body: bytes, content_type: str, request: LLMRequest, prices: Mapping[str, Price], *,
               batch: bool = False) -> LLMResponse:
    """The :class:`LLMResponse` in ``body``; :class:`TypeError` saying why when it is not a reply.
    ``batch``: the message came through the Message Batches API (priced at the batch rate)."""
    try:
        reply = _Reply.model_validate_json(body)
    except ValidationError as error:
        raise TypeError(_why(error, body, content_type)) from None
    return _response(reply, request, prices, batch)


def read_message(message: Any, request: LLMRequest, prices: Mapping[str, Price], *, batch: bool = False) -> LLMResponse:
    """The :class:`LLMResponse` of a message already decoded from JSON (a batch result's);
    :class:`TypeError` saying why when it is not a message."""
    try:
        reply = _Reply.model_validate(message)
    except ValidationError as error:
        raise TypeError(_why(error, b"", "application/json")) from None
    return _response(reply, request, prices, batch)


def _response(reply: _Reply, request: LLMRequest, prices: Mapping[str, Price], batch: bool) -> LLMResponse:
    texts: list[str] = []
    tool_input: dict | None = None
    for block in reply.content:
        if block.type == "text":
            texts.append(block.text or "")
        elif (
            block.type == "tool_use"
            and tool_input is None
            and isinstance(block.input, dict)
            and (request.tool is None or block.name == request.tool.name)
        ):
            tool_input = block.input
    raw = reply.usage
    usage = TokenUsage(input_tokens=raw.input_tokens, output_tokens=raw.output_tokens,
                       cache_creation_input_tokens=raw.cache_creation_input_tokens or 0,
                       cache_read_input_tokens=raw.cache_read_input_tokens or 0)
    model = reply.model or request.model
    return LLMResponse(text="".join(texts), tool_input=tool_input, usage=usage, model=model,
                       stop_reason=reply.stop_reason, id=reply.id, batched=batch,
                       cost_usd=cost_usd(model, usage, prices, batch=batch),
                       uncached_prefix=uncached_note(request, usage) if request.cache_prefix else None)


def _why(error: ValidationError, body: bytes, content_type: str) -> str:
    """The first thing wrong with a body, in one line."""
    first = error.errors(include_url=False)[0]
    kind, loc = first["type"], first["loc"]
    if kind == "json_invalid":
        if "json" not in content_type.lower():  # a proxy's or a portal's page
            return f"got {body[:80].decode('utf-8', 'replace')!r}"
        return f"the body is not JSON ({first['msg']})"
    if not loc:
        return f"got {type(first['input']).__name__!r}"
    if loc[0] == "content":
        if len(loc) == 1 or first["type"] == "list_type":
            return "the message has no content list"
        if loc[-1] == "type":
            return f"a content block without a type: {str(first['input'])[:80]}"
        return first["msg"] if kind == "block" else f"content block {loc[1]}: {first['msg']}"
    if loc[0] == "usage":
        return "the message has no token usage"
    from evalloop.validation import location, message

    return f"{location(first)}: {message(first)}"
