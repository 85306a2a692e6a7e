"""Reading a JSONL fixture file: one parsed value per non-blank line, or one clear error.

Every line is decoded with one ``raw_decode`` call; only a line that does not parse that way
(blank, leading whitespace, bad JSON) goes through :func:`parse_line`, whose ``json.loads``
message the error quotes with the file, the line and the column. A cases file is read by
:func:`evalloop.suites.casesource.jsonl_cases`, which opens it here and parses a line here only when
pydantic-core refused it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from evalloop.errors import FixtureError

__all__ = ["iter_jsonl", "not_utf8", "open_jsonl", "parse_line"]

#: one decoder for every line; ``raw_decode`` skips ``json.loads``' wrappers (a JSONL file of
#: short cases spends a third of its parsing there)
_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"  # the whitespace JSON allows around a value


def open_jsonl(path: Path) -> IO[bytes]:
    """The file opened for reading its lines as bytes, or a FixtureError naming it."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise FixtureError(f"cannot open cases file: {exc.strerror}", where=str(path),
                           hint="check the 'cases:' path in the suite file") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; a FixtureError for the first bad one."""
    decode = _DECODER.raw_decode
    with open_jsonl(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(exc, path, line=lineno) from None
            try:  # the fast path: a line that starts with its JSON value and ends after it
                data, end = decode(line)
            except ValueError:
                end = -1
            if end == len(line) or end > 0 and not line[end:].strip(_JSON_SPACE):
                yield lineno, data
                continue
            if not raw.strip():
                continue
            yield lineno, parse_line(raw, path, lineno)


def parse_line(raw: bytes, path: Path, lineno: int) -> Any:
    """One non-blank line parsed by ``json.loads``, or a FixtureError that says what is wrong
    where (the file, the line, the column)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path, line=lineno) from None
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise FixtureError(f"invalid JSON: {exc.msg} (column {exc.colno})", where=f"{path}:{lineno}",
                           hint="each line must be one JSON object") from None


def not_utf8(exc: UnicodeDecodeError, path: Path, *, line: int) -> FixtureError:
    """One line for a fixture file that is not UTF-8: the file, the line, the byte."""
    return FixtureError(f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x})", where=f"{path}:{line}",
                        hint="save the file as UTF-8")
