"""Target failures are product failures; infrastructure failures invalidate. Timeouts that hold.

Real runs on real SQLite: a target that times out or answers something its scorer cannot parse
fails its case (a real 0, counted as a target failure); a target whose network is down is an
infrastructure failure (errored, and past the errored limit the run is invalid, exit 1, never a
baseline). Deadlines count from the call's start, threads never hold the process at exit.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from evalloop.run.failures import Failure, classify
from support.project import TARGET, make_project

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

FAILING_TARGET = TARGET + '''
import socket, time

import threading

_MEETING = threading.Barrier(16, timeout=20)

def sleepy(input):
    time.sleep(input.get("sleep", 0))
    return input.get("value")

def together(input):
    """Returns once 16 calls are in at the same time; a call that waits alone past the
    barrier's timeout (calls queued for threads) breaks it and fails its case."""
    _MEETING.wait()
    return input["value"]

def returns_coroutine(input):
    async def later():
        await asyncio.sleep(0.01)
        return input["value"]
    return later()

def reply(input):
    time.sleep(input.get("sleep", 0))
    return input["reply"]

def unreachable(input):
    raise ConnectionRefusedError(111, "Connection refused")

def no_dns(input):
    raise socket.gaierror(-2, "Name or service not known")
'''


def project(root: Path, **suites: dict) -> Path:
    return make_project(root, suites, target=FAILING_TARGET, scorers=None)


def case_rows(root: Path, run_id: str) -> dict[str, tuple[str | None, str | None]]:
    store = HistoryStore(load_settings(root).database_url)
    return {c.case_id: (c.failure, c.error) for c in store.case_results(run_id)}


# -- timeouts ---------------------------------------------------------------------------------
def test_a_deadline_counts_from_the_call_not_from_the_wait_for_a_thread(tmp_path):
    # 48 sync calls at concurrency 16 with a deadline: the calls meet in threes of sixteen at a
    # barrier, so each returns only when 16 run at once. asyncio's default pool (cpu + 4
    # threads) queued them: they never met, and the queueing counted against the deadline.
    cases = [{"id": f"c{i}", "input": {"value": i}, "expected": i} for i in range(48)]
    root = project(tmp_path, busy={"name": "busy", "target": "sut:together", "scorers": ["equals"],
                                   "concurrency": 16, "timeout": 10, "cases": cases})
    report = run_suite("busy", settings=load_settings(root))
    run = report.executed.run
    failed = {c: error for c, (_, error) in case_rows(root, run.id).items() if error}
    assert failed == {} and run.target_failures == 0 and run.infra_failures == 0, failed
    assert report.executed.summaries["equals"].mean == 1.0


def test_a_hung_sync_target_does_not_hold_the_cli_at_exit(tmp_path):
    # the call hangs for an hour: the CLI ends at all only if it does not wait for the thread
    hung = {"name": "hung", "target": "sut:sleepy", "scorers": ["equals"], "timeout": 1,
            "cases": [{"id": "a", "input": {"sleep": 3600, "value": 1}, "expected": 1}]}
    root = project(tmp_path, hung=hung)
    result = subprocess.run([EVALLOOP, "run", "--suite", "hung", "--json"], cwd=root,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr  # every target call failed: an invalid run
    doc = json.loads(result.stdout)
    assert doc["scorers"][0]["current"] == 0.0 and doc["case_errors"] == 1
    assert doc["valid"] is False  # its only call failed: a run that answered nothing is no pass


def test_a_sync_target_returning_a_coroutine_scores_the_same_with_and_without_timeout(tmp_path):
    cases = [{"id": f"c{i}", "input": {"value": i}, "expected": i} for i in range(4)]
    suite = {"name": "plain", "target": "sut:returns_coroutine", "scorers": ["equals"], "cases": cases}
    root = project(tmp_path, plain=suite, timed={**suite, "name": "timed", "timeout": 5},
                   threaded={**suite, "name": "threaded", "target_threads": True})
    settings = load_settings(root)
    for name in ("plain", "timed", "threaded"):
        report = run_suite(name, settings=settings)
        assert report.executed.summaries["equals"].mean == 1.0, name
        outputs = [c.output for c in HistoryStore(settings.database_url).case_results(report.executed.run.id)]
        assert "coroutine" not in " ".join(map(str, outputs)), name


# -- target failures: a real 0, counted -------------------------------------------------------
def test_unparseable_and_timed_out_replies_are_counted_target_failures(tmp_path):
    replies = [{"id": f"c{i}", "input": {"reply": '{"action": "NOOP", "reason": "identical content"}'}}
               for i in range(8)]
    replies += [{"id": "garbled", "input": {"reply": "Sure! The action is NOOP."}},
                {"id": "slow", "input": {"sleep": 3, "reply": '{"action": "NOOP", "reason": "identical"}'}}]
    root = project(tmp_path, replies={"name": "replies", "target": "sut:reply", "timeout": 1,
                                      "scorers": ["exact-match-noop"], "cases": replies})
    report = run_suite("replies", settings=load_settings(root))
    run, summary = report.executed.run, report.executed.summaries["exact-match-noop"]
    assert (summary.n, summary.errored, summary.mean) == (10, 0, pytest.approx(0.8))
    assert run.valid and (run.target_failures, run.infra_failures) == (2, 0)
    assert (report.executed.target_failures, report.executed.infra_failures) == (2, 0)
    rows = case_rows(root, run.id)
    assert rows["garbled"][0] == "target" and rows["slow"][0] == "target" and rows["c0"] == (None, None)
    assert "timed out after 1" in rows["slow"][1]
    store = HistoryStore(load_settings(root).database_url)
    messages = store.case_messages(run.id, "exact-match-noop", ["garbled", "slow"])
    assert messages["garbled"].startswith("output is not valid JSON: ")
    assert messages["slow"].startswith("target failure: target timed out after 1")
    # the rate is reported beside the baseline's: here the first run, so no baseline rate yet
    rate = report.comparison.target_failures
    assert (rate.failures, rate.results, rate.baseline_rate) == (2, 10, None)
    assert "target failures: 2/10 = 20.0%" in report.notices
    again = run_suite("replies", settings=load_settings(root)).comparison.target_failures
    assert again.rate == 0.2 and again.baseline_rate == 0.2


# -- infrastructure failures: errored, the run invalid, exit 1 --------------------------------
@pytest.mark.parametrize("target", ["sut:unreachable", "sut:no_dns"])
def test_a_target_whose_network_is_down_gives_an_invalid_run(tmp_path, target):
    cases = [{"id": f"c{i}", "input": {"value": i}, "expected": i} for i in range(5)]
    root = project(tmp_path, down={"name": "down", "target": target, "scorers": ["equals"], "cases": cases})
    result = subprocess.run([EVALLOOP, "run", "--suite", "down", "--json", "--fail-on-regression"],
                            cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["valid"] is False and re.search(r"5/5 \w+ errored", doc["invalid_reason"])
    run = HistoryStore(load_settings(root).database_url).get_run(doc["run_id"])
    assert (run.target_failures, run.infra_failures) == (0, 5)
    failure, error = case_rows(root, run.id)["c0"]
    assert failure == "infra" and "Connection refused" in error or "Name or service" in error
    score = doc["scorers"][0]
    assert score["current"] is None and score["errored"] == 5
    assert score["first_error"].startswith("infrastructure: ")


# -- the classification itself ------------------------------------------------------------------
def test_classify_tells_the_product_from_the_infrastructure():
    import httpx

    from evalloop.llm.errors import LLMCallFailed, MalformedReply, RefusalError, ReplyParseError
    from evalloop.run.targets import TargetTimeout

    infra = [ConnectionRefusedError(111, "refused"), ConnectionResetError(), BrokenPipeError(),
             TimeoutError("read timed out"), OSError(101, "Network is unreachable"),
             httpx.ConnectError("refused"), LLMCallFailed("HTTP 503", status=503),
             MalformedReply("not a message", status=200)]
    wrapped = RuntimeError("client gave up")
    wrapped.__cause__ = ConnectionRefusedError(111, "refused")     # requests, urllib3, SDKs chain so
    infra.append(wrapped)
    for code in (502, 429, 400):                                     # an SDK's APIStatusError
        status = RuntimeError(f"HTTP {code}")
        status.status_code = code
        infra.append(status)
    import anthropic

    infra.append(anthropic.InternalServerError("overloaded", body=None,
                                               response=httpx.Response(529, request=httpx.Request("POST", "http://x"))))
    infra.append(anthropic.APIConnectionError(request=httpx.Request("POST", "http://x")))
    ours = ValueError("decide failed")
    ours.__context__ = LLMCallFailed("HTTP 500 after 5 attempts", status=500)   # wrapped by a target
    infra.append(ours)
    target = [ValueError("bad"), KeyError("action"), TargetTimeout(1.0), ReplyParseError("not JSON"),
              RefusalError("refused"), FileNotFoundError(2, "No such file"), RuntimeError("boom")]
    assert [classify(e) for e in infra] == [Failure.INFRA] * len(infra)
    assert [classify(e) for e in target] == [Failure.TARGET] * len(target)


# -- the calling machinery itself -------------------------------------------------------------
async def test_a_hung_thread_is_replaced_and_a_targets_own_timeout_is_not_the_deadline():
    from evalloop.run.calling import call
    from evalloop.run.failures import TargetTimeout

    release = threading.Event()
    meeting = threading.Barrier(2, timeout=20)

    def hang() -> int:
        release.wait(60)
        return 0

    def meet(value: int) -> int:
        meeting.wait()  # returns only when the other call runs at the same time
        return value

    try:
        with pytest.raises(TargetTimeout, match="timed out after 0.2 s"):
            await call(hang, in_thread=True, timeout=0.2)
        assert not release.is_set()  # the call ended at its deadline; its thread still hangs
        # two new calls neither wait for the abandoned thread nor for each other: they meet
        values = await asyncio.gather(*(call(meet, (i,), in_thread=True, timeout=30) for i in (1, 2)))
        assert values == [1, 2]
    finally:
        release.set()

    def own_timeout() -> None:
        raise TimeoutError("read timed out")          # e.g. the target's HTTP client

    with pytest.raises(TimeoutError, match="read timed out") as caught:
        await call(own_timeout, in_thread=True, timeout=5)
    assert not isinstance(caught.value, TargetTimeout) and classify(caught.value) is Failure.INFRA

    async def slow_async() -> int:
        await asyncio.sleep(2)
        return 1

    with pytest.raises(TargetTimeout):
        await call(slow_async, timeout=0.1)
