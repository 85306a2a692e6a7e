"""Per-case results of a stored run: what each case got, from whom, and why it passed or failed.

The one place that reads a run's case rows back (output, error, every scorer's score and
message), joins them with the cases' input and expected from the suite file, filters them
(``-k`` pattern on ids, ``--tag``, failed only), and renders them for ``evalloop show``,
``run -v`` and the ``--json`` documents of ``run`` and ``history``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from sqlalchemy import select

from evalloop.history.models import CaseResult, CaseScore
from evalloop.history.outputs import truncation_note
from evalloop.history.store import SCORES, HistoryStore
from evalloop.report.filters import CaseFilter
from evalloop.report.format import num
from evalloop.verdicts.outcome import case_outcome

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CaseFilter", "CaseScoreView", "CaseView", "case_docs", "load_cases", "previous_completed",
           "print_cases"]

#: characters of an input, expected or output shown per case on a terminal (JSON has it all)
SHOWN_CHARS = 400


class CaseScoreView(BaseModel):
    """One scorer's grade of one case (epochs averaged)."""

    scorer: str
    value: float | None
    passed: bool | None
    errored: bool = False
    skipped: bool = False
    control: bool = False
    tests_scorer: bool = False  # a control with a fixed output (else an expected failure of the product)
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict)  # what the scorer added (a judge's grade, ...)


class CaseView(BaseModel):
    """One case of a run: its input and expected (from the suite), output, error and scores."""

    case_id: str
    tags: list[str] = Field(default_factory=list)
    input: Any = None
    expected: Any = None
    output: Any = None
    error: str | None = None
    traceback: str | None = None  # the target's exception, its own frames
    failure: str | None = None
    output_bytes: int | None = None  # a truncated output's full size (history.outputs); None: stored whole
    output_sha256: str | None = None
    truncated: str | None = None  # the line that says so
    latency_ms: float = 0.0
    epochs: int = 1
    passed: bool
    scores: list[CaseScoreView]
    change: str | None = None  # "newly failing" / "newly passing" against the previous run
    held_out: bool | None = None  # in the suite's held-out part now (never in a lesson); None: suite not found


def _pass_marks(store: HistoryStore, run_id: str) -> dict[str, float]:
    marks = {}
    for name, summary in store.summaries(run_id).items():
        try:
            marks[name] = float(json.loads(summary.details or "{}").get("pass_mark", 0.5))
        except (ValueError, TypeError):
            marks[name] = 0.5
    return marks


def _output(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def load_cases(store: HistoryStore, run_id: str, *, which: CaseFilter | None = None,
               suite: Any = None, previous_run: str | None = None) -> list[CaseView]:
    """The run's cases in run order, filtered; ``suite`` (a :class:`~evalloop.suites.models.Suite`)
    adds input and expected; ``previous_run`` marks the cases that newly fail or pass."""
    which = which or CaseFilter()
    marks = _pass_marks(store, run_id)
    results, scores = store.case_results(run_id), store.score_rows(run_id)
    by_case: dict[str, list[CaseResult]] = defaultdict(list)
    for row in results:
        if which.keeps_id(row.case_id) and which.keeps_tags((row.tags or "").split(",") if row.tags else []):
            by_case[row.case_id].append(row)
    grades: dict[str, dict[str, list[CaseScore]]] = defaultdict(lambda: defaultdict(list))
    for s in scores:
        if s.case_id in by_case:
            grades[s.case_id][s.scorer].append(s)
    before = _case_passes(store, previous_run, marks) if previous_run else {}
    fixture = _fixture(suite, set(by_case)) if suite is not None and by_case else {}
    held = _held_out(suite) if suite is not None and by_case else None
    views = []
    for case_id, rows in by_case.items():
        first = rows[0]
        case = fixture.get(case_id)
        per_scorer = [_grade(name, items, marks.get(name, 0.5),
                             control=bool(case is not None and case.expects_fail(name)),
                             tests_scorer=bool(case is not None and case.tests_scorer(name)))
                      for name, items in grades[case_id].items()]
        # the one rule (evalloop.verdicts.outcome): a target failure is a real 0 in every scorer's grades
        passed = all(g.passed for g in per_scorer if g.passed is not None)
        change = None
        if case_id in before and before[case_id] != passed:
            change = "newly passing" if passed else "newly failing"
        views.append(CaseView(
            case_id=case_id, tags=[t for t in (first.tags or "").split(",") if t],
            output=_output(first.output), error=first.error, traceback=first.traceback, failure=first.failure,
            output_bytes=first.output_bytes, output_sha256=first.output_sha256,
            truncated=truncation_note(first.output, first.output_bytes, first.output_sha256),
            latency_ms=sum(r.latency_ms for r in rows) / len(rows), epochs=len(rows),
            passed=passed, scores=per_scorer, change=change, held_out=None if held is None else case_id in held,
            input=case.input if case is not None else None,
            expected=case.expected if case is not None else None))
    if which.failed:
        views = [v for v in views if not v.passed]
    return views


def _grade(name: str, items: Sequence[CaseScore], pass_mark: float, *, control: bool,
           tests_scorer: bool = False) -> CaseScoreView:
    usable = [s.value for s in items if not s.errored and not s.skipped]
    graded = case_outcome(usable, pass_mark, errored=sum(1 for s in items if s.errored), control=control)
    value = graded.value
    passed = None if value is None else graded.passed
    return CaseScoreView(scorer=name, value=value, passed=passed, control=control, tests_scorer=tests_scorer,
                         errored=any(s.errored for s in items) and value is None,
                         skipped=all(s.skipped for s in items), message=items[0].message,
                         details=_details(items[0].meta))


def _details(meta: str | None) -> dict[str, Any]:
    """A stored score's metadata (its JSON object; anything else is left out)."""
    if not meta:
        return {}
    try:
        found = json.loads(meta)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _case_passes(store: HistoryStore, run_id: str, marks: dict[str, float]) -> dict[str, bool]:
    """Whether each case of another run passed (every graded scorer at or over its pass mark)."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(SCORES.c.case_id, SCORES.c.scorer, SCORES.c.value)
                            .where(SCORES.c.run_id == run_id, SCORES.c.errored.is_(False),
                                   SCORES.c.skipped.is_(False))).all()
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for case_id, scorer, value in rows:
        acc[(case_id, scorer)].append(value)
    out: dict[str, bool] = {}
    for (case_id, scorer), values in acc.items():
        ok = case_outcome(values, marks.get(scorer, 0.5)).passed
        out[case_id] = out.get(case_id, True) and ok
    return out


def _fixture(suite: Any, wanted: set[str]) -> dict[str, Any]:
    """The shown cases as the suite file holds them now (streamed): input, expected, controls."""
    found: dict[str, Any] = {}
    try:
        for case in suite.iter_cases():
            if case.id in wanted:
                found[case.id] = case
    except Exception:  # noqa: BLE001 - the file changed or broke since: the outputs still show
        pass
    return found


def _held_out(suite: Any) -> set[str] | None:
    """The suite's held-out cases as it splits them now (None when the file cannot be read)."""
    try:
        return set(suite.held_out_ids())
    except Exception:  # noqa: BLE001 - the file changed or broke since: the cases still show
        return None


def previous_completed(store: HistoryStore, suite: str, run_id: str) -> str | None:
    """The completed, valid run of the suite that came just before ``run_id``."""
    runs = store.runs(suite, limit=200, statuses=["completed"])
    ids = [r.id for r in runs]
    if run_id not in ids:
        return None
    for r in runs[ids.index(run_id) + 1:]:
        if r.valid:
            return r.id
    return None


def case_docs(views: Sequence[CaseView]) -> list[dict[str, Any]]:
    """The cases as JSON-able dicts (``--json``)."""
    return [v.model_dump(mode="json") for v in views]


def _short(value: Any, limit: int = SHOWN_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def print_cases(views: Sequence[CaseView], console: Console, *, limit: int | None = None,
                total: int | None = None, tracebacks: bool = False) -> None:
    """Each case: id, verdict, tags, input, expected, output (or error, with ``tracebacks`` its
    traceback), every score and message (each wrapped under its own indent)."""
    from evalloop.report.layout import note

    shown = views if limit is None else views[:limit]
    for v in shown:
        mark = "[green]pass[/]" if v.passed else "[red]FAIL[/]"
        change = f"  [yellow]{v.change}[/]" if v.change else ""
        change += "  [cyan]held out[/]" if v.held_out else ""
        tags = f"  [dim]tags: {', '.join(v.tags)}[/]" if v.tags else ""
        console.print(f"{mark} [bold]{_escape(v.case_id)}[/]{change}{tags}")
        note(console, f"input:    {_short(v.input)}", hang=10)
        note(console, f"expected: {_short(v.expected)}", hang=10)
        if v.error:
            note(console, f"error:    {_short(v.error)}", hang=10)
            if tracebacks and v.traceback:
                for line in v.traceback.rstrip().splitlines():
                    console.print(f"    {line}", markup=False, highlight=False, soft_wrap=True)
        else:
            note(console, f"output:   {_short(v.output)}", hang=10)
            if v.truncated:
                note(console, f"          {v.truncated}", hang=10)
        for s in v.scores:
            value = num(s.value)
            state = ("errored" if s.errored else "skipped" if s.skipped else
                     ("ok" if s.passed else "fail") + _control_label(s))
            message = f" — {_short(s.message, 200)}" if s.message else ""
            note(console, f"{s.scorer}: {value} {state}{message}", hang=4)
    left = (total if total is not None else len(views)) - len(shown)
    if left > 0:
        note(console, f"{left} more case(s) not shown (use --limit or filter with -k/--tag)", indent=0)


def _control_label(s: CaseScoreView) -> str:
    """What kind of known-bad case a score is of: a control of the scorer (a fixed output) or an
    expected failure of the product (it ran through the target)."""
    if not s.control:
        return ""
    return " (known-bad output: a control of the scorer)" if s.tests_scorer else " (expected to fail)"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
