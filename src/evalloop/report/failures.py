"""Failure patterns across runs: each case's failure history, grouped by what went wrong.

``evalloop failures SUITE`` reads the suite's last completed runs (:data:`RUNS` by default) and,
for every case that failed in any of them: how often it failed (in how many of the runs that
graded it), when it first and last failed, whether it fails now and since when (the current
streak), which incidents remember it (their ``failing_cases`` or ``chronic_cases``), and whether it
is a learn or a held-out case of the suite's split now. Cases are grouped by the **pattern** of
their latest failure: ``expected X, got Y`` on the expected answer's own fields
(:func:`evalloop.learning.feedback.pattern`), else the scorer's message with its numbers blanked.
A case fails a run when any scorer grades it below that run's pass mark (the one rule,
:func:`evalloop.report.failing.case_fails`); a scorer's known-bad controls are never failing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from evalloop.history.details import summary_details
from evalloop.history.models import Run
from evalloop.history.store import HistoryStore
from evalloop.learning import feedback
from evalloop.learning.incident_records import meta
from evalloop.report.failing import CaseReader, case_fails

RUNS = 20


class CaseHistory(BaseModel):
    """One case's failures over the runs read."""

    case_id: str
    part: str | None = Field(None, description="learn or held-out (the suite's split now); None: suite not found")
    runs: int = Field(description="runs that graded the case")
    failed: int = Field(description="of them, runs in which it failed")
    first_failed: str
    last_failed: str
    failing_now: bool = Field(description="failing in the newest run that graded it")
    since: str | None = Field(None, description="when the current streak of failures began (failing now)")
    streak: int = 0
    scorers: list[str] = Field(default_factory=list, description="the scorers it failed in its latest failure")
    incidents: list[str] = Field(default_factory=list, description="'<id> (<status>)' of incidents remembering it")


class Pattern(BaseModel):
    """What the cases of one group got wrong, and the cases."""

    pattern: str
    cases: list[CaseHistory]


class Failures(BaseModel):
    """The failure history of one suite."""

    suite: str
    runs: int
    first_run: str | None = None
    last_run: str | None = None
    cases: int = 0
    patterns: list[Pattern] = Field(default_factory=list)
    notice: str | None = None


def _when(run: Run) -> str:
    return run.started_at.isoformat(timespec="minutes")


def failure_history(store: HistoryStore, suite: str, *, runs: int = RUNS, fixture: Any = None,
                    incidents: Sequence[Any] = (), failing_only: bool = False) -> Failures:
    """The failure history of ``suite`` over its last ``runs`` completed runs; ``fixture`` (the
    :class:`~evalloop.suites.models.Suite`) adds each case's expected answer and split part,
    ``incidents`` (stored incident records) which incidents remember each case."""
    window = list(reversed(store.runs(suite, limit=runs, statuses=["completed"])))  # oldest first
    out = Failures(suite=suite, runs=len(window))
    if not window:
        return out
    out.first_run, out.last_run = _when(window[0]), _when(window[-1])
    reader = CaseReader(store)
    graded: dict[str, list[tuple[int, bool, list[str]]]] = defaultdict(list)  # case → (run, failed, scorers)
    for at, run in enumerate(window):
        verdicts: dict[str, list[str]] = {}
        for name, summary in store.summaries(run.id).items():
            details = summary_details(summary)
            mark, controls = details.pass_mark, set(details.controls)
            for case_id, value in reader.scores(run.id, name).items():
                bad = verdicts.setdefault(case_id, [])
                if case_id not in controls and case_fails(value, mark):
                    bad.append(name)
        for case_id, bad in verdicts.items():
            graded[case_id].append((at, bool(bad), bad))
    held = _held_out(fixture)
    remembered = _remembered(incidents)
    latest_failure: dict[int, list[str]] = defaultdict(list)  # run index → cases whose latest failure it is
    histories: dict[str, CaseHistory] = {}
    for case_id, seen in graded.items():
        failed = [(at, scorers) for at, fails, scorers in seen if fails]
        if not failed:
            continue
        streak = 0
        for _, fails, _ in reversed(seen):
            if not fails:
                break
            streak += 1
        now = seen[-1][1]
        if failing_only and not now:
            continue
        histories[case_id] = CaseHistory(
            case_id=case_id, part=None if held is None else "held-out" if case_id in held else "learn",
            runs=len(seen), failed=len(failed), first_failed=_when(window[failed[0][0]]),
            last_failed=_when(window[failed[-1][0]]), failing_now=now,
            since=_when(window[seen[-streak][0]]) if now else None, streak=streak,
            scorers=failed[-1][1], incidents=remembered.get(case_id, []))
        latest_failure[failed[-1][0]].append(case_id)
    groups: dict[str, list[CaseHistory]] = defaultdict(list)
    for at, ids in latest_failure.items():
        for case_id, text in _patterns(store, window[at].id, ids, histories, fixture).items():
            groups[text].append(histories[case_id])
    out.cases = len(histories)
    out.patterns = [Pattern(pattern=text, cases=sorted(cases, key=lambda c: (-c.failed, c.case_id)))
                    for text, cases in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))]
    return out


def _held_out(fixture: Any) -> set[str] | None:
    if fixture is None:
        return None
    try:
        return set(fixture.held_out_ids())
    except Exception:  # noqa: BLE001 - the file changed or broke since: the history still shows
        return None


def _remembered(incidents: Sequence[Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for item in incidents:
        record = getattr(item, "record", item)
        found_meta = meta(record)
        if found_meta is None:
            continue
        label = f"{record.id} ({found_meta.status})"
        for case_id in {*found_meta.failing_cases, *found_meta.chronic_cases}:
            found[str(case_id)].append(label)
    return found


def _patterns(store: HistoryStore, run_id: str, ids: list[str], histories: dict[str, CaseHistory],
              fixture: Any) -> dict[str, str]:
    """Each case's pattern in the run of its latest failure."""
    outputs = {r.case_id: (r.output if r.output is not None else r.error)
               for r in store.case_results(run_id) if r.case_id in set(ids) and r.epoch == 0}
    expected = {}
    if fixture is not None:
        wanted = set(ids)
        try:
            expected = {c.id: c.expected for c in fixture.iter_cases() if c.id in wanted}
        except Exception:  # noqa: BLE001 - the file changed since: messages still group
            expected = {}
    messages: dict[str, str] = {}
    for scorer in {s for c in ids for s in histories[c].scorers}:
        want = [c for c in ids if scorer in histories[c].scorers and c not in messages]
        messages.update(store.case_messages(run_id, scorer, want))
    return {c: feedback.pattern(expected.get(c), outputs.get(c), messages.get(c, "")) for c in ids}


def _short_time(iso: str) -> str:
    return iso[:16].replace("T", " ")


def lines(report: Failures, limit: int | None = None) -> list[tuple[str, list[str]]]:
    """The report as (heading, lines) records: one per pattern, a line per case (``limit`` per
    pattern, then how many more); times in UTC to the minute, incident ids to 8 characters."""
    out = []
    for group in report.patterns:
        rows = []
        for c in group.cases[:limit]:
            part = f" ({c.part})" if c.part else ""
            often = (f"failed once ({_short_time(c.last_failed)})" if c.failed == 1 else
                     f"failed {c.failed} of {c.runs} runs ({_short_time(c.first_failed)} … "
                     f"{_short_time(c.last_failed)})")
            now = (f"failing since {_short_time(c.since or c.last_failed)} ({c.streak} run"
                   f"{'s' if c.streak != 1 else ''} in a row)" if c.failing_now else "passing now")
            row = f"{c.case_id}{part}: {often}; {now}"
            if c.incidents:
                row += "; " + ", ".join(f"incident {i[:8]}{i[i.index(' '):] if ' ' in i else ''}" for i in c.incidents)
            rows.append(row)
        if limit is not None and len(group.cases) > limit:
            rows.append(f"… and {len(group.cases) - limit} more (--limit, or --json for all)")
        out.append((f"{group.pattern}  ({len(group.cases)} case{'s' if len(group.cases) != 1 else ''})", rows))
    return out
