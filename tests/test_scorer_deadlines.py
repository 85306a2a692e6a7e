"""A scorer past its deadline is an errored grade, and the run goes on.

Real runs on real SQLite. The hanging scorers wait for a file the test writes when it is done
(never a sleep the test depends on): a run that completes while they still hang shows they were
cut at the deadline and, for a sync scorer, that its thread was left behind, not joined.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from support.project import TARGET, make_project

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

HANGING_SCORERS = '''
import asyncio, os, time
from evalloop import Score, scorer

def _released():
    return os.path.exists(os.environ["SCORER_RELEASE"])

@scorer("hangs-sync")
def hangs_sync(input, output, expected):
    """Hangs on the case asking for it, until the test is over (at most 60 s)."""
    if input.get("hang"):
        until = time.monotonic() + 60
        while not _released() and time.monotonic() < until:
            time.sleep(0.02)
    return Score(value=float(output == expected))

@scorer("hangs-async")
async def hangs_async(input, output, expected):
    if input.get("hang"):
        until = time.monotonic() + 60
        while not _released() and time.monotonic() < until:
            await asyncio.sleep(0.02)
    return Score(value=float(output == expected))
'''

CASES = [{"id": "hung", "input": {"hang": True, "v": 0}, "expected": {"hang": True, "v": 0}}]
CASES += [{"id": f"c{i}", "input": {"v": i}, "expected": {"v": i}} for i in range(1, 6)]


@pytest.fixture
def released(tmp_path, monkeypatch):
    release = tmp_path / "release"
    monkeypatch.setenv("SCORER_RELEASE", str(release))
    yield release
    release.write_text("done")  # the abandoned scorer threads end


def _project(root: Path, **suites: dict) -> Path:
    return make_project(root, suites, target=TARGET, scorers=HANGING_SCORERS)


@pytest.mark.parametrize("scorer", ["hangs-sync", "hangs-async"])
def test_a_scorer_past_the_suites_timeout_is_errored_and_the_run_completes(tmp_path, released, scorer):
    root = _project(tmp_path / "p", s={"name": "s", "target": "sut:echo", "timeout": 0.5,
                                       "scorers": [scorer, "equals"], "cases": CASES})
    report = run_suite("s", settings=load_settings(root))
    assert not released.exists()  # the hung scorer is still hanging: it was cut, not waited for
    summary = report.executed.summaries[scorer]
    assert (summary.n, summary.errored, summary.mean) == (5, 1, 1.0)
    assert report.executed.summaries["equals"].errored == 0
    store = HistoryStore(load_settings(root).database_url)
    message = store.case_messages(report.executed.run.id, scorer, ["hung"])["hung"]
    assert message == f"scorer {scorer} timed out after 0.5 s"


def test_a_scorers_own_timeout_needs_no_suite_timeout_and_wins_over_it(tmp_path, released):
    root = _project(tmp_path / "p",
                    own={"name": "own", "target": "sut:echo", "cases": CASES,
                         "scorers": [{"name": "hangs-sync", "timeout": 0.3}]},
                    both={"name": "both", "target": "sut:echo", "cases": CASES, "timeout": 600,
                          "scorers": [{"name": "hangs-async", "timeout": 0.3}]})
    settings = load_settings(root)
    for name, scorer in (("own", "hangs-sync"), ("both", "hangs-async")):
        report = run_suite(name, settings=settings)
        assert report.executed.summaries[scorer].errored == 1, name
        message = HistoryStore(settings.database_url).case_messages(report.executed.run.id, scorer, ["hung"])
        assert message["hung"] == f"scorer {scorer} timed out after 0.3 s"


def test_a_hung_sync_scorer_does_not_hold_the_cli(tmp_path, released):
    root = _project(tmp_path / "p", s={"name": "s", "target": "sut:echo", "cases": CASES,
                                       "scorers": [{"name": "hangs-sync", "timeout": 0.5}]})
    result = subprocess.run([EVALLOOP, "run", "--suite", "s", "--json"], cwd=root, capture_output=True,
                            text=True, timeout=50)
    assert result.returncode == 0, result.stderr
    assert not released.exists()
    doc = json.loads(result.stdout)
    score = doc["scorers"][0]
    assert score["errored"] == 1 and score["current"] == 1.0
    assert score["first_error"] == "scorer hangs-sync timed out after 0.5 s"
