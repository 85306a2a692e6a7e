"""Fault injection: named points where this process dies at once, for tests of crash safety.

A step that must survive a ``kill -9`` calls :func:`point` with its name between its writes;
a test sets ``EVALLOOP_FAULT`` to that name (or several, comma-separated) and the process is
killed there with SIGKILL — deterministically, with no timing involved. Unset (always, outside
tests) a point costs one look at the ``EVALLOOP_*`` variables
(:func:`evalloop.environ.environment`). The points are listed where they are used (e.g.
:data:`evalloop.history.swap.KILL_POINTS`).
"""

from __future__ import annotations

import os
import signal

ENV = "EVALLOOP_FAULT"


def point(name: str) -> None:
    """Die here (SIGKILL, as ``kill -9``) when ``EVALLOOP_FAULT`` names this point."""
    from evalloop.environ import environment

    wanted = environment().fault
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
