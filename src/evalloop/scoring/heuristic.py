"""Built-in heuristic scorers: deterministic, no API calls, case-insensitive matching."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evalloop.score import Score
from evalloop.scoring.registry import scorer

PLACEHOLDER_PATTERN = r"<\s*[a-z][a-z0-9]*(?:[-_ ][a-z0-9]+)*\s*>|\{\{[^}]*\}\}|\[(?:todo|tbd|placeholder)\]"


def as_data(output: Any) -> Any:
    """An output as data: JSON text is parsed, anything else is returned as it is."""
    if isinstance(output, str | bytes):
        return json.loads(output)
    if hasattr(output, "model_dump"):
        return output.model_dump()
    return output


def not_json(error: Exception) -> Score:
    """An output that is not valid JSON: the target's failure (a real 0), never an errored grade."""
    return Score.unparseable(f"output is not valid JSON: {error}")


def not_object(data: Any) -> Score:
    """JSON that is not the object a scorer grades: the target's failure (a real 0)."""
    return Score.unparseable(f"output is not a JSON object (got {type(data).__name__})")


def as_text(output: Any) -> str:
    """An output as text: strings as they are, anything else as compact JSON."""
    if isinstance(output, str):
        return output
    if hasattr(output, "model_dump_json"):
        return output.model_dump_json()
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def _field(data: Any, path: str | None) -> Any:
    """Follow a dotted path (``a.b.0``) into dicts and lists; None when absent."""
    if not path:
        return data
    for part in path.split("."):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


@scorer("exact-match-noop", binary=True)
def exact_match_noop(input: Any, output: Any, expected: Any) -> Score:
    """Identical content must give action NOOP with a reason that says 'identical' (ADR)."""
    try:
        result = as_data(output)
    except (ValueError, TypeError) as exc:
        return not_json(exc)
    if not isinstance(result, dict):
        return not_object(result)
    action = str(result.get("action", ""))
    reason = str(result.get("reason") or "")
    if action.upper() == "NOOP" and re.search("identical", reason, re.I):
        return Score(value=1.0, message="Correctly identified exact match")
    return Score(value=0.0, message=f"Failed to detect exact match (action={action or '∅'})")


@scorer("no-placeholder", binary=True)
def no_placeholder(input: Any, output: Any, expected: Any, pattern: str = PLACEHOLDER_PATTERN) -> Score:
    """The output must not contain a template placeholder such as ``<memory-id>`` (ADR)."""
    found = re.search(pattern, as_text(output), re.I)
    if found:
        return Score(value=0.0, message=f"placeholder left in output: {found.group(0)!r}")
    return Score(value=1.0, message="no placeholder")


@scorer("required-fields", binary=True)
def required_fields(
    input: Any, output: Any, expected: Any, fields: Sequence[str] = ("id", "content", "tags")
) -> Score:
    """All required fields (default id, content, tags) are present and non-empty (ADR)."""
    try:
        data = as_data(output)
    except (ValueError, TypeError) as exc:
        return not_json(exc)
    if not isinstance(data, dict):
        return not_object(data)
    missing = [f for f in fields if _field(data, f) in (None, "", [], {})]
    if missing:
        return Score(value=0.0, message=f"missing or empty: {', '.join(missing)}")
    return Score(value=1.0, message="all required fields present")


def _normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


@scorer("equals", binary=True)
def equals(
    input: Any, output: Any, expected: Any, field: str | None = None, normalize: bool = True
) -> Score:
    """The output (or one field of it) equals the expected value; text compared loosely."""
    got: Any = output
    if field:
        try:
            got = _field(as_data(output), field)
        except (ValueError, TypeError) as exc:
            return not_json(exc)
        expected = _field(expected, field) if isinstance(expected, dict) else expected
    if isinstance(got, str) and isinstance(expected, str) and normalize:
        ok = _normalise(got) == _normalise(expected)
    else:
        ok = got == expected
    return Score(value=float(ok), message="equal" if ok else f"expected {expected!r}, got {got!r}")


@scorer("contains", binary=True)
def contains(
    input: Any, output: Any, expected: Any, text: str | Sequence[str] | None = None,
    case_sensitive: bool = False,
) -> Score:
    """The output contains the expected text (or every one of a list of texts)."""
    wanted = text if text is not None else expected
    needles = [wanted] if isinstance(wanted, str) else list(wanted or [])
    hay = as_text(output)
    if not case_sensitive:
        hay, needles = hay.casefold(), [n.casefold() for n in needles]
    missing = [n for n in needles if n not in hay]
    if missing:
        return Score(value=0.0, message=f"missing: {', '.join(map(repr, missing))}")
    return Score(value=1.0, message="contains all")


@scorer("regex", binary=True)
def regex(
    input: Any, output: Any, expected: Any, pattern: str | None = None, ignore_case: bool = True,
    fullmatch: bool = False,
) -> Score:
    """The output matches a regular expression (the ``pattern`` parameter, else ``expected``)."""
    pat = pattern if pattern is not None else expected
    if not isinstance(pat, str):
        return Score.error("regex needs a pattern: set params.pattern or a string expected")
    try:
        compiled = re.compile(pat, re.I if ignore_case else 0)
    except re.error as exc:
        return Score.error(f"bad regex {pat!r}: {exc}")
    text = as_text(output)
    hit = compiled.fullmatch(text) if fullmatch else compiled.search(text)
    return Score(value=float(bool(hit)), message="matches" if hit else f"no match for /{pat}/")


@scorer("json-valid", binary=True)
def json_valid(
    input: Any, output: Any, expected: Any, required: Sequence[str] = ()
) -> Score:
    """The output is valid JSON (and, optionally, an object with the required keys)."""
    try:
        data = as_data(output)
    except (ValueError, TypeError) as exc:
        return not_json(exc)
    if required:
        if not isinstance(data, dict):
            return not_object(data)
        missing = [k for k in required if k not in data]
        if missing:
            return Score(value=0.0, message=f"missing keys: {', '.join(missing)}")
    return Score(value=1.0, message="valid JSON")


def keyword_grade(
    text: str, keywords: Sequence[str], mode: str = "all", max_words: int | None = None
) -> tuple[float, str]:
    """Seed-003 grading: keywords right and concise 1.0, right but wordy 0.5, wrong 0.0."""
    low = text.casefold()
    hits = [k for k in keywords if k.casefold() in low]
    ok = bool(hits) if mode == "any" else len(hits) == len(keywords)
    if not ok:
        missing = [k for k in keywords if k not in hits]
        return 0.0, f"missing keywords: {', '.join(missing)}"
    words = len(text.split())
    if max_words is not None and words > max_words:
        return 0.5, f"keywords present but {words} words > {max_words}"
    return 1.0, "keywords present" + (f", {words} words" if max_words is not None else "")


@scorer("keywords")
def keywords(
    input: Any, output: Any, expected: Any, keywords: Sequence[str] | None = None,
    mode: str = "all", max_words: int | None = None,
) -> Score:
    """Keywords (all or any, case-insensitive) with an optional word limit: 1.0 / 0.5 / 0.0.

    Keywords and the limit come from the parameters, else from ``expected`` (a list of
    keywords, or ``{keywords: [...], max_words: N}``).
    """
    if keywords is None:
        if isinstance(expected, dict):
            keywords = expected.get("keywords")
            max_words = expected.get("max_words", max_words)
            mode = expected.get("mode", mode)
        else:
            keywords = [expected] if isinstance(expected, str) else expected
    if not keywords:
        return Score.error("keywords scorer needs keywords (params.keywords or expected)")
    if mode not in ("all", "any"):
        return Score.error(f"keywords mode must be 'all' or 'any', not {mode!r}")
    value, message = keyword_grade(as_text(output), list(keywords), mode, max_words)
    return Score(value=value, message=message)
