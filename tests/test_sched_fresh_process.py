"""Scheduled fires run today's code in a fresh process; a crashing or hanging target never takes
the scheduler down. A real APScheduler on a SQLite job store, real `python -m evalloop` children."""

from __future__ import annotations

from datetime import UTC, datetime

import yaml

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import add_schedule
from support.project import wait_for
from support.scheduling import serving

GOOD = "def answer(input):\n    return input\n"
BROKEN = "def answer(input):\n    return {'wrong': True}  # a deploy that broke the product\n"
BAD = '''
import os, time

def crash(input):
    os.abort()  # the whole interpreter dies, as a segfaulting extension would

def hang(input):
    time.sleep(3600)  # a sync target stuck in a call with no timeout
'''


def suite(name: str, target: str, n: int = 8) -> dict:
    return {"name": name, "target": target, "scorers": ["equals"],
            "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(n)]}


def project(tmp_path, timeout: float = 60, **extra_suites):
    root = tmp_path / "proj"
    (root / "fixtures").mkdir(parents=True)
    (root / "live.py").write_text(GOOD)
    (root / "bad.py").write_text(BAD)
    for name, doc in {"live": suite("live", "live:answer"), **extra_suites}.items():
        (root / "fixtures" / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    (root / "evalloop.toml").write_text(f"fire_timeout_seconds = {timeout}\nlearn = false\n")
    return load_settings(root)




def verdicts(settings, job_id):
    return [e.verdict for e in reversed(ledger.entries(settings.database_url, job_id)) if e.status == "completed"]


def test_editing_the_target_between_two_fires_changes_the_verdict(tmp_path):
    settings = project(tmp_path)
    add_schedule(settings, ["live"], every="2s", job_id="live", first_run=datetime.now(UTC))
    with serving(settings, join_timeout=60) as result:
        assert wait_for(lambda: len(verdicts(settings, "live")) >= 2, 90)
        (settings.project_dir / "live.py").write_text(BROKEN)  # deployed while the scheduler runs
        assert wait_for(lambda: "regressed" in verdicts(settings, "live"), 90), verdicts(settings, "live")
    assert result["code"] == 0
    seen = verdicts(settings, "live")
    assert seen[0] == "no baseline yet" and "steady" in seen[:seen.index("regressed")]
    runs = HistoryStore(settings.database_url).runs("live", limit=None)
    assert all(r.status == "completed" for r in runs)


def test_a_crashing_or_hanging_target_leaves_the_scheduler_serving(tmp_path):
    # a fire process needs ~1.6 s of CPU to start: 20 s leaves room on a loaded 2-core machine
    settings = project(tmp_path, timeout=20, crash=suite("crash", "bad:crash", 1), hang=suite("hang", "bad:hang", 1))
    add_schedule(settings, ["crash", "hang"], every="1h", job_id="bad", first_run=datetime.now(UTC))
    # an hour-long call: both fires ending within the waits below shows the scheduler did not wait for it
    with serving(settings, join_timeout=60):
        assert wait_for(lambda: len([e for e in ledger.entries(settings.database_url, "bad")
                                     if e.status != "running"]) == 2, 120)
        add_schedule(settings, ["live"], every="1h", job_id="after", first_run=datetime.now(UTC))
        assert wait_for(lambda: verdicts(settings, "after") == ["no baseline yet"], 90)
    entries = {e.suite: e for e in ledger.entries(settings.database_url, "bad")}
    assert entries["crash"].status == "error" and "signal 6" in entries["crash"].detail
    assert entries["hang"].status == "error" and "overran fire_timeout_seconds (20 s)" in entries["hang"].detail
    hung = HistoryStore(settings.database_url).runs("hang", limit=None)
    # SIGTERM marks it interrupted; a target that blocks signals is SIGKILLed and its run reaped as failed
    assert len(hung) == 1 and hung[0].status in ("interrupted", "failed"), (hung[0].status, hung[0].invalid_reason)
