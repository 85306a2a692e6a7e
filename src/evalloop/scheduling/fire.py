"""One suite of a scheduled fire, run in a fresh process: today's code, isolated, stoppable.

The scheduler never imports the system under test. Each suite of each fire runs as
``python -m evalloop run --suite S -C PROJECT --json --notify`` — the same code path as
``evalloop run`` — in a new process, so a deploy takes effect at the next fire without a
restart, a target that crashes or hangs the interpreter cannot take the scheduler down, and
a run that overruns ``fire_timeout_seconds`` is stopped (SIGTERM: the run is marked
interrupted; SIGKILL after a grace period). The child sends its run to the sinks itself
(``--notify``, a documented option of ``evalloop run``) and prints its JSON summary, the dump
of :class:`evalloop.report.summary.RunSummary`; the scheduler reads it back with that model.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalloop.environ import variable
from evalloop.report.summary import RunSummary, SummaryError

log = logging.getLogger("evalloop.scheduler")

#: seconds a fire process gets after SIGTERM (to mark its run interrupted) before SIGKILL
TERM_GRACE_SECONDS = 30.0


@dataclass
class FireResult:
    """What one suite's fire process did."""

    status: str  # completed | interrupted | error
    verdict: str | None = None
    run_id: str | None = None
    detail: str | None = None
    exit_code: int | None = None
    summary: RunSummary | None = None


def fire_argv(project_dir: str, suite: str, options: dict[str, Any] | None = None) -> list[str]:
    """The command of one suite's fire: this interpreter, the installed evalloop, as a CLI run;
    a schedule's ``options`` (``batch``, ``max_cost``) as the run's flags, and ``resume`` (a run id)
    to collect a killed batch run's batches instead of submitting again."""
    options = options or {}
    which = ["--resume", str(options["resume"])] if options.get("resume") else ["--suite", suite]
    extra = ["--batch"] if options.get("batch") else []
    if options.get("max_cost") is not None:
        extra += ["--max-cost", repr(float(options["max_cost"]))]
    return [sys.executable, "-m", "evalloop", "run", *which, "--project", str(project_dir),
            "--json", "--no-cases", "--no-fail-on-regression", "--notify", "--nightly", *extra]


def fire_line(job_id: str, suite: str, result: FireResult) -> tuple[int, str]:
    """The scheduler's one log line for one suite of a fire, and its level: ERROR when the fire
    did not complete, WARNING when the run fails (regression, broken scorer, invalid run), else
    INFO. A failing run's line names its failing scorers and their first newly failing cases."""
    if result.status != "completed":
        return logging.ERROR, f"{job_id}: {suite}: {result.detail}"
    line = f"{job_id}: {suite} run {result.run_id}: {result.verdict}"
    doc = result.summary
    if doc is None or not doc.fails:
        return logging.INFO, line
    why = []
    for s in doc.scorers:
        if not s.fails:
            continue
        part = f"{s.scorer} {s.verdict}"
        if s.current is not None and s.baseline is not None:
            part += f" {s.baseline:.3f} → {s.current:.3f}"
        cases = [c.case for c in s.newly_failing]
        if cases:
            more = f" (+{len(cases) - 5} more)" if len(cases) > 5 else ""
            part += f", newly failing: {', '.join(cases[:5])}{more}"
        why.append(part)
    if not doc.valid and doc.invalid_reason:
        why.append(doc.invalid_reason)
    return logging.WARNING, line + (f" — {'; '.join(why)}" if why else "")


def run_fire(project_dir: str, suite: str, *, timeout: float | None, processes: Processes | None = None,
             stop_requested: Callable[[], bool] = lambda: False,
             options: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> FireResult:
    """Run one suite in a fresh process and wait for it; never raises for what the run did.
    ``env``: more environment for the run (the ledger entry it belongs to)."""
    env = {**os.environ, variable("project"): str(project_dir), "NO_COLOR": "1",
           variable("fire_parent"): str(os.getpid()), **(env or {})}  # the fire ends if the scheduler dies
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(fire_argv(project_dir, suite, options), stdout=stdout, stderr=stderr,
                                    stdin=subprocess.DEVNULL, cwd=project_dir, env=env,
                                    start_new_session=True)  # a terminal's Ctrl-C is the scheduler's
        except OSError as exc:
            return FireResult("error", detail=f"cannot start the fire process: {exc}")
        if processes is not None:
            processes.add(proc)
        try:
            why = _wait(proc, timeout, started, stop_requested)
        finally:
            if processes is not None:
                processes.discard(proc)
        stdout.seek(0)
        stderr.seek(0)
        out_text = stdout.read().decode("utf-8", "replace")
        err_text = stderr.read().decode("utf-8", "replace")
    for line in err_text.splitlines():  # the fire's own line says the outcome: the child's
        if line.strip():                 # notices are detail, a failing sink an error of its own,
            log.log(_level(line), "%s: %s", suite, line)  # a damaged store something to mend
    return _result(proc.returncode, out_text, err_text, why, timeout)


def _level(line: str) -> int:
    """The log level of one line the fire's process printed: ERROR for a failing sink, WARNING
    for a store it went on without (its one line names `evalloop doctor`), else DEBUG."""
    if line.startswith("ERROR "):
        return logging.ERROR
    return logging.WARNING if "evalloop doctor" in line else logging.DEBUG


def _wait(proc: subprocess.Popen[bytes], timeout: float | None, started: float,
          stop_requested: Callable[[], bool]) -> str | None:
    """Wait for the process; stop it when it overruns or the scheduler is told to interrupt."""
    why = None
    while proc.poll() is None:
        if why is None and timeout is not None and time.monotonic() - started > timeout:
            why = "overran"
        elif why is None and stop_requested():
            why = "stopped"
        if why is not None:
            terminate(proc)
            break
        time.sleep(0.05)
    return why


def terminate(proc: subprocess.Popen[bytes], grace: float = TERM_GRACE_SECONDS) -> None:
    """SIGTERM (the run is flushed and marked interrupted), then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()


def _result(code: int | None, out_text: str, err_text: str, why: str | None,
            timeout: float | None) -> FireResult:
    summary, malformed = _summary(out_text)
    last_error = next((line for line in reversed(err_text.splitlines()) if line.startswith("error:")), None)
    if why == "overran":
        return FireResult("error", detail=f"overran fire_timeout_seconds ({timeout:g} s): stopped",
                          exit_code=code, run_id=summary.run_id if summary else None)
    if why == "stopped" or code in (130, 143, -signal.SIGTERM, -signal.SIGINT):
        return FireResult("interrupted", detail="scheduler stopped mid-run", exit_code=code)
    if summary is not None and code in (0, 1):
        return FireResult("completed", verdict=summary.outcome, run_id=summary.run_id,
                          exit_code=code, summary=summary)
    if last_error:
        return FireResult("error", detail=last_error.removeprefix("error: "), exit_code=code)
    if code in (0, 1):  # the run ended as runs do, but what it printed is not its summary
        return FireResult("error", exit_code=code,
                          detail=f"the fire process exited {code} without a run summary: {malformed}; "
                                 "run `evalloop run --suite SUITE --json` in the checkout to see its output")
    tail = [line for line in err_text.splitlines() if line.strip()][-1:]
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
    return FireResult("error", detail=f"the fire process {how}" + (f": {tail[0][:300]}" if tail else ""),
                      exit_code=code)


def _summary(text: str) -> tuple[RunSummary | None, str]:
    """The child's run summary, or None and why not (one line)."""
    try:
        return RunSummary.from_output(text), ""
    except SummaryError as exc:
        return None, str(exc)


class Processes:
    """The fire processes in flight, so that a second signal can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs[proc.pid] = proc

    def discard(self, proc: subprocess.Popen[bytes] | None) -> None:
        if proc is not None:
            with self._lock:
                self._procs.pop(proc.pid, None)

    def stop_all(self) -> int:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            threading.Thread(target=terminate, args=(proc,), daemon=True).start()
        return len(procs)

