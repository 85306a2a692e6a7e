"""What failed when a case failed: the product (a real 0) or the infrastructure (errored).

The rule, in one place:

* **target** — the system under test failed its case: it raised, it missed the suite's
  ``timeout:``, the model's reply could not be used (unparseable after the one retry, a refusal),
  or it returned an output its scorer cannot parse. Every scorer gives that case a real 0, and
  the run counts it in ``target_failures``.
* **infra** — the infrastructure failed, so the case says nothing about the product: the LLM API
  could not be reached, refused or kept failing the call (any HTTP error status after retries,
  timeouts) or answered with a body that is not its reply shape (HTML, truncated JSON, ``{}``);
  or the target's own network call failed (``ConnectionError``, DNS, a socket timeout, an
  ``httpx`` transport error, an exception carrying an HTTP error ``status_code`` — anywhere in
  the exception's chain). The case is *errored*, the run counts it in ``infra_failures``, and
  past the errored limit the run is invalid.

When in doubt the rule leans to *infra*: an infrastructure fault taken for the product's gives a
valid run of zeros — a false regression, a failure memory, a poisoned baseline — while a product
fault taken for infrastructure is errored, shown, and (when common) makes the run invalid, which
fails CI just the same. An API refusing the call (a 4xx: a rejected key, an exhausted credit
balance, an over-long prompt) has no answer to grade, so it is infrastructure too.
"""

from __future__ import annotations

import errno
import socket
import ssl
import sys

from evalloop.score import Failure

NETWORK_ERRNOS = frozenset({
    errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
    errno.EHOSTDOWN, errno.ENETUNREACH, errno.ENETDOWN, errno.ENETRESET, errno.EPIPE,
})
_CHAIN_DEPTH = 16


class TargetTimeout(Exception):
    """The target missed the suite's deadline (counted from the call's start): a target failure."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"target timed out after {timeout:g} s")


def classify(exc: BaseException) -> Failure:
    """Whether a target's exception is the product's failure or the infrastructure's (see above)."""
    from evalloop.errors import ConnectionFailed
    from evalloop.llm.errors import LLMCallFailed, LLMError

    if isinstance(exc, TargetTimeout):
        return Failure.TARGET
    if isinstance(exc, LLMError | ConnectionFailed):  # evalloop's own clients say what they mean
        return Failure.INFRA if isinstance(exc, LLMCallFailed | ConnectionFailed) else Failure.TARGET
    return Failure.INFRA if any(_is_network(link) for link in _chain(exc)) else Failure.TARGET


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes (``raise … from``) and contexts (raised while handling)."""
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(seen) < _CHAIN_DEPTH and all(link is not s for s in seen):
        seen.append(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return seen


def _is_network(exc: BaseException) -> bool:
    from evalloop.errors import ConnectionFailed
    from evalloop.llm.errors import LLMCallFailed

    if isinstance(exc, TargetTimeout):
        return False
    if isinstance(exc, LLMCallFailed | ConnectionFailed):  # evalloop's clients, wrapped by the target
        return True
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror | socket.herror | ssl.SSLError):
        return True
    if isinstance(exc, OSError) and exc.errno in NETWORK_ERRNOS:
        return True
    if isinstance(exc, _transport_errors()):
        return True
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    return isinstance(status, int) and 400 <= status <= 599   # an SDK's or httpx's HTTP status error


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Transport errors of the HTTP clients and LLM SDKs already imported (httpx, anthropic,
    openai; an exception of one means its module is loaded): the SDKs chain the httpx error as
    the cause, but their own types say it directly."""
    found: list[type[BaseException]] = []
    for module, name in (("httpx", "TransportError"), ("anthropic", "APIConnectionError"),
                         ("openai", "APIConnectionError")):
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            found.append(kind)
    return tuple(found)
