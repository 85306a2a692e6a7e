"""A real scheduler served on a thread for a test: stopped and joined when the block ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from evalloop.scheduling.scheduler import serve


@contextmanager
def serving(settings, join_timeout: float = 20.0) -> Iterator[dict]:
    """``serve(settings)`` on a thread; the dict gets its exit ``code`` once it has stopped."""
    stop, result = threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(code=serve(settings, stop=stop, poll_seconds=0.1)))
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join(join_timeout)
        assert not thread.is_alive()
