"""SIGTERM handled like Ctrl-C: the run in progress keeps what finished and is marked interrupted.

systemd, Docker and Kubernetes stop a process with SIGTERM. Inside :func:`terminate_as_interrupt`
a SIGTERM cancels the running asyncio tasks (the runner then flushes the finished cases and
marks the run ``interrupted``, as on SIGINT) and the block ends in :class:`Terminated`, a
``KeyboardInterrupt`` whose ``exit_code`` is 143 (128 + SIGTERM), the code a supervisor expects.
A second SIGTERM while cleaning up stops at once.
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
        for task in asyncio.all_tasks(loop):
            task.cancel("SIGTERM")

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
