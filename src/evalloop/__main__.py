"""``python -m evalloop``: the command line (scheduled fires run themselves this way)."""

import os

from evalloop.cli import main


def _die_with_the_scheduler() -> None:
    """A fire's process ends (SIGTERM: flushed, marked interrupted) when its scheduler dies.

    The scheduler names itself in ``EVALLOOP_FIRE_PARENT``; on Linux the kernel sends SIGTERM
    when that parent goes away, even by SIGKILL, so no run outlives a killed scheduler unseen.
    """
    parent = os.environ.pop("EVALLOOP_FIRE_PARENT", None)
    if not parent:
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the run's lease lapses and a reaper marks it
        return
    if str(os.getppid()) != parent:  # the scheduler died before the request took effect
        raise SystemExit(143)


if __name__ == "__main__":
    _die_with_the_scheduler()
    main()
