"""A fire runs where its arguments say: no process-wide state of a serving scheduler wins over
the project directory ``run_scheduled_job`` is given (issue #43), and a worker passes its own
checkout to the job explicitly."""

from __future__ import annotations

import threading

from apscheduler.schedulers.background import BackgroundScheduler

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.scheduling.scheduler import ClaimingExecutor, run_scheduled_job, serve
from support.project import make_project

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}


def runs_of(root) -> list[str]:
    return [r.id for r in HistoryStore(load_settings(root).database_url).runs("s")]


def test_the_project_argument_wins_over_a_serving_scheduler(tmp_path):
    serving = make_project(tmp_path / "serving", {"s": SUITE})
    asked = make_project(tmp_path / "asked", {"s": SUITE})
    stop, ready = threading.Event(), threading.Event()
    scheduler = threading.Thread(target=serve, args=(load_settings(serving),),
                                 kwargs={"stop": stop, "poll_seconds": 0.2, "on_ready": ready.set})
    scheduler.start()
    try:
        assert ready.wait(60)
        (run_id,) = run_scheduled_job(str(asked), ["s"], job_id="adhoc")
    finally:
        stop.set()
        scheduler.join(60)
    assert runs_of(asked) == [run_id]
    assert runs_of(serving) == []


def test_a_worker_gives_the_job_its_own_checkout_and_leaves_the_stored_job_alone(tmp_path):
    scheduler = BackgroundScheduler()
    scheduler.start(paused=True)
    try:
        job = scheduler.add_job("evalloop.scheduling.scheduler:run_scheduled_job", "interval", hours=1,
                                args=["/elsewhere/proj", ["s"]], kwargs={"job_id": "n"}, id="n")
    finally:
        scheduler.shutdown(wait=False)
    executor = ClaimingExecutor("sqlite://", "me", project_dir=tmp_path)
    local = executor.in_checkout(job)
    assert local.args == (str(tmp_path), ["s"]) and local.kwargs == {"job_id": "n"} and local.id == "n"
    assert local._jobstore_alias == job._jobstore_alias and local._scheduler is scheduler  # as the pool runs it
    assert job.args == ("/elsewhere/proj", ["s"])
    assert ClaimingExecutor("sqlite://", "me").in_checkout(job) is job  # an admin's pool: as stored
