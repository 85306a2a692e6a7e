"""Batch mode: a run's LLM calls (the judges', and a target's through evalloop's client) go through
the Message Batches API of the real anthropic SDK against the loopback server — chunked within the
API's limits, polled, matched back by custom_id, priced at half, and failed results mapped to the
same target/infrastructure rule as live calls."""

from __future__ import annotations

import os

import pytest

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.errors import EvalloopError
from evalloop.history.batches import batches_of
from evalloop.history.store import HistoryStore
from evalloop.llm.anthropic_batches import AnthropicBatches
from evalloop.loop.pipeline import arun_suite
from evalloop.suites.models import Suite
from support.messages_server import LLMServer, Reply, Seen
from support.sqlitedb import sqlite_conn

TARGET = '''
from evalloop.llm import LLMRequest, Message

async def ask(input, ctx):
    reply = await ctx.llm.complete(LLMRequest(model=ctx.llm.model, system="Answer in one word.",
                                              messages=[Message(role="user", content=input)]))
    return reply.text

def echo(input):
    return "said " + input
'''


def judged(n: int, target: str = "sut:echo") -> Suite:
    cases = [{"id": f"c{i:02d}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(n)]
    return Suite.model_validate({"name": "judged", "target": target, "cases": cases,
                                 "scorers": [{"name": "llm-rubric", "params": {"rubric": "Is it right?"}}]})


def answer(seen: Seen) -> Reply:
    if seen.forced_tool:
        return Reply.of_tool({"score": 70, "issues": [], "strengths": []}, input_tokens=1000, output_tokens=100)
    return Reply.of_text("blue", input_tokens=1000, output_tokens=100)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "sut.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("EVALLOOP_BATCH_POLL", "0.02")
    monkeypatch.setenv("EVALLOOP_BATCH_WINDOW", "0.02")
    return tmp_path


def batch_items(server) -> list[Seen]:
    return [s for s in server.requests if "x-batch-id" in s.headers]


async def test_a_judge_suite_goes_out_in_one_batch_at_half_the_live_price(project, monkeypatch):
    settings = load_settings(project)
    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        live = await arun_suite(judged(20), RunOptions(cache="off"), settings=settings)
        assert server.batches.submissions == 0
        batched = await arun_suite(judged(20), RunOptions(cache="off", batch=True), settings=settings)
        assert server.batches.submissions == 1 and len(batch_items(server)) == 20
    run = batched.executed.run
    assert run.batched_calls == run.llm_calls == 20 and live.executed.run.batched_calls == 0
    assert run.cost_usd == pytest.approx(live.executed.run.cost_usd / 2)
    assert batched.executed.summaries["llm-rubric"].mean == pytest.approx(0.7) and run.valid
    assert len(batches_of(HistoryStore(settings.database_url), run.id)) == 20  # recorded for a resume


async def test_a_target_calling_the_llm_through_evalloop_is_batched_too(project, monkeypatch):
    monkeypatch.setattr(AnthropicBatches, "max_requests", 7)  # chunked within the API's count limit
    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        report = await arun_suite(judged(20, "sut:ask"), RunOptions(cache="off", engine="llm", batch=True),
                                  settings=load_settings(project))
        sizes = sorted(len(b.requests) for b in server.batches.batches.values())
    # two stages (the targets' calls, then the judges'), each in chunks of at most 7
    assert sizes == [6, 6, 7, 7, 7, 7] and report.executed.run.batched_calls == 40
    assert report.executed.summaries["llm-rubric"].mean == pytest.approx(0.7)


async def test_failed_batch_results_follow_the_live_rule(project, monkeypatch):
    failures = [Reply.overloaded(), Reply(batch_result="expired"), Reply(batch_result="canceled"),
                Reply.error(400, "invalid_request_error", "prompt is too long")]
    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        server.script(*failures)
        report = await arun_suite(judged(20), RunOptions(cache="off", batch=True), settings=load_settings(project))
        summary = report.executed.summaries["llm-rubric"]
        assert summary.errored == 3 and summary.n == 17 and summary.mean == pytest.approx(0.7)  # never a real 0
        # the overloaded request went out once more, in a second batch, as a live call is retried
        assert server.batches.submissions == 2 and report.executed.run.llm_retries == 1
        store = HistoryStore(load_settings(project).database_url)
        messages = " ".join(store.case_messages(report.executed.run.id, "llm-rubric",
                                                [f"c{i:02d}" for i in range(20)]).values())
        assert "expired" in messages and "canceled" in messages and "invalid_request_error" in messages
        server.script(Reply.error(404, "not_found_error", "model: claude-nope"))
        with pytest.raises(EvalloopError, match="not_found_error"):  # an unknown model stops the run
            await arun_suite(judged(3), RunOptions(cache="off", batch=True), settings=load_settings(project))


# -- resuming a batch run killed while it polls ---------------------------------------------------
def batch_project(tmp_path, server, n: int = 12) -> dict[str, str]:
    """A project whose suite is in batch mode, and the environment of its runs."""
    import yaml

    (tmp_path / "sut.py").write_text(TARGET)
    (tmp_path / "fixtures").mkdir()
    suite = judged(n).model_dump(mode="json", exclude={"path"}, exclude_none=True)
    (tmp_path / "fixtures" / "judged.yaml").write_text(yaml.safe_dump({**suite, "batch": True}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    return {**env, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "PYTHONPATH": str(tmp_path),
            "EVALLOOP_BATCH_POLL": "0.05", "EVALLOOP_BATCH_WINDOW": "0.02", "NO_COLOR": "1"}


def killed_mid_poll(tmp_path, server, env) -> str:
    """Start a batch run, kill -9 it while it polls its (held) batch; the killed run's id."""
    import signal
    import sqlite3
    import subprocess
    import time

    from support.cli import EVALLOOP

    server.batches.held.set()  # the batch stays in progress: the run polls
    proc = subprocess.Popen([EVALLOOP, "run", "--suite", "judged", "--no-cache", "--json"], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while server.batches.polls < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert server.batches.polls >= 3, proc.stderr.read().decode() if proc.poll() is not None else "no polls"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    from contextlib import closing

    with closing(sqlite3.connect(tmp_path / "history" / "evalloop.db")) as conn:
        (killed, status), = conn.execute("select id, status from runs").fetchall()
        recorded = conn.execute("select count(*) from run_batches where run_id = ?", (killed,)).fetchone()[0]
    assert status == "running" and recorded == 1 and server.batches.submissions == 1
    server.batches.held.clear()  # the batch ends while nobody waits on it
    return killed


def test_a_batch_run_killed_mid_poll_is_resumed_without_submitting_twice(tmp_path):
    import json

    from support.cli import cli

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        killed = killed_mid_poll(tmp_path, server, env)
        resumed = cli(tmp_path, "run", "--resume", killed[:12], "--no-cache", "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.batches.submissions == 1 and server.batches.submitted_requests == 12  # nothing twice
        doc = json.loads(resumed.stdout)
        assert doc["valid"] and doc["batched_calls"] == 12 and doc["scorers"][0]["current"] == pytest.approx(0.7)
        assert f"resumed run {killed}: 12 request(s) collected from its batches, nothing submitted again" \
            in resumed.stderr
        with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
            assert conn.execute("select status from runs where id = ?", (killed,)).fetchone()[0] == "failed"

        again = cli(tmp_path, "run", "--resume", doc["run_id"], "--json", env=env)
        assert again.returncode == 2 and "completed: there is nothing to resume" in again.stderr
        unknown = cli(tmp_path, "run", "--resume", "nope", env=env)
        assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr


HOLDER = """
import sys
from evalloop.history.locks import DatabaseLock
lock = DatabaseLock(sys.argv[1], "resume:" + sys.argv[2], owner="otherhost:1:abcdef")
assert lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


def test_one_killed_batch_run_is_resumed_once(tmp_path):
    """#40 item 2: two `--resume` of one killed run paid twice (3 submissions, 12 requests paid
    again) and made 2 completed runs. One resumer holds the run's resume lease (here another
    process holds it first); a run that was resumed to completion is not resumed again."""
    import subprocess
    import sys

    from support.cli import cli

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        killed = killed_mid_poll(tmp_path, server, env)
        url = load_settings(tmp_path).database_url
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, url, killed], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert holder.stdout.readline().strip() == "held"
            busy = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        finally:
            holder.communicate("\n", timeout=60)
        assert busy.returncode == 2 and f"run {killed} is being resumed by otherhost:1:abcdef" in busy.stderr, \
            busy.stderr
        first = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        assert first.returncode == 0, first.stderr
        second = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        assert second.returncode == 2 and "was resumed by run" in second.stderr, second.stderr
        assert server.batches.submissions == 1 and server.batches.submitted_requests == 12
        completed = [r for r in HistoryStore(url).runs("judged") if r.status == "completed"]
        assert len(completed) == 1


def test_two_resumes_of_one_killed_run_at_once_pay_once(tmp_path):
    """#40 item 2 as the probe ran it: two `evalloop run --resume` processes of one killed run at
    the same time. The second starts while the first polls the killed run's (held) batch, so the
    first holds the resume lease: the second is refused, having submitted nothing."""
    import subprocess
    import time

    from support.cli import EVALLOOP, cli

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        killed = killed_mid_poll(tmp_path, server, env)
        server.batches.held.set()
        polls = server.batches.polls
        first = subprocess.Popen([EVALLOOP, "run", "--resume", killed, "--no-cache", "--json"], cwd=tmp_path,
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while server.batches.polls < polls + 2 and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.05)  # waits for the event (the first resumer polling), not a duration
            assert server.batches.polls >= polls + 2, "the first resumer never polled"
            second = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        finally:
            server.batches.held.clear()
            out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        assert second.returncode == 2 and f"run {killed} is being resumed by" in second.stderr, second.stderr
        assert server.batches.submissions == 1 and server.batches.submitted_requests == 12
        completed = [r for r in HistoryStore(load_settings(tmp_path).database_url).runs("judged")
                     if r.status == "completed"]
        assert len(completed) == 1


def test_the_next_scheduled_fire_resumes_a_killed_batch_run(tmp_path, monkeypatch):

    from evalloop.scheduling.scheduler import run_scheduled_job

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        killed = killed_mid_poll(tmp_path, server, env)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        (run_id,) = run_scheduled_job(str(tmp_path), ["judged"], job_id="nightly")
        assert server.batches.submissions == 1  # collected, not paid again
        store = HistoryStore(load_settings(tmp_path).database_url)
        run = store.get_run(run_id)
        assert run.status == "completed" and run.valid and run.batched_calls == 12
        assert run.notes["resumed_from"] == killed
        assert len(batches_of(store, run_id)) == 12  # kept under the new run: it can be resumed in turn
        (later,) = run_scheduled_job(str(tmp_path), ["judged"], job_id="nightly")
        after = store.get_run(later)  # nothing left to resume; the replies come from the response cache
        assert after is not None, (later, [(r.id, r.status, r.notes) for r in store.runs("judged")])
        assert "resumed_from" not in after.notes and after.cache_hits == 12
        assert server.batches.submissions == 1


# -- a schedule's runs in batch mode under a budget -----------------------------------------------
def test_a_schedule_runs_in_batch_mode_under_its_budget(tmp_path, monkeypatch):
    from datetime import UTC, datetime

    import yaml

    from evalloop.scheduling.scheduler import add_schedule, list_schedules
    from support.project import wait_for
    from support.scheduling import serving

    (tmp_path / "sut.py").write_text(TARGET)
    (tmp_path / "fixtures").mkdir()
    suite = judged(12).model_dump(mode="json", exclude={"path"}, exclude_none=True)
    (tmp_path / "fixtures" / "judged.yaml").write_text(yaml.safe_dump(suite))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "EVALLOOP_")):
            monkeypatch.delenv(name)
    budget = 6 * (1000 * 1.0 + 100 * 5.0) / 1e6 / 2  # six batched judge calls
    with LLMServer(answer) as server:
        for name, value in {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "PYTHONPATH": str(tmp_path),
                            "EVALLOOP_BATCH_POLL": "0.05", "EVALLOOP_BATCH_WINDOW": "0.02"}.items():
            monkeypatch.setenv(name, value)
        settings = load_settings(tmp_path)
        info = add_schedule(settings, ["judged"], every="1h", job_id="nightly", first_run=datetime.now(UTC),
                            batch=True, max_cost=budget)
        assert info.options == {"batch": True, "max_cost": budget}
        store = HistoryStore(settings.database_url)
        with serving(settings):
            assert wait_for(lambda: any(r.status == "completed" for r in store.runs("judged")), timeout=60)
        assert server.batches.submissions >= 1
    (run,) = store.runs("judged")
    assert run.batched_calls == run.llm_calls > 0 and run.cost_usd <= budget
    assert not run.valid and run.invalid_reason.startswith("stopped at the cost budget")
    assert list_schedules(settings)[0].last_verdict == "invalid run"


# -- the OpenAI-compatible client: /v1/files + /v1/batches ----------------------------------------
async def test_the_openai_compatible_client_batches_through_v1_batches(project, monkeypatch):
    from evalloop.llm import OpenAICompatClient
    from evalloop.run.services import build_services, close_services

    def openai_answer(seen: Seen) -> Reply:
        return Reply.of_tool({"score": 60, "issues": [], "strengths": []}, input_tokens=1000, output_tokens=100)

    with LLMServer(openai_answer) as server:
        server.script(Reply.server_error(), Reply(batch_result="expired"))
        client = OpenAICompatClient(server.openai_url, "claude-haiku-4-5")
        services, _ = build_services(load_settings(project), client=client, cache="off", batch=True)
        try:
            report = await arun_suite(judged(10), settings=load_settings(project), services=services)
        finally:
            await close_services(services)
        # the server error went out once more in a second batch; the expired request is errored
        assert server.openai_batches.submissions == 2 and server.batches.submissions == 0
    run = report.executed.run
    summary = report.executed.summaries["llm-rubric"]
    assert summary.errored == 1 and summary.n == 9 and summary.mean == pytest.approx(0.6)
    assert run.batched_calls == run.llm_calls == 9
    assert run.cost_usd == pytest.approx(9 * (1000 * 1.0 + 100 * 5.0) / 1e6 / 2)


async def test_a_batch_run_does_not_apply_the_per_case_timeout(project, monkeypatch):
    suite = judged(4, "sut:ask").model_copy(update={"timeout": 0.3})
    with LLMServer(answer) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        server.batches.delay = 0.8  # longer than the suite's timeout
        report = await arun_suite(suite, RunOptions(cache="off", engine="llm", batch=True),
                                  settings=load_settings(project))
    assert report.executed.run.target_failures == 0 and report.executed.run.batched_calls == 8
    assert report.executed.summaries["llm-rubric"].errored == 0  # the judge's grading is not cut either
    assert "batch mode: the suite's timeout (0.3 s) is not applied; a case waits for its batch" in report.notices


def test_a_batch_run_killed_before_it_recorded_its_batch_is_resumed_without_paying_again(tmp_path):
    """#40 item 2: a run killed just after the provider took its batch, before the history knew the
    batch's id: `--resume` refused ("submitted no batch"), the run stayed `running`, and running
    again paid for the requests a second time. The submission is recorded before it goes out, so
    the resumer finds the unrecorded batch at the provider (created after it, with its requests)
    and collects it. The kill point is deterministic (EVALLOOP_FAULT=batch.created)."""
    import json
    import subprocess

    from support.cli import EVALLOOP, cli

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        server.batches.held.set()
        killed_proc = subprocess.run([EVALLOOP, "run", "--suite", "judged", "--no-cache", "--json"], cwd=tmp_path,
                                     env={**env, "EVALLOOP_FAULT": "batch.created"}, capture_output=True,
                                     text=True, timeout=120)
        assert killed_proc.returncode == -9, killed_proc.stderr
        assert server.batches.submissions == 1
        with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
            (killed, status), = conn.execute("select id, status from runs").fetchall()
        assert status == "running"
        server.batches.held.clear()
        resumed = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.batches.submissions == 1 and server.batches.submitted_requests == 12  # paid once
        doc = json.loads(resumed.stdout)
        assert doc["valid"] and doc["batched_calls"] == 12
        assert f"resumed run {killed}: 12 request(s) collected from its batches, nothing submitted again" \
            in resumed.stderr
        with sqlite_conn(tmp_path / "history" / "evalloop.db") as conn:
            assert conn.execute("select status from runs where id = ?", (killed,)).fetchone()[0] == "failed"
            recorded = conn.execute("select batch_id from run_batches where run_id = ?", (doc["run_id"],)).fetchall()
        assert [r[0] for r in recorded] == list(server.batches.batches)  # kept: the new run can be resumed


def test_a_batch_run_killed_before_submitting_submits_once_when_resumed(tmp_path):
    """The other side of the same step: killed after recording that it would submit, before the
    provider took anything — the resumer finds no batch and submits the requests (once)."""
    import subprocess

    from support.cli import EVALLOOP, cli

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        proc = subprocess.run([EVALLOOP, "run", "--suite", "judged", "--no-cache", "--json"], cwd=tmp_path,
                              env={**env, "EVALLOOP_FAULT": "batch.submitting"}, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == -9 and server.batches.submissions == 0, proc.stderr
        killed = HistoryStore(load_settings(tmp_path).database_url).runs("judged")[0].id
        resumed = cli(tmp_path, "run", "--resume", killed, "--no-cache", "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.batches.submissions == 1 and server.batches.submitted_requests == 12


def test_a_batch_the_lookup_takes_for_lost_but_is_not_is_submitted_past(tmp_path):
    """The Message Batches API has no metadata of ours, so the lookup takes a batch of as many
    requests created after the record while it is in progress. When that batch ends without the
    run's requests (another client's batch), they are submitted then: the run is graded, not errored."""
    import json
    import subprocess
    import time

    import anthropic

    from support.cli import EVALLOOP

    with LLMServer(answer) as server:
        env = batch_project(tmp_path, server)
        server.batches.held.set()
        proc = subprocess.run([EVALLOOP, "run", "--suite", "judged", "--no-cache", "--json"], cwd=tmp_path,
                              env={**env, "EVALLOOP_FAULT": "batch.submitting"}, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == -9 and server.batches.submissions == 0, proc.stderr
        killed = HistoryStore(load_settings(tmp_path).database_url).runs("judged")[0].id
        sdk = anthropic.Anthropic(api_key="test", base_url=server.url)
        sdk.messages.batches.create(requests=[  # someone else's batch of 12, after the record
            {"custom_id": f"foreign-{i}", "params": {"model": "claude-haiku-4-5", "max_tokens": 8,
                                                      "messages": [{"role": "user", "content": "hi"}]}}
            for i in range(12)])
        polls = server.batches.polls
        resumer = subprocess.Popen([EVALLOOP, "run", "--resume", killed, "--no-cache", "--json"], cwd=tmp_path,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while server.batches.polls < polls + 2 and time.monotonic() < deadline and resumer.poll() is None:
                time.sleep(0.05)  # waits for the event (the resumer polling the batch it took), not a duration
        finally:
            server.batches.held.clear()
            out, err = resumer.communicate(timeout=120)
        assert resumer.returncode == 0, err
        doc = json.loads(out)
        assert doc["valid"] and doc["scorers"][0]["errored"] == 0 and doc["scorers"][0]["n"] == 12
        assert server.batches.submissions == 2 and "ended without this run's requests" in err


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_lost_batch_is_found_by_its_requests_and_no_other_is(project, monkeypatch, provider):
    """The lookup behind resuming a run killed before it recorded its batch id, on both providers'
    list APIs: the batch created after the record with exactly these requests; not one the
    history knows already, nor one with other requests, nor one created long before."""
    from datetime import timedelta

    from evalloop.history.models import utcnow
    from evalloop.llm import AnthropicClient, OpenAICompatClient
    from evalloop.llm.openai_batches import OpenAIBatches
    from evalloop.llm.types import LLMRequest, Message

    def request(i: int) -> LLMRequest:
        return LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content=f"q{i}")])

    with LLMServer(answer) as server:
        server.batches.held.set()
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        backend = (AnthropicBatches(AnthropicClient(model="claude-haiku-4-5")) if provider == "anthropic"
                   else OpenAIBatches(OpenAICompatClient(server.openai_url, "claude-haiku-4-5")))
        since = utcnow()
        ours = await backend.create([backend.entry(f"ours-{i}", request(i)) for i in range(3)])
        other = await backend.create([backend.entry(f"other-{i}", request(i)) for i in range(2)])
        ids = [f"ours-{i}" for i in range(3)]
        assert await backend.find(ids, since, set()) == ours
        assert await backend.find(ids, since, {ours}) is None          # recorded by a run: not lost
        assert await backend.find(["ours-0", "ours-1"], since, {other}) is None  # no batch holds just these
        assert await backend.find(ids, since + timedelta(hours=1), set()) is None  # created before the record
        server.batches.held.clear()
        assert await backend.ended(ours)
        assert await backend.find(ids, since, set()) == ours          # ended: its results name its requests
        assert await backend.find(["x-0", "x-1", "x-2"], since, set()) is None
