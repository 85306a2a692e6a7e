"""The one Jinja2 environment of every HTML page: the static report (:mod:`evalloop.report.html`)
and the pages of ``evalloop view`` share its templates (``templates/``: one base page, one
stylesheet, one set of chart macros), its filters and its autoescape.

Every value a template prints is escaped (autoescape on every ``.j2`` template), so a case's
input, output or message shows as the text it is, never as markup; and every value printed is
redacted (:func:`evalloop.redact.redact_text`; a mapping or a list as its JSON): a URL with a
credential in a stored message or a scorer's metadata shows with the credential masked, as the
terminal shows it.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from evalloop.redact import redact_text
from evalloop.report.format import ms, num, pct

TEMPLATES = Path(__file__).parent / "templates"


def _dt(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M") if at else "—"


def _usd(value: float | None) -> str:
    return f"${value:,.4f}" if value else "—"


def _clean(value: Any) -> Any:
    """What a template prints, redacted (the terminal's rule): text, and a mapping or a list as the
    JSON it prints as (a scorer's nested metadata); markup a macro made is left as it is (each
    value inside it was redacted where the macro printed it), numbers and dates as they are."""
    if isinstance(value, Markup):
        return value
    if isinstance(value, dict | list | tuple | set):
        value = json.dumps(value if not isinstance(value, set) else sorted(value, key=str), ensure_ascii=False,
                           default=str)
    return redact_text(value) if isinstance(value, str) else value


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The shared environment (built once): autoescape, strict undefined names, the number filters."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2", "html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      finalize=_clean)
    env.filters.update(pct=pct, num=num, ms=ms, dt=_dt, usd=_usd)
    return env
