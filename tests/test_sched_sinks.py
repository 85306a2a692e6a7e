"""Sinks: a webhook on loopback (success, retries, failure, timeout), the log, and a scheduled fire."""

from __future__ import annotations

import logging

import pytest

from evalloop import load_settings, run_suite
from evalloop.errors import ConfigError
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import list_schedules, run_scheduled_job
from evalloop.scheduling.sinks import (
    CallableSink,
    LogSink,
    WebhookSink,
    build_sinks,
    notify,
    register_sink,
)
from support.project import controlled_suite, make_project, write_answers
from support.webhook_server import closed_port_url, webhook_server


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A steady run and a regressed run of a real suite."""
    root = make_project(tmp_path_factory.mktemp("sinks"), {"controlled": controlled_suite(4)})
    answers = root / "answers.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    settings = load_settings(root)
    write_answers(answers, {f"c{i}": 1.0 for i in range(4)})
    for _ in range(3):
        steady = run_suite("controlled", settings=settings)
    write_answers(answers, {"c0": 0.0, "c1": 0.0, "c2": 0.0, "c3": 1.0})
    regressed = run_suite("controlled", settings=settings)
    mp.undo()
    assert regressed.comparison.has_regression
    return steady, regressed


def test_webhook_posts_the_run_summary(reports):
    _, regressed = reports
    with webhook_server() as server:
        deliveries = notify(regressed, [WebhookSink(server.url, timeout=2)])
    assert [d.ok for d in deliveries] == [True]
    (got,) = server.received
    assert got.headers["Content-Type"] == "application/json"
    body = got.body
    assert body["event"] == "regression" and body["suite"] == "controlled"
    assert body["run_id"] == regressed.executed.run.id and body["regression"] is True
    (scorer,) = body["scorers"]
    assert scorer["verdict"].startswith("regressed") and scorer["regression"] is True
    assert [c["case"] for c in scorer["newly_failing"]] == ["c0", "c1", "c2"]


def test_webhook_retries_5xx_then_succeeds(reports):
    with webhook_server(statuses=[503, 500, 200]) as server:
        deliveries = notify(reports[1], [WebhookSink(server.url, attempts=3, backoff=0.01)])
    assert deliveries[0].ok and len(server.received) == 3


def test_a_failing_sink_is_logged_and_the_others_still_run(reports, caplog):
    seen = []
    closed = closed_port_url()
    with webhook_server(statuses=[500]) as server:
        sinks = [WebhookSink(server.url, attempts=3, backoff=0.01),
                 WebhookSink(closed, attempts=2, backoff=0.01),
                 CallableSink("memory", seen.append)]
        with caplog.at_level(logging.ERROR, logger="evalloop.sinks"):
            deliveries = notify(reports[1], sinks)
    assert len(server.received) == 3  # every attempt reached the server
    assert [d.ok for d in deliveries] == [False, False, True]
    assert "HTTP 500" in deliveries[0].error and "ConnectError" in deliveries[1].error
    assert seen == [reports[1]]
    # the log names the URL, also for a network error whose message does not
    assert f"sink webhook ({closed}) failed" in caplog.text
    assert f"sink webhook ({server.url}) failed" in caplog.text


def test_a_webhook_that_hangs_times_out(reports):
    with webhook_server(delay=1.0) as server:
        (delivery,) = notify(reports[1], [WebhookSink(server.url, timeout=0.2, attempts=1)])
    assert not delivery.ok and "Timeout" in delivery.error


def test_only_regressions_are_sent_and_the_log_sink_names_them(reports, caplog):
    steady, regressed = reports
    seen = []
    assert notify(steady, [CallableSink("x", seen.append)]) == [] and seen == []
    with caplog.at_level(logging.WARNING, logger="evalloop.sinks"):
        notify(regressed, [LogSink()])
    assert "controlled run" in caplog.text and "equals" not in caplog.text
    assert "value regressed" in caplog.text and "newly failing: c0, c1, c2" in caplog.text


def test_sinks_built_from_settings(tmp_path):
    settings = load_settings(tmp_path)
    assert [s.name for s in build_sinks(settings)] == ["log"]  # no webhook_url: no webhook
    with_hook = load_settings(tmp_path, webhook_url="http://127.0.0.1:9/x", webhook_retries=5)
    sinks = build_sinks(with_hook)
    assert [s.name for s in sinks] == ["log", "webhook"] and sinks[1].attempts == 5
    register_sink("probe", lambda s: CallableSink("probe", print))
    assert [s.name for s in build_sinks(load_settings(tmp_path, sinks=["probe"]))] == ["probe"]
    with pytest.raises(ConfigError, match="unknown sink 'nope'"):
        build_sinks(load_settings(tmp_path, sinks=["nope"]))
    register_sink("broken", "evalloop.no_such_module:factory")
    with pytest.raises(ConfigError, match="sink 'broken' is not available"):
        build_sinks(load_settings(tmp_path, sinks=["broken"]))


def test_a_scheduled_fire_sends_its_regression_and_survives_a_dead_webhook(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"controlled": controlled_suite(8)})
    answers = root / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    with webhook_server(statuses=[500]) as dead, webhook_server() as alive:
        (root / "evalloop.toml").write_text(f'webhook_url = "{dead.url}"\nwebhook_retries = 2\n')
        write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
        for _ in range(2):  # two healthy runs: the regressed one joins the window, and still loses
            assert len(run_scheduled_job(str(root), ["controlled"], job_id="j")) == 1
        write_answers(answers, {f"c{i}": 0.0 for i in range(8)})
        second = run_scheduled_job(str(root), ["controlled"], job_id="j")
        assert len(second) == 1 and len(dead.received) == 2  # retried, failed, logged
        (root / "evalloop.toml").write_text(f'webhook_url = "{alive.url}"\n')
        third = run_scheduled_job(str(root), ["controlled"], job_id="j")
    assert len(third) == 1
    (got,) = alive.received
    assert got.body["run_id"] == third[0] and got.body["regression"] is True
    url = load_settings(root).database_url
    assert [e.verdict for e in ledger.entries(url, "j")] == ["regressed", "regressed", "steady",
                                                            "no baseline yet"]
    assert list_schedules(load_settings(root)) == []  # ad-hoc fires need no stored schedule
