"""The run log: what a line holds, import into an empty database, idempotency, export, bad lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop import load_settings, run_suite
from evalloop.history.models import CaseScore, Run, ScorerSummary
from evalloop.history.runlog import (
    RunLogError,
    export_runs,
    import_logs,
    log_path,
    read_log,
    sync_suite,
)
from evalloop.history.store import HistoryStore
from support.project import controlled_suite, make_project, write_answers


@pytest.fixture
def logged(tmp_path, monkeypatch):
    """A project with three runs of 'controlled' (the second has c3 errored in the target)."""
    suite = controlled_suite(4)
    root = make_project(tmp_path / "a", {"controlled": suite})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    settings = load_settings(root)
    ids = []
    for values in ({"c0": 1.0, "c1": 1.0, "c2": 0.5, "c3": 0.0},
                   {"c0": 1.0, "c1": 0.25, "c2": 1.0, "c3": "not a number"},
                   {"c0": 0.75, "c1": 1.0, "c2": 1.0, "c3": 1.0}):
        write_answers(answers, values)
        ids.append(run_suite("controlled", settings=settings).executed.run.id)
    return settings, ids


def test_one_compact_line_per_completed_run(logged):
    settings, ids = logged
    path = log_path(settings.history_dir, "controlled")
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(line.startswith('{"v":1,"id":"') for line in lines)
    entries = list(read_log(path))
    assert [e.id for e in entries] == ids
    first = entries[0]
    assert first.suite == "controlled" and first.status == "completed" and first.n_cases == 4
    value = first.scorers["value"]
    assert value.cases == {"c0": 1.0, "c1": 1.0, "c2": 0.5, "c3": 0.0} and value.mean == 0.625
    assert '"output":' not in lines[0]  # no bulky outputs
    second = entries[1].scorers["value"]
    assert second.errored_cases == ["c3"] and "c3" not in second.cases and second.errored == 1


def test_an_empty_database_gets_the_logged_runs_once(logged, tmp_path):
    settings, ids = logged
    source = HistoryStore(settings.database_url)
    fresh = HistoryStore(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert import_logs(fresh, settings.history_dir) == {"controlled": 3}
    assert import_logs(fresh, settings.history_dir) == {"controlled": 0}  # idempotent by run id
    assert sync_suite(fresh, settings.history_dir, "controlled") == 0
    runs = fresh.runs("controlled", limit=None)
    assert [r.id for r in reversed(runs)] == ids and {r.origin for r in runs} == {"log"}
    for run_id in ids:
        a, b = source.get_run(run_id), fresh.get_run(run_id)
        assert (a.started_at, a.fingerprint_hash, a.valid) == (b.started_at, b.fingerprint_hash, b.valid)
        assert a.fingerprint == b.fingerprint
        sa, sb = source.summaries(run_id)["value"], fresh.summaries(run_id)["value"]
        assert (sa.mean, sa.n, sa.errored, sa.verdict, sa.baseline) == \
               (sb.mean, sb.n, sb.errored, sb.verdict, sb.baseline)
        assert source.case_scores(run_id, "value") == fresh.case_scores(run_id, "value")
    assert fresh.count(Run) == 3 and fresh.count(ScorerSummary) == 3
    assert fresh.count(CaseScore) == source.count(CaseScore)
    # the imported runs are a baseline exactly like the originals
    window = [[r.id for r, _ in store.baseline_runs("controlled", "value", store.get_run(ids[-1]), 5)]
              for store in (source, fresh)]
    assert window[0] == window[1] == [ids[0]]  # the second run is invalid (25 % errored)


def test_export_writes_only_what_the_log_lacks(logged):
    settings, ids = logged
    store = HistoryStore(settings.database_url)
    path = log_path(settings.history_dir, "controlled")
    assert export_runs(store, settings.history_dir) == {"controlled": 0}
    path.write_text("\n".join(path.read_text().splitlines()[:1]))  # lost two lines, no newline
    assert export_runs(store, settings.history_dir) == {"controlled": 2}
    assert sorted(e.id for e in read_log(path)) == sorted(ids)


def test_a_merge_conflict_in_the_log_is_one_clear_error(logged, tmp_path):
    settings, _ = logged
    path = log_path(settings.history_dir, "controlled")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(["<<<<<<< HEAD", lines[0], "=======", lines[1], ">>>>>>> b", ""]))
    fresh = HistoryStore(f"sqlite:///{tmp_path / 'fresh.db'}")
    with pytest.raises(RunLogError) as info:
        sync_suite(fresh, settings.history_dir, "controlled")
    assert f"{path}:1" in info.value.one_line() and "merge conflict" in info.value.one_line()
    path.write_text(lines[0] + "\n" + lines[0] + "\n\n" + lines[1] + "\n")  # union merge: dupes
    assert sync_suite(fresh, settings.history_dir, "controlled") == 2


def test_lines_are_found_by_their_heads_across_chunk_boundaries(logged, tmp_path, monkeypatch):
    """The importer reads only each line's first bytes to learn its run id, in chunks; lines that
    straddle chunks, blank lines of spaces and a whole last line without its newline still count."""
    from evalloop.history import linefile, runlog

    settings, ids = logged
    path = log_path(settings.history_dir, "controlled")
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + " " * 5000 + "\n\n" + lines[1] + "\n" + lines[2])
    monkeypatch.setattr(linefile, "CHUNK", 97)  # every line crosses several chunk ends
    assert [run_id for _, run_id, _, _ in runlog._heads(path)] == ids
    assert [e.id for e in read_log(path)] == ids
    fresh = HistoryStore(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert sync_suite(fresh, settings.history_dir, "controlled") == 3
    assert [r.id for r in reversed(fresh.runs("controlled", limit=None))] == ids


def test_run_log_can_be_switched_off(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"controlled": controlled_suite(2)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(tmp_path / "answers.json"))
    write_answers(tmp_path / "answers.json", {"c0": 1.0, "c1": 1.0})
    run_suite("controlled", settings=load_settings(root, run_log=False))
    assert not log_path(root / "history", "controlled").exists()


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.text(max_size=12) | st.sampled_from(["https://u:p@h.io/x", 'a"b', "é\u2028"]),
                                st.floats(0, 1) | st.just(float("nan"))), max_size=1100),
       repeat=st.booleans())
def test_a_vector_is_written_into_the_line_as_pair_by_pair(pairs, repeat):
    """A score vector's ``{"case": score, …}`` text is what writing each graded pair with ``dumps``
    (NaN left out, each chunk redacted) gives, whether a chunk is written in one call or, with a
    repeated id, pair by pair."""
    import numpy as np

    from evalloop.history.runlog import _cases_json
    from evalloop.history.store import dumps
    from evalloop.redact import redact_text

    if repeat and pairs:
        pairs = [*pairs, pairs[0]]
    ids = [i for i, _ in pairs]
    values = np.array([v for _, v in pairs], dtype=float)
    chunks = []
    for start in range(0, len(pairs), 512):
        text = ",".join(f"{dumps(i)}:{float(v)!r}" for i, v in pairs[start:start + 512] if v == v)
        if text:
            chunks.append(redact_text(text))
    assert b"".join(_cases_json(ids, values)) == ("{" + ",".join(chunks) + "}").encode("utf-8")
