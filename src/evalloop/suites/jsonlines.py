"""Reading a JSONL fixture file: one parsed value per non-blank line, or one clear error.

Every line is decoded with one ``raw_decode`` call; only a line that does not parse that way
(blank, leading whitespace, bad JSON) goes through ``json.loads``, whose message the error
quotes with the file, the line and the column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalloop.errors import FixtureError

__all__ = ["iter_jsonl", "not_utf8"]

#: one decoder for every line; ``raw_decode`` skips ``json.loads``' wrappers (a JSONL file of
#: short cases spends a third of its parsing there)
_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"  # the whitespace JSON allows around a value


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; a FixtureError for the first bad one."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise FixtureError(f"cannot open cases file: {exc.strerror}", where=str(path),
                           hint="check the 'cases:' path in the suite file") from None
    decode = _DECODER.raw_decode
    with handle:
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
            try:  # anything else takes json.loads, whose message names what is wrong
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                   where=f"{path}:{lineno}",
                                   hint="each line must be one JSON object") from None
            yield lineno, data


def not_utf8(exc: UnicodeDecodeError, path: Path, *, line: int) -> FixtureError:
    """One line for a fixture file that is not UTF-8: the file, the line, the byte."""
    return FixtureError(f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x})", where=f"{path}:{line}",
                        hint="save the file as UTF-8")
