"""``evalloop.lessons(suite)``: the suite's lessons for a system's own prompts at serving time.

The text is the one an eval run injects (:func:`evalloop.learning.injection.injected_for`: the
suite's open incidents, newest first, without any that shows a held-out case, each fenced as
untrusted data, within the injection budget), so production prompts and eval runs see the same
lessons. It is meant for a hot path: cached per (project, suite) for :data:`TTL_SECONDS` and
while the embedded store's file is unchanged, no LLM call, no embedding; and it never raises
into the caller — a missing or broken store, a missing suite or bad settings give "" and one
logged warning (``evalloop.lessons`` logger).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings load lazily: a hot path imports only what it uses
    from evalloop.config import Settings

log = logging.getLogger("evalloop.lessons")

TTL_SECONDS = 30.0
_cache: dict[tuple[str, str], tuple[float, object, str]] = {}
_warned: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def _warn(key: tuple[str, str], message: str) -> None:
    """One warning per (project, suite, message): a hot path must not flood the log."""
    with _lock:
        if (*key, message) in _warned:
            return
        _warned.add((*key, message))
    log.warning("lessons for suite '%s' (project %s): %s", key[1], key[0], message)


def _stamp(settings: Settings) -> object:
    """What says the lessons may have changed: the embedded store's size and time (a memory service: None)."""
    if settings.memory_url:
        return None
    try:
        stat = Path(settings.memory_file).stat()
    except OSError:
        return "missing"
    return (stat.st_size, stat.st_mtime_ns)


def lessons(suite: str, project_dir: str | Path | None = None) -> str:
    """The suite's lessons as fenced prompt text ("" when there are none, or on any problem)."""
    key = (str(project_dir or "."), suite)
    try:
        from evalloop.config import load_settings

        settings = load_settings(Path(project_dir) if project_dir is not None else None)
        key = (str(settings.project_dir), suite)
        stamp = _stamp(settings)
        now = time.monotonic()
        with _lock:
            cached = _cache.get(key)
        if cached is not None and cached[1] == stamp and now - cached[0] < TTL_SECONDS:
            return cached[2]
        if stamp == "missing":  # nothing was ever learned: no store to open (and none created)
            text = ""
            _warn(key, f"no memory store yet at {settings.memory_file} (nothing learned): no lessons")
        else:
            text = _read(settings, suite, key)
        with _lock:
            _cache[key] = (now, stamp, text)
        return text
    except Exception as exc:  # noqa: BLE001 - a serving path never fails because of its lessons
        from evalloop.errors import EvalloopError

        _warn(key, exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}")
        return ""


def _read(settings: Settings, suite: str, key: tuple[str, str]) -> str:
    from evalloop.learning.injection import injected_for, skipped_notice
    from evalloop.suites.lookup import find_suite

    found = find_suite(suite, settings.project_dir)
    injected, notice = injected_for(settings, found)
    if notice:
        _warn(key, notice)
    if injected.skipped:
        _warn(key, skipped_notice(injected.skipped))
    return injected.text or ""


def clear_cache() -> None:
    """Forget cached lessons (tests; a process that just learned and wants them now)."""
    with _lock:
        _cache.clear()
        _warned.clear()
