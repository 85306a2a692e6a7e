"""The scheduler process's shared state: who it is, where its checkout is, what it claimed,
and whether it is stopping — read by the foreground loop, the job threads and the worker."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

from evalloop.history.locks import process_owner
from evalloop.scheduling.fire import Processes


class _Control:
    """Process-wide state shared by the foreground loop and the job threads."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.owner = process_owner()
        #: a worker's own checkout and database (``scheduler start -C DIR``): fires run there
        self.project_dir: Path | None = None
        self.url: str | None = None
        #: the fire time this scheduler claimed, by job (one fire of a job at a time)
        self.claims: dict[str, datetime] = {}
        self.stopping = threading.Event()
        self.hard = threading.Event()
        self.interrupted = 0
        self.processes = Processes()

    def cancel_all(self) -> int:
        """Stop every fire process in progress (each marks its run interrupted)."""
        self.hard.set()
        return self.processes.stop_all()


CONTROL = _Control()
