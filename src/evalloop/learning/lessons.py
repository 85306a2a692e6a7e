"""``evalloop.lessons(suite)``: the suite's lessons for a system's own prompts at serving time.

The text is the one an eval run injects (:func:`evalloop.learning.injection.injected_for`: the
suite's open incidents, newest first, without any that shows a held-out case, each fenced as
untrusted data, within the injection budget), so production prompts and eval runs see the same
lessons. It is meant for a hot path, so it never waits long and never raises into the caller:

- **cached** per (project, suite) for :data:`TTL_SECONDS` and while the embedded store's file is
  unchanged: no LLM call, no embedding;
- **a bounded wait**: the store is read on a worker thread, and the caller waits at most
  ``wait`` seconds (``lessons_wait``, default :data:`WAIT_SECONDS`); when the read is late or
  fails, the caller gets the **last good value** (``""`` when there never was one) and the read
  goes on in the background, its result kept for the next call. A late or failed read never
  replaces a good value with ``""``;
- **a circuit breaker**: after :data:`BREAK_AFTER` failures in a row (a read that raised, or a
  wait that ran out), no read is started for :data:`COOL_SECONDS`; the last good value is served.
  The first read after that is a probe: one more failure opens the breaker again, a success
  closes it;
- a missing store, a missing suite or bad settings give the last good value or ``""`` and one
  logged warning per problem and process (``evalloop.lessons`` logger).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings load lazily: a hot path imports only what it uses
    from evalloop.config import Settings

log = logging.getLogger("evalloop.lessons")

TTL_SECONDS = 30.0
WAIT_SECONDS = 0.3
BREAK_AFTER = 3
COOL_SECONDS = 30.0


@dataclass
class _Slot:
    """What is known of one (project, suite): its last good text, and the state of its reads."""

    good: str | None = None       # the last text read without a problem
    good_at: float = float("-inf")  # when (monotonic)
    stamp: object = None          # the embedded store's stamp it was read at
    reading: threading.Event | None = None  # set when the read in flight ends
    failures: int = 0             # failed reads and waits that ran out, in a row
    open_until: float = 0.0       # the breaker is open (no read starts) until then


_slots: dict[tuple[str, str], _Slot] = {}
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


def _failed(slot: _Slot, now: float) -> None:
    """Count one failure (under the lock); the :data:`BREAK_AFTER`-th in a row opens the breaker."""
    slot.failures += 1
    if slot.failures >= BREAK_AFTER:
        slot.open_until = now + COOL_SECONDS


def lessons(suite: str, project_dir: str | Path | None = None, *, wait: float | None = None) -> str:
    """The suite's lessons as fenced prompt text ("" when there are none); within ``wait`` seconds
    (default: the ``lessons_wait`` setting, 0.3 s), else the last good value; never raises."""
    key = (str(project_dir or "."), suite)
    try:
        from evalloop.config import load_settings

        settings = load_settings(Path(project_dir) if project_dir is not None else None)
        key = (str(settings.project_dir), suite)
        stamp = _stamp(settings)
        wait = settings.lessons_wait if wait is None else wait
    except Exception as exc:  # noqa: BLE001 - a serving path never fails because of its lessons
        _warn(key, _line(exc))
        return _last(key)
    now = time.monotonic()
    with _lock:
        slot = _slots.setdefault(key, _Slot())
        if slot.good is not None and slot.stamp == stamp and now - slot.good_at < TTL_SECONDS:
            return slot.good
        if stamp == "missing":  # nothing was ever learned: no store to open (and none created)
            slot.good, slot.good_at, slot.stamp = "", now, stamp
            missing = True
        else:
            missing = False
            if now < slot.open_until:
                return slot.good or ""
            if slot.reading is None:
                slot.reading = threading.Event()
                threading.Thread(target=_read_into, args=(slot, settings, suite, key, stamp, slot.reading),
                                 name=f"evalloop-lessons-{suite}", daemon=True).start()
            done = slot.reading
    if missing:
        _warn(key, f"no memory store yet at {settings.memory_file} (nothing learned): no lessons")
        return ""
    if not done.wait(wait):
        with _lock:
            _failed(slot, time.monotonic())
        _warn(key, f"the memory store did not answer within {wait:g} s: serving the last good lessons, "
                   f"if any (the read goes on in the background)")
    with _lock:
        return slot.good or ""


def _read_into(slot: _Slot, settings: Settings, suite: str, key: tuple[str, str], stamp: object,
               done: threading.Event) -> None:
    """The worker: read the lessons, keep a good result, count a failure; wake the waiters."""
    try:
        text, problem = _read(settings, suite, key), None
    except Exception as exc:  # noqa: BLE001 - counted and logged, never raised
        text, problem = None, _line(exc)
    if problem:
        _warn(key, problem)
    with _lock:
        now = time.monotonic()
        if text is not None:
            slot.good, slot.good_at, slot.stamp = text, now, stamp
            slot.failures, slot.open_until = 0, 0.0
        else:
            _failed(slot, now)
        slot.reading = None
    done.set()


def _read(settings: Settings, suite: str, key: tuple[str, str]) -> str | None:
    """The lessons as an eval run would inject them; None when the store could not be read."""
    from evalloop.learning.injection import injected_for, skipped_notice
    from evalloop.suites.lookup import find_suite

    found = find_suite(suite, settings.project_dir)
    injected, notice = injected_for(settings, found)
    if notice:  # the memories could not be read: a failure, not "no lessons"
        _warn(key, notice)
        return None
    if injected.skipped:
        _warn(key, skipped_notice(injected.skipped))
    return injected.text or ""


def _line(exc: Exception) -> str:
    from evalloop.errors import EvalloopError

    return exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"


def _last(key: tuple[str, str]) -> str:
    with _lock:
        slot = _slots.get(key)
        return slot.good or "" if slot is not None else ""


def clear_cache() -> None:
    """Forget cached lessons and the breakers' state (tests; a process that just learned and wants
    them now). A read still in flight finishes into a slot nobody reads."""
    with _lock:
        _slots.clear()
        _warned.clear()
