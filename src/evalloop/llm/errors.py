"""Typed errors of the LLM layer, all :class:`evalloop.errors.EvalloopError` subclasses.

Whose failure each one is (:mod:`evalloop.run.failures`): a reply the model made that cannot be used
(:class:`ReplyParseError`, :class:`RefusalError`) is the target's; a call that failed
(:class:`LLMCallFailed`, including :class:`MalformedReply`) or could not connect
(:class:`LLMConnectionFailed`) is the infrastructure's.
"""

from __future__ import annotations

from evalloop.errors import ConnectionFailed, EvalloopError


class LLMError(EvalloopError):
    """Base of every error raised by ``evalloop.llm``; a scorer turns it into an errored score."""

    exit_code = 1


class ReplyParseError(LLMError):
    """A reply that could not be parsed into the expected structure (after one retry)."""

    def __init__(self, what: str, *, raw: str = "", where: str | None = None, hint: str | None = None) -> None:
        self.raw = raw
        super().__init__(what, where=where, hint=hint)


class RefusalError(LLMError):
    """The model refused to answer (``stop_reason == "refusal"``)."""

    def __init__(self, what: str, *, text: str = "", where: str | None = None) -> None:
        self.text = text
        super().__init__(what, where=where, hint="rephrase the prompt or use another model")


class LLMCallFailed(LLMError):
    """A call that failed for good: a non-retryable status, or retries exhausted."""

    def __init__(
        self,
        what: str,
        *,
        status: int | None = None,
        where: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.status = status
        super().__init__(what, where=where, hint=hint)


class MalformedReply(LLMCallFailed):
    """The API answered, but not with its reply shape: an HTML page, JSON cut off, ``{}``, a
    message without content or usage. An infrastructure fault (never retried, never cached)."""


class LLMConnectionFailed(ConnectionFailed, LLMError):
    """The LLM server could not be reached (connection refused, DNS, TLS) after retries."""


class BudgetExceeded(LLMError):
    """An LLM call refused because its estimate would take the run past its cost budget
    (:mod:`evalloop.llm.budget`). Not one case's failure: the run stops starting cases."""


RUN_LEVEL_STATUS = {404}  # a model that does not exist fails every case alike: stop the run


def is_case_level(exc: BaseException) -> bool:
    """Whether an error fails the grading of one case (an unusable reply, a refusal, a call that
    kept failing) rather than the whole run (no connection, a rejected key, an unknown model, a
    replay miss, a spent cost budget — anything that would fail every case alike)."""
    if not isinstance(exc, LLMError) or isinstance(exc, ConnectionFailed):
        return False
    if isinstance(exc, BudgetExceeded):
        return False
    return not (isinstance(exc, LLMCallFailed) and exc.status in RUN_LEVEL_STATUS)
