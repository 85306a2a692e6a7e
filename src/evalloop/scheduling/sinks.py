"""Notification sinks: where a run that fails goes (the log, a webhook, your own).

A sink is anything with ``name`` and ``send(report)``. Sinks are built from the settings'
``sinks`` list by name; a factory registered with :func:`register_sink` (or named lazily as
``module:function``) turns settings into a sink, or None when unconfigured. :func:`notify`
sends to every sink and logs a sink that fails: a failing sink never stops the caller. Which
runs are sent is not a rule of its own: a run alarms exactly when it fails
(:attr:`evalloop.verdicts.outcome.RunOutcome.fails`: a regression, a scorer under its floor, a
broken scorer, an invalid run).
A fire that could not run a suite (skipped: the suite stayed busy; a worker that cannot run it;
a dead host's fire taken over) has no run report: :func:`alarm` sends it as an event to the
sinks that take events (``send_event(document)``: the log and the webhook do).
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from evalloop.config import Settings
from evalloop.errors import ConfigError
from evalloop.loop.pipeline import RunReport
from evalloop.redact import install_log_redaction, redact_text, redact_url, remember_secrets

log = logging.getLogger("evalloop.sinks")
install_log_redaction()  # a webhook URL is a credential: no log line (httpx's included) shows one


@runtime_checkable
class Sink(Protocol):
    """Receives the report of a finished run that fails."""

    name: str

    def send(self, report: RunReport) -> None: ...


SinkFactory = Callable[[Settings], "Sink | None"]


def is_alarm(report: RunReport) -> bool:
    """Deprecated: ``report.comparison.fails`` (a run alarms exactly when it fails)."""
    warnings.warn("is_alarm(report) is report.comparison.fails; use that", DeprecationWarning, stacklevel=2)
    return report.comparison.fails


def payload(report: RunReport) -> dict[str, Any]:
    """The JSON document a sink sends: the run summary plus an event name (``regression`` for a
    run that fails, whatever its label: the summary's ``verdict`` says which)."""
    from evalloop.report.summary import run_summary

    return {"event": "regression" if report.comparison.fails else "run", **run_summary(report).dump()}


class LogSink:
    """Writes one warning per failing scorer to the ``evalloop.sinks`` logger, and one for the run
    when it is invalid (an invalid run fails whatever its scorers say)."""

    name = "log"

    def send(self, report: RunReport) -> None:
        run = report.executed.run
        if not run.valid:
            log.warning("%s run %s: invalid run (%s)", run.suite, run.id, run.invalid_reason or "no reason recorded")
        for s in report.comparison.scorers:
            if s.fails:
                failing = ", ".join(c for c, _ in s.newly_failing[:5])
                log.warning("%s run %s: %s %s (%s)%s", run.suite, run.id, s.scorer, s.verdict,
                            s.reason, f"; newly failing: {failing}" if failing else "")


    def send_event(self, event: dict[str, Any]) -> None:
        log.warning("%s: %s %s: %s", event.get("schedule"), event.get("suite"), event.get("event"),
                    event.get("detail"))


class WebhookError(Exception):
    """The webhook answered with a status that is worth retrying (5xx, 408, 429)."""


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError | WebhookError)


class WebhookSink:
    """POSTs the run summary as JSON; retries transport errors and 5xx/408/429 answers."""

    name = "webhook"

    def __init__(self, url: str, *, timeout: float = 10.0, attempts: int = 3,
                 backoff: float = 0.5, headers: dict[str, str] | None = None) -> None:
        self.url, self.timeout, self.attempts, self.backoff = url, timeout, attempts, backoff
        remember_secrets(url)  # a receiver that echoes its path in an error reveals no token
        self.headers = {"user-agent": "evalloop", **(headers or {})}

    def send(self, report: RunReport) -> None:
        self.post(payload(report))

    def send_event(self, event: dict[str, Any]) -> None:
        self.post(event)

    def post(self, document: dict[str, Any]) -> httpx.Response:
        retrying = Retrying(stop=stop_after_attempt(self.attempts),
                            wait=wait_exponential(multiplier=self.backoff, max=30),
                            retry=retry_if_exception(_retryable), reraise=True)
        with httpx.Client(timeout=self.timeout, headers=self.headers) as client:
            for attempt in retrying:
                with attempt:
                    response = client.post(self.url, json=document)
                    if response.status_code >= 500 or response.status_code in (408, 429):
                        raise WebhookError(f"HTTP {response.status_code} from {redact_url(self.url)}")
                    response.raise_for_status()
                    return response
        raise AssertionError("unreachable")  # pragma: no cover


class CallableSink:
    """A plain function ``fn(report)`` as a sink."""

    def __init__(self, name: str, fn: Callable[[RunReport], Any]) -> None:
        self.name, self.fn = name, fn

    def send(self, report: RunReport) -> None:
        self.fn(report)


def _log_factory(settings: Settings) -> Sink:
    return LogSink()


def _webhook_factory(settings: Settings) -> Sink | None:
    if not settings.webhook_url:
        return None
    return WebhookSink(settings.webhook_url, timeout=settings.webhook_timeout,
                       attempts=settings.webhook_retries)


_FACTORIES: dict[str, SinkFactory | str] = {
    "log": _log_factory,
    "webhook": _webhook_factory,
}


def register_sink(name: str, factory: SinkFactory | str) -> None:
    """Make a sink available to the ``sinks`` setting: a factory, or 'module:function'."""
    _FACTORIES[name] = factory


def _factory(name: str) -> SinkFactory:
    found = _FACTORIES.get(name)
    if found is None and ":" in name:  # 'package.module:factory' names its own factory
        found = name
    if found is None:
        raise ConfigError(f"unknown sink '{name}'", where="settings: sinks",
                          hint=f"known sinks: {', '.join(sorted(_FACTORIES))}")
    if isinstance(found, str):
        module_name, _, attr = found.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"sink '{name}' is not available ({exc})", where="settings: sinks",
                              hint=f"remove '{name}' from sinks or install what it needs") from None
        _FACTORIES[name] = found
    return found


def build_sinks(settings: Settings, extra: Iterable[Sink] = ()) -> list[Sink]:
    """The sinks named in ``settings.sinks`` (unconfigured ones left out), plus ``extra``."""
    sinks = [s for s in (_factory(name)(settings) for name in settings.sinks) if s is not None]
    return [*sinks, *extra]


@dataclass
class Delivery:
    """What happened to one report at one sink."""

    sink: str
    ok: bool
    error: str = ""


def notify(report: RunReport, sinks: Sequence[Sink], *, only_alarms: bool = True) -> list[Delivery]:
    """Send a report to every sink (by default only when the run fails: ``only_alarms``); a sink
    that fails is logged."""
    if only_alarms and not report.comparison.fails:
        return []
    out = []
    for sink in sinks:
        try:
            sink.send(report)
            out.append(Delivery(sink.name, True))
        except Exception as exc:
            message = redact_text(f"{type(exc).__name__}: {exc}")
            url = getattr(sink, "url", None)
            log.error("sink %s%s failed for run %s: %s", sink.name, f" ({redact_url(url)})" if url else "",
                      report.executed.run.id, message)
            out.append(Delivery(sink.name, False, message))
    return out


def alarm(event: dict[str, Any], sinks: Sequence[Sink]) -> list[Delivery]:
    """Send a fire's event (``event``: skipped | cannot run | taken over, with ``schedule``,
    ``suite``, ``detail``) to every sink that takes events; failures are logged."""
    out = []
    for sink in sinks:
        send = getattr(sink, "send_event", None)
        if send is None:
            continue
        try:
            send(event)
            out.append(Delivery(sink.name, True))
        except Exception as exc:
            message = redact_text(f"{type(exc).__name__}: {exc}")
            log.error("sink %s failed for %s of %s: %s", sink.name, event.get("event"), event.get("suite"), message)
            out.append(Delivery(sink.name, False, message))
    return out
