"""Settings: read from ``evalloop.toml``, ``[tool.evalloop]`` in pyproject.toml, and the env.

Precedence, lowest first: defaults, the file, ``EVALLOOP_*`` environment variables (every one
declared in :class:`evalloop.environ.Environment`), and finally what the CLI passes explicitly.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from evalloop.environ import Environment, environment, variable
from evalloop.errors import ConfigError
from evalloop.redact import install_log_redaction, redact_url, remember_secrets

CONFIG_FILE = "evalloop.toml"


class VerdictSettings(BaseModel):
    """How verdicts are reached, set per project (``[verdict]``) or per suite (``verdict:``); see docs/verdicts.md.

    The one declaration of these knobs: :class:`evalloop.policy.VerdictPolicy` extends it with
    what the runner binds per scorer (threshold, pass mark, resampling).
    """

    model_config = ConfigDict(extra="forbid")

    rule: Literal["evidence", "threshold", "paired"] = "evidence"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    confidence: float = Field(default=0.95, gt=0.5, lt=1)  # rule="evidence": the drop is ≥ threshold with this
    min_effect: float | None = Field(default=None, ge=0, lt=1)
    min_score: float | None = Field(default=None, ge=0, le=1)  # absolute floor; None = the scorer kind's target
    alarm_budget: float = Field(default=0.05, gt=0, lt=1)  # nightly: P(≥ 1 false red night in 30), per suite
    flaky_flips: int = Field(default=2, ge=0)
    quarantine_flaky: bool = False
    restart_on_change: bool = False  # a product change restarts the baseline window
    bridge: bool = True  # a measurement change re-grades the baseline's stored outputs; false: restart

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and "require_significance" in data:
            raise ValueError("require_significance is retired: every rule now needs significance "
                             "(a drop that is not significant is a 'watch'); remove the key")
        if isinstance(data, dict) and "reach_level" in data:
            raise ValueError("reach_level is retired: the evidence rule now asks that the drop be at least "
                             "the threshold with `confidence` (default 0.95); rename the key")
        return data


class LearningSettings(BaseModel):
    """``[learning]``: where incidents (and so lessons) live. ``store = "embedded"`` (the default:
    ``history/memory.db``), ``"mem0"`` (a mem0 REST server at ``url``, scoped by ``user_id`` and/or
    ``agent_id`` — the scope the production agent queries) or ``"http"`` (another memory service
    of the same shape, with the ``[memory_http]`` settings)."""

    model_config = ConfigDict(extra="forbid")

    store: Literal["embedded", "mem0", "http"] = "embedded"
    url: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    #: a held incident's cases are run again without lessons after every this-many full runs
    #: with its lesson (0: never; the suite's ``ablation_every`` wins)
    ablation_every: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _url(self) -> LearningSettings:
        if self.store != "embedded" and not self.url:
            raise ValueError(f'store = "{self.store}" needs the service\'s url '
                             '(url = "http://localhost:8000" under [learning])')
        return self


class RevisionSettings(BaseModel):
    """``[revise]``: how ``evalloop prompt revise`` splits, spends and decides (docs/revision.md).

    The test split is the suite's held-out cases (its ``holdout`` setting: fraction, tags and
    salt); ``validation`` is the share of the *learn* cases GEPA selects on (its Pareto
    frontier), the rest are the train split it reflects on, ``minibatch`` cases at a time.
    ``max_metric_calls`` bounds the search (None: ten passes over the validation split, at least
    150); ``max_cost`` (USD) bounds the whole revision, confirmation included. The one
    confirmation on the test split is a one-sided paired test at ``alpha / (k (k + 1))`` for the
    k-th use of that test split (the series sums to ``alpha``); ``min_gain`` is the gain in the
    mean score worth having, against which the test split's minimum detectable effect (at
    ``power``) is checked before anything is spent."""

    model_config = ConfigDict(extra="forbid")

    validation: float = Field(default=0.4, gt=0.0, lt=1.0)
    minibatch: int = Field(default=3, ge=1, le=50)
    max_metric_calls: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    min_gain: float = Field(default=0.1, gt=0.0, le=1.0)
    power: float = Field(default=0.8, gt=0.5, lt=1.0)
    merge: bool = True
    seed: int = 0


class Settings(BaseModel):
    """Everything a run needs to know about the project it runs in."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _run_log_default(cls, data: Any) -> Any:
        """Run logs by default only beside a SQLite history: a shared server's database is the
        team's truth (its run logs are an export, ``evalloop history export``)."""
        if isinstance(data, dict) and data.get("run_log") is None:
            url = str(data.get("history_url") or "sqlite")
            data = {**data, "run_log": url.startswith("sqlite")}
        return data

    project_dir: Path = Field(default_factory=Path.cwd)
    history_url: str | None = None
    window: int = Field(default=5, ge=1, le=100)
    concurrency: int = Field(default=16, ge=1, le=1024)
    errored_limit: float = Field(default=0.2, ge=0.0, le=1.0)
    #: bytes of a case's output stored (its JSON); past it the history keeps its size and hash (0: no cap)
    max_output_bytes: int = Field(default=1_000_000, ge=0)
    engine: Literal["auto", "local", "llm"] = "auto"
    model: str | None = None
    judge_model: str | None = None
    cache: Literal["use", "off", "only"] = "use"
    memory_path: str | None = None
    memory_url: str | None = None
    memory_http: dict[str, Any] = Field(default_factory=dict)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    revise: RevisionSettings = Field(default_factory=RevisionSettings)
    learn: bool = True
    inject_failures: bool = True
    inject_budget: int = Field(default=6000, ge=200, description="characters of failure memories per prompt")
    inject_per_memory: int = Field(default=2400, ge=100, description="characters of one failure memory")
    inject_limit: int = Field(default=3, ge=1, le=20, description="open failure memories per prompt")
    inject_detail: Literal["full", "ids"] = "full"
    #: seconds `evalloop.lessons()` waits for the memory store before it serves its last good value
    lessons_wait: float = Field(default=0.3, gt=0, le=60)
    #: keep history/<suite>.jsonl; default: yes with a SQLite history, no with a shared server
    run_log: bool = True
    timezone: str | None = None
    misfire_grace_seconds: int = Field(default=3600, ge=1)
    #: how often a holder of a lock or a run's lease writes its heartbeat (the database's now())
    heartbeat_seconds: float = Field(default=5.0, gt=0, le=60)
    #: missed heartbeats after which another host takes the lock over (and the run is reaped)
    takeover_heartbeats: int = Field(default=4, ge=2, le=100)
    scheduler_poll_seconds: float = Field(default=5.0, gt=0)
    scheduler_stop_seconds: float | None = Field(default=None, ge=0)
    #: a scheduled run still going after this is stopped (marked interrupted); None: no limit
    fire_timeout_seconds: float | None = Field(default=6 * 3600.0, gt=0)
    sinks: list[str] = Field(default_factory=lambda: ["log", "webhook"])
    webhook_url: str | None = None
    webhook_timeout: float = Field(default=10.0, gt=0)
    webhook_retries: int = Field(default=3, ge=1, le=20)
    #: where `evalloop view` is served for this project: `run` prints a failing run's page under it
    viewer_url: str | None = None
    thresholds: dict[str, Annotated[float, Field(gt=0.0, lt=1.0)]] = Field(default_factory=dict)
    verdict: VerdictSettings = Field(default_factory=VerdictSettings)
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _learning_store(self) -> Settings:
        """``[learning] store = "mem0"|"http"`` is a memory service: its URL and scope become
        ``memory_url`` and ``memory_http`` (the one path every reader of memories takes)."""
        chosen = self.learning
        if chosen.store == "embedded":
            return self
        pairs = (("user_id", chosen.user_id), ("agent_id", chosen.agent_id))
        scope: dict[str, str | None] = {k: v for k, v in pairs if v}
        if scope and "user_id" not in scope:
            scope["user_id"] = None  # an agent's scope alone, not the adapter's default user
        self.memory_url = chosen.url
        self.memory_http = {**self.memory_http, **scope}
        return self

    #: the ``EVALLOOP_*`` variables as :func:`load_settings` read them (not a setting: no file sets it)
    _env: Environment | None = PrivateAttr(default=None)

    @property
    def env(self) -> Environment:
        """Every ``EVALLOOP_*`` variable, typed: read through the settings, never ``os.environ``."""
        if self._env is None:  # settings made in code, not by load_settings: the process's now
            self._env = environment()
        return self._env

    @property
    def lease_seconds(self) -> float:
        """How long a lock or a run's lease lasts without a heartbeat: then another host takes over."""
        return self.heartbeat_seconds * self.takeover_heartbeats

    @property
    def history_dir(self) -> Path:
        return self.project_dir / "history"

    @property
    def database_url(self) -> str:
        if self.history_url:
            return self.history_url
        return f"sqlite:///{self.history_dir / 'evalloop.db'}"

    @property
    def memory_file(self) -> Path:
        if self.memory_path:
            path = Path(self.memory_path)
            return path if path.is_absolute() else self.project_dir / path
        return self.history_dir / "memory.db"

    @property
    def cache_file(self) -> Path:
        """The LLM response cache (only a cache: ``evalloop doctor --repair`` may move it aside)."""
        return self.history_dir / "llm-cache.db"


def _file_settings(project_dir: Path) -> tuple[dict[str, Any], Path | None]:
    own = project_dir / CONFIG_FILE
    if own.is_file():
        return _read_toml(own), own
    pyproject = project_dir / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("evalloop")
        if isinstance(table, dict):
            return table, pyproject
    return {}, None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                          where=str(path), hint="save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=str(path), hint="fix the syntax") from None


def load_settings(project_dir: Path | None = None, **overrides: Any) -> Settings:
    """Settings for a project directory (default: ``EVALLOOP_PROJECT``, else the current
    directory). Precedence, lowest first: defaults, the file, ``EVALLOOP_*`` variables
    (:class:`~evalloop.environ.Environment`), ``overrides`` (the CLI's options). The environment
    read here travels with the settings (``settings.env``). Raises ConfigError."""
    env = environment()
    project_dir = (project_dir or env.project or Path(".")).resolve()
    if not project_dir.is_dir():
        raise ConfigError("project directory does not exist", where=str(project_dir),
                          hint="check --project / EVALLOOP_PROJECT (or run `evalloop init DIR` to make one)")
    data, source = _file_settings(project_dir)
    for key, value in env.setting_overrides().items():
        section, _, name = key.rpartition(".")
        if section:
            data[section] = {**data.get(section, {}), name: value}
        else:
            data[key] = value
    data.update({k: v for k, v in overrides.items() if v is not None})
    data["project_dir"] = project_dir
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        from evalloop import validation

        err = validation.first(exc)
        where = str(source) if source else "settings"
        raise ConfigError(f"setting '{validation.location(err)}': {validation.message(err, Settings)}", where=where,
                          hint="see docs/configuration.md") from None
    settings._env = env
    # webhook/memory/LLM base URLs are checked now; credentials are kept out of logs
    check_settings(settings, str(source) if source else None)
    return settings


def check_settings(settings: Settings, where: str | None = None) -> None:
    """Check the URLs a configuration names (webhook, memory service, LLM servers) as it loads,
    not at the first send; and make sure this process's log lines carry no credential."""
    check_url(settings.webhook_url, setting="webhook_url", where=where)
    check_url(settings.memory_url, setting="memory_url", where=where)
    check_url(settings.viewer_url, setting="viewer_url", where=where)
    servers = {"ANTHROPIC_BASE_URL": os.environ.get("ANTHROPIC_BASE_URL"),  # the Anthropic SDK's own
               variable("llm_base_url"): settings.env.llm_base_url,
               variable("judge_base_url"): settings.env.judge_base_url}
    for name, url in servers.items():
        check_url(url, setting=name, where="environment")
    for url in (settings.webhook_url, settings.memory_url, settings.history_url, *servers.values()):
        remember_secrets(url)  # masked wherever a server echoes them
    install_log_redaction()


def check_url(value: str | None, *, setting: str, schemes: tuple[str, ...] = ("http", "https"),
              where: str | None = None) -> None:
    """Raise ConfigError (with the URL redacted) unless ``value`` is an absolute URL of ``schemes``."""
    if not value:
        return
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if parts is None or not port_ok or parts.scheme.lower() not in schemes or not parts.hostname:
        raise ConfigError(f"setting '{setting}' is not a usable {'/'.join(schemes)} URL: '{redact_url(value)}'",
                          where=where,
                          hint=f"give an absolute URL like https://host/path (schemes: {', '.join(schemes)})")
