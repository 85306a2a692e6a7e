"""``python -m evalloop``: the command line (scheduled fires run themselves this way)."""

import os

from evalloop.cli import main


def _die_with_the_scheduler() -> None:
    """A fire's process ends (SIGTERM: flushed, marked interrupted) when its scheduler dies.

    The scheduler names itself in ``EVALLOOP_FIRE_PARENT``; on Linux the kernel sends SIGTERM
    when that parent goes away, even by SIGKILL, so no run outlives a killed scheduler unseen.
    """
    from evalloop.environ import environment, variable
    from evalloop.errors import ConfigError

    try:
        parent = environment().fire_parent
    except ConfigError:  # a bad EVALLOOP_* value: the command says so, in its one line
        return
    if parent is None:
        return
    os.environ.pop(variable("fire_parent"))  # for this process only: not for what it starts
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the run's lease lapses and a reaper marks it
        return
    if os.getppid() != parent:  # the scheduler died before the request took effect
        raise SystemExit(143)


if __name__ == "__main__":
    _die_with_the_scheduler()
    main()
