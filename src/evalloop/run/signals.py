"""SIGTERM handled like Ctrl-C: the run in progress keeps what finished and is marked interrupted.

systemd, Docker and Kubernetes stop a process with SIGTERM. Inside :func:`terminate_as_interrupt`
a SIGTERM cancels the running asyncio tasks (the runner then flushes the finished cases and
marks the run ``interrupted``, as on SIGINT) and the block ends in :class:`Terminated`, a
``KeyboardInterrupt`` whose ``exit_code`` is 143 (128 + SIGTERM), the code a supervisor expects.
A second SIGTERM while cleaning up stops at once.

A sync target called in place (on the loop's own thread, see ``Target.inline``) holds the loop,
so a cancelled task would only notice when the call returns — a slow case kept Ctrl-C waiting for
the rest of the run. While such a call runs (:data:`IN_PLACE`), SIGINT and SIGTERM raise right
there, inside the call, and the run is marked interrupted as on any other path
(:func:`interrupt_in_place` installs the SIGINT side for the duration of a run).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_CODE = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """The process was asked to stop with SIGTERM."""

    exit_code = EXIT_CODE


class _InPlace:
    """Whether a sync target is running in place on the main thread (``active``), and a stop
    asked for while it was not (``pending``: the next call in place raises at once)."""

    __slots__ = ("active", "pending")

    def __init__(self) -> None:
        self.active = False
        self.pending: type[KeyboardInterrupt] | None = None

    def enter(self) -> None:
        """Before a call in place: raise a stop that came while none was running."""
        if self.pending is not None:
            stop, self.pending = self.pending, None
            raise stop()
        self.active = True

    def stop(self, kind: type[KeyboardInterrupt]) -> bool:
        """A signal arrived: raise it inside the running call (True: it was raised)."""
        if self.active:
            self.active = False
            raise kind()
        self.pending = kind
        return False


IN_PLACE = _InPlace()


@contextlib.contextmanager
def interrupt_in_place() -> Iterator[None]:
    """Within the block (a run on the main thread), Ctrl-C during a call in place raises
    KeyboardInterrupt inside it; otherwise it is asyncio's (the run's tasks are cancelled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_int(signum: int, frame: FrameType | None) -> None:
        IN_PLACE.stop(KeyboardInterrupt)
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_int)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        IN_PLACE.active, IN_PLACE.pending = False, None


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM interrupts the work like SIGINT does; the block raises Terminated.

    A no-op outside the main thread (Python delivers signals to the main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no run in progress: stop where we are
            raise Terminated() from None
        if received > 1:
            raise Terminated()
        IN_PLACE.stop(Terminated)  # a sync call in place stops here, now
        for task in asyncio.all_tasks(loop):
            task.cancel("SIGTERM")
        # the loop may sleep in select() until its next timer (a target's long await): wake it
        # so the cancellations run now, as asyncio's own SIGINT handler does
        loop.call_soon_threadsafe(lambda: None)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        if received and not isinstance(exc, Terminated):
            raise Terminated() from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:  # the work ended anyway (it finished as the signal came)
        raise Terminated()
