"""The scheduler process's shared state: who it is, what it claimed, and whether it is
stopping — read by the foreground loop, the job threads and the worker."""

from __future__ import annotations

import threading
from datetime import datetime

from evalloop.history.locks import process_owner
from evalloop.scheduling.fire import Processes


class _Control:
    """Process-wide state shared by the foreground loop and the job threads."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.owner = process_owner()
        #: the serving scheduler's database: where a fire whose settings cannot load says so (the
        #: checkout a fire runs in is the job's argument, see ``ClaimingExecutor``)
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
