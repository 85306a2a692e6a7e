"""Fires missed while no scheduler could take them (downtime, a database outage) are said
(#40 item 4): on main they were coalesced or dropped with no ledger row and no alarm. A late
fire that ran as one with later ones gets a `coalesced` row; a fire past its misfire grace a
`missed` row and an event to the sinks (a real loopback webhook). A real scheduler."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evalloop.config import load_settings
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import CONTROL, add_schedule, list_schedules
from support.project import make_project, wait_for
from support.scheduling import serving
from support.webhook_server import webhook_server

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}


@pytest.fixture
def project(tmp_path):
    CONTROL.reset()
    yield make_project(tmp_path / "p", {"s": SUITE})
    CONTROL.reset()


def test_late_and_missed_fires_get_ledger_rows_and_missed_ones_an_alarm(project):
    with webhook_server() as server:
        (project / "evalloop.toml").write_text(f'webhook_url = "{server.url}"\n')
        settings = load_settings(project)
        now = datetime.now(UTC)
        add_schedule(settings, ["s"], every="10s", job_id="late", first_run=now - timedelta(seconds=35),
                     grace_seconds=3600)
        add_schedule(settings, ["s"], every="1h", job_id="gone", first_run=now - timedelta(hours=2, minutes=30),
                     grace_seconds=60)
        url = settings.database_url
        with serving(settings):
            assert wait_for(lambda: any(e.status == "completed" for e in ledger.entries(url, "late")), 60)
            assert wait_for(lambda: any(e.status == "missed" for e in ledger.entries(url, "gone")), 30)
            assert wait_for(lambda: any(r.body.get("event") == "missed" for r in server.received), 30)
        late = ledger.entries(url, "late")
        assert sum(e.status == "coalesced" for e in late) >= 3, [(e.status, e.detail) for e in late]
        assert "ran as one with" in next(e.detail for e in late if e.status == "coalesced")
        missed = [e for e in ledger.entries(url, "gone") if e.status == "missed"]
        assert missed and "past its misfire grace" in missed[0].detail
        posted = next(r.body for r in server.received if r.body.get("event") == "missed")
        assert posted["schedule"] == "gone" and posted["suite"] == "s"
        info = {s.id: s for s in list_schedules(settings)}
        assert info["gone"].last_verdict == "missed"
