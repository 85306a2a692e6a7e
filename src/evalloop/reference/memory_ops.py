"""Reference memory operations: decide (NOOP / UPDATE / CREATE), the first system under test.

The ``local`` engine needs no network: exact duplicates are NOOP, near paraphrases UPDATE,
the rest CREATE, judged by normalised text and token overlap.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

_TOKEN = re.compile(r"[a-z0-9]+")
SIMILAR_AT = 0.5


class Decision(BaseModel):
    """What to do with an incoming memory given an existing one."""

    action: str
    reason: str


def _content(memory: Any) -> str:
    if isinstance(memory, dict):
        return str(memory.get("content", ""))
    return str(memory or "")


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.casefold()))


def lexical_similarity(a: str, b: str) -> float:
    """Jaccard overlap of word tokens (the fallback when no embedder is available)."""
    ta, tb = _tokens(a), _tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def decide_local(existing: str, incoming: str) -> Decision:
    """Exact duplicate → NOOP; similar enough → UPDATE; otherwise CREATE."""
    if existing == incoming:
        return Decision(action="NOOP", reason="identical content")
    if " ".join(existing.split()).casefold() == " ".join(incoming.split()).casefold():
        return Decision(action="NOOP", reason="identical content apart from case and spacing")
    sim = lexical_similarity(existing, incoming)
    if sim >= SIMILAR_AT:
        return Decision(action="UPDATE", reason=f"similar content (overlap {sim:.2f})")
    return Decision(action="CREATE", reason=f"different content (overlap {sim:.2f})")


def decide(input: dict[str, Any], engine: str = "local") -> dict[str, str]:
    """Decide what to do with ``input['incoming']`` given ``input['existing']``."""
    existing, incoming = _content(input.get("existing")), _content(input.get("incoming"))
    return decide_local(existing, incoming).model_dump()


def _fingerprint(params: dict[str, Any]) -> dict[str, Any]:
    return {"operation": "decide", "engine": params.get("engine", "local")}


decide.fingerprint = _fingerprint  # type: ignore[attr-defined]
