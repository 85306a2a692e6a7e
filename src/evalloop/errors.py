"""The errors a user can cause, each rendered as one line: what, where, and how to mend it."""

from __future__ import annotations


class EvalloopError(Exception):
    """An error caused by user input or environment; the CLI prints it as one line.

    ``where`` names the file (and line or case) or the component; ``hint`` says how to fix it.
    ``exit_code`` is 2 for usage and input errors, 1 for runtime failures the user must act on.
    """

    exit_code: int = 2

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.what = what
        self.where = where
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.hint:
            parts.append(self.hint)
        return " — ".join(parts).replace("\n", " ")


class FixtureError(EvalloopError):
    """A suite or case file that cannot be loaded or validated."""


class ScorerError(EvalloopError):
    """An unknown scorer, bad scorer parameters, or a registry clash."""


class TargetError(EvalloopError):
    """A target that cannot be resolved or called."""


class ConfigError(EvalloopError):
    """Bad settings, or a missing key or service the chosen configuration needs."""


class ConnectionFailed(EvalloopError):
    """A server (LLM API, memory service, webhook) that cannot be reached."""

    exit_code = 1


class ReplayMiss(EvalloopError):
    """A cache-only (replay) run asked for a response that is not cached."""

    exit_code = 1
