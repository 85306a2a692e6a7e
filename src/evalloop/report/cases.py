"""Per-case results of a stored run: what each case got, from whom, and why it passed or failed.

The one place that reads a run's case rows back (output, error, every scorer's score and
message), joins them with the cases' input and expected from the suite file, filters them
(``-k`` pattern on ids, ``--tag``, failed only), and renders them for ``evalloop show``,
``run -v``, the ``--json`` documents of ``run`` and ``history``, and the viewer's pages.

Two steps, so a page of a large run reads what it shows: :func:`case_facts` grades every case
from a few columns (whether it passed, each scorer's value, tags, held out), and
:func:`case_views` reads the full rows of the cases chosen from those facts.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, Field
from sqlalchemy import select

from evalloop.history.details import json_object, summary_details
from evalloop.history.outputs import truncation_note
from evalloop.history.store import RESULTS, SCORES, HistoryStore
from evalloop.report.filters import CaseFilter
from evalloop.report.format import num
from evalloop.verdicts.outcome import case_outcome

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CaseFacts", "CaseFilter", "CaseGrade", "CaseScoreView", "CaseView", "case_docs", "case_facts",
           "case_views", "load_cases", "previous_completed", "print_cases", "with_changes"]

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


class CaseGrade(NamedTuple):
    """One scorer's outcome of one case: its value (graded epochs averaged) and whether it passed
    (None: every grade errored or was skipped)."""

    value: float | None
    passed: bool | None


class CaseFacts(NamedTuple):
    """What a case of a run is filtered, counted and compared by: read for every case of a run
    from a few columns (no output, message or fixture value), so a page of a 10k-case run reads
    its facts, then the full rows of only the cases it shows (:func:`case_views`)."""

    case_id: str
    tags: tuple[str, ...]
    passed: bool  # every graded scorer passed (the one rule: evalloop.verdicts.outcome)
    grades: dict[str, CaseGrade]  # scorer -> its grade, in the order the run wrote them
    held_out: bool | None = None  # in the suite's held-out part now; None: the suite is not found
    change: str | None = None  # "newly failing" / "newly passing" (:func:`with_changes`)

    @property
    def graded(self) -> bool:
        """Whether any scorer graded the case (one that only errored neither passes nor fails)."""
        return any(g.passed is not None for g in self.grades.values())


def _pass_marks(store: HistoryStore, run_id: str) -> dict[str, float]:
    return {name: summary_details(summary).pass_mark for name, summary in store.summaries(run_id).items()}


def _output(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _tags(text: str | None) -> tuple[str, ...]:
    return tuple(t for t in text.split(",") if t) if text else ()


def _passed(grades: Iterable[bool | None]) -> bool:
    """Whether a case passed: every scorer that graded it passed (a target failure is a real 0 in
    every scorer's grades)."""
    return all(g for g in grades if g is not None)


def case_facts(store: HistoryStore, run_id: str, *, which: CaseFilter | None = None,
               suite: Any = None) -> list[CaseFacts]:
    """Every case of the run in run order (kept by ``which``'s ids and tags; its ``failed`` is the
    caller's), graded by the one rule; ``suite`` (a :class:`~evalloop.suites.models.Suite`) adds
    its controls and held-out part. Column reads only: a 10k-case run in a fraction of a second."""
    which = which or CaseFilter()
    marks = _pass_marks(store, run_id)
    tags: dict[str, tuple[str, ...]] = {}
    graded: dict[tuple[str, str], list[float]] = {}  # (case, scorer) -> its graded epochs' values
    errored: dict[tuple[str, str], int] = {}
    with store.engine.connect() as conn:  # rows streamed, not held: a 10k-case run is 20k rows
        for case_id, text in conn.execute(select(RESULTS.c.case_id, RESULTS.c.tags)
                                          .where(RESULTS.c.run_id == run_id).order_by(RESULTS.c.id)):
            if case_id not in tags:
                tags[case_id] = _tags(text)
        if which.patterns or which.tags:
            tags = {c: t for c, t in tags.items() if which.keeps_id(c) and which.keeps_tags(t)}
        for case_id, scorer, value, err, skipped in conn.execute(
                select(SCORES.c.case_id, SCORES.c.scorer, SCORES.c.value, SCORES.c.errored, SCORES.c.skipped)
                .where(SCORES.c.run_id == run_id).order_by(SCORES.c.id)):
            if case_id not in tags:
                continue
            key = (case_id, scorer)
            values = graded.get(key)
            if values is None:
                values = graded[key] = []
            if err:
                errored[key] = errored.get(key, 0) + 1
            elif not skipped:
                values.append(value)
    fixture = _fixture(suite) if suite is not None and tags else {}
    held = _held_out(suite) if suite is not None and tags else None
    grades: dict[str, dict[str, CaseGrade]] = {c: {} for c in tags}
    for (case_id, name), values in graded.items():
        case = fixture.get(case_id)
        outcome = case_outcome(values, marks.get(name, 0.5), errored=errored.get((case_id, name), 0),
                               control=bool(case is not None and case.expects_fail(name)))
        grades[case_id][name] = CaseGrade(outcome.value, None if outcome.value is None else outcome.passed)
    return [CaseFacts(case_id, case_tags, _passed(g.passed for g in grades[case_id].values()), grades[case_id],
                      held_out=None if held is None else case_id in held)
            for case_id, case_tags in tags.items()]


def with_changes(facts: Sequence[CaseFacts], before: Sequence[CaseFacts]) -> list[CaseFacts]:
    """``facts`` with each case's flip against another run's (``before``): newly failing or
    newly passing (a case that run did not grade has none)."""
    passed = {f.case_id: f.passed for f in before if f.graded}
    return [CaseFacts(f.case_id, f.tags, f.passed, f.grades, f.held_out,
                      None if f.case_id not in passed or passed[f.case_id] == f.passed
                      else "newly passing" if f.passed else "newly failing") for f in facts]


def case_views(store: HistoryStore, run_id: str, facts: Sequence[CaseFacts], *,
               suite: Any = None) -> list[CaseView]:
    """The full views of the cases ``facts`` names (in their order): output, error, every
    scorer's message and details, and input and expected from ``suite``; only their rows are read."""
    if not facts:
        return []
    marks = _pass_marks(store, run_id)
    wanted = {f.case_id for f in facts}
    results, scores = _rows(store, run_id, wanted)
    by_case: dict[str, list[Any]] = defaultdict(list)
    for row in results:
        by_case[row.case_id].append(row)
    grades: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for s in scores:
        grades[s.case_id][s.scorer].append(s)
    fixture = _fixture(suite) if suite is not None else {}
    views = []
    for f in facts:
        rows = by_case.get(f.case_id)
        if not rows:
            continue
        first, case = rows[0], fixture.get(f.case_id)
        per_scorer = [_grade(name, items, marks.get(name, 0.5),
                             control=bool(case is not None and case.expects_fail(name)),
                             tests_scorer=bool(case is not None and case.tests_scorer(name)))
                      for name, items in grades[f.case_id].items()]
        views.append(CaseView(
            case_id=f.case_id, tags=list(f.tags),
            output=_output(first.output), error=first.error, traceback=first.traceback, failure=first.failure,
            output_bytes=first.output_bytes, output_sha256=first.output_sha256,
            truncated=truncation_note(first.output, first.output_bytes, first.output_sha256),
            latency_ms=sum(r.latency_ms for r in rows) / len(rows), epochs=len(rows),
            passed=_passed(g.passed for g in per_scorer), scores=per_scorer, change=f.change,
            held_out=f.held_out, input=case.input if case is not None else None,
            expected=case.expected if case is not None else None))
    return views


#: up to this many cases, a page's rows are read by their ids; more, the run's rows are read whole
BY_ID = 500


def _rows(store: HistoryStore, run_id: str, wanted: set[str]) -> tuple[list[Any], list[Any]]:
    """The case result and score rows (every column) of the ``wanted`` cases, in write order."""
    chosen = sorted(wanted)
    with store.engine.connect() as conn:
        def read(table: Any) -> list[Any]:
            query = select(table).where(table.c.run_id == run_id).order_by(table.c.id)
            if len(chosen) > BY_ID:
                return [r for r in conn.execute(query) if r.case_id in wanted]
            return sorted((r for i in range(0, len(chosen), 250)
                           for r in conn.execute(query.where(table.c.case_id.in_(chosen[i:i + 250])))),
                          key=lambda r: r.id)
        return read(RESULTS), read(SCORES)


def load_cases(store: HistoryStore, run_id: str, *, which: CaseFilter | None = None,
               suite: Any = None, previous_run: str | None = None) -> list[CaseView]:
    """The run's cases in run order, filtered; ``suite`` (a :class:`~evalloop.suites.models.Suite`)
    adds input and expected; ``previous_run`` marks the cases that newly fail or pass."""
    which = which or CaseFilter()
    facts = case_facts(store, run_id, which=which, suite=suite)
    if previous_run:
        facts = with_changes(facts, case_facts(store, previous_run, suite=suite))
    if which.failed:
        facts = [f for f in facts if not f.passed]
    return case_views(store, run_id, facts, suite=suite)


def _grade(name: str, items: Sequence[Any], pass_mark: float, *, control: bool,
           tests_scorer: bool = False) -> CaseScoreView:
    usable = [s.value for s in items if not s.errored and not s.skipped]
    graded = case_outcome(usable, pass_mark, errored=sum(1 for s in items if s.errored), control=control)
    value = graded.value
    passed = None if value is None else graded.passed
    return CaseScoreView(scorer=name, value=value, passed=passed, control=control, tests_scorer=tests_scorer,
                         errored=any(s.errored for s in items) and value is None,
                         skipped=all(s.skipped for s in items), message=items[0].message,
                         details=json_object(items[0].meta))  # its JSON object; anything else left out


def _fixture(suite: Any) -> dict[str, Any]:
    """The suite's cases as its file holds them now, by id (read once while the file is unchanged):
    input, expected, controls."""
    try:
        found: dict[str, Any] = suite.cases_by_id()
        return found
    except Exception:  # noqa: BLE001 - the file changed or broke since: the outputs still show
        return {}


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
