"""One place per concept (issue #36, items 8 and 9): whether a score passes its pass mark, the order
of verdicts, the Markdown headline, the trend chart's window, the eligibility of rows an older
version judged, and the power line — each answered once, and every reader asks that one place."""

from __future__ import annotations

import ast
from pathlib import Path

import evalloop

SRC = Path(evalloop.__file__).parent
#: the one module that compares a score with a pass mark (evalloop.score.passes / passes_many)
PASS_MARK_HOME = SRC / "score.py"
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _is_mark(node: ast.AST, aliases: set[str]) -> bool:
    """Whether an expression *is* a pass mark: a name or attribute spelt ``*pass_mark*`` (or a
    local name assigned from one), a call of a ``*pass_mark*`` function, ``x.get("pass_mark", …)``,
    ``x["pass_mark"]``, or ``float(…)`` of one of these."""
    if isinstance(node, ast.Name):
        return "pass_mark" in node.id or node.id in aliases
    if isinstance(node, ast.Attribute):
        return "pass_mark" in node.attr
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "pass_mark"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if "pass_mark" in name:
            return True
        if name == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value == "pass_mark"
        return name == "float" and len(node.args) == 1 and _is_mark(node.args[0], aliases)
    return False


def pass_mark_comparisons(path: Path, root: Path = SRC) -> list[str]:
    """``file:line`` of every ordering comparison (<, <=, >, >=) with a pass mark in one module."""
    tree = ast.parse(path.read_text(), str(path))
    aliases: set[str] = set()
    changed = True
    while changed:  # names assigned a pass mark (pm = policy.pass_mark; mark = _pass_mark(s))
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None \
                    and _is_mark(node.value, aliases):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in aliases:
                        aliases.add(target.id)
                        changed = True
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops) \
                and any(_is_mark(sub, aliases) for side in (node.left, *node.comparators) for sub in ast.walk(side)):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_pass_mark_is_compared_in_one_place():
    """``passes`` (and ``passes_many`` beside it) is the only comparison of a score with a pass
    mark; every other module calls it, so a control case and a missing grade (NaN) are handled
    alike everywhere."""
    offenders = [hit for path in sorted(SRC.rglob("*.py")) if path != PASS_MARK_HOME
                 for hit in pass_mark_comparisons(path)]
    assert offenders == [], "compare with evalloop.score.passes / passes_many instead"
    assert pass_mark_comparisons(PASS_MARK_HOME)  # the one place does compare (the check finds it)


def test_the_comparison_check_finds_what_it_looks_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(v, policy, s):\n    pm = policy.pass_mark\n    a = v >= pm\n"
                     "    b = s.value < s.pass_mark\n    c = v > 0.5\n    return a, b, c\n")
    assert [hit.rsplit(":", 1)[1] for hit in pass_mark_comparisons(probe, tmp_path)] == ["3", "4"]


# -- one order of verdicts -------------------------------------------------------------------------
def test_failure_lines_name_the_worst_first_in_the_one_order(tmp_path, answers):
    """``run``'s closing lines (why the runs fail) follow :data:`ORDER`: an invalid run before a
    regression (main listed regressions first and invalid runs last, its own order)."""
    from evalloop import load_settings, run_suite
    from evalloop.loop.exitcodes import failure_lines
    from evalloop.verdicts.outcome import ORDER
    from support.project import make_project, write_answers

    cases = [{"id": f"c{i}", "input": {"id": f"c{i}", "boom": True}} for i in range(20)]
    root = make_project(tmp_path, {
        "drops": {"name": "drops", "target": "sut:controlled", "scorers": ["value"], "cases": cases},
        "broken": {"name": "broken", "target": "sut:flaky", "scorers": ["value"], "cases": cases}})
    settings = load_settings(root)
    write_answers(answers, {c["id"]: 1.0 for c in cases})
    run_suite("drops", settings=settings)
    write_answers(answers, {c["id"]: 0.0 for c in cases})
    reports = [run_suite("drops", settings=settings), run_suite("broken", settings=settings)]
    assert [r.comparison.worst.value for r in reports] == ["regressed", "invalid run"]
    lines = failure_lines(reports)
    assert [line.split(" in ")[0] for line in lines] == ["invalid run", "regression"]
    assert lines[0].startswith("invalid run in broken (every target call failed")
    assert ORDER.index(reports[1].comparison.worst) < ORDER.index(reports[0].comparison.worst)


# -- the Markdown headline -------------------------------------------------------------------------
def test_the_markdown_headline_is_the_run_outcome(tmp_path, answers):
    """A suite whose latest verdict is ``below floor`` is headlined "below floor" (main said
    "invalid run": its own reading of the verdicts), as the HTML banner and ``run`` say."""
    from evalloop import HistoryStore, load_settings, run_suite
    from evalloop.report.html import render_html
    from evalloop.report.markdown import render_markdown
    from evalloop.report.trends import build_trends
    from support.project import make_project, write_answers

    cases = [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(10)]
    root = make_project(tmp_path, {"low": {"name": "low", "target": "sut:controlled", "cases": cases,
                                           "scorers": [{"name": "value", "min_score": 0.9}]}})
    settings = load_settings(root)
    write_answers(answers, {c["id"]: 0.5 for c in cases})
    report = run_suite("low", settings=settings)
    assert report.comparison.worst.value == "below floor" and report.comparison.fails
    trends = build_trends(HistoryStore(settings.database_url), ["low"])
    head = render_markdown(trends).splitlines()[0]
    assert head == "### evalloop: ❌ below floor in `low`", head
    assert trends.suites[0].outcome.label == "below floor" and trends.failing_suites == trends.suites
    assert "below floor" in render_html(trends).split('class="banner bad">')[1].split("</div>")[0]


# -- the trend chart's window ----------------------------------------------------------------------
def _ten(name: str, **extra):
    return {"name": name, "target": "sut:controlled", "scorers": ["value"],
            "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(10)], **extra}


def test_the_trend_band_is_the_window_the_verdict_used_after_an_acceptance(tmp_path, answers):
    """After ``accept``, the verdict's baseline starts at the accepted run; the chart's band and
    window must be that window too (main rebuilt its own window from every eligible run, so the
    band still reached back to the runs before the acceptance)."""
    from evalloop import HistoryStore, load_settings, run_suite
    from evalloop.history.acceptance import accept
    from evalloop.report.trends import build_trends
    from support.project import make_project, write_answers

    root = make_project(tmp_path, {"acc": _ten("acc")})
    settings = load_settings(root)
    store = HistoryStore(settings.database_url)
    write_answers(answers, {f"c{i}": 0.9 for i in range(10)})
    for _ in range(3):
        run_suite("acc", settings=settings)
    write_answers(answers, {f"c{i}": 0.4 for i in range(10)})
    assert run_suite("acc", settings=settings).comparison.worst.value == "regressed"
    accept(store, "acc", "the new normal")
    last = run_suite("acc", settings=settings).comparison.scorers[0]
    assert (last.window_runs, last.baseline) == (1, 0.4)  # the verdict: from the accepted run on
    point = build_trends(store, ["acc"]).suites[0].scorers[0].points[-1]
    assert point.window_runs == last.window_runs == 1
    assert (point.band_low, point.band_high) == (0.4, 0.4)
    assert point.baseline == last.baseline


def test_the_trend_band_is_the_window_the_verdict_used_after_a_restart(tmp_path, answers):
    """With ``restart_on_change`` a changed system starts a new window; the chart's band is that
    window, not the runs of the system before (main's band spanned both)."""
    from evalloop import HistoryStore, load_settings, run_suite
    from evalloop.report.trends import build_trends
    from support.project import TARGET, make_project, write_answers

    # the product changes with the target's parameter (a threshold is verdict policy, not the product:
    # it restarts nothing, docs/judge-changes.md)
    target = TARGET + "\ndef versioned(input, version='v1'):\n    return controlled(input)\n"
    suite = _ten("rs", verdict={"restart_on_change": True})
    root = make_project(tmp_path, {"rs": {**suite, "target": {"ref": "sut:versioned", "params": {"version": "v1"}}}},
                        target=target)
    settings = load_settings(root)
    write_answers(answers, {f"c{i}": 0.9 for i in range(10)})
    for _ in range(2):
        run_suite("rs", settings=settings)
    make_project(tmp_path, {"rs": {**suite, "target": {"ref": "sut:versioned", "params": {"version": "v2"}}}},
                 target=target)
    write_answers(answers, {f"c{i}": 0.5 for i in range(10)})
    report = run_suite("rs", settings=settings)
    change = report.comparison.fingerprint_change
    assert change is not None and change.restarted
    s = report.comparison.scorers[0]
    point = build_trends(HistoryStore(settings.database_url), ["rs"]).suites[0].scorers[0].points[-1]
    assert point.window_runs == s.window_runs == 0 and point.band_low is None


# -- the power line --------------------------------------------------------------------------------
def _printed(report) -> str:
    import io

    from rich.console import Console

    from evalloop.report.terminal import print_run

    buffer = io.StringIO()
    print_run(report, Console(file=buffer, width=100, force_terminal=False))
    return buffer.getvalue()


def test_the_power_line_prints_only_when_the_run_could_miss_a_regression(tmp_path, answers):
    """A 30-case suite that can see a drop a little past its threshold prints no power line (main
    printed "smallest drop this run would catch" for every scorer on every run); a 3-case
    pass/fail suite, which cannot show any drop, says so and what to do."""
    from evalloop import load_settings, run_suite
    from support.project import make_project, write_answers

    big = {"name": "big", "target": "sut:controlled", "scorers": ["value"],
           "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(30)]}
    small = {**big, "name": "small", "cases": big["cases"][:3]}
    root = make_project(tmp_path, {"big": big, "small": small})
    settings = load_settings(root)
    reports = {}
    for name, level in (("big", 0.8), ("small", 1.0)):
        for k in range(3):
            write_answers(answers, {f"c{i}": level - 0.02 * ((i + k) % 3) * (name == "big") for i in range(30)})
            reports[name] = run_suite(name, settings=settings)
    big_s, small_s = (reports[n].comparison.scorers[0] for n in ("big", "small"))
    assert big_s.verdict == small_s.verdict == "steady"
    assert big_s.mdd is not None and big_s.mdd <= 2 * big_s.threshold
    text = _printed(reports["big"])
    assert "would catch" not in text and "catches a drop" not in text and "cannot show" not in text, text
    small_text = " ".join(_printed(reports["small"]).split())
    assert small_s.mdd is None or small_s.mdd > 2 * small_s.threshold
    assert "value: this run cannot show a regression" in small_text \
        or "value: this run can miss a real regression" in small_text, small_text


# -- rows an older version judged ------------------------------------------------------------------
def _f3594c2_history(tmp_path):
    """A project whose history f3594c2 made (its two ``steady`` runs of ``tiny``, saved in
    tests/data), plus a third run as f3594c2 stored a regression: verdict ``regressed``,
    ``eligible`` true (its rule only kept ``scorer broken`` out)."""
    import json
    import sqlite3

    from support.project import make_project
    from support.sqlitedb import sqlite_conn

    before = json.loads((Path(__file__).parent / "data" / "schema_f3594c2.json").read_text())
    tiny = {"name": "tiny", "target": "sut:echo", "scorers": ["equals"],
            "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(5)]}
    root = make_project(tmp_path / "p", {"tiny": tiny}, scorers=None)
    db = root / "history" / "evalloop.db"
    db.parent.mkdir()
    with sqlite_conn(db) as conn:
        conn.executescript("\n".join(before["database_dump"]))
        conn.execute(f"PRAGMA user_version = {before['database_user_version']}")
        conn.row_factory = sqlite3.Row
        (last,) = conn.execute("SELECT * FROM runs ORDER BY started_at DESC LIMIT 1").fetchall()
        new_id = "20261125T180501000-aaaaaa"
        run = {**dict(last), "id": new_id, "started_at": "2026-11-25 18:05:01.000000",
               "ended_at": "2026-11-25 18:05:01.100000"}
        conn.execute(f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join('?' * len(run))})", list(run.values()))
        for i in range(5):
            conn.execute("INSERT INTO case_results (run_id, case_id, epoch, tags, output, error, failure, latency_ms, "
                         "cost_usd, input_tokens, output_tokens) VALUES (?, ?, 0, NULL, '0', NULL, NULL, 1.0, 0, 0, 0)",
                         (new_id, f"c{i}"))
            conn.execute("INSERT INTO case_scores (run_id, case_id, epoch, scorer, value, errored, skipped, message, "
                         "meta) VALUES (?, ?, 0, 'equals', 0.0, 0, 0, 'not equal', NULL)", (new_id, f"c{i}"))
        (summary,) = conn.execute("SELECT * FROM scorer_summaries WHERE run_id = ?", (last["id"],)).fetchall()
        row = {**dict(summary), "run_id": new_id, "mean": 0.0, "verdict": "regressed", "baseline": 1.0,
               "drop": 1.0, "p_value": 0.06, "eligible": 1}
        row.pop("id")
        details = json.loads(row["details"])
        details["evidence"].update(window_runs=2, reason="Significant drop: 1.000 → 0.000 (-100%) vs 2-run baseline")
        row["details"] = json.dumps(details)
        columns = ", ".join(f"[{c}]" for c in row)  # "drop" is an SQL word
        conn.execute(f"INSERT INTO scorer_summaries ({columns}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))
    return root, new_id


def test_a_regression_an_older_version_judged_stays_out_of_the_new_baselines(tmp_path):
    """After an upgrade from f3594c2 its ``regressed`` runs are judged again by the current rule
    (main trusted their stored ``eligible``, so the regression entered the baseline: 1, 1, 0)."""
    from evalloop import HistoryStore, load_settings, run_suite
    from evalloop.history import engine as history_engine
    from evalloop.history.eligibility import baseline_eligible
    from evalloop.report.trends import build_trends

    history_engine._ENGINES.clear()
    root, regressed = _f3594c2_history(tmp_path)
    settings = load_settings(root)
    report = run_suite("tiny", settings=settings)
    s = report.comparison.scorers[0]
    assert (s.baseline, s.window_runs, s.verdict) == (1.0, 2, "steady")
    store = HistoryStore(settings.database_url)
    run = store.get_run(regressed)
    assert not baseline_eligible(run, store.summaries(regressed)["equals"])
    from evalloop.history.eligibility import RULE, RULE_KEY, judged_by_rule

    summary = store.summaries(report.executed.run.id)["equals"]
    assert judged_by_rule(summary) == RULE and RULE_KEY in summary.details
    # the old rows' trend points get the window the baseline rule reads for them (none recorded)
    points = build_trends(store, ["tiny"]).suites[0].scorers[0].points
    assert [p.window_runs for p in points] == [0, 1, 2, 2]
    assert [p.eligible for p in points] == [True, True, False, True]
    history_engine._ENGINES.clear()


def test_a_row_judged_by_the_current_rule_is_taken_as_stored(tmp_path, answers):
    """A row stamped with the current rule keeps its stored answer (the verdict rules may keep a
    drop eligible, for instance against an unsound baseline): it is not judged again here."""
    from sqlalchemy import update

    from evalloop import HistoryStore, load_settings, run_suite
    from evalloop.history.eligibility import baseline_eligible
    from evalloop.history.store import SUMMARIES
    from support.project import make_project, write_answers

    root = make_project(tmp_path, {"t": _ten("t")})
    settings = load_settings(root)
    write_answers(answers, {f"c{i}": 0.9 for i in range(10)})
    run_id = run_suite("t", settings=settings).executed.run.id
    store = HistoryStore(settings.database_url)
    with store.engine.begin() as conn:  # a watch whose drop was significant, stored eligible by its rule
        conn.execute(update(SUMMARIES).where(SUMMARIES.c.run_id == run_id)
                     .values(verdict="watch", p_value=0.001, drop=0.05, eligible=True))
    assert baseline_eligible(store.get_run(run_id), store.summaries(run_id)["value"])
