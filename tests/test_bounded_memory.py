"""Memory that does not grow with the case count beyond the scores themselves (issue #14, item 7).

Structural checks with ``tracemalloc`` (NumPy's arrays are traced too), never timed: the
whole-process RSS figures (100k cases vs 10k) live in bench/whole_process.py. Each step is held
to a budget in bytes per case that the old code broke: the run-log importer held whole log
lines, the appender built a line several times over, and the comparison copied the window
matrix three times (stacked for flips, reordered for the test, decoded from stored bytes).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore, runlog
from evalloop.scoring.scorevec import Vector
from evalloop.verdicts.baseline import compare_run
from support.project import make_project

N = 20_000
WINDOW = 5


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 20,000-case JSONL suite run WINDOW + 1 times (every run in the next one's window)."""
    root = make_project(tmp_path_factory.mktemp("big"))
    with (root / "fixtures" / "cases.jsonl").open("w") as f:
        for i in range(N):
            f.write(json.dumps({"id": f"case-{i:05d}", "input": i % 7, "expected": i % 7}) + "\n")
    (root / "fixtures" / "big.yaml").write_text(
        "name: big\ntarget: sut:echo\nscorers:\n  - name: equals\n    params: {normalize: false}\n"
        "cases: cases.jsonl\n")
    settings = load_settings(root)
    reports = [run_suite("big", settings=settings) for _ in range(WINDOW + 1)]
    return settings, reports


def peak_of(fn, *args, **kwargs) -> tuple[int, object]:
    """Bytes traced at the peak of ``fn`` beyond what was held when it started, and its result
    (a first, untraced call warms the caches: SQL compilation, imports)."""
    fn(*args, **kwargs)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        out = fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] - start, out
    finally:
        tracemalloc.stop()


def test_importing_a_known_log_does_not_hold_its_lines(big):
    settings, _ = big
    path = runlog.log_path(settings.history_dir, "big")
    line = max(len(raw) for raw in path.read_bytes().splitlines())
    assert line > 200_000  # every line holds 20,000 case scores
    store = HistoryStore(settings.database_url)
    peak, imported = peak_of(runlog.sync_suite, store, settings.history_dir, "big")
    assert imported == 0
    assert peak < line / 2, f"sync_suite peaked at {peak:,} bytes for {line:,}-byte lines"


def test_appending_a_run_does_not_build_its_line_whole(big, tmp_path):
    settings, reports = big
    store = HistoryStore(settings.database_url)
    report = reports[-1]
    peak, path = peak_of(runlog.append_run, store, tmp_path, report.executed.run.id,
                         results=report.executed.results)
    line = path.stat().st_size / 2
    assert [e.id for e in runlog.read_log(path)] == [report.executed.run.id] * 2
    assert peak < line / 2, f"append_run peaked at {peak:,} bytes for a {line:,}-byte line"


def test_the_comparison_holds_one_window_matrix(big, monkeypatch):
    """Each earlier run in the window costs the comparison its 8 bytes a case in the window
    matrix and little more; the old code also held each run's stored bytes, a decoded copy, a
    stacked copy (flips) and a reordered copy (the paired test): 12.5 bytes a case and run at
    its peak, against 8.3 now.
    Row blocks are made small here, so their fixed-size temporaries do not pass for per-case cost."""
    import evalloop.verdicts.masks
    import evalloop.verdicts.paired
    import evalloop.verdicts.runlabel
    import evalloop.verdicts.stats

    for module in (evalloop.verdicts.masks, evalloop.verdicts.paired, evalloop.verdicts.stats,
                   evalloop.verdicts.runlabel):
        monkeypatch.setattr(module, "_BLOCK_ROWS", 512)
    settings, reports = big
    store = HistoryStore(settings.database_url)
    report = reports[-1]
    current = {name: Vector(r.ids, r.vector) for name, r in report.executed.results.items()}
    peaks = {}
    for window in (1, WINDOW):
        peaks[window], comparison = peak_of(compare_run, store, report.executed.run, window=window,
                                            current=current)
        (scorer,) = comparison.scorers
        assert scorer.window_runs == window and scorer.evidence.n_paired == N
    per_run = (peaks[WINDOW] - peaks[1]) / (WINDOW - 1) / N
    assert per_run < 10.5, f"each window run cost the comparison {per_run:.1f} bytes a case"
