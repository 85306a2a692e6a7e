"""The process environment: every ``EVALLOOP_*`` variable evalloop reads, declared once
(:class:`Environment`, read with pydantic-settings), and variables set for a while (a library's
offline switch) put back as they were when that ends (:func:`restore_env`).

No other module reads an ``EVALLOOP_*`` variable from ``os.environ``: code that has the
project's :class:`~evalloop.config.Settings` reads ``settings.env``; the few places below any
settings (a fault point, the SQLite driver switch, the LLM client factory called from Python)
call :func:`environment`. docs/configuration.md lists every field (a test keeps it complete).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic.json_schema import JsonDict
from pydantic_settings import BaseSettings, SettingsConfigDict

from evalloop.errors import ConfigError

__all__ = ["PREFIX", "Environment", "environment", "restore_env", "variable"]

PREFIX = "EVALLOOP_"


def _setting(key: str, meaning: str) -> JsonDict:
    """The ``json_schema_extra`` of a variable that overrides the project setting ``key``."""
    return {"overrides": key, "meaning": meaning}


def _own(meaning: str, set_by: str = "you") -> JsonDict:
    return {"meaning": meaning, "set_by": set_by}


class Environment(BaseSettings):
    """Every ``EVALLOOP_*`` variable, typed. An empty variable counts as unset.

    The first group overrides the project setting of the same name (defaults < ``evalloop.toml``
    < these < a command-line option) and is kept as the text given: the setting's own field
    validates it, so a bad value is reported as that setting. The rest are read only here.
    """

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    # -- project settings (evalloop.toml keys): validated by evalloop.config.Settings --
    history_url: str | None = Field(None, json_schema_extra=_setting("history_url", "where runs are stored"))
    window: str | None = Field(None, json_schema_extra=_setting("window", "runs in the rolling baseline"))
    concurrency: str | None = Field(None, json_schema_extra=_setting("concurrency", "cases in flight at once"))
    errored_limit: str | None = Field(None, json_schema_extra=_setting(
        "errored_limit", "share of errored scores above which a run is invalid"))
    max_output_bytes: str | None = Field(None, json_schema_extra=_setting(
        "max_output_bytes", "bytes of a case's output stored"))
    engine: str | None = Field(None, json_schema_extra=_setting(
        "engine", "engine of the reference memory operations: auto, local, llm"))
    model: str | None = Field(None, json_schema_extra=_setting("model", "the LLM model of a run"))
    judge_model: str | None = Field(None, json_schema_extra=_setting(
        "judge_model", "the judges' model (also the model on EVALLOOP_JUDGE_BASE_URL's server)"))
    cache: str | None = Field(None, json_schema_extra=_setting("cache", "the LLM response cache: use, off, only"))
    memory_path: str | None = Field(None, json_schema_extra=_setting(
        "memory_path", "the embedded memory store's file"))
    memory_url: str | None = Field(None, json_schema_extra=_setting(
        "memory_url", "an HTTP memory service instead of the embedded store (and the mem0 retriever's default)"))
    learn: str | None = Field(None, json_schema_extra=_setting("learn", "write failure memories"))
    inject_failures: str | None = Field(None, json_schema_extra=_setting(
        "inject_failures", "put failure memories into prompts"))
    inject_budget: str | None = Field(None, json_schema_extra=_setting(
        "inject_budget", "characters of failure memories per prompt"))
    lessons_wait: str | None = Field(None, json_schema_extra=_setting(
        "lessons_wait", "seconds evalloop.lessons() waits for the memory store"))
    timezone: str | None = Field(None, json_schema_extra=_setting("timezone", "default zone of schedules"))
    webhook_url: str | None = Field(None, json_schema_extra=_setting(
        "webhook_url", "JSON POST of a failing run's summary"))
    viewer_url: str | None = Field(None, json_schema_extra=_setting(
        "viewer_url", "where evalloop view serves this project"))
    verdict_rule: str | None = Field(None, json_schema_extra=_setting(
        "verdict.rule", "the verdict rule: evidence, threshold, paired"))

    # -- where the project is --
    project: Path | None = Field(None, json_schema_extra=_own(
        "the project directory when no -C is given (default: the current directory)"))

    # -- the LLM servers and client (evalloop.llm.clients) --
    llm_base_url: str | None = Field(None, json_schema_extra=_own(
        "an OpenAI-compatible server for every LLM call (instead of Anthropic)"))
    llm_model: str | None = Field(None, json_schema_extra=_own("the model on EVALLOOP_LLM_BASE_URL's server"))
    llm_api_key: str | None = Field(None, repr=False, json_schema_extra=_own(
        "the key of EVALLOOP_LLM_BASE_URL's server"))
    llm_max_retries: int | None = Field(None, ge=0, json_schema_extra=_own("retries of one LLM call"))
    llm_backoff: float | None = Field(None, ge=0, json_schema_extra=_own("seconds before the first retry"))
    llm_concurrency: int | None = Field(None, ge=1, json_schema_extra=_own(
        "LLM calls in flight at once (default: the run's concurrency)"))
    llm_timeout: float | None = Field(None, gt=0, json_schema_extra=_own("seconds one LLM call may take"))
    llm_rate_limits: bool | None = Field(None, json_schema_extra=_own(
        "0: no adaptive rate limits from the provider's headers"))
    llm_prompt_cache: bool | None = Field(None, json_schema_extra=_own(
        "0: no prompt-cache marks on Anthropic requests"))
    judge_base_url: str | None = Field(None, json_schema_extra=_own(
        "an OpenAI-compatible server for the LLM judges alone"))
    judge_api_key: str | None = Field(None, repr=False, json_schema_extra=_own(
        "the key of EVALLOOP_JUDGE_BASE_URL's server"))
    batch_poll: float | None = Field(None, gt=0, json_schema_extra=_own(
        "batch mode: seconds between the first polls of a batch (default 5)"))
    batch_poll_max: float | None = Field(None, gt=0, json_schema_extra=_own(
        "batch mode: the longest wait between polls (default 60)"))
    batch_window: float | None = Field(None, ge=0, json_schema_extra=_own(
        "batch mode: seconds requests are gathered into one batch (default 0.2)"))

    # -- memory --
    mem0_url: str | None = Field(None, json_schema_extra=_own(
        "the mem0 server of the mem0 retriever (default: EVALLOOP_MEMORY_URL)"))
    sqlite_vec: str | None = Field(None, json_schema_extra=_own(
        "on: vector search with sqlite-vec instead of NumPy"))

    # -- provenance and process plumbing --
    code_version: str | None = Field(None, json_schema_extra=_own(
        "the code version stored with a run (default: the project's git commit)"))
    fire_entry: str | None = Field(None, json_schema_extra=_own(
        "the schedule ledger entry a fire's run belongs to", set_by="the scheduler, for a fire's process"))
    fire_parent: int | None = Field(None, json_schema_extra=_own(
        "the scheduler's pid: a fire's process ends when it dies", set_by="the scheduler, for a fire's process"))
    fault: str | None = Field(None, json_schema_extra=_own(
        "fault points where the process kills itself (evalloop.faults)", set_by="crash-safety tests"))

    def setting_overrides(self) -> dict[str, str]:
        """The variables set that override a project setting, by setting key (``verdict.rule``)."""
        out = {}
        for name in self.model_fields_set:
            extra = type(self).model_fields[name].json_schema_extra
            value = getattr(self, name)
            if isinstance(extra, dict) and "overrides" in extra and value is not None:
                out[str(extra["overrides"])] = value
        return out


def variable(field: str) -> str:
    """The environment variable of a field of :class:`Environment` (``fire_parent`` ->
    ``EVALLOOP_FIRE_PARENT``): for a parent that sets one for a child process."""
    if field not in Environment.model_fields:
        raise KeyError(field)
    return PREFIX + field.upper()


_cache_lock = threading.Lock()
_cached: tuple[tuple[tuple[str, str], ...], Environment] | None = None


def environment() -> Environment:
    """The environment as it is now (re-read when an ``EVALLOOP_*`` variable changed). Raises
    :class:`~evalloop.errors.ConfigError`, one line naming the variable, for a bad value."""
    global _cached
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(PREFIX)))
    with _cache_lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    try:
        env = Environment()
    except ValidationError as exc:
        err = exc.errors()[0]
        name = PREFIX + str(err["loc"][0]).upper() if err["loc"] else "EVALLOOP_*"
        raise ConfigError(f"{name}={os.environ.get(name, '')!r}: {err['msg']}", where="environment",
                          hint=f"fix or unset {name} (every variable: docs/configuration.md)") from None
    with _cache_lock:
        _cached = (key, env)
    return env


def restore_env(saved: Mapping[str, str | None]) -> None:
    """Put each variable back to its saved value; one that was unset (None) is unset again."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
