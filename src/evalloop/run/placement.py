"""Where a run calls a sync target: in place on the event loop's thread, or on threads.

A call in place costs nothing (no thread, no future) but holds the loop: while it blocks, no other
case runs. A call on a thread (:mod:`evalloop.run.calling`) costs tens of microseconds but lets
the suite's ``concurrency`` calls wait at once. The suite's ``target_threads`` decides:

* ``true`` — every call on a thread; so does a ``timeout:`` (a call in place cannot be cut);
* ``false`` — every call in place (a target that is not thread-safe); with ``timeout:`` the
  suite is refused, since a call in place cannot be cut at its deadline;
* unset (the default) — **adaptive**: calls run in place while they return without waiting, and
  the run moves to threads, for the rest of the run, once a call in place has *waited* (wall
  time minus the thread's own CPU time) :data:`LONG_WAIT` seconds or more, or :data:`WAITS`
  calls have waited :data:`WAITED` seconds or more — a network call, a sleep, a lock, a
  subprocess. A call that only computes stays in place (threads would not run Python faster),
  as does a one-off slow first call (loading a model).

Measuring a call's CPU time costs about a microsecond, so only some calls are measured: the run's
first :data:`PROBE` calls, and the :data:`PROBE` calls after any call that held the loop
:data:`SLOW` seconds or more; a fast target's run pays one clock read per case. A short wait
counts only the second time, so that a call the operating system preempted on a busy machine does
not move a fast target; a blocking LLM or HTTP call (tenths of a second) moves the run at once.
An async target is always called in place (its awaits let the other cases run).

A target that works in place may not work on a thread: a SQLite connection opened at import
("objects created in a thread can only be used in that same thread"), ``signal.signal`` for a
time limit ("only works in main thread"). When a run moved to threads on its own, a call that
fails that way (:func:`thread_bound`) moves the run back in place for good and is made again there
(:func:`call_on_thread`), so the default never turns a working target into failed cases; the run's
notes say so. A suite that asks for threads (``target_threads: true``, ``timeout:``) gets the error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalloop.run.calling import is_awaitable
from evalloop.run.signals import IN_PLACE

if TYPE_CHECKING:
    from evalloop.run.targets import Target

__all__ = ["LONG_WAIT", "PROBE", "SLOW", "WAITED", "WAITS", "Placement", "call_on_thread", "thread_bound"]

SLOW = 0.001    #: seconds a call in place held the loop for the calls after it to be measured
WAITED = 0.001  #: seconds of waiting (wall − own CPU) that count a measured call as blocking
WAITS = 2       #: blocking calls that move a run to threads
LONG_WAIT = 0.05  #: seconds of waiting in one call that move a run to threads at once
PROBE = 32      #: calls measured at the start of a run and after each slow call


class Placement:
    """One run's placement of its target's calls (see the module docstring).

    ``inline``: call in place (no thread and no deadline); ``threads``: a sync target's calls go
    to a thread; ``probing``: how many more calls in place to measure (0: only the clock).
    """

    __slots__ = ("_waits", "adaptive", "back", "inline", "moved", "probing", "threads")

    def __init__(self, mode: bool | None, *, is_async: bool, timeout: float | None) -> None:
        self.threads = not is_async and (mode is True or (mode is None and timeout is not None))
        self.inline = not self.threads and timeout is None
        self.adaptive = mode is None and not is_async and self.inline
        self.probing = PROBE if self.adaptive else 0
        self.moved = False   # the run moved to threads
        self.back: str | None = None  # why it moved back in place (a call failed on a thread)
        self._waits = 0

    def held(self, wall: float, cpu: float | None) -> None:
        """A call in place held the loop ``wall`` seconds, ``cpu`` of them its own CPU time (None:
        not measured). The runner reports every measured call and every call of ``SLOW`` or more."""
        if not self.adaptive:
            return
        if cpu is not None and wall - cpu >= WAITED:
            self._waits += WAITS if wall - cpu >= LONG_WAIT else 1
            if self._waits >= WAITS:
                self.adaptive, self.inline, self.threads, self.probing = False, False, True, 0
                self.moved = True
                return
        if wall >= SLOW:
            self.probing = PROBE
        elif cpu is not None:
            self.probing -= 1

    def move_back(self, why: str) -> None:
        """A call failed on a thread the run moved to by itself: in place for the rest of the run."""
        self.inline, self.threads, self.back = True, False, self.back or why

    def describe(self) -> str | None:
        """A line for the run's notes when the run moved to threads (and back)."""
        if not self.moved:
            return None
        if self.back is not None:
            return f"in place, on threads once calls blocked, in place again: a call failed on a thread ({self.back})"
        return "in place, then on threads once calls blocked"


#: words of the errors a call gives on a thread when it only works on the thread it was set up on
_THREAD_WORDS = ("thread", "main loop")


def thread_bound(exc: BaseException) -> bool:
    """Whether a call failed for running on a thread (an error, or its cause, that says so: SQLite's
    same-thread check, ``signal`` outside the main thread, an event loop or GUI loop of the main
    thread)."""
    link: BaseException | None = exc
    for _ in range(8):
        if link is None:
            return False
        if any(word in str(link).lower() for word in _THREAD_WORDS):
            return True
        link = link.__cause__ or link.__context__
    return False


async def call_on_thread(placement: Placement, target: Target, input: Any, ctx: Any,
                         timeout: float | None) -> Any:
    """Call the target where ``placement`` puts a call that is not in place; when the run moved to
    threads by itself and the call fails for being on a thread, move the run back and call again
    in place (see the module docstring)."""
    on_thread = placement.threads
    try:
        return await target(input, ctx, timeout=timeout, in_thread=on_thread)
    except Exception as exc:
        if not (on_thread and placement.moved and thread_bound(exc)):
            raise
        placement.move_back(f"{type(exc).__name__}: {str(exc)[:120]}")
    IN_PLACE.enter()
    try:
        output = target.start(input, ctx)
    finally:
        IN_PLACE.active = False
    return await output if is_awaitable(output) else output
