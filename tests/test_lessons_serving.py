"""Issue #37 item 7: ``evalloop.lessons()`` on a serving path waits a bounded time, serves its last
good value when the memory service is slow or failing, and stops asking a failing service for a
while (a circuit breaker). On main it blocked 10.1 s on a service that accepts connections and
never answers, then cached "" for 30 s."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import yaml

import evalloop
from evalloop.learning import lessons as lessons_module
from evalloop.learning.incident_records import failure_tags
from support.http_memory_server import MemoryServer, memory_server  # noqa: F401 - a fixture
from support.loopback import SilentServer

#: generous: the bound is 0.3 s; main took the memory service's whole 10 s timeout
RETURNED = 5.0


def project(root: Path, url: str) -> Path:
    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    suite = {"name": "faq", "target": "sut:answer", "scorers": ["equals"],
             "cases": [{"id": f"c{i}", "input": f"question {i}", "expected": f"answer {i}"} for i in range(10)]}
    (root / "fixtures" / "faq.yaml").write_text(yaml.safe_dump(suite))
    (root / "evalloop.toml").write_text(f'memory_url = "{url}"\n')
    return root


@pytest.fixture(autouse=True)
def _fresh():
    lessons_module.clear_cache()
    yield
    lessons_module.clear_cache()


def test_a_service_that_never_answers_costs_a_bounded_wait(tmp_path, caplog):
    with SilentServer() as silent:
        root = project(tmp_path, silent.url)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="evalloop.lessons"):
            assert evalloop.lessons("faq", project_dir=root) == ""
        assert time.monotonic() - started < RETURNED
        assert "did not answer within 0.3 s" in caplog.text
        (root / "evalloop.toml").write_text(f'memory_url = "{silent.url}"\nlessons_wait = 0.05\n')
        assert evalloop.lessons("faq", project_dir=root) == ""     # the setting; nothing good to serve


def test_the_last_good_lessons_are_served_and_a_failing_service_is_left_alone(tmp_path, monkeypatch,
                                                                             memory_server: MemoryServer):  # noqa: F811
    memory_server.store.store("Eval \"faq\" regression: equals — c1 should answer 'answer 1'",
                              tags=failure_tags("faq", "equals"),
                              metadata={"kind": "eval-failure", "eval_suite": "faq", "scorer": "equals",
                                        "status": "open", "failing_cases": [], "last_seen": "now",
                                        "tags": failure_tags("faq", "equals")})
    root = project(tmp_path, memory_server.url)
    good = evalloop.lessons("faq", project_dir=root, wait=60)
    assert "PAST FAILURE" in good and "answer 1" in good
    monkeypatch.setattr(lessons_module, "TTL_SECONDS", 0.0)       # every call reads again

    memory_server.status = 500                                    # failing fast: the good value stays
    assert evalloop.lessons("faq", project_dir=root, wait=60) == good
    memory_server.status = 200
    assert evalloop.lessons("faq", project_dir=root, wait=60) == good  # and a success resets the count

    with SilentServer() as silent:                                # now it hangs
        (root / "evalloop.toml").write_text(f'memory_url = "{silent.url}"\n')
        for _ in range(lessons_module.BREAK_AFTER):
            assert evalloop.lessons("faq", project_dir=root, wait=0.05) == good  # never "" over a good value
        assert silent.connected.wait(30) and silent.connections == 1  # one read in flight, not three
        slot = lessons_module._slots[(str(root.resolve()), "faq")]
        assert slot.open_until > time.monotonic()                 # the breaker is open
        (root / "evalloop.toml").write_text(f'memory_url = "{memory_server.url}"\n')
        asked = len(memory_server.requests)
        started = time.monotonic()
        assert evalloop.lessons("faq", project_dir=root, wait=60) == good
        assert time.monotonic() - started < RETURNED              # served at once: no read started
        assert len(memory_server.requests) == asked
