"""Prompt caching: how a request's stable prefix is marked, and the word when it was not cached.

A caller whose system prompt is the same for every case (a judge's instructions and rubric, an
operation's prompt with its injected lessons) sets :attr:`LLMRequest.cache_prefix`; the Anthropic
client then marks the system block with ``cache_control`` (the tool definition comes before the
system prompt, so it is cached with it), and the per-case text stays in the messages. A prefix
shorter than the model's minimum cacheable length is not cached by the API and billed as plain
input: :func:`uncached_note` says so in one line instead of pretending.
"""

from __future__ import annotations

import json
from typing import Any

from evalloop.llm.pricing import estimate_tokens, min_cacheable
from evalloop.llm.types import LLMRequest, TokenUsage

EPHEMERAL = {"type": "ephemeral"}


def system_blocks(request: LLMRequest) -> str | list[dict[str, Any]] | None:
    """The Messages API ``system`` of ``request``: a cache-marked text block when it asks for
    prompt caching, else the plain string."""
    if request.system is None:
        return None
    if not request.cache_prefix:
        return request.system
    return [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]


def prefix_tokens(request: LLMRequest) -> int:
    """A rough size of the stable prefix (tool definition and system prompt) in tokens."""
    tool = json.dumps(request.tool.model_dump()) if request.tool is not None else ""
    return estimate_tokens(tool + (request.system or ""))


def uncached_note(request: LLMRequest, usage: TokenUsage) -> str | None:
    """One line when ``request`` marked a prefix for caching and ``usage`` shows neither a cache
    write nor a read; ``None`` otherwise."""
    if not request.cache_prefix or usage.cache_creation_input_tokens or usage.cache_read_input_tokens:
        return None
    tokens, minimum = prefix_tokens(request), min_cacheable(request.model)
    if tokens < minimum:
        return (f"prompt caching: the stable prefix of {request.model} calls (about {tokens} tokens) is "
                f"below the model's minimum cacheable length ({minimum} tokens), so it is billed as "
                "plain input")
    return (f"prompt caching: {request.model} reported no cache write or read for a prefix of about "
            f"{tokens} tokens, so it is billed as plain input")
