"""One line for a pydantic validation error: where in the input, what is wrong in plain words
(never pydantic's ``Value error,`` prefix), and a "did you mean" for a misspelt field."""

from __future__ import annotations

import difflib
import types
import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails

#: pydantic's prefixes for errors raised in validators (ValueError, AssertionError)
_PREFIXES = ("Value error, ", "Assertion failed, ")


def message(err: ErrorDetails, model: type[BaseModel] | None = None) -> str:
    """What one error says, in plain words; an unknown field of ``model`` gets a "did you mean"."""
    kind = err["type"]
    if kind == "extra_forbidden":
        fields = _fields_at(model, err["loc"][:-1]) if model is not None else []
        close = difflib.get_close_matches(str(err["loc"][-1]), fields, n=1)
        return "unknown field" + (f" — did you mean '{close[0]}'?" if close else "")
    if kind == "missing":
        return "required field missing"
    text = err["msg"]
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def location(err: ErrorDetails) -> str:
    """The error's place in the input, dotted (``cases.2.expected``); empty for the whole input."""
    return ".".join(str(p) for p in err["loc"])


def first(exc: ValidationError) -> ErrorDetails:
    """The error to show: an unknown field before the others, as a misspelt field is also a
    missing one, and the misspelling is what to fix."""
    errors = exc.errors(include_url=False)
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def first_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """``loc: message (+N more)`` for the error :func:`first` picks."""
    err = first(exc)
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    loc = location(err)
    return f"{loc}: {message(err, model)}{more}" if loc else f"{message(err, model)}{more}"


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names (and aliases) of the model found by following ``loc`` down from ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list: the same model
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = _model_in(fields[part].annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", {})
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


def _model_in(annotation: Any) -> Any:
    """The first pydantic model inside a field's type (``list[Case]``, ``Case | None`` …)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) or typing.get_args(annotation):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
