"""``evalloop view`` over real HTTP on 127.0.0.1: the suites, a run's cases and its filters, two
runs compared (the newly failing first), incidents; read-only, loopback by default, nothing leaked,
and one clear line when there is no history."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import httpx
import pytest

from evalloop import HistoryStore, load_settings
from evalloop.view.serve import DEFAULT_HOST, make_server
from evalloop.view.urls import failing_runs
from support.cli import cli
from support.viewer import LOST, SECRET, regression_project, serving


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("view")
    settings, ids = regression_project(root)
    return root, settings, ids


@pytest.fixture(scope="module")
def base(project):
    _, settings, _ = project
    with serving(settings) as url:
        yield url


def get(base: str, path: str, **kw) -> httpx.Response:
    return httpx.get(base + path, timeout=30, **kw)


def test_home_lists_the_suites_with_the_failing_one_named(base):
    res = get(base, "/")
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    page = res.text
    assert 'href="/suites/controlled"' in page and 'href="/suites/leaky"' in page
    assert "The latest run fails in" in page and "<svg" in page  # a banner and the sparklines


def test_a_runs_page_shows_its_cases_and_filters_them(base, project):
    _, _, ids = project
    page = get(base, f"/runs/{ids[-1]}").text
    assert all(f"<code>c{i}</code>" in page for i in range(12))
    failing = get(base, f"/runs/{ids[-1]}", params={"failing": "1"}).text
    shown = set(re.findall(r"<code>(c\d+)</code>", failing))
    assert shown == set(LOST), shown
    flipped = get(base, f"/runs/{ids[-1]}", params={"flipped": "1", "tag": "smoke"}).text
    assert set(re.findall(r"<code>(c\d+)</code>", flipped)) == {"c1", "c3"}  # c0-c3 are tagged smoke
    # a unique prefix redirects to the stable URL
    res = get(base, f"/runs/{ids[-1][:-2]}", follow_redirects=False)
    assert res.status_code == 307 and res.headers["location"] == f"/runs/{ids[-1]}"


def test_compare_puts_the_newly_failing_cases_first_by_how_much_they_moved(base, project):
    _, _, ids = project
    page = get(base, f"/compare/{ids[-2]}/{ids[-1]}").text
    order = re.findall(r'<article class="case-card[^"]*">\s*<h3><code>(c\d+)</code>', page)
    assert order[:6] == ["c1", "c7", "c9", "c3", "c11", "c5"], order  # newly failing, the biggest drop first
    assert len(order) == 12 and "6 newly failing" in page
    assert "95% CI" in page and re.search(r'data-label="p">[0-9.e-]+', page)  # the run-level test
    assert "<del>" in page and "<ins>" in page  # each case's output diff
    changed = get(base, f"/compare/{ids[-2]}/{ids[-1]}", params={"changed": "1"}).text
    assert re.findall(r'<article class="case-card[^"]*">\s*<h3><code>(c\d+)</code>', changed)[:6] == order[:6]


def test_suite_and_incident_pages(base, project):
    _, _, ids = project
    page = get(base, "/suites/controlled").text
    assert "<svg" in page and f'href="/runs/{ids[-1]}"' in page
    incidents = get(base, "/incidents").text
    found = re.findall(r'href="(/incidents/[^"]+)"', incidents)
    assert found, incidents[-2000:]
    one = get(base, found[0])
    assert one.status_code == 200 and "open" in one.text and ids[-1] in one.text


def test_what_is_not_there_is_a_404_page_and_nothing_is_written(base, project):
    root, settings, ids = project
    db = root / "history" / "evalloop.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for path in ("/runs/nope", f"/compare/{ids[0]}/nope", "/suites/nope", "/incidents/nope", "/x"):
        res = get(base, path)
        assert res.status_code == 404 and "<h1>404" in res.text, path
    assert httpx.post(base + "/", timeout=30).status_code == 405
    for path in ("/", f"/runs/{ids[-1]}", f"/compare/{ids[0]}/{ids[-1]}", "/incidents", "/suites/controlled"):
        assert get(base, path).status_code == 200
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_no_page_shows_a_secret_or_runs_a_script(base, project):
    _, settings, _ = project
    home = get(base, "/")
    assert "script-src" not in home.headers["content-security-policy"]  # default-src 'none': no script
    assert home.headers["x-frame-options"] == "DENY"
    first, run_id = [r.id for r in HistoryStore(settings.database_url, readonly=True).runs("leaky")][::-1]
    page = get(base, f"/runs/{run_id}").text
    assert "db.internal" in page and SECRET not in page and "***@" in page
    assert "source: " in page and "looked it up" in page  # what the scorer added, redacted too
    for path in (f"/runs/{run_id}?failing=1", f"/compare/{first}/{run_id}", "/suites/leaky", "/"):
        assert SECRET not in get(base, path).text


def test_a_request_naming_another_host_is_refused(base):
    """A DNS-rebinding page (evil.example resolving to 127.0.0.1) cannot read the history."""
    assert get(base, "/", headers={"Host": "evil.example"}).status_code == 400
    assert get(base, "/", headers={"Host": "localhost"}).status_code == 200


def test_it_listens_on_loopback_by_default(project):
    _, settings, _ = project
    assert DEFAULT_HOST == "127.0.0.1" and make_server(settings).config.host == "127.0.0.1"


def test_no_history_is_one_line_saying_what_to_do(tmp_path):
    res = cli(tmp_path, "view")
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no runs yet" in lines[0] and "evalloop run" in lines[0], res.stderr
    assert not (tmp_path / "history").exists()  # nothing created


def test_a_history_without_runs_says_the_same(tmp_path):
    assert cli(tmp_path, "init").returncode == 0
    HistoryStore(load_settings(tmp_path).database_url)  # the tables, no run
    res = cli(tmp_path, "view")
    assert res.returncode != 0 and "no runs yet" in res.stderr and "evalloop run" in res.stderr, res.stderr


def test_a_large_run_is_paged_and_its_filters_count_every_case(tmp_path, monkeypatch):
    from evalloop import run_suite
    from support.project import controlled_suite, make_project, write_answers

    root = make_project(tmp_path, {"controlled": controlled_suite(120)})
    write_answers(root / "answers.json", {f"c{i}": 0.1 if i % 10 == 0 else 0.9 for i in range(120)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    monkeypatch.syspath_prepend(str(root))
    settings = load_settings(root)
    run_id = run_suite("controlled", settings=settings).comparison.run.id
    with serving(settings) as url:
        first = get(url, f"/runs/{run_id}").text
        assert len(re.findall(r'<article class="case-card', first)) == 50 and "1–50 shown" in first
        assert f'href="/runs/{run_id}?page=3"' in first and "failing (12)" in first
        last = get(url, f"/runs/{run_id}", params={"page": "3"}).text
        assert len(re.findall(r'<article class="case-card', last)) == 20 and "<code>c119</code>" in last
        beyond = get(url, f"/runs/{run_id}", params={"page": "99"}).text  # the last page, not an error
        assert "<code>c119</code>" in beyond


def test_run_prints_the_failing_runs_page_when_a_viewer_is_configured(tmp_path):
    assert cli(tmp_path, "init").returncode == 0
    assert cli(tmp_path, "run", "--all").returncode == 0
    quiet = cli(tmp_path, "run", "--all", env={"EVALLOOP_VIEWER_URL": "http://127.0.0.1:8765/"})
    assert quiet.returncode == 0 and "view " not in quiet.stderr  # nothing fails: no link
    greeter = tmp_path / "greeter.py"
    greeter.write_text(greeter.read_text().replace("Hello", "Bye"))
    res = cli(tmp_path, "run", "--all", env={"EVALLOOP_VIEWER_URL": "http://127.0.0.1:8765/"})
    assert res.returncode == 1, res.stderr
    found = re.search(r"^view greeting: http://127\.0\.0\.1:8765(/runs/\S+)$", res.stderr, flags=re.M)
    assert found, res.stderr
    with serving(load_settings(tmp_path)) as url:
        page = get(url, found.group(1))
        assert page.status_code == 200 and "fail" in page.text
    bad = cli(tmp_path, "run", "--all", env={"EVALLOOP_VIEWER_URL": "localhost:8765"})
    assert bad.returncode != 0 and "viewer_url" in bad.stderr
    assert failing_runs([object()], None) == []  # no viewer configured: no link


def test_the_docs_commands_parse():
    """docs/viewer.md shows these in a text block (they serve until Ctrl-C): their options exist."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "viewer.md").read_text()
    shown = re.findall(r"^\$ evalloop (view[^#\n]*?)\s*(?:#.*)?$", text, flags=re.M)
    assert len(shown) == 3, shown
    for line in shown:
        res = cli(Path.cwd(), *line.split(), "--help")
        assert res.returncode == 0, (line, res.stderr)


def test_a_postgresql_history_is_served_and_never_written(tmp_path, monkeypatch, pg_server):
    import sqlalchemy
    from sqlalchemy import inspect, text

    from evalloop import run_suite
    from evalloop.errors import EvalloopError
    from evalloop.history.readonly import readonly_engine
    from evalloop.view.serve import check_history
    from support.project import controlled_suite, make_project, write_answers

    url = pg_server.create_database()
    monkeypatch.setenv("EVALLOOP_HISTORY_URL", url)
    root = make_project(tmp_path, {"controlled": controlled_suite(4)})
    settings = load_settings(root)
    with pytest.raises(EvalloopError, match="no runs yet"):
        check_history(settings)  # an empty database: the one line, and no table created
    with sqlalchemy.create_engine(url).connect() as conn:
        assert not inspect(conn).get_table_names()
    write_answers(root / "answers.json", {f"c{i}": 0.9 for i in range(4)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    monkeypatch.syspath_prepend(str(root))
    run_id = run_suite("controlled", settings=settings).comparison.run.id
    with serving(settings) as base:
        assert "<code>c3</code>" in get(base, f"/runs/{run_id}").text
        assert 'href="/suites/controlled"' in get(base, "/").text
    with readonly_engine(url).connect() as conn, pytest.raises(sqlalchemy.exc.DBAPIError, match="read-only"):
        conn.execute(text("DELETE FROM runs"))


def test_a_suites_page_follows_new_runs_and_acceptances(tmp_path, monkeypatch):
    """The trend is kept between requests, but never past a new run or an acceptance."""
    from evalloop import run_suite
    from evalloop.history.acceptance import accept
    from support.project import controlled_suite, make_project, write_answers

    root = make_project(tmp_path, {"controlled": controlled_suite(4)})
    write_answers(root / "answers.json", {f"c{i}": 0.9 for i in range(4)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    monkeypatch.syspath_prepend(str(root))
    settings = load_settings(root)
    first = run_suite("controlled", settings=settings).comparison.run.id
    with serving(settings) as url:
        page = get(url, "/suites/controlled").text
        assert f"/runs/{first}" in page and "accepted: the run a person" not in page
        second = run_suite("controlled", settings=settings).comparison.run.id
        page = get(url, "/suites/controlled").text
        assert f"/runs/{second}" in page
        accept(HistoryStore(settings.database_url), "controlled", "the new prompt")
        assert "accepted: the run a person" in get(url, "/suites/controlled").text


def test_warming_reads_the_latest_run_its_suite_and_its_comparison(project):
    from evalloop.view.serve import read_ahead
    from evalloop.view.source import Source

    _, settings, ids = project
    source = Source(settings)
    read_ahead(source)
    assert any(key[1] == ids[-1] for key in source._cases)
    assert any(key[:3] == ("pair", ids[-2], ids[-1]) for key in source._kept)
    assert any(key[0] == "trend" and key[1] == "controlled" for key in source._kept)


def test_the_command_prints_the_port_it_chose_and_a_port_in_use_is_one_line(project):
    import os
    import signal
    import subprocess

    from support.cli import EVALLOOP

    root, _, _ = project
    proc = subprocess.Popen([EVALLOOP, "view", "--port", "0"], cwd=root, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        line = proc.stderr.readline()  # blocks until the viewer serves
        found = re.match(r"evalloop view: (http://127\.0\.0\.1:(\d+)/) \(read-only", line)
        assert found and found.group(2) != "0", line
        assert httpx.get(found.group(1), timeout=30).status_code == 200
        port = int(found.group(2))
        res = cli(root, "view", "--port", str(port))
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and f"cannot listen on http://127.0.0.1:{port}/" in lines[0] and "--port" in lines[0]
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: how a viewer stops — exit 0, one line
        assert proc.wait(60) == 0
        assert proc.stderr.read().strip() == "evalloop view: stopped"


def test_an_accepted_incident_says_who_closed_it_and_why(tmp_path):
    settings, ids = regression_project(tmp_path)
    res = cli(tmp_path, "accept", "controlled", "--reason", "the shorter answers are intended")
    assert res.returncode == 0, res.stderr
    with serving(settings) as url:
        listed = get(url, "/incidents").text
        found = re.findall(r'href="(/incidents/[^"]+)"', listed)
        assert found and "accepted: the shorter answers are intended" in listed
        page = get(url, found[0]).text
        assert "Closed — accepted: the shorter answers are intended" in page and f"/runs/{ids[-1]}" in page


def test_a_suite_whose_only_run_is_still_going_is_a_page_that_says_so(tmp_path):
    from datetime import UTC, datetime

    from evalloop.history.models import Run, RunStatus

    settings, _ = regression_project(tmp_path)
    store = HistoryStore(settings.database_url)
    store.begin_run(Run(id="20990101T000000000-runnin", suite="fresh", status=RunStatus.RUNNING,
                        started_at=datetime.now(UTC)))
    with serving(settings) as url:
        page = get(url, "/suites/fresh")
        assert page.status_code == 200 and "first run in progress" in page.text, page.text[-1500:]
        assert get(url, "/").status_code == 200
