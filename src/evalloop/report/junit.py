"""JUnit XML for CI: one testsuite per run, one testcase per case × scorer, one per scorer verdict.

A case's testcase fails when its score is below the scorer's pass mark (a known-bad case
fails when it passes), errors when grading errored, and is skipped when the scorer was skipped.
The ``<suite>.baseline`` testcases carry the run's verdicts: a regression fails its scorer's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from evalloop.history.store import RESULTS, SCORES, HistoryStore
from evalloop.loop.pipeline import RunReport
from evalloop.report.format import num
from evalloop.verdicts.outcome import case_outcome, passes
from evalloop.verdicts.verdict import VerdictStatus


@dataclass
class _Cell:
    values: list[float] = field(default_factory=list)
    errored: int = 0
    skipped: int = 0
    message: str = ""
    failing_message: str = ""


def junit_xml(reports: Sequence[RunReport], store: HistoryStore) -> str:
    """The JUnit XML document for the given runs."""
    root = ET.Element("testsuites", name="evalloop")
    totals: defaultdict[str, int] = defaultdict(int)
    for report in reports:
        suite_el = _testsuite(report, store)
        root.append(suite_el)
        for key in ("tests", "failures", "errors", "skipped"):
            totals[key] += int(suite_el.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: str | Path, reports: Sequence[RunReport], store: HistoryStore) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(junit_xml(reports, store), encoding="utf-8")
    return target


def _testsuite(report: RunReport, store: HistoryStore) -> ET.Element:
    run = report.executed.run
    cells, latency = _load(store, run.id, {b.name: b.pass_mark for b in report.prepared.scorers})
    controls = {case.id: case for case in report.suite.iter_cases() if case.expect != "pass"}
    elapsed = (run.ended_at - run.started_at).total_seconds() if run.ended_at else 0.0
    suite_el = ET.Element("testsuite", name=run.suite, id=run.id,
                          timestamp=run.started_at.replace(microsecond=0).isoformat(),
                          time=f"{elapsed:.3f}")
    props = ET.SubElement(suite_el, "properties")
    for name, value in (("run_id", run.id), ("code_version", run.code_version or ""),
                        ("fingerprint", run.system_fingerprint), ("valid", str(run.valid).lower())):
        ET.SubElement(props, "property", name=name, value=value)
    counts: defaultdict[str, int] = defaultdict(int)
    for bound in report.prepared.scorers:
        classname = f"{run.suite}.{bound.name}"
        for case_id, cell in sorted(cells[bound.name].items()):
            case = controls.get(case_id)
            control = bool(case is not None and case.expects_fail(bound.name))
            el = ET.SubElement(suite_el, "testcase", classname=classname, name=case_id,
                               time=f"{latency.get(case_id, 0.0) / 1000.0:.3f}")
            counts["tests"] += 1
            _grade(el, cell, bound.pass_mark, control, counts,
                   tests_scorer=bool(case is not None and case.tests_scorer(bound.name)))
    for s in report.comparison.scorers:
        el = ET.SubElement(suite_el, "testcase", classname=f"{run.suite}.baseline", name=s.scorer)
        counts["tests"] += 1
        line = (f"{s.verdict}: current {num(s.current)}, baseline {num(s.baseline)} "
                f"({s.window_runs} runs), threshold {s.threshold:.0%}"
                + (f" — {s.reason}" if s.reason else ""))
        if s.fails:
            failing = ", ".join(c for c, _ in s.newly_failing[:20])
            fail = ET.SubElement(el, "failure", message=line, type=s.verdict)
            fail.text = f"newly failing vs previous run: {failing}" if failing else line
            counts["failures"] += 1
        elif s.skipped:
            ET.SubElement(el, "skipped", message=s.reason or "scorer did not run")
            counts["skipped"] += 1
        ET.SubElement(el, "system-out").text = line
    if not run.valid and not any(s.status is VerdictStatus.INVALID for s in report.comparison.scorers):
        el = ET.SubElement(suite_el, "testcase", classname=f"{run.suite}.baseline", name="run")
        counts["tests"] += 1
        ET.SubElement(el, "failure", message=f"invalid run: {run.invalid_reason or 'invalid'}",
                      type="invalid run")
        counts["failures"] += 1
    for key in ("tests", "failures", "errors", "skipped"):
        suite_el.set(key, str(counts[key]))
    return suite_el


def _grade(el: ET.Element, cell: _Cell, pass_mark: float, control: bool,
           counts: dict[str, int], *, tests_scorer: bool = False) -> None:
    graded = case_outcome(cell.values, pass_mark, errored=cell.errored, control=control)
    if graded.state == "errored":
        ET.SubElement(el, "error", message=cell.message or "grading errored", type="errored")
        counts["errors"] += 1
        return
    if graded.state == "skipped":
        ET.SubElement(el, "skipped", message=cell.message or "skipped")
        counts["skipped"] += 1
        return
    value = graded.value
    if not graded.failed:
        return
    if control and tests_scorer:
        ET.SubElement(el, "failure", type="control passed",
                      message=f"known-bad output passed (score {value:.3f} ≥ {pass_mark:g}): "
                              "the scorer is broken")
        counts["failures"] += 1
    elif control:
        ET.SubElement(el, "failure", type="expected failure passed",
                      message=f"expected to fail, but scored {value:.3f} ≥ {pass_mark:g}: the product's "
                              "answer to this known-bad case changed (give it a fixed output to test the scorer)")
        counts["failures"] += 1
    else:
        message = cell.failing_message or cell.message or "below pass mark"
        fail = ET.SubElement(el, "failure", type="below pass mark",
                             message=f"score {value:.3f} < {pass_mark:g}: {message}")
        fail.text = message
        counts["failures"] += 1


def _load(store: HistoryStore, run_id: str,
          marks: dict[str, float]) -> tuple[dict[str, dict[str, _Cell]], dict[str, float]]:
    cells: dict[str, dict[str, _Cell]] = defaultdict(lambda: defaultdict(_Cell))
    latency: dict[str, list[float]] = defaultdict(list)
    scores, results = SCORES.c, RESULTS.c
    with store.engine.connect() as conn:
        for case_id, scorer, value, errored, skipped, message in conn.execute(
            select(scores.case_id, scores.scorer, scores.value, scores.errored, scores.skipped, scores.message)
            .where(scores.run_id == run_id).order_by(scores.id)
        ):
            cell = cells[scorer][case_id]
            if skipped:
                cell.skipped += 1
            elif errored:
                cell.errored += 1
            else:
                cell.values.append(value)
                if message and not cell.failing_message and not passes(value, marks.get(scorer, 0.5)):
                    cell.failing_message = message
            cell.message = cell.message or message
        for case_id, ms in conn.execute(
            select(results.case_id, results.latency_ms).where(results.run_id == run_id)
        ):
            latency[case_id].append(ms)
    return cells, {c: sum(v) / len(v) for c, v in latency.items()}


