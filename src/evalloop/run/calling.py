"""Calling a target under a deadline: threads that never queue and never hold the process.

* **A deadline from the call's start.** ``timeout`` seconds count from the moment the target
  starts running — never the wait for a thread — and cover awaiting what it returned.
* **One thread per call in flight.** Sync targets that block run on :data:`THREADS`, which starts a
  thread whenever none is idle, so it grows to the run's concurrency and a call never waits
  behind others (asyncio's default pool has ``cpu + 4`` threads). A thread left behind by a
  timed-out call is replaced, not waited for, and is reused once the call returns.
* **Daemon threads, not asyncio's executor.** A hung call keeps neither ``asyncio.run`` (which
  waits for its default executor's threads) nor the interpreter (which joins non-daemon
  threads) alive at exit. Idle threads retire after ``idle_seconds``.
* **Awaitables are awaited.** A sync target that returns a coroutine (or any awaitable) is
  awaited on the loop, under the same deadline, with or without a thread.
* **A failed call keeps its traceback.** :func:`traceback_of` gives the frames of the target's
  own code (evalloop's and asyncio's left out), redacted, for ``show -v`` and ``--json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import itertools
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalloop.run.failures import TargetTimeout

_OWN = (str(Path(__file__).resolve().parent) + os.sep, str(Path(asyncio.__file__).resolve().parent) + os.sep)
TRACEBACK_CHARS = 8000


def traceback_of(exc: BaseException) -> str:
    """The traceback of a target's exception without evalloop's and asyncio's frames (the
    caller's machinery), URLs redacted, at most :data:`TRACEBACK_CHARS` (its end kept)."""
    from evalloop.redact import redact_text

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_OWN)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames),
             *traceback.format_exception_only(type(exc), exc)]
    text = redact_text("".join(lines))
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]

_NAMES = itertools.count(1)

#: what a target mostly returns, and never an awaitable: answered without ``inspect.isawaitable``
#: (whose ABC check costs a microsecond per case on a fast run)
_NEVER_AWAITABLE = frozenset({str, bytes, int, float, bool, type(None), dict, list, tuple})


def is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable``, answered at once for plain data."""
    return type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value)


class DaemonThreads:
    """A cached pool of daemon threads: an idle one takes the next job, else a new one starts."""

    def __init__(self, name: str = "evalloop-target", idle_seconds: float = 30.0) -> None:
        self.name, self.idle_seconds = name, idle_seconds
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []
        self.started = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a thread now (``job`` must not raise)."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self.started += 1
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=f"{self.name}-{next(_NAMES)}",
                             daemon=True).start()
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:     # still idle: retire
                        self._idle.remove(inbox)
                        return
                continue                        # taken just now: its job is on the way
            job()
            del job
            with self._lock:
                self._idle.append(inbox)


THREADS = DaemonThreads()


async def call(fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, *,
               in_thread: bool = False, timeout: float | None = None) -> Any:
    """``fn(*args, **kwargs)``, on a daemon thread when ``in_thread``, its awaitable result awaited.

    Raises :class:`~evalloop.run.failures.TargetTimeout` when the call (and awaiting its result)
    takes longer than ``timeout`` seconds from its start; anything ``fn`` raises passes through.
    """
    kwargs = kwargs or {}
    if in_thread:
        started, result = await _in_thread(fn, args, kwargs, timeout)
    else:
        started = time.monotonic()
        result = fn(*args, **kwargs)
    if is_awaitable(result):
        result = await _within(result, started, timeout)
    return result


async def _in_thread(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any],
                     timeout: float | None) -> tuple[float, Any]:
    loop = asyncio.get_running_loop()
    began: asyncio.Future[float] = loop.create_future()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()   # the case's context variables, as asyncio.to_thread

    def settle(future: asyncio.Future[Any], value: Any = None, error: BaseException | None = None) -> None:
        if future.done():   # the waiter timed out or was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def post(future: asyncio.Future[Any], value: Any = None, error: BaseException | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this call any more
            loop.call_soon_threadsafe(settle, future, value, error)

    def job() -> None:
        if timeout is not None:  # the deadline counts from here: the loop is told when it began
            post(began, time.monotonic())
        try:
            value = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
            post(done, error=exc)
        else:
            post(done, value)

    THREADS.submit(job)
    if timeout is None:  # no deadline: one wake-up of the loop a call, not two
        return 0.0, await done
    started = await began          # no deadline while a thread picks the call up
    return started, await _within(done, started, timeout)


async def _within(awaitable: Any, started: float, timeout: float | None) -> Any:
    if timeout is None:
        return await awaitable
    remaining = timeout - (time.monotonic() - started)
    if remaining <= 0:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise TargetTimeout(timeout)
    try:
        async with asyncio.timeout(remaining) as deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise TargetTimeout(timeout) from None
        raise  # the target's own timeout (its network call): not the suite's deadline
