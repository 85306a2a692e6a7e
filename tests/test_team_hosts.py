"""Three scheduler workers as three simulated hosts on one real PostgreSQL; one host dies (issue #28).

Each host is a set of Linux namespaces made with ``unshare``: its own hostname (UTS), its own
PID namespace (its pids mean nothing to the others) and its own mount namespace, in which the
other hosts' checkouts are hidden under a tmpfs, so each worker sees only its own checkout, at
a path of its own. A schedule fires every 10 s a suite that runs ~8 s. The host running the
first fire is killed with SIGKILL (its namespace's init: every process of the host dies at
once, no handler runs). With the default leases (a heartbeat every 5 s, taken over after 4
missed), the next fire completes on another host within a minute, the dead fire's run is
``interrupted`` and its ledger row is closed with that run's id. The figures are printed
(``-s``) and quoted in docs/deployment.md.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from evalloop.config import load_settings
from evalloop.history.engine import get_engine
from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore
from evalloop.scheduling.ledger import ENTRIES, LedgerEntry
from evalloop.scheduling.scheduler import add_schedule
from support.project import SLOW_TARGET, make_project, slow_suite, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
PATHS = {"host-a": "srv/evals", "host-b": "home/ci/evalloop", "host-c": "opt/checkout"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="simulated hosts need root and unshare (Linux namespaces)")


def start_host(name: str, hosts: Path, url: str, log: Path) -> subprocess.Popen:
    """A worker in its own UTS, PID and mount namespaces, seeing only its own checkout."""
    hide = "".join(f"mount -t tmpfs none {hosts / other}; " for other in PATHS if other != name)
    script = (f"hostname {name}; {hide}"
              f"{EVALLOOP} scheduler start --poll 0.5 -C {hosts / name / PATHS[name]}")
    return subprocess.Popen(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "--propagation", "private",
                             "--kill-child", "sh", "-c", script],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"),  # noqa: SIM115
                            env={**os.environ, "NO_COLOR": "1", "EVALLOOP_HISTORY_URL": url})


def kill_host(proc: subprocess.Popen) -> None:
    """SIGKILL the host's init (PID 1 of its namespace): the kernel kills every process in it."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    for pid in children:
        os.kill(int(pid), signal.SIGKILL)
    proc.wait(30)


def rows(url: str) -> list[tuple[int, LedgerEntry]]:
    """The ledger read directly (``ledger.entries`` would close dead rows itself: the taker must)."""
    with get_engine(url).connect() as conn:
        found = conn.execute(select(ENTRIES).where(ENTRIES.c.job_id == "nightly").order_by(ENTRIES.c.id))
        return [(r.id, LedgerEntry.model_validate({k: v for k, v in r._mapping.items() if k != "id"}))
                for r in found]


def test_a_dead_hosts_suite_is_taken_over_and_its_next_fires_complete_elsewhere(tmp_path, pg_server):
    url = pg_server.create_database()
    hosts = tmp_path / "hosts"
    for name, path in PATHS.items():
        make_project(hosts / name / path, {"slow": slow_suite(16, 0.5)}, target=SLOW_TARGET)
    os.environ["EVALLOOP_HISTORY_URL"] = url
    try:
        settings = load_settings(hosts / "host-a" / PATHS["host-a"])
    finally:
        del os.environ["EVALLOOP_HISTORY_URL"]
    store = HistoryStore(url)
    add_schedule(settings, ["slow"], every="10s", job_id="nightly",
                 first_run=datetime.now(UTC) + timedelta(seconds=4))
    procs = {name: start_host(name, hosts, url, tmp_path / f"{name}.log") for name in PATHS}
    logs = lambda: "\n".join(f"--- {n}\n{(tmp_path / f'{n}.log').read_text()}" for n in PATHS)  # noqa: E731
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 40), logs()
        ((entry_id, first),) = [(i, e) for i, e in rows(url) if e.status == "running"]
        victim = first.owner.split(":")[0]
        (dead_run,) = store.runs("slow", statuses=[RunStatus.RUNNING])
        time.sleep(2.0)  # well into the run: cases written, heartbeats beating
        killed = time.time()
        kill_host(procs.pop(victim))

        def completed_elsewhere() -> LedgerEntry | None:
            done = [e for _, e in rows(url) if e.status == "completed" and e.started_at > killed]
            return done[0] if done else None

        assert wait_for(completed_elsewhere, 60), logs()
        after = completed_elsewhere()
        assert after is not None and after.ended_at is not None
        recovered = after.ended_at - killed
        closed = {i: e for i, e in rows(url)}[entry_id]
        taken_over = closed.ended_at - killed if closed.ended_at else None
    finally:
        for proc in procs.values():
            kill_host(proc)
    print(f"\nkilled {victim} {killed - first.started_at:.1f} s into its fire; dead fire closed after "
          f"{taken_over:.1f} s; next fire completed on {after.owner.split(':')[0]} {recovered:.1f} s after the kill")
    assert after.owner.split(":")[0] != victim
    assert recovered < 60
    assert closed.status == "interrupted" and closed.run_id == dead_run.id, closed
    assert "stopped heartbeating" in (closed.detail or "")
    assert store.get_run(dead_run.id).status == RunStatus.INTERRUPTED
    assert after.run_id and store.get_run(after.run_id).status == RunStatus.COMPLETED
