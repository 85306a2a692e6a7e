"""A project with a regression for the viewer's tests, and the viewer served on 127.0.0.1 in a
thread (a real uvicorn server on a free port, started and stopped on events)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalloop import load_settings, run_suite
from evalloop.config import Settings
from evalloop.view.serve import bound_port, make_server
from support.project import SCORERS, controlled_suite, make_project, write_answers

#: the cases the last run of ``controlled`` loses (c1 drops the most: it must come first)
LOST = {"c1": 0.05, "c3": 0.2, "c5": 0.3, "c7": 0.1, "c9": 0.15, "c11": 0.25}
#: a credential in a stored output and a scorer's metadata: no page may show it
SECRET = "hunter2-s3cr3t"
#: a scorer whose metadata nests the credential (a page prints what a scorer added)
LEAKY_SCORER = SCORERS + '''

@scorer("leaks")
def leaks(input, output, expected):
    return Score(value=0.0, message="looked it up", metadata={"source": {"dsn": input["dsn"]}, "n": 1})
'''


def regression_project(root: Path) -> tuple[Settings, list[str]]:
    """``controlled`` run six times steady, then once with three cases lost (a regression);
    ``leaky`` run twice with a database URL holding a password in its output. Returns the
    settings and the run ids of ``controlled``, oldest first."""
    leaky = {"name": "leaky", "target": "sut:echo", "scorers": ["equals", "leaks"],
             "cases": [{"id": "dsn", "input": {"dsn": f"postgresql://app:{SECRET}@db.internal/prod"},
                        "expected": "no"}]}
    controlled = controlled_suite(12)
    for i, case in enumerate(controlled["cases"]):
        case["tags"] = ["smoke" if i < 4 else "deep"]
    make_project(root, {"controlled": controlled, "leaky": leaky}, scorers=LEAKY_SCORER)
    answers = root / "answers.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    mp.syspath_prepend(str(root))
    settings = load_settings(root)
    ids = []
    try:
        for k in range(7):
            level = {f"c{i}": 0.9 + 0.01 * ((i + k) % 3) for i in range(12)}
            if k == 6:
                level.update(LOST)
            write_answers(answers, level)
            ids.append(run_suite("controlled", settings=settings).comparison.run.id)
        for _ in range(2):
            run_suite("leaky", settings=settings)
    finally:
        mp.undo()
    return settings, ids


@contextlib.contextmanager
def serving(settings: Settings, host: str = "127.0.0.1") -> Iterator[str]:
    """The viewer of ``settings``' project served on ``host`` and a free port: yields its base URL."""
    server = make_server(settings, host=host, port=0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.ready.wait(30), "the viewer did not start"
        port = bound_port(server)
        assert port
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
