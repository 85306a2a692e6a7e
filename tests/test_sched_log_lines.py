"""The scheduler's log: one line per fire, at the level of the run's outcome (real fire processes)."""

from __future__ import annotations

import logging

import pytest

from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import run_scheduled_job
from support.project import controlled_suite, make_project, write_answers
from support.webhook_server import closed_port_url


def fire_lines(caplog: pytest.LogCaptureFixture, root, answers: dict[str, float]) -> list[logging.LogRecord]:
    write_answers(root / "answers.json", answers)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        assert len(run_scheduled_job(str(root), ["controlled"], job_id="j")) == 1
    return [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith("evalloop")]


def test_each_fire_logs_one_line_at_the_level_of_its_outcome(tmp_path, monkeypatch, caplog):
    root = make_project(tmp_path, {"controlled": controlled_suite(8)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    healthy = {f"c{i}": 1.0 for i in range(8)}
    (first,) = fire_lines(caplog, root, healthy)
    assert first.levelno == logging.INFO and "no baseline yet" in first.getMessage()
    (steady,) = fire_lines(caplog, root, healthy)
    assert steady.levelno == logging.INFO and "steady" in steady.getMessage()
    (watch,) = fire_lines(caplog, root, {**healthy, "c0": 0.0, "c1": 0.0})  # 25 % down, not significant
    assert watch.levelno == logging.INFO and ": watch" in watch.getMessage(), watch.getMessage()
    (root / "evalloop.toml").write_text(f'webhook_url = "{closed_port_url()}"\nwebhook_retries = 1\n')
    sink, regressed = fire_lines(caplog, root, {f"c{i}": 0.0 for i in range(8)})
    assert sink.levelno == logging.ERROR and "sink webhook" in sink.getMessage()  # a problem of its own
    text = regressed.getMessage()
    assert regressed.levelno == logging.WARNING, text
    assert "regressed" in text and "WARNING" not in text and "value" in text  # the scorer is named
    assert [e.verdict for e in ledger.entries(load_url(root), "j")] == [
        "regressed", "watch", "steady", "no baseline yet"]


def load_url(root) -> str:
    from evalloop import load_settings

    return load_settings(root).database_url
