"""Credentials never leave memory: URLs lose their userinfo and secret query parameters.

:func:`redact_url` cleans one URL; :func:`redact_text` every URL inside a message (exception
texts of HTTP clients and database drivers carry the URLs they were given). Messages, logs,
reports and history go through these before they are shown or stored. :func:`install_log_redaction`
makes every log record's message go through it, and quiets httpx's
per-request INFO lines (each names the full URL). It knows nothing of settings or errors:
checking a configured URL is :mod:`evalloop.config`'s.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
#: query parameters whose value is a credential (compared lower-case, '-' as '_')
SECRET_PARAMS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth", "authorization", "key", "api_key",
    "apikey", "x_api_key", "sig", "signature", "x_amz_signature", "x_amz_credential",
    "x_amz_security_token", "password", "passwd", "pwd", "secret", "client_secret", "code",
    "session", "sessionid", "private_token", "jwt", "hmac",
})
_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'"<>`]+""")
_SECRET_WORDS = ("token", "secret", "password", "passwd", "signature", "api_key", "apikey")


def _is_secret(name: str) -> bool:
    norm = name.lower().replace("-", "_")
    return norm in SECRET_PARAMS or any(word in norm for word in _SECRET_WORDS)


def redact_url(url: str) -> str:
    """``url`` without userinfo (``user:pass@``) and with secret query values masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL.sub(lambda m: m.group(0).split("://", 1)[0] + "://" + MASK, url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret(k) for k, _ in pairs):
            query = urlencode([(k, MASK if _is_secret(k) else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (fast when there is none)."""
    if not text or "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


_installed = False


def _redacting_factory(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        if record.args or "://" in str(record.msg):
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken record is logging's own business
                return record
            if "://" in message:
                record.msg, record.args = redact_text(message), None
        return record

    return make


def install_log_redaction() -> None:
    """Redact the URLs in every log record of this process (any logger, any handler), and quiet
    httpx's per-request INFO lines. Idempotent."""
    global _installed
    if not _installed:
        logging.setLogRecordFactory(_redacting_factory(logging.getLogRecordFactory()))
        _installed = True
    for name in ("httpx", "httpcore"):  # their INFO lines name each request's full URL
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
