"""The viewer's home and suite pages: every suite's latest verdict, a sparkline of its scorers and
its open incidents; one suite's trend charts (the report's own: band, baseline, threshold, floor,
and the marks where the product, the measurement or the acceptance changed), its runs and its
incidents and lessons over time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from evalloop.history.models import RunStatus
from evalloop.report.html import ChartPair, latency_charts, score_charts
from evalloop.report.trends import SuiteTrend, suite_trend
from evalloop.verdicts.outcome import outcome_of_labels
from evalloop.view import urls
from evalloop.view.incidents import Incident, open_counts, suite_incidents
from evalloop.view.source import Source

#: runs a sparkline and a suite's charts cover
SPARK_RUNS = 20
CHART_RUNS = 30
FINISHED = [s.value for s in RunStatus if s is not RunStatus.RUNNING]


@dataclass
class Spark:
    """A sparkline's geometry: a polyline per run of present values, a dot per value."""

    title: str
    width: int = 120
    height: int = 24
    lines: list[str] = field(default_factory=list)
    points: list[tuple[float, float, bool]] = field(default_factory=list)  # x, y, failed


def spark(title: str, values: Sequence[float | None], failed: Sequence[bool]) -> Spark:
    """The sparkline of ``values`` (oldest first; None: a gap), scaled to their own range."""
    out = Spark(title=title)
    present = [v for v in values if v is not None]
    if not present:
        return out
    lo, hi = min(present), max(present)
    span = hi - lo if hi - lo > 1e-9 else 1.0
    step = (out.width - 6) / max(1, len(values) - 1)
    run: list[str] = []
    for i, (v, bad) in enumerate(zip(values, failed, strict=True)):
        if v is None:
            if len(run) > 1:
                out.lines.append(" ".join(run))
            run = []
            continue
        x = 3 + i * step if len(values) > 1 else out.width / 2
        y = out.height - 3 - (v - lo) / span * (out.height - 6) if hi - lo > 1e-9 else out.height / 2
        run.append(f"{x:.1f},{y:.1f}")
        out.points.append((x, y, bad))
    if len(run) > 1:
        out.lines.append(" ".join(run))
    return out


class SuiteRow(BaseModel):
    """One suite on the home page."""

    name: str
    runs: int
    latest: Any  # the latest finished run (None: none yet)
    outcome: str
    fails: bool
    running: int
    scorers: list[tuple[str, float | None, str | None, Any]]  # name, latest mean, verdict, Spark
    open_incidents: int


def home_rows(source: Source) -> list[SuiteRow]:
    """Every suite with runs: its latest verdict, a sparkline per scorer, its open incidents."""
    store = source.store
    names = store.suites()
    opened = open_counts(source, names)
    rows = []
    for name in names:
        recent = store.runs(name, limit=SPARK_RUNS, statuses=FINISHED)[::-1]
        running = len(store.runs(name, limit=50, statuses=[RunStatus.RUNNING.value]))
        summaries = {r.id: store.summaries(r.id) for r in recent}
        scorers: dict[str, None] = {}
        for run in recent:
            scorers.update(dict.fromkeys(summaries[run.id]))
        latest = recent[-1] if recent else None
        labels = [s.verdict for s in summaries[latest.id].values()] if latest else []
        outcome = outcome_of_labels(labels, valid=latest.valid or latest.status != RunStatus.COMPLETED) \
            if latest else None
        lines = []
        for scorer in scorers:
            values = [summaries[r.id][scorer].mean if scorer in summaries[r.id] else None for r in recent]
            failed = [bool(scorer in summaries[r.id] and _fails(summaries[r.id][scorer].verdict)) for r in recent]
            last = summaries[latest.id].get(scorer) if latest else None
            lines.append((scorer, last.mean if last else None, last.verdict if last else None,
                          spark(f"{scorer}: the last {len(recent)} runs", values, failed)))
        rows.append(SuiteRow(name=name, runs=store.count_runs(name), latest=latest,
                             outcome=outcome.label if outcome else "no finished run",
                             fails=bool(outcome and outcome.fails), running=running, scorers=lines,
                             open_incidents=opened.get(name, 0)))
    return rows


def _fails(verdict: str | None) -> bool:
    return outcome_of_labels([verdict]).fails


class SuitePage(BaseModel):
    """One suite: its trend (the report's), the charts, its incidents and lessons."""

    model_config = {"arbitrary_types_allowed": True}

    trend: SuiteTrend
    charts: dict[str, ChartPair]
    latency: ChartPair | None
    incidents: list[Incident]
    incident_note: str
    previous: dict[str, str]  # run id -> the completed run before it (for "compare" links)
    window: int


def suite_page(source: Source, name: str, last: int = CHART_RUNS) -> SuitePage | None:
    """The suite's page (None: no run of that suite)."""
    if name not in source.store.suites():
        return None
    trend = source.memo(("trend", *source.suite_state(name, last)),
                        lambda: suite_trend(source.store, name, last=last, window=source.settings.window))
    link = urls.run
    charts = {t.scorer: score_charts(t, link=link) for t in trend.scorers}
    found, note = suite_incidents(source, name)
    previous: dict[str, str] = {}
    done: str | None = None  # the latest completed, valid run so far (oldest first)
    for row in trend.runs:
        if done is not None:
            previous[row.run_id] = done
        if row.status == RunStatus.COMPLETED and row.valid:
            done = row.run_id
    return SuitePage(trend=trend, charts=charts, latency=latency_charts(trend), incidents=found,
                     incident_note=note, previous=previous, window=source.settings.window)
