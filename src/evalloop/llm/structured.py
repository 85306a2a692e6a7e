"""Structured replies: a forced tool from a pydantic model, a text-JSON fallback, one retry."""

from __future__ import annotations

import functools
import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from evalloop import validation
from evalloop.llm.errors import RefusalError, ReplyParseError
from evalloop.llm.types import LLMClient, LLMRequest, LLMResponse, Message, ToolSpec

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)


def parse_json_reply(text: str) -> dict:
    """The JSON object in a text reply: code fences stripped, surrounding prose tolerated.

    Raises :class:`ReplyParseError` (carrying the text) when no JSON object can be read.
    """
    candidate = text.strip()
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    elif candidate.startswith("```"):  # an unclosed fence
        candidate = re.sub(r"^```[A-Za-z0-9_-]*[ \t]*\n?", "", candidate).strip()
    try:
        value = json.loads(candidate)
    except ValueError as error:
        value = _first_object(candidate)
        if value is None:
            raise ReplyParseError(f"reply is not JSON ({error})", raw=text) from error
    if not isinstance(value, dict):
        raise ReplyParseError(f"reply is JSON but not an object ({type(value).__name__})", raw=text)
    return value


def _first_object(text: str) -> dict | None:
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


@functools.lru_cache(maxsize=256)
def tool_for(schema: type[BaseModel], name: str | None = None) -> ToolSpec:
    """A forced-tool spec whose input schema is ``schema``'s JSON schema."""
    json_schema = schema.model_json_schema()
    description = json_schema.pop("description", None) or (schema.__doc__ or "").strip()
    json_schema.pop("title", None)
    return ToolSpec(
        name=name or _snake(schema.__name__),
        description=description or f"Record the reply as {schema.__name__}.",
        input_schema=json_schema,
    )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()[:64]


def _parse(response: LLMResponse, schema: type[T]) -> T:
    if response.stop_reason == "refusal":
        raise RefusalError(f"{response.model} refused to answer", text=response.text, where=schema.__name__)
    data = response.tool_input if response.tool_input is not None else parse_json_reply(response.text)
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        details = "; ".join(f"{validation.location(e) or '(root)'}: {validation.message(e)}" for e in error.errors())
        raise ReplyParseError(
            f"reply does not match {schema.__name__}: {details}",
            raw=json.dumps(data) if response.tool_input is not None else response.text,
        ) from error


async def structured(
    client: LLMClient,
    schema: type[T],
    *,
    prompt: str,
    system: str | None = None,
    model: str | None = None,
    max_tokens: int = 512,
    temperature: float | None = None,
    tool_name: str | None = None,
    cache_prefix: bool = False,
) -> T:
    """Ask ``client`` for a reply shaped as ``schema`` through a forced tool.

    A reply in text instead is parsed as JSON (fences stripped). A reply that does not parse or
    validate is sent back once with the error; if that fails too, :class:`ReplyParseError` is
    raised with the error text. A refusal raises :class:`RefusalError` (never retried).
    ``cache_prefix``: ``system`` is the same for every case, mark it for prompt caching.
    """
    tool = tool_for(schema, tool_name)
    request = LLMRequest(
        model=model or client.model,
        system=system,
        messages=[Message(role="user", content=prompt)],
        max_tokens=max_tokens,
        temperature=temperature,
        tool=tool,
        cache_prefix=cache_prefix and system is not None,
    )
    response = await client.complete(request)
    try:
        return _parse(response, schema)
    except ReplyParseError as first:
        retry = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    Message(role="assistant", content=first.raw or "(empty reply)"),
                    Message(role="user", content=_retry_prompt(first, tool)),
                ]
            }
        )
        second = await client.complete(retry)
        try:
            return _parse(second, schema)
        except ReplyParseError as error:
            _forget(client, request)  # keep a recovered exchange replayable; drop a failed one
            _forget(client, retry)
            raise ReplyParseError(
                f"{error.what} (after one retry; first error: {first.what})",
                raw=error.raw,
                where=f"{second.model} reply",
                hint="check the prompt asks for this schema, or use a stronger model",
            ) from error


def _forget(client: LLMClient, request: LLMRequest) -> None:
    """Unusable replies are not kept in a response cache (when the client is one)."""
    forget = getattr(client, "forget", None)
    if callable(forget):
        forget(request)


def _retry_prompt(error: ReplyParseError, tool: ToolSpec) -> str:
    return (
        f"Your reply could not be used: {error.what}. "
        f"Reply again by calling the tool {tool.name}, or with only a JSON object matching this "
        f"schema and nothing else:\n{json.dumps(tool.input_schema)}"
    )
