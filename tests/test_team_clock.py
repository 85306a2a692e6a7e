"""One clock for a team (#40 item 3): on a shared PostgreSQL history a host's clock decided
verdicts — a host 90 s slow ran a regression (1.0 → 0.5) that said `no baseline yet` and exit 0,
and then joined the other hosts' baselines; a host 90 s fast made `accept`'s "latest run" its
older good run. Run times now come from the database's clock. Hosts are real `evalloop`
processes whose clock (``time.time`` and ``datetime.now``) is faked, as in test_team_leases."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from evalloop.config import load_settings
from evalloop.history.locks import database_time
from evalloop.history.store import HistoryStore
from support.project import controlled_suite, make_project, write_answers

SKEWED = """
import datetime as _dt, sys, time
SKEW = float(sys.argv[1])
_real_time, _Real = time.time, _dt.datetime
time.time = lambda: _real_time() + SKEW
class _Skewed(_Real):
    @classmethod
    def now(cls, tz=None):
        return _Real.now(tz) + _dt.timedelta(seconds=SKEW)
    @classmethod
    def utcnow(cls):
        return _Real.utcnow() + _dt.timedelta(seconds=SKEW)
_dt.datetime = _Skewed
sys.argv = ["evalloop", *sys.argv[2:]]
from evalloop.cli import main
main()
"""


def run_on_host(root, skew: float, *args: str) -> subprocess.CompletedProcess[str]:
    """``evalloop ARGS`` on a host whose clock is off by ``skew`` seconds."""
    return subprocess.run([sys.executable, "-c", SKEWED, str(skew), *args, "--project", str(root)],
                          capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture
def team(tmp_path, pg_server, monkeypatch):
    """A project on a fresh PostgreSQL history with three good runs (every case at 1.0)."""
    url = pg_server.create_database()
    root = make_project(tmp_path / "p", {"controlled": controlled_suite(8)})
    (root / "evalloop.toml").write_text(f'history_url = "{url}"\nrun_log = false\n')
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    for _ in range(3):
        good = run_on_host(root, 0.0, "run", "--suite", "controlled")
        assert good.returncode == 0, good.stderr
    return root, url, answers


def test_a_slow_hosts_regression_is_judged_against_the_teams_baseline(team):
    root, url, answers = team
    write_answers(answers, {f"c{i}": 0.5 for i in range(8)})
    slow = run_on_host(root, -90.0, "run", "--suite", "controlled", "--json")
    assert slow.returncode == 1, slow.stdout + slow.stderr  # regressed, not "no baseline yet"
    assert '"verdict": "regressed"' in slow.stdout, slow.stdout
    store = HistoryStore(url)
    latest = store.runs("controlled", limit=1)[0]
    assert latest.status == "completed" and latest.n_cases == 8
    now = datetime.fromtimestamp(database_time(store.engine), UTC)
    assert abs(latest.started_at - now) < timedelta(seconds=60)  # the database's time, not the host's


def test_accept_picks_the_latest_run_by_the_databases_order(team):
    root, url, answers = team
    fast_good = run_on_host(root, 90.0, "run", "--suite", "controlled")  # a good run on a fast host
    assert fast_good.returncode == 0, fast_good.stderr
    write_answers(answers, {f"c{i}": 0.5 for i in range(8)})
    regressed = run_on_host(root, 0.0, "run", "--suite", "controlled", "--json")
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    import json

    newest = json.loads(regressed.stdout)
    newest = (newest[0] if isinstance(newest, list) else newest)["run_id"]
    assert HistoryStore(url).runs("controlled", limit=1)[0].id == newest  # the latest, by the database
    accepted = run_on_host(root, 0.0, "accept", "controlled", "--reason", "expected change", "--json")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert newest in accepted.stdout, (newest, accepted.stdout)


def test_a_fire_a_fast_host_claims_starts_by_the_databases_clock(tmp_path, pg_server):
    """A host whose clock runs ahead sees fires due early; the fire it claims starts when the
    database's clock reaches the fire time."""
    from evalloop.scheduling.scheduler import CONTROL, run_scheduled_job

    url = pg_server.create_database()
    root = make_project(tmp_path / "p", {"s": {"name": "s", "target": "sut:echo", "scorers": ["equals"],
                                               "cases": [{"id": "a", "input": 1, "expected": 1}]}})
    (root / "evalloop.toml").write_text(f'history_url = "{url}"\nrun_log = false\n')
    store = HistoryStore(load_settings(root).database_url)
    fire = datetime.fromtimestamp(database_time(store.engine) + 8.0, UTC)  # due 8 s from now, by the database
    CONTROL.reset()
    CONTROL.claims["nightly"] = fire
    try:
        (run_id,) = run_scheduled_job(str(root), ["s"], job_id="nightly")
    finally:
        CONTROL.reset()
    assert store.get_run(run_id).started_at >= fire
