"""``evalloop compare RUN_A RUN_B``: per-scorer deltas between two runs and the cases that flipped."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import BaseModel
from rich.table import Table

from evalloop.cli.app import JsonOpt, ProjectOpt, app, friendly, out, settings_for
from evalloop.errors import EvalloopError
from evalloop.history.models import Run
from evalloop.history.store import HistoryStore
from evalloop.report.format import num

MAX_SHOWN = 10


class ScorerDelta(BaseModel):
    """One scorer in two runs: means, their difference, and the cases that crossed the pass mark."""

    scorer: str
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    relative: float | None
    pass_mark: float
    common_cases: int
    ci_a: tuple[float, float] | None = None
    ci_b: tuple[float, float] | None = None
    p_value: float | None = None
    stars: str = ""
    test: str | None = None
    newly_failing: list[str]
    newly_passing: list[str]


class RunDiff(BaseModel):
    run_a: str
    run_b: str
    suite_a: str
    suite_b: str
    scorers: list[ScorerDelta]


def diff_runs(store: HistoryStore, a: Run, b: Run) -> RunDiff:
    """Compare run ``b`` with run ``a`` scorer by scorer (scorers in either run)."""
    sa, sb = store.summaries(a.id), store.summaries(b.id)
    deltas = []
    for name in [*sb, *(n for n in sa if n not in sb)]:
        mean_a = sa[name].mean if name in sa else None
        mean_b = sb[name].mean if name in sb else None
        details = json.loads((sb.get(name) or sa[name]).details or "{}")
        pass_mark = float(details.get("pass_mark", 0.5))
        controls = set(details.get("controls", []))  # known-bad cases check the scorer, not the product
        ca = {c: v for c, v in store.case_scores(a.id, name).items() if c not in controls}
        cb = {c: v for c, v in store.case_scores(b.id, name).items() if c not in controls}
        common = ca.keys() & cb.keys()
        delta = None if mean_a is None or mean_b is None else mean_b - mean_a
        deltas.append(ScorerDelta(
            scorer=name, mean_a=mean_a, mean_b=mean_b, delta=delta,
            relative=delta / mean_a if delta is not None and mean_a else None,
            pass_mark=pass_mark, common_cases=len(common), **_evidence(ca, cb, sorted(common)),
            newly_failing=sorted(c for c in common if ca[c] >= pass_mark > cb[c]),
            newly_passing=sorted(c for c in common if cb[c] >= pass_mark > ca[c])))
    return RunDiff(run_a=a.id, run_b=b.id, suite_a=a.suite, suite_b=b.suite, scorers=deltas)


def _evidence(ca: dict[str, float], cb: dict[str, float], common: list[str]) -> dict:
    """Bootstrap CIs of both means and a two-sided paired test on the cases both runs graded."""
    from evalloop import stats

    out: dict = {}
    for key, scores in (("ci_a", ca), ("ci_b", cb)):
        ci = stats.bootstrap_ci(list(scores.values()))
        out[key] = (ci.low, ci.high) if ci is not None else None
    if len(common) >= 2:
        x, y = [cb[c] for c in common], [ca[c] for c in common]
        binary = all(v in (0.0, 1.0) for v in (*x, *y))
        result = stats.mcnemar_exact(x, y) if binary else stats.paired_permutation_test(x, y)
        out.update(p_value=result.p_value, stars=stats.stars(result.p_value), test=result.test)
    return out


def find_run(store: HistoryStore, ref: str, where: str) -> Run:
    """A run by id or unique prefix; an unknown or ambiguous one is a one-line error."""
    found = store.find_runs(ref, limit=4)
    if len(found) == 1:
        return found[0]
    if not found:
        raise EvalloopError(f"no run '{ref}'", where=where,
                            hint="use a run id or a unique prefix (see `evalloop history`)")
    shown = ", ".join(r.id for r in found[:3]) + (", …" if len(found) > 3 else "")
    raise EvalloopError(f"run prefix '{ref}' is ambiguous: it matches {shown}", where=where,
                        hint="give more of the run id (see `evalloop history`)")


@app.command()
@friendly
def compare(
    run_a: Annotated[str, typer.Argument(help="The earlier run (id or unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="The later run (id or unique prefix).")],
    json_out: JsonOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Show per-scorer deltas from RUN_A to RUN_B and the cases that flipped.

    Example: [bold]evalloop compare 20250101T030000 20250102T030000[/bold]
    """
    from evalloop.history.runlog import synced_store

    settings = settings_for(project)
    store = synced_store(settings.database_url, settings.history_dir, run_log=settings.run_log)
    assert store is not None
    a, b = find_run(store, run_a, settings.database_url), find_run(store, run_b, settings.database_url)
    diff = diff_runs(store, a, b)
    if json_out:
        print(diff.model_dump_json(indent=2))
        return
    console = out()
    suites = a.suite if a.suite == b.suite else f"{a.suite} → {b.suite}"
    console.print(f"[bold]{suites}[/bold]  {a.id} → {b.id}")
    table = Table(show_edge=False, pad_edge=False)
    for col in ("scorer", "A", "A 95% CI", "B", "B 95% CI", "delta", "relative", "p", "paired",
                "newly failing", "newly passing"):
        table.add_column(col, justify="left" if col == "scorer" else "right")
    for d in diff.scorers:
        table.add_row(d.scorer, num(d.mean_a), _ci(d.ci_a), num(d.mean_b), _ci(d.ci_b),
                      "—" if d.delta is None else f"{d.delta:+.3f}",
                      "—" if d.relative is None else f"{d.relative:+.1%}",
                      "—" if d.p_value is None else f"{d.p_value:.3g}{d.stars}", str(d.common_cases),
                      str(len(d.newly_failing)), str(len(d.newly_passing)))
    console.print(table)
    for d in diff.scorers:
        for label, cases in (("newly failing", d.newly_failing), ("newly passing", d.newly_passing)):
            if cases:
                more = f" (+{len(cases) - MAX_SHOWN} more)" if len(cases) > MAX_SHOWN else ""
                console.print(f"  {d.scorer} {label}: {', '.join(cases[:MAX_SHOWN])}{more}")


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}"


