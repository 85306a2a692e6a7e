"""Calling user objects that may be sync or async, and reading hit texts of any shape."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable, else return it."""
    if inspect.isawaitable(value):
        return await value
    return value


def hit_text(hit: Any) -> str:
    """The text of a search hit: a string, a mapping with text/content/memory, or an object."""
    if isinstance(hit, str):
        return hit
    if isinstance(hit, Mapping):
        for key in ("text", "content", "memory", "value"):
            if isinstance(hit.get(key), str):
                return hit[key]
    for attr in ("text", "content", "memory"):
        value = getattr(hit, attr, None)
        if isinstance(value, str):
            return value
    return str(hit)
