"""The pytest plugin: ``pytest --evalloop-suite NAME`` runs a suite as tests, and the ``evalloop`` fixture.

Each suite is run once, through :func:`evalloop.loop.pipeline.run_suite`, so the run is stored in
the history, compared with its baseline and learnt from like any other (``--evalloop-no-history``
keeps it in a throwaway database and writes no failure memory or run log instead). Every case ×
scorer becomes one test item:

* passed when the case's score (mean over epochs) is at or above the scorer's pass mark — or,
  for a known-bad control case (``expect: fail``), below it;
* failed with the scorer's message otherwise, and when the scorer errored or the target raised;
* skipped when the scorer did not run.

The suite runs when its first item runs, so ``--collect-only`` runs nothing. A summary of each
run's verdicts is printed at the end; a run that fails its verdict (a regression, a broken scorer,
an invalid run: :mod:`evalloop.loop.exitcodes`) fails the session (exit 1) even when every case passed,
unless ``--evalloop-no-fail-on-regression`` is given.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from evalloop.config import Settings
    from evalloop.history.store import HistoryStore
    from evalloop.loop.pipeline import RunReport
    from evalloop.run.runner import PreparedRun
    from evalloop.scoring.registry import Registry
    from evalloop.suites.models import Suite

RUNS_KEY = pytest.StashKey[list["SuiteRun"]]()
TMPDIR_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalloop", "evalloop: run evaluation suites as tests")
    group.addoption("--evalloop-suite", action="append", default=[], metavar="NAME",
                    help="Run this suite (name or path) as tests, one per case and scorer. Repeatable.")
    group.addoption("--evalloop-project", default=None, metavar="DIR",
                    help="The evalloop project directory (default: $EVALLOOP_PROJECT or the cwd).")
    group.addoption("--evalloop-no-history", action="store_true", default=False,
                    help="Store the runs in a throwaway database, not the project's history.")
    group.addoption("--evalloop-fail-on-regression", action="store_true", dest="evalloop_fail_on_regression",
                    default=True, help="Fail the session when a suite's run fails its verdict (a regression, "
                                       "a broken scorer, an invalid run); the default.")
    group.addoption("--evalloop-no-fail-on-regression", action="store_false", dest="evalloop_fail_on_regression",
                    help="Do not fail the session on a run's verdict (case tests still pass or fail).")


def _settings(config: pytest.Config) -> Settings:
    from evalloop.config import load_settings

    project = config.getoption("evalloop_project")
    settings = load_settings(Path(project) if project else None)
    if config.getoption("evalloop_no_history"):  # nothing written into the project at all
        settings = settings.model_copy(update={"learn": False, "run_log": False})
    return settings


def _committed_log(config: pytest.Config) -> Path | None:
    """With ``--evalloop-no-history``, the project's run log folder: read into the throwaway
    database (never written), so a run there still has the team's baseline."""
    from evalloop.config import load_settings

    if not config.getoption("evalloop_no_history"):
        return None  # the pipeline syncs the project's own database itself
    project = config.getoption("evalloop_project")
    settings = load_settings(Path(project) if project else None)
    return settings.history_dir if settings.run_log else None


def _read_log(store: HistoryStore, log_dir: Path | None, suite: str) -> None:
    from evalloop.history.runlog import sync_suite

    if log_dir is not None:
        sync_suite(store, log_dir, suite)


def _history_url(config: pytest.Config, settings: Settings) -> str:
    if not config.getoption("evalloop_no_history"):
        return settings.database_url
    if TMPDIR_KEY not in config.stash:
        config.stash[TMPDIR_KEY] = tempfile.mkdtemp(prefix="evalloop-pytest-")
    return f"sqlite:///{Path(config.stash[TMPDIR_KEY]) / 'history.db'}"


@dataclass
class CaseOutcome:
    """One case × scorer of a finished run: epochs averaged, errors and skips kept."""

    values: list[float] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)
    skipped: str | None = None
    messages: list[str] = field(default_factory=list)

    @property
    def value(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None


class SuiteRun:
    """One suite, prepared at collection and run (once) when its first test item runs."""

    def __init__(self, suite: Suite, prepared: PreparedRun, settings: Settings, registry: Registry,
                 store: HistoryStore, log_dir: Path | None = None) -> None:
        self.suite, self.prepared = suite, prepared
        self.settings, self.registry, self.store = settings, registry, store
        self.log_dir = log_dir
        self.report: RunReport | None = None
        self.error: BaseException | None = None
        self.outcomes: dict[tuple[str, str], CaseOutcome] = {}
        self.target_errors: dict[str, str] = {}
        self._done = False

    def result(self) -> None:
        """Run the suite the first time it is asked for; later calls reuse (or re-raise) it."""
        if not self._done:
            self._done = True
            try:
                self._run()
            except Exception as exc:
                self.error = exc
        if self.error is not None:
            raise SuiteFailed(f"suite '{self.suite.name}' did not run: {_one_line(self.error)}")

    def _run(self) -> None:
        from evalloop.loop.pipeline import run_suite

        _read_log(self.store, self.log_dir, self.suite.name)
        self.report = run_suite(self.suite, settings=self.settings, registry=self.registry,
                                store=self.store)
        run_id = self.report.executed.run.id
        for row in self.store.score_rows(run_id):
            out = self.outcomes.setdefault((row.case_id, row.scorer), CaseOutcome())
            if row.skipped:
                out.skipped = row.message or "scorer did not run"
            elif row.errored:
                out.errored.append(row.message)
            else:
                out.values.append(row.value)
                if row.message:
                    out.messages.append(row.message)
        self.target_errors = self.store.case_errors(run_id)


class SuiteFailed(Exception):
    """A case × scorer that did not pass, or a suite that could not run."""


def _one_line(exc: BaseException) -> str:
    from evalloop.errors import EvalloopError

    return exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"


def _skip(message: str) -> None:
    """Skip, reported at the suite file rather than at this plugin's line."""
    try:
        raise pytest.skip.Exception(message, _use_item_location=True)
    except TypeError:  # pragma: no cover - a pytest without the item-location flag
        pytest.skip(message)


class SuiteNode(pytest.Collector):
    """The parent of one suite's items (node id ``evalloop/<suite>``)."""

    def collect(self) -> list[pytest.Item]:  # items are made in pytest_collection_modifyitems
        return []


class CaseItem(pytest.Item):
    """One case graded by one scorer."""

    def __init__(self, *, suite_run: SuiteRun, case_id: str, scorer: str, pass_mark: float,
                 control: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite_run, self.case_id, self.scorer = suite_run, case_id, scorer
        self.pass_mark, self.control = pass_mark, control

    def runtest(self) -> None:
        self.suite_run.result()
        out = self.suite_run.outcomes.get((self.case_id, self.scorer))
        if out is None:
            raise SuiteFailed(f"no score for case '{self.case_id}' by '{self.scorer}' in the run")
        from evalloop.verdicts.outcome import case_outcome

        graded = case_outcome(out.values, self.pass_mark, errored=len(out.errored), control=self.control)
        if graded.state == "skipped":
            _skip(f"{self.scorer} did not run: {out.skipped or 'no grade'}")
        if graded.state == "errored":
            raise SuiteFailed(f"{self.scorer} errored: {out.errored[0]}")
        if graded.failed:  # the one rule: the mean of the graded epochs (a target failure is a real 0)
            target_error = self.suite_run.target_errors.get(self.case_id)
            detail = "; ".join(dict.fromkeys(out.messages)) or "no message"
            if target_error:
                detail = f"the target raised: {target_error}; {detail}"
            want = f"< {self.pass_mark} (a known-bad case, expected to fail)" if self.control else f"≥ {self.pass_mark}"
            raise SuiteFailed(f"{self.scorer} scored {graded.value:.3f}, want {want}: {detail}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, SuiteFailed):
            return f"{self.suite_run.suite.name} / {self.case_id} / {self.scorer}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        suite = self.suite_run.suite
        path = suite.cases_file or suite.path or self.path
        return path, _case_line(Path(path), self.case_id), f"{suite.name}::{self.case_id}[{self.scorer}]"


def _case_line(path: Path, case_id: str) -> int:
    """The 0-based line where a case's id is given in its fixture file (0 when not found)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 0
    quoted = (f"'{case_id}'", f'"{case_id}"')
    for number, line in enumerate(lines):
        if "id" in line and (any(q in line for q in quoted) or line.rstrip().endswith(f" {case_id}")):
            return number
    return 0


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, so those filter our items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    names = config.getoption("evalloop_suite")
    if not names:
        return
    from evalloop.errors import EvalloopError

    try:
        runs = [_prepare(config, name) for name in names]
    except EvalloopError as exc:
        raise pytest.UsageError(f"evalloop: {exc.one_line()}") from None
    config.stash[RUNS_KEY] = runs
    for run in runs:
        made = list(_items(session, run))
        items.extend(made)
        # counted like collected items (the "collected N items" line, other plugins' bookkeeping)
        config.hook.pytest_collectreport(report=pytest.CollectReport(
            f"evalloop/{run.suite.name}", "passed", None, [*made]))


def _prepare(config: pytest.Config, name: str) -> SuiteRun:
    from evalloop.history.store import HistoryStore
    from evalloop.loop.pipeline import load
    from evalloop.run.runner import prepare
    from evalloop.scoring.registry import discover

    settings = _settings(config)
    registry = discover(settings.project_dir)
    suite = load(name, settings)
    prepared = prepare(suite, registry, project_dir=settings.project_dir,
                       settings_thresholds=settings.thresholds)
    return SuiteRun(suite, prepared, settings, registry, HistoryStore(_history_url(config, settings)),
                    log_dir=_committed_log(config))


def _items(session: pytest.Session, run: SuiteRun) -> Iterator[CaseItem]:
    suite = run.suite
    node = SuiteNode.from_parent(session, name=f"evalloop/{suite.name}",
                                 path=suite.path or session.path, nodeid=f"evalloop/{suite.name}")
    for case in suite.iter_cases():
        for bound in run.prepared.scorers:
            if case.fixed_output and not case.tests_scorer(bound.name):
                continue  # a control of other scorers: this one never grades it
            yield CaseItem.from_parent(node, name=f"{case.id}[{bound.name}]", suite_run=run,
                                       case_id=case.id, scorer=bound.name,
                                       pass_mark=bound.pass_mark, control=case.expects_fail(bound.name))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    runs = config.stash.get(RUNS_KEY, [])
    reports = [r.report for r in runs if r.report is not None]
    if not reports:
        return
    from evalloop.report.format import num

    terminalreporter.section("evalloop")
    for report in reports:
        run = report.executed.run
        terminalreporter.write_line(f"{run.suite}: run {run.id}, {run.n_cases} cases"
                                    + ("" if run.valid else f" — invalid: {run.invalid_reason}"))
        for s in report.comparison.scorers:
            mean = num(s.current)
            base = "" if s.baseline is None else f", baseline {s.baseline:.3f}"
            drop = "" if s.drop is None else f", drop {s.drop:+.1%}"
            terminalreporter.write_line(f"  {s.scorer}: {mean}{base}{drop} — {s.verdict}",
                                        red=s.fails, yellow=s.verdict == "watch",
                                        green=s.verdict == "improved")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    from evalloop.loop.exitcodes import exit_code_of

    runs = config.stash.get(RUNS_KEY, [])
    reports = [r.report for r in runs if r.report is not None]
    fail = config.getoption("evalloop_fail_on_regression", True)
    if exit_code_of(reports, fail_on_regression=fail) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    tmp = config.stash.get(TMPDIR_KEY, None)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


class Evalloop:
    """What the ``evalloop`` fixture gives a test: settings, registry, history, and ``run``."""

    def __init__(self, settings: Settings, history_url: str, log_dir: Path | None = None) -> None:
        self.settings = settings
        self._history_url = history_url
        self._log_dir = log_dir

    @cached_property
    def registry(self) -> Registry:
        from evalloop.scoring.registry import discover

        return discover(self.settings.project_dir)

    @cached_property
    def history(self) -> HistoryStore:
        from evalloop.history.store import HistoryStore

        return HistoryStore(self._history_url)

    def suite(self, name: str) -> Suite:
        """A suite of the project by name or path."""
        from evalloop.loop.pipeline import load

        return load(name, self.settings)

    def run(self, suite: str | Path | Suite, **kwargs: Any) -> RunReport:
        """Run a suite (stored in this history) and compare it with its baseline."""
        from evalloop.loop.pipeline import run_suite

        kwargs.setdefault("settings", self.settings)
        kwargs.setdefault("registry", self.registry)
        kwargs.setdefault("store", self.history)
        if self._log_dir is not None and kwargs["store"] is self.history:
            from evalloop.loop.pipeline import load

            _read_log(self.history, self._log_dir, load(suite, self.settings).name)
        return run_suite(suite, **kwargs)


@pytest.fixture
def evalloop(request: pytest.FixtureRequest) -> Evalloop:
    """The project's evalloop settings, scorer registry, history store, and a ``run(suite)`` helper."""
    settings = _settings(request.config)
    return Evalloop(settings, _history_url(request.config, settings), _committed_log(request.config))
