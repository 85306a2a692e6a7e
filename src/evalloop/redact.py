"""Credentials never leave memory: every URL evalloop shows or stores is cut to what is known
to carry no secret, and the secret parts of the URLs it was configured with are masked wherever
they turn up (a server that echoes the path it was asked for).

The rule (:func:`redact_url`, the one place): a URL is cut to scheme, host and port — its
userinfo becomes ``***@`` and anything after the port ``/***`` — unless its path is known to be
secret-free: API roots and versions and the endpoints evalloop calls (``/v1``,
``/v1/chat/completions``, ``/api``, …), with no path parameters, query or fragment. A database
URL (``sqlite:``, ``postgresql:``, …) keeps its path, the database's name or file, and loses its
userinfo and secret query values. Slack- and Discord-style webhook URLs, whose path *is* the
token, are therefore never shown whole.

:func:`redact_text` cleans every URL inside a message, and masks every secret that
:func:`remember_secrets` was told about (userinfo, token-like path segments, path parameters and
secret query values of configured URLs). :func:`install_log_redaction` makes every log record's
message go through it, and quiets httpx's per-request INFO lines (each names the full URL).
It knows nothing of settings or errors: checking a configured URL (and telling
:func:`remember_secrets` about it) is :mod:`evalloop.config`'s.
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


#: schemes whose URL names a database: the path is the database's name (or file), kept
_DATABASE = re.compile(r"(sqlite|postgres|postgresql|mysql|mariadb|oracle|mssql|cockroachdb|duckdb)(\+[\w-]+)?")
#: path segments known to carry no secret: API roots and versions, the endpoints evalloop calls
SAFE_SEGMENTS = frozenset({"", "api", "openai", "anthropic", "messages", "chat", "completions", "embeddings",
                           "memories", "search", "hook", "webhook", "webhooks", MASK})
_VERSION = re.compile(r"v\d+(alpha\d*|beta\d*)?")
_TRAILING = ").,;:!?]}'\""
_remembered: set[str] = set()


def _safe_path(path: str) -> bool:
    return ";" not in path and all(seg in SAFE_SEGMENTS or _VERSION.fullmatch(seg) for seg in path.split("/"))


def redact_url(url: str) -> str:
    """``url`` as evalloop may show or store it: scheme, host and port (userinfo as ``***@``,
    anything after the port as ``/***``) unless the path is known to be secret-free; a
    database URL keeps its path and loses its userinfo and secret query values."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return _URL.sub(lambda m: m.group(0).split("://", 1)[0] + "://" + MASK, url)
    netloc = parts.netloc
    userinfo = "@" in netloc
    if _DATABASE.fullmatch(parts.scheme.lower()) or parts.scheme.lower() == "file":
        if userinfo:
            netloc = MASK + "@" + netloc.rpartition("@")[2]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_is_secret(k) for k, _ in pairs):
                query = urlencode([(k, MASK if _is_secret(k) else v) for k, v in pairs], safe="*")
        if netloc == parts.netloc and query == parts.query:
            return url
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    shown = f"{parts.scheme}://{MASK + '@' if userinfo else ''}{host}{f':{port}' if port is not None else ''}"
    if _safe_path(parts.path) and not parts.query and not parts.fragment and "#" not in url:
        return shown + parts.path
    return shown + "/" + MASK


def _redact_match(match: re.Match[str]) -> str:
    text = match.group(0)
    core = text.rstrip(_TRAILING)
    return redact_url(core) + text[len(core):]


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted, and every remembered secret masked (fast when
    there is neither)."""
    if not text:
        return text
    if "://" in text:
        text = _URL.sub(_redact_match, text)
    for secret in _remembered:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _token_like(piece: str) -> bool:
    """Whether a path segment looks like a credential (not a word): digits or mixed case, or long."""
    return len(piece) >= 6 and (any(c.isdigit() for c in piece) or len(piece) >= 16
                                or (piece.lower() != piece and piece.upper() != piece))


def remember_secrets(url: str | None) -> None:
    """Mask the secret parts of a configured URL wherever they appear later (a server may echo
    its path in an error): userinfo, path parameters, secret query values, token-like segments."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    found: set[str] = set()
    if parts.password:
        found.add(parts.password)
    if not _DATABASE.fullmatch(parts.scheme.lower()):
        for segment in parts.path.split("/"):
            name, _, params = segment.partition(";")
            if not (name in SAFE_SEGMENTS or _VERSION.fullmatch(name)):
                found.add(name)
            for param in params.split(";") if params else ():
                key, _, value = param.partition("=")
                found.add(value or key)
    found.update(value for key, value in parse_qsl(parts.query, keep_blank_values=True) if _is_secret(key))
    # only what looks like a credential: masking a word ("postgres", "hook") everywhere would
    # garble messages (a short or plain-word secret is still cut from every URL that shows it)
    _remembered.update(piece for piece in found if _token_like(piece))


_installed = False


def _redacting_factory(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        if record.args or "://" in str(record.msg) or _remembered:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken record is logging's own business
                return record
            clean = redact_text(message)
            if clean != message:
                record.msg, record.args = clean, None
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
