"""An LLM server's base URL as the transports need it: ``user:pass@`` taken out of the URL and
sent as the HTTP Basic ``Authorization`` header a proxy in front of the API expects.

The SDK's aiohttp transport refuses a URL with credentials (aiohttp will not combine them with
the headers the SDK sets), and httpx used to turn them into Basic auth silently; here it is said
once, for both clients. The credentials are remembered by :mod:`evalloop.redact`, so they never
reach a message, a log or the history.
"""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit, urlunsplit

from evalloop.errors import ConfigError
from evalloop.redact import redact_url, remember_secrets


def split_credentials(url: str, *, setting: str, authorization_taken: bool = False) -> tuple[str, dict[str, str]]:
    """``url`` without its userinfo, and the headers that carry it (``{}`` when it has none).

    ``authorization_taken``: the client already sends its own ``Authorization`` header (a
    bearer token), so credentials in the URL cannot be sent too — a one-line ConfigError.
    """
    remember_secrets(url)
    parts = urlsplit(url)
    if parts.username is None:
        return url, {}
    if authorization_taken:
        raise ConfigError(f"{setting} carries a user and password, and an API token is sent as the "
                          f"Authorization header too: '{redact_url(url)}'", where="environment",
                          hint="give the credentials one way: drop user:pass@ from the URL, or the token")
    host = parts.netloc.rpartition("@")[2]
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode()
    remember_secrets(f"http://x/?token={token}")  # the header's value is a secret too
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, {"Authorization": f"Basic {token}"}
