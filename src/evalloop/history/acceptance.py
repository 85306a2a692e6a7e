"""Accepted changes: a run a person declared the new normal, so later baselines start from it.

``evalloop accept SUITE --reason TEXT`` marks the scorers of the suite's latest full, valid
run (or ``--run``) as accepted: the acceptance (reason, time, who) is written into each
scorer's summary details, which makes that run eligible as a baseline whatever its verdict
and the oldest run any later baseline, nightly chart or drift reference reaches back to
(:mod:`evalloop.history.eligibility`). It is also appended to the suite's run log as its own
line (``"id": "accept:<run id>"``), so a clone that imports the log accepts the same run.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from datetime import UTC, datetime

from pydantic import BaseModel

from evalloop.errors import ConfigError
from evalloop.history.details import json_object
from evalloop.history.models import Run, RunStatus
from evalloop.history.store import HistoryStore

PREFIX = "accept:"


class Acceptance(BaseModel):
    """One acceptance: which run and scorers, why, when and by whom."""

    run_id: str
    suite: str
    scorers: list[str]
    reason: str
    at: str
    by: str = ""


def _who() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""


def accept(store: HistoryStore, suite: str, reason: str, *, scorer: str | None = None,
           run_id: str | None = None) -> Acceptance:
    """Accept the suite's latest full, valid run (or ``run_id``) for ``scorer`` (or every scorer)."""
    if not reason.strip():
        raise ConfigError("an acceptance needs a reason", hint="add --reason TEXT (it is kept with the run)")
    run = _chosen_run(store, suite, run_id)
    summaries = store.summaries(run.id)
    names = [n for n, s in summaries.items() if not s.skipped and (scorer is None or n == scorer)]
    if not names:
        raise ConfigError(f"run {run.id} has no graded scorer '{scorer}'" if scorer else
                          f"run {run.id} has no graded scorer", where=suite,
                          hint=f"scorers of that run: {', '.join(sorted(summaries)) or 'none'}")
    found = Acceptance(run_id=run.id, suite=suite, scorers=names, reason=reason.strip(),
                       at=datetime.now(UTC).isoformat(timespec="seconds"), by=_who())
    apply(store, found)
    return found


def apply(store: HistoryStore, found: Acceptance) -> bool:
    """Write the acceptance into the run's scorer summaries; False when the run is not here."""
    summaries = store.summaries(found.run_id)
    if not summaries:
        return False
    record = found.model_dump(include={"reason", "at", "by"})
    updates: dict[str, dict[str, object]] = {}
    for name in found.scorers:
        summary = summaries.get(name)
        if summary is None:
            continue
        details = json_object(summary.details)
        if details.get("accepted") == record and summary.accepted:
            continue
        details["accepted"] = dict(record)
        updates[name] = {"details": details, "eligible": True, "accepted": True}
    if updates:
        store.update_summaries(found.run_id, updates)
    return True


def _chosen_run(store: HistoryStore, suite: str, run_id: str | None) -> Run:
    if run_id is not None:
        run = store.get_run(run_id)
        if run is None or run.suite != suite:
            raise ConfigError(f"no run {run_id} of suite '{suite}'", hint="see `evalloop history SUITE`")
        if run.status != RunStatus.COMPLETED or not run.valid or run.partial:
            raise ConfigError(f"run {run_id} cannot be accepted: only a completed, valid, full run can "
                              "become the new normal", hint="run the whole suite, then accept that run")
        return run
    for run in store.runs(suite, limit=50):
        if run.status == RunStatus.COMPLETED and run.valid and not run.partial:
            return run
    raise ConfigError(f"suite '{suite}' has no completed, valid, full run to accept",
                      hint=f"run it first: evalloop run --suite {suite}")


def log_line(found: Acceptance) -> dict[str, object]:
    """The acceptance as a run log line (read back by :func:`from_log`)."""
    return {"v": 1, "id": PREFIX + found.run_id, "suite": found.suite, "started_at": found.at,
            "accept": found.model_dump()}


def from_log(extra: Mapping[str, object]) -> Acceptance | None:
    """The acceptance a run log line carries, if it is one."""
    data = extra.get("accept")
    return Acceptance(**data) if isinstance(data, dict) else None
