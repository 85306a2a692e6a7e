"""The fast paths of a run (issue #16): what start-up imports, how often cases are read, and
where the comparison and the run log get their per-case scores. Structural checks, never timed:
the speed and memory figures live in bench/whole_process.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import evalloop.suites.casesource
import evalloop.suites.lookup
import evalloop.suites.suite
from evalloop import load_settings, run_suite
from evalloop.cli import app
from evalloop.history import HistoryStore, runlog
from evalloop.run.runner import ScorerResult
from evalloop.scoring.scorevec import align, ids_digest
from evalloop.verdicts.verdict import VerdictPolicy, decide, decide_aligned
from support.project import make_project

HEAVY = ("sqlalchemy", "sqlmodel", "numpy", "pydantic", "anthropic", "httpx", "apscheduler", "jinja2",
         "model2vec", "sqlite_vec", "yaml")


def jsonl_project(tmp_path, n=30, epochs=1):
    """A suite whose cases live in JSONL: some fail, one is a negative control, one errors."""
    root = make_project(tmp_path)
    (root / "scorers" / "speed_scorers.py").write_text(
        "from evalloop import Score, scorer\n\n"
        "@scorer('half', binary=False, min_score=0)\n"
        "def half(input, output, expected):\n"
        "    if output == 'text 3':\n"
        "        raise ValueError('grader bug')\n"
        "    return Score(value=0.25 if output.endswith('7') else 1.0,\n"
        "                 message='low' if output.endswith('7') else 'fine')\n")
    with (root / "fixtures" / "cases.jsonl").open("w") as f:
        for i in range(n):
            case = {"id": f"case-{i}", "input": f"text {i}", "expected": f"text {i}"}
            if i == 7:
                case["expect"] = {"half": "fail"}
            f.write(json.dumps(case) + "\n")
    (root / "fixtures" / "speedy.yaml").write_text(
        f"name: speedy\ntarget: sut:echo\nepochs: {epochs}\nscorers:\n"
        "  - name: equals\n    params: {normalize: false}\n  - half\ncases: cases.jsonl\n")
    return root


def test_help_imports_no_heavy_library():
    """`evalloop --help` (and every command's registration) needs only Typer and Rich."""
    code = ("import sys, evalloop.cli; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_constants_match_their_sources():
    from evalloop.cli import memories, report
    from evalloop.learning import injection
    from evalloop.report import trends

    assert memories.PATTERN_LIMIT == injection.PATTERN_LIMIT
    assert report.DEFAULT_LAST == trends.DEFAULT_LAST


@pytest.mark.parametrize(("keep_bytes", "reads"), [(None, 1), (10, 2)])
def test_cli_run_reads_the_cases_file_once_or_twice_never_three_times(tmp_path, monkeypatch, keep_bytes, reads):
    """A small file once (the check's parse serves the run); a file above the size the check keeps
    twice (once to validate before anything is written, once to run); never a third time."""
    root = jsonl_project(tmp_path)
    opened = []
    real = evalloop.suites.casesource.open_jsonl

    def counting(path):
        opened.append(path)
        return real(path)

    monkeypatch.setattr(evalloop.suites.casesource, "open_jsonl", counting)
    if keep_bytes is not None:
        monkeypatch.setattr(evalloop.suites.suite, "KEEP_PARSED_BYTES", keep_bytes)
    result = CliRunner().invoke(app, ["run", "--suite", "speedy", "--project", str(root)])
    assert result.exit_code == 0, result.output
    assert len(opened) == reads


def test_a_changed_cases_file_is_validated_again(tmp_path):
    root = jsonl_project(tmp_path, n=4)
    suite = evalloop.suites.lookup.find_suite("speedy", root)
    assert suite.validate_cases() == 4
    with suite.cases_file.open("a") as f:
        f.write(json.dumps({"id": "case-0", "input": "dup"}) + "\n")
    with pytest.raises(evalloop.errors.FixtureError, match="duplicate case id 'case-0'"):
        suite.validate_cases()


def test_baselines_read_score_vectors_not_rows(tmp_path, monkeypatch):
    root = jsonl_project(tmp_path)
    settings = load_settings(root)
    first = run_suite("speedy", settings=settings)
    store = HistoryStore(settings.database_url)
    for name, result in first.executed.results.items():  # the vector is the rows, compactly
        assert _finite(result) == store.case_scores(first.executed.run.id, name)
    reads = []
    real = HistoryStore.case_scores
    monkeypatch.setattr(HistoryStore, "case_scores", lambda self, *a: reads.append(a) or real(self, *a))
    second = run_suite("speedy", settings=settings)
    assert reads == []
    verdicts = {s.scorer: s for s in second.comparison.scorers}
    assert all(s.window_runs == 1 and s.verdict == "steady" for s in verdicts.values())
    assert verdicts["half"].n == 28  # case-3 errored, case-7 a control


def _finite(result: ScorerResult) -> dict[str, float]:
    return {c: float(v) for c, v in zip(result.ids, result.vector, strict=True) if v == v}


def test_a_vector_and_rows_give_the_same_verdict(tmp_path):
    """A window run without a stored vector (an older evalloop, a run-log import) is read from its
    rows; the verdict is the same as from its vector."""
    root = jsonl_project(tmp_path)
    settings = load_settings(root)
    runs = [run_suite("speedy", settings=settings) for _ in range(3)]
    store = HistoryStore(settings.database_url)
    current = runs[-1].executed.results["half"]
    rows = [store.case_scores(r.executed.run.id, "half") for r in runs[:-1]]
    vectors = [r.executed.results["half"].vector for r in runs[:-1]]
    policy = VerdictPolicy(threshold=0.1)
    from_rows = decide(_finite(current), rows, policy, known_bad={"case-7"})
    from_vectors = decide_aligned(align(current.ids, current.vector, vectors), policy, known_bad={"case-7"})
    assert from_rows == from_vectors


@pytest.mark.parametrize("epochs", [1, 2])
def test_run_log_line_from_memory_equals_the_one_from_history(tmp_path, epochs):
    """Failing cases with their messages, an errored case, a control: the same line either way."""
    root = jsonl_project(tmp_path, epochs=epochs)
    settings = load_settings(root)
    report = run_suite("speedy", settings=settings)
    store = HistoryStore(settings.database_url)
    run = store.get_run(report.executed.run.id)
    from_rows = json.loads(runlog._line(runlog.entry_for(store, run)))
    from_memory = json.loads(runlog._line(runlog.entry_for(store, run, report.executed.results)))
    assert from_memory == from_rows
    half = from_memory["scorers"]["half"]
    assert half["errored_cases"] == ["case-3"] and half["messages"]["case-7"] == "low"
    logged = json.loads(runlog.log_path(settings.history_dir, "speedy").read_text().splitlines()[-1])
    assert logged == from_rows


def test_a_run_and_its_comparison_never_open_a_session(tmp_path, monkeypatch):
    """A run reads and writes the history through Core statements and builds its model objects
    from the rows: no Session, so no ORM query to compile in every process. The baseline runs of
    each scorer are read once per comparison."""
    from sqlalchemy.orm import Session

    root = jsonl_project(tmp_path)
    settings = load_settings(root)
    for _ in range(3):  # a baseline to compare with, then a run with a window
        run_suite("speedy", settings=settings)
    sessions: list[object] = []
    opened = Session.__init__

    def counted(self, *args, **kwargs):
        sessions.append(self)
        opened(self, *args, **kwargs)

    reads: list[str] = []
    baseline_runs = HistoryStore.baseline_runs

    def counted_reads(self, suite, scorer, *args, **kwargs):
        reads.append(scorer)
        return baseline_runs(self, suite, scorer, *args, **kwargs)

    monkeypatch.setattr(Session, "__init__", counted)
    monkeypatch.setattr(HistoryStore, "baseline_runs", counted_reads)
    report = run_suite("speedy", settings=settings)
    assert report.comparison.scorers and all(s.window_runs for s in report.comparison.scorers)
    assert sessions == []
    assert sorted(reads) == sorted(s.scorer for s in report.comparison.scorers)
    monkeypatch.undo()
    found = HistoryStore(settings.database_url).runs("speedy", limit=None)  # a user's read still is one
    assert [r.id for r in found][0] == report.executed.run.id


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.text(max_size=6) | st.sampled_from(["\ud800", "é", ""]), max_size=50))
@example(ids=[f"c{i}" for i in range(8193)])  # across two chunk boundaries
def test_a_case_list_digest_is_each_id_and_a_nul_in_order(ids):
    """Hashed a chunk of ids at a time, the digest is still SHA-256 over each id's UTF-8 (lone
    surrogates passed through) followed by a NUL, in order: stored digests keep matching."""
    import hashlib

    one_by_one = hashlib.sha256()
    for case_id in ids:
        one_by_one.update(case_id.encode("utf-8", "surrogatepass") + b"\0")
    assert ids_digest(ids) == one_by_one.hexdigest()[:32]
