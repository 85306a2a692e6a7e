"""Terminal rendering with rich: the run summary table and the history table (each laid out
for the console's width by :mod:`evalloop.report.layout`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

from evalloop.report.format import num, pct, some
from evalloop.report.layout import Record, fits, note, print_records, table_or_records

if TYPE_CHECKING:  # annotations only: printing a run needs no more than Rich and the report
    from evalloop.history.models import Run, ScorerSummary
    from evalloop.loop.pipeline import RunReport
    from evalloop.verdicts.baseline import ScorerComparison

VERDICT_STYLE = {
    "regressed": "bold red", "watch": "yellow", "improved": "green",
    "steady": "", "no baseline yet": "cyan", "invalid run": "magenta", "skipped": "dim",
    "scorer broken": "bold magenta", "below floor": "red",
}
MAX_FLIPS_SHOWN = 5
#: verdicts that already acted on the run: no power line under them
_CAUGHT = frozenset({"regressed", "invalid run", "scorer broken", "skipped"})
#: from this many columns on, the run table shows every column
WIDE_COLUMNS = 120


def print_run(report: RunReport, console: Console) -> None:
    """The summary of one run: per scorer current, baseline, drop, verdict, and flipped cases."""
    run = report.executed.run
    head = f"[bold]{run.suite}[/bold]  run {run.id}  {run.n_cases} cases"
    if run.epochs > 1:
        head += f" × {run.epochs} epochs"
    if run.llm_calls or run.cost_usd:
        head += f"  {run.llm_calls} LLM calls ({run.cache_hits} cached), ${run.cost_usd:.4f}"
        if run.cache_read_tokens or run.cache_write_tokens:
            head += f", prompt cache {run.cache_read_tokens or 0} read / {run.cache_write_tokens or 0} written tokens"
        if run.batched_calls:
            head += f", {run.batched_calls} batched"
    if any(s.evidence is not None and s.evidence.mode == "nightly" for s in report.comparison.scorers):
        head += "  (nightly)"
    console.print(head)
    wide = run_table(report, wide=True)
    if console.width >= WIDE_COLUMNS and fits(wide, console):
        console.print(wide)
    else:
        table_or_records(console, run_table(report, wide=False), run_records(report))
    scoped = max((s.evidence.scopes or 0 for s in report.comparison.scorers if s.evidence), default=0)
    if scoped:
        note(console, f"95% CI and p by scope ({scoped} scopes): the questions of one conversation "
             "are resampled together, not as independent cases")
    _print_identity(report, console)
    for s in report.comparison.scorers:
        _print_details(s, console)
        result = report.executed.results.get(s.scorer)
        if result is not None and result.expected_failures_passed:
            note(console, f"{s.scorer}: expected to fail, but passed: {some(result.expected_failures_passed, 5)} — "
                          "the product's answer to these known-bad cases changed (not the scorer's doing: "
                          "a case with a fixed output tests the scorer)")
    held = report.extras.get("held_out") or {}
    if held.get("n") and held["n"] < held.get("of", 0) and any(m is not None for m in held["means"].values()):
        shown = [f"{s} {num(m)} (whole {num(held['whole'].get(s))})" for s, m in held["means"].items()]
        note(console, f"held-out cases ({held['n']} of {held['of']}, never in a lesson): " + " · ".join(shown))
    if report.executed.case_errors:
        note(console, f"{report.executed.case_errors} case(s) failed in the target; "
                      f"first: {report.executed.first_case_error}", indent=0, style="red")
    if report.extras.get("strata"):
        from evalloop.report.strata import StrataReport, print_strata

        strata = StrataReport.model_validate(report.extras["strata"])
        print_strata(console, strata, "per stratum (tag)")
        if strata.scopes:
            print_strata(console, strata, "per scope", scopes=True)
    stats = report.extras.get("target_stats")
    if stats:
        for line in target_lines(stats):
            note(console, line)
    if not run.valid:
        note(console, f"run is invalid and kept out of baselines: {run.invalid_reason}", indent=0,
             style="magenta")


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def target_lines(stats: Mapping[str, Any]) -> list[str]:
    """What a target measured, in lines: its flat figures on one, then one per category
    (``per_category``), then a benchmark's card (``card``: what the figures were measured with)."""
    flat = {k: v for k, v in stats.items() if not isinstance(v, Mapping)}
    lines = ["target: " + ", ".join(f"{k} {_value(v)}" for k, v in flat.items())] if flat else []
    for category, row in (stats.get("per_category") or {}).items():
        lines.append(f"  {category}: " + ", ".join(f"{k} {_value(v)}" for k, v in row.items()))
    card = stats.get("card")
    if isinstance(card, Mapping):
        def show(v: Any) -> str:
            if isinstance(v, Mapping):
                return "{" + ", ".join(f"{k} {show(x)}" for k, x in v.items() if x not in (None, [], {})) + "}"
            if isinstance(v, list):
                return ", ".join(map(str, v)) or "—"
            return _value(v)
        lines.append("benchmark card: " + "; ".join(f"{k} {show(v)}" for k, v in card.items() if v is not None))
    return lines


def run_table(report: RunReport, *, wide: bool) -> Table:
    """Per scorer: current, baseline, drop, p, verdict; a wide terminal also gets kind, the CI,
    n, errored grades and the threshold (a narrow one reads them in the lines below)."""
    cols = (("scorer", "kind", "current", "95% CI", "n", "errored", "baseline", "drop", "threshold", "p",
             "verdict") if wide else ("scorer", "current", "baseline", "drop", "p", "verdict"))
    table = Table(show_edge=False, pad_edge=False, box=None if not wide else box.HEAVY_HEAD)
    for col in cols:
        table.add_column(col, justify="left" if col in ("scorer", "kind", "verdict") else "right", no_wrap=True)
    for s in report.comparison.scorers:
        style = VERDICT_STYLE.get(s.verdict, "")
        base = num(s.baseline) + (f" ({s.window_runs})" if s.window_runs else "")
        ev = s.evidence
        ci = f"{ev.ci_low:.2f}–{ev.ci_high:.2f}" if ev and ev.ci_low is not None else "—"
        p = f"{ev.p_value:.2g}{ev.stars}" if ev and ev.p_value is not None else "—"
        cells = {"scorer": s.scorer, "kind": s.kind, "current": num(s.current), "95% CI": ci, "n": str(s.n),
                 "errored": str(s.errored), "baseline": base, "drop": pct(s.drop, signed=False),
                 "threshold": pct(s.threshold), "p": p,
                 "verdict": f"[{style}]{s.verdict}[/]" if style else s.verdict}
        table.add_row(*(cells[c] for c in cols))
    return table


def run_records(report: RunReport) -> list[Record]:
    """The run table's rows stacked, for a terminal too narrow for the table: one per scorer."""
    records = []
    for s in report.comparison.scorers:
        ev = s.evidence
        base = num(s.baseline) + (f" ({s.window_runs} runs)" if s.window_runs else "")
        ci = f" (95% CI {ev.ci_low:.2f}–{ev.ci_high:.2f})" if ev and ev.ci_low is not None else ""
        p = f" · p {ev.p_value:.2g}{ev.stars}" if ev and ev.p_value is not None else ""
        records.append(Record(f"{s.scorer}: {s.verdict}", [
            f"current {num(s.current)}{ci} · baseline {base} · drop {pct(s.drop)} "
            f"(threshold {pct(s.threshold)}){p}"], style=VERDICT_STYLE.get(s.verdict, "") or "bold"))
    return records


def closing_line(reports: Sequence[RunReport], seconds: float) -> str:
    """One line after all runs: suites run, regressions, watches, invalid runs, broken scorers, time."""
    regressions = sum(1 for r in reports for s in r.comparison.scorers if s.is_regression)
    watches = sum(len(r.comparison.watches) for r in reports)
    invalid = sum(1 for r in reports if r.comparison.invalid)
    broken = sum(len(r.comparison.broken) for r in reports)
    low = sum(len(r.comparison.below_floor) for r in reports)
    failing = sum(1 for r in reports if r.comparison.fails)
    parts = [f"{len(reports)} suite{'s' if len(reports) != 1 else ''} run",
             f"{regressions} regression{'s' if regressions != 1 else ''}",
             f"{watches} watch{'es' if watches != 1 else ''}",
             f"{invalid} invalid run{'s' if invalid != 1 else ''}"]
    if low:
        parts.append(f"{low} below floor")
    if broken:
        parts.append(f"{broken} broken scorer{'s' if broken != 1 else ''}")
    verdict = f"FAILED ({failing} of {len(reports)})" if failing else "ok"
    return f"{verdict}: {', '.join(parts)} in {seconds:.1f}s"


def _print_identity(report: RunReport, console: Console) -> None:
    """Which changed since the baseline — the product, a scorer's measurement — and the bridge: the
    baseline runs' outputs re-graded by the new measurement, and what that cost."""
    change = report.comparison.fingerprint_change
    if change is None or not (change.product or change.measurement):
        return
    if change.product:
        note(console, f"product changed ({some(change.product, 4)}): "
                      + ("the baseline restarts here" if change.product_restarted else "compared with the "
                         "product before it" + (" under one measurement" if change.bridged else "")))
    for scorer, parts in change.measurement.items():
        note(console, f"{scorer}: measurement changed ({some(parts, 4)}): "
                      + ("the baseline is earlier runs' outputs re-graded by it" if scorer in change.bridged
                         else "its baseline restarts here"))
    bridge = report.extras.get("bridge")
    if bridge:
        made = bridge["runs"]
        note(console, f"bridge: {len(made)} baseline run{'s' if len(made) != 1 else ''} re-graded for "
                      f"{', '.join(bridge['scorers'])}: {bridge['llm_calls']} judge calls"
                      + (f" ({bridge['cache_hits']} cached)" if bridge["cache_hits"] else "")
                      + f", ${bridge['cost_usd']:.4f}")
        for r in bridge["unbridged"][:MAX_FLIPS_SHOWN]:
            note(console, f"not bridged: run {r['run']} ({r['reason']})", indent=4)


def power_line(s: ScorerComparison) -> str | None:
    """What a reader should know of the run's power, only where it changes what to do: a run that
    was compared and did not already fail on a drop, yet would miss a regression well past the
    threshold (:func:`evalloop.verdicts.power.too_coarse`)."""
    from evalloop.verdicts.power import too_coarse

    ev = s.evidence
    if ev is None or ev.baseline_mean is None or s.verdict in _CAUGHT or not too_coarse(ev.mdd, s.threshold):
        return None
    if ev.mdd is None:
        return (f"{s.scorer}: this run cannot show a regression: even a total drop would go unnoticed "
                f"at {s.n} cases; add cases (or epochs) before relying on its verdict")
    return (f"{s.scorer}: this run can miss a real regression: it catches a drop 90% of the time only "
            f"from {pct(ev.mdd)} (threshold {pct(s.threshold)}); more cases or epochs make that smaller")


def _print_details(s: ScorerComparison, console: Console) -> None:
    if s.verdict not in ("steady", "improved", "no baseline yet"):
        note(console, f"{s.scorer}: {s.reason}")
    ev = s.evidence
    if ev is not None and (ev.added or ev.removed):
        added = f"{ev.added} added (mean {num(ev.added_mean)})" if ev.added else ""
        removed = f"{ev.removed} removed (mean {num(ev.removed_mean)})" if ev.removed else ""
        note(console, f"{s.scorer}: compared on {ev.n_paired} shared cases; "
             + ", ".join(x for x in (added, removed) if x))
    line = power_line(s)
    if line:
        note(console, line)
    if s.errored and s.first_error:
        note(console, f"{s.scorer}: {s.errored} errored grade(s); first: {s.first_error}")
    if ev is not None and ev.flaky:
        label = "quarantined" if ev.quarantined else "flagged"
        note(console, f"{s.scorer}: flaky cases ({label}): {some(ev.flaky, MAX_FLIPS_SHOWN)}")
    if s.newly_failing:
        failing = some([c for c, _ in s.newly_failing], MAX_FLIPS_SHOWN)
        note(console, f"{s.scorer}: newly failing vs previous run: {failing}")
        for case, message in s.newly_failing[:MAX_FLIPS_SHOWN]:
            if message:
                note(console, f"{case}: {message}", indent=4)
    if s.newly_passing:
        note(console, f"{s.scorer}: newly passing: {some(s.newly_passing, MAX_FLIPS_SHOWN)}")


def print_history(runs: Sequence[Run], summaries: dict[str, dict[str, ScorerSummary]],
                  console: Console) -> None:
    """One row per run and scorer, newest first: one table when it fits the console (from 120
    columns), else each run on a line of its own and its scorers' mean, baseline, drop and
    verdict in aligned rows below it (stacked further when even those do not fit)."""
    if console.width >= WIDE_COLUMNS:
        table = _wide_history(runs, summaries)
        if fits(table, console):
            console.print(table)
            return
    _narrow_history(runs, summaries, console)


def _wide_history(runs: Sequence[Run], summaries: dict[str, dict[str, ScorerSummary]]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for col in ("run", "suite", "started (UTC)", "status", "scorer", "mean", "n", "err",
                "baseline", "drop", "verdict"):
        table.add_column(col, no_wrap=True)
    for run in runs:
        status = _status(run)
        rows = summaries.get(run.id) or {}
        if not rows:
            table.add_row(run.id, run.suite, run.started_at.strftime("%Y-%m-%d %H:%M:%S"), status,
                          "", "", "", "", "", "", "")
        for i, (name, s) in enumerate(sorted(rows.items())):
            first = i == 0
            table.add_row(
                run.id if first else "", run.suite if first else "",
                run.started_at.strftime("%Y-%m-%d %H:%M:%S") if first else "",
                status if first else "", name, num(s.mean), str(s.n), str(s.errored),
                num(s.baseline), pct(s.drop), _verdict(s.verdict),
            )
    return table


def _status(run: Run) -> str:
    return run.status if run.valid or run.status != "completed" else "invalid"


def _verdict(verdict: str | None) -> str:
    style = VERDICT_STYLE.get(verdict or "", "")
    return f"[{style}]{verdict}[/]" if style and verdict else (verdict or "")


def _narrow_history(runs: Sequence[Run], summaries: dict[str, dict[str, ScorerSummary]],
                    console: Console) -> None:
    from rich.cells import cell_len

    names = {name for run in runs for name in summaries.get(run.id) or {}}
    widths = {"scorer": max((cell_len(n) for n in names), default=6) + 2, "mean": 5, "baseline": 8,
              "drop": 6, "verdict": max((cell_len(s.verdict or "") for r in runs
                                         for s in (summaries.get(r.id) or {}).values()), default=7)}
    header = True
    for run in runs:
        note(console, f"{run.id}  {run.suite} · {_status(run)} · {run.started_at:%m-%d %H:%M}",
             indent=0, hang=4, style="bold")
        rows = sorted((summaries.get(run.id) or {}).items())
        if not rows:
            continue
        table = Table(show_edge=False, pad_edge=False, box=None, show_header=header, header_style="dim")
        for col, width in widths.items():
            table.add_column(f"  {col}" if col == "scorer" else col, width=max(width, cell_len(col)),
                             no_wrap=True, justify="left" if col in ("scorer", "verdict") else "right")
        for name, s in rows:
            table.add_row(f"  {name}", num(s.mean), num(s.baseline), pct(s.drop), _verdict(s.verdict))
        records = [Record(name, [f"mean {num(s.mean)} · baseline {num(s.baseline)} · drop {pct(s.drop)} · "
                                 f"{s.verdict or '—'}"], style="") for name, s in rows]
        if fits(table, console):
            console.print(table)
            header = False
        else:
            print_records(console, records, indent=2)
