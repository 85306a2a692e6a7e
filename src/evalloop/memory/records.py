"""Memory records, search hits, and the validation of tags and metadata on the way in."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, JsonValue, TypeAdapter, ValidationError

from evalloop import validation
from evalloop.errors import EvalloopError

TagsInput = str | Sequence[str] | None
MetadataInput = Mapping[str, Any] | str | None

_METADATA = TypeAdapter(dict[str, JsonValue])


class InvalidMemory(EvalloopError):
    """A memory whose text, tags or metadata cannot be stored."""


class MemoryRecord(BaseModel):
    """One stored memory."""

    id: str
    information: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: datetime | None = None


class FoundMemory(BaseModel):
    """A memory returned by ``find``: the fused score and where it ranked on each side.

    ``score`` is the reciprocal-rank-fusion score (higher is better); ``similarity`` is the
    cosine similarity between query and memory vectors when the vector side saw it.
    """

    record: MemoryRecord
    score: float
    text_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None

    @property
    def information(self) -> str:
        return self.record.information


def _clean_tags(tags: Sequence[object]) -> bool:
    """Whether ``tags`` is already clean: distinct stripped non-empty strings without commas
    (the common case, checked without building anything)."""
    for tag in tags:
        if type(tag) is not str or not tag or "," in tag or tag != tag.strip():
            return False
    return len(set(tags)) == len(tags)


def normalise_tags(tags: TagsInput) -> list[str]:
    """Tags as a clean list: a comma-separated string or a sequence; stripped, no blanks,
    first occurrence kept. Tag matching is exact (case-sensitive)."""
    if not tags:
        return []
    if isinstance(tags, list | tuple) and _clean_tags(tags):
        return list(tags)
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidMemory(f"tag {item!r} is not a string", where="memory tags", hint="pass tags as strings")
        parts = item.split(",") if "," in item else [item]
        for part in parts:
            tag = part.strip()
            if tag and tag not in out:
                out.append(tag)
    return out


def _check_finite(value: JsonValue, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidMemory(
            f"metadata value at {where} is {value}, which JSON cannot hold",
            where="memory metadata",
            hint="use a finite number or null",
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{where}[{i}]")


def validate_metadata(metadata: MetadataInput) -> dict[str, JsonValue]:
    """Metadata as a JSON object: a mapping or a JSON string; raises ``InvalidMemory``."""
    if metadata is None:
        return {}
    if isinstance(metadata, str):
        if not metadata.strip():
            return {}
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise InvalidMemory(
                f"metadata is not valid JSON ({exc.msg} at column {exc.colno})",
                where="memory metadata",
                hint='pass a JSON object such as {"eval_name": "similarity"}',
            ) from exc
    if not isinstance(metadata, Mapping):
        raise InvalidMemory(
            f"metadata must be a JSON object, not {type(metadata).__name__}",
            where="memory metadata",
            hint='pass a JSON object such as {"eval_name": "similarity"}',
        )
    try:
        clean = _METADATA.validate_python(dict(metadata))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InvalidMemory(
            f"metadata value at {loc or 'top level'} is not JSON ({validation.message(first)})",
            where="memory metadata",
            hint="use strings, numbers, booleans, null, lists and objects only",
        ) from exc
    for key, value in clean.items():
        _check_finite(value, key)
    return clean


def validate_information(information: object) -> str:
    """The memory text, which must be a non-blank string."""
    if not isinstance(information, str) or not information.strip():
        raise InvalidMemory(
            "memory information must be a non-empty string",
            where="memory store",
            hint="pass the text to remember",
        )
    return information
