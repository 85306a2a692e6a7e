"""How the ``evalloop`` process ends: its work done and flushed, without the interpreter's teardown.

After a 10,000-case run, tearing the interpreter down (clearing ~700 modules and collecting the
hundreds of thousands of objects SQLAlchemy, pydantic and the run left behind) costs more CPU
than reading the cases. When evalloop is the program (the console script, ``python -m
evalloop``), :func:`leave` ends it the way the interpreter would, minus that teardown:

1. threads are waited for (executors told to end their workers, non-daemon threads joined)
   and the ``atexit`` handlers run, as at a normal exit;
2. every stdlib ``sqlite3`` connection still open is closed (so the last one checkpoints its WAL
   and removes the ``-wal``/``-shm`` files, as a garbage-collected connection would) and every
   file still open for writing is flushed. Connections of other SQLite drivers (sqlean,
   pysqlite3) are invisible to the collector: evalloop closes its own (the memory store) before
   this point; one a target leaves open keeps what it committed in its WAL file, which the next
   open of the database replays;
3. stdout and stderr are flushed, then ``os._exit`` ends the process with the exit code.

Called in-process (tests, embedders calling :func:`evalloop.cli.main`), nothing of this happens:
``main`` raises ``SystemExit`` as before.

The program runs numpy's BLAS on one thread unless the user chose (:func:`one_blas_thread`), and
skips the cyclic garbage collector while it starts (:func:`hold_collector`, until the command is
known) and while a run sets up (:func:`setting_up`): what loads then lives until the end, so
collecting it is wasted work. evalloop's own modules and libraries are frozen
out of the collector for good once loaded, before any of the user's code, suite or database is
touched (:func:`own_code_loaded`); they hold no leftover, so step 2 scans only what came after
(a 10,000-case run: ≈ 20,000 objects instead of ≈ 120,000, 2 ms instead of ≈ 25 ms).
"""

from __future__ import annotations

import atexit
import gc
import io
import itertools
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

#: what a teardown would close or flush: SQLite connections, files open for writing
_LEFTOVERS = (sqlite3.Connection, io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)


#: whether evalloop is the program (set by :func:`evalloop.cli.main`), not a library in a process
PROGRAM = False
#: whether :func:`hold_collector` turned the collector off while the program starts
_HELD = False
#: when :func:`evalloop.cli.main` was called (``time.monotonic()``), in or out of the program
CALLED: float | None = None


def process_age() -> float | None:
    """Seconds since this process started (Linux: its start time in /proc, to 10 ms), else None."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / ticks)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def waited(since: float) -> float:
    """The seconds the user has waited for the command: since the process started when evalloop
    is the program (where the start is unknown, since :func:`evalloop.cli.main` was called, which
    leaves out the interpreter's own start, ≈ 20 ms), since ``main`` was called in a process
    that embeds it, else since ``since`` (a command invoked without ``main``)."""
    now = time.monotonic()
    if PROGRAM:
        age = process_age()
        if age is not None:
            return age
    return now - (CALLED if CALLED is not None else since)


def launched_as_program() -> bool:
    """Before ``main`` is bound: whether ``__main__`` is evalloop's console script (a file named
    exactly ``evalloop``) or ``python -m evalloop``."""
    top = sys.modules.get("__main__")
    spec = getattr(top, "__spec__", None)
    if spec is not None and spec.name == "evalloop.__main__":
        return True
    return os.path.basename(getattr(top, "__file__", None) or "") == "evalloop"


def hold_collector() -> None:
    """As the command line starts in its own process: no garbage collection while evalloop's
    modules and libraries load (they live until the end; collecting them is wasted work,
    ≈ 20–30 ms of a run). :func:`evalloop.cli.main` turns it back on for every command but ``run``,
    whose set-up (:func:`setting_up`) turns it on once the suites are checked; a process that
    imports evalloop as a library is left alone."""
    global _HELD
    if gc.isenabled() and launched_as_program():
        gc.disable()
        _HELD = True


def release_collector() -> None:
    """Turn the collector back on if :func:`hold_collector` turned it off."""
    global _HELD
    if _HELD:
        _HELD = False
        gc.enable()


def is_program(entry: Any) -> bool:
    """Whether ``entry`` is the program's own entry point: the ``__main__`` module is the console
    script or ``python -m evalloop`` and imported it as ``main``. pytest's is not, nor a script
    of the user's that calls it (it may catch ``SystemExit`` and carry on)."""
    top = sys.modules.get("__main__")
    if getattr(top, "main", None) is not entry:
        return False
    spec = getattr(top, "__spec__", None)
    return (spec is not None and spec.name == "evalloop.__main__") \
        or os.path.basename(getattr(top, "__file__", None) or "").split(".")[0] == "evalloop"


#: the variables OpenBLAS (numpy's wheels), MKL and OpenMP read for their thread count
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """In the program, before numpy loads: BLAS on one thread, unless a thread variable is set.

    OpenBLAS starts a worker per core when numpy is imported, and on two busy cores that start
    costs a run ≈ 0.1 s of CPU (spinning), more than any matrix product of evalloop's saves: its vectors are
    pooled by table look-ups and compared one query at a time. A target that wants threaded BLAS
    in the process sets ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``) itself."""
    if not any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def starting(command: str | None) -> None:
    """In the program, once the command is known and before Typer parses it: a ``run`` imports
    numpy first and keeps the collector off (:func:`hold_collector`) through its set-up; every
    other command turns it back on now.

    numpy first: on Python 3.11, typing_extensions (which Typer's pydantic brings in) replaces
    ``typing``'s parameter collection with a slower one, and numpy's typing modules — hundreds of
    ``Literal`` types — then take three times as long to import (≈ 30 ms of every run). Other
    commands, some of which never need numpy, are left as they are."""
    if command != "run":
        release_collector()
        return
    if not PROGRAM or sys.version_info >= (3, 12) or "numpy" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.disable()  # as in setting_up: what loads now lives until the end
    try:
        import numpy  # noqa: F401
    finally:
        if enabled:
            gc.enable()


def die_with_the_scheduler() -> None:
    """A fire's process ends (SIGTERM: flushed, marked interrupted) when its scheduler dies.

    The scheduler names itself in ``EVALLOOP_FIRE_PARENT``; on Linux the kernel sends SIGTERM
    when that parent goes away, even by SIGKILL, so no run outlives a killed scheduler unseen.
    Called by the program once its command is known (after :func:`starting`: a run's numpy is
    imported before the environment model's pydantic).
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


@contextmanager
def setting_up() -> Iterator[None]:
    """In the program: no garbage collection while the run's modules and cases load (a process
    that imports evalloop is left alone)."""
    if not PROGRAM or not (gc.isenabled() or _HELD):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        release_collector()
        gc.enable()


def own_code_loaded() -> None:
    """In the program, once evalloop's modules are loaded and before the user's code (targets,
    scorers), a suite or a database is touched: freeze what is loaded out of the collector.

    Every object frozen here is evalloop's or a library's, made on import; none of them is a file
    open for writing or a SQLite connection (a test checks it), so the ending never scans them."""
    if PROGRAM:
        gc.freeze()


def exit_status(code: object) -> int:
    """The process status ``SystemExit(code)`` gives (a message is printed and means 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def leave(code: object) -> NoReturn:
    """End the process with ``code`` as :class:`SystemExit` would, without the interpreter teardown."""
    status = exit_status(code)
    _wait_for_threads()
    atexit._run_exitfuncs()
    _close_leftovers()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe (`evalloop … | head`): nothing more to say
            pass
    os._exit(status)


def _wait_for_threads() -> None:
    """What the interpreter does before the atexit handlers: its thread hooks (an executor tells
    its idle workers to end), then it joins every non-daemon thread."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        shutdown()
        return
    current = threading.current_thread()  # pragma: no cover - a Python without the hook
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()


def leftovers() -> list[Any]:
    """The stdlib SQLite connections and the file objects (open or not) among the objects the
    collector tracks, leaving out what :func:`own_code_loaded` froze."""
    kinds: set[type] = set()
    pending = list(_LEFTOVERS)
    while pending:  # the types and every subclass of them that exists now
        kind = pending.pop()
        if kind not in kinds:
            kinds.add(kind)
            pending.extend(kind.__subclasses__())
    objects = gc.get_objects()
    # by exact type, never isinstance (a proxy's __class__ could run code); one C-level pass
    return list(itertools.compress(objects, map(kinds.__contains__, map(type, objects))))


def _close_leftovers() -> None:
    """Close open SQLite connections and flush files open for writing, as their deallocation would."""
    for obj in leftovers():
        try:
            if isinstance(obj, sqlite3.Connection):
                obj.close()
            elif not obj.closed:
                obj.flush()
        except Exception:  # noqa: BLE001 - another thread's connection, a broken file: as at teardown
            continue
