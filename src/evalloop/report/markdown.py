"""The Markdown report: a compact summary for a pull-request comment (GitHub-flavoured).

Per suite a table of scorers (latest mean, baseline, drop, threshold, verdict, a sparkline of
the last runs), the latest run's per-stratum and per-scope means, then the cases that flipped
in the latest run, each inside ``<details>``.
"""

from __future__ import annotations

import html
import re

from evalloop.history.strata import MAX_SCOPE_ROWS, StrataReport
from evalloop.learning.incident_machine import ACTIVE, State
from evalloop.report.format import ms, num, pct
from evalloop.report.trends import ScorerTrend, SuiteTrend, TrendPoint, TrendReport
from evalloop.verdicts.outcome import failure_name
from evalloop.verdicts.verdict import VerdictStatus

SPARKS = "▁▂▃▄▅▆▇█"
MAX_CASES = 15
MAX_MESSAGE = 120
MAX_MEMORIES = 3


def sparkline(values: list[float | None]) -> str:
    """One block character per value, scaled between the smallest and largest value."""
    present = [v for v in values if v is not None]
    if not present:
        return ""
    lo, hi = min(present), max(present)
    span = hi - lo
    out = []
    for v in values:
        if v is None:
            out.append("·")
        else:
            level = 0 if span < 1e-9 else round((v - lo) / span * (len(SPARKS) - 1))
            out.append(SPARKS[level if span >= 1e-9 else len(SPARKS) // 2])
    return "".join(out)


# what can open inline Markdown or HTML in the middle of a line (images, links, emphasis, code,
# strikethrough, entities, raw HTML) or end a table cell; ``-``, ``.``, ``(`` and ``:`` cannot
_ACTIVE = re.compile(r"([\\`*_\[\]<>!|~&#])")


def _cell(text: str) -> str:
    """Free text from case data (a scorer's message, a verdict's reason) as inert Markdown, on one
    line, never at its start: every character that could open Markdown backslash-escaped, which
    CommonMark and GitHub show as itself — no image, link, emphasis or HTML can start in it, and
    ``|`` cannot end a table cell."""
    text = " ".join(str(text).split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE - 1] + "…"
    return _ACTIVE.sub(r"\\\1", text)


def _code(text: str, cell: bool = True) -> str:
    """Text as a code span, which GitHub shows verbatim (it decodes no entities there).

    Backticks inside are kept by a longer fence (padded when the text starts or ends with one);
    ``<`` and ``>`` need nothing. In a table cell ``|`` is escaped, which GFM undoes in spans.
    """
    text = " ".join(str(text).split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE - 1] + "…"
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    if cell:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _clip_lines(text: str, limit: int = 16) -> list[str]:
    lines = text.splitlines()
    return lines if len(lines) <= limit else [*lines[:limit - 1], "…"]


def _verdict(p: TrendPoint | None) -> str:
    status = p.status if p else None
    if status is None:
        return "—"
    if status.fails:
        return f"❌ **{status.value}**"
    if status is VerdictStatus.WATCH:
        return f"⚠️ {status.value}"
    if status is VerdictStatus.IMPROVED:
        return f"✅ {status.value}"
    return status.value


def _what(suite: SuiteTrend) -> str:
    """What a failing suite's latest run is, in the one vocabulary: its run outcome's status."""
    status = suite.outcome.status
    return failure_name(status) if status is not None else "no verdict"


def render_markdown(report: TrendReport, title: str = "evalloop") -> str:
    """The report as Markdown for a pull-request comment."""
    failing = report.failing_suites
    lines = [f"### {title}: " + (
        "❌ " + "; ".join(f"{_what(s)} in {_code(s.suite, cell=False)}" for s in failing) if failing
        else f"✅ no regression in {len(report.suites)} suite{'s' if len(report.suites) != 1 else ''}"
    ), ""]
    for suite in report.suites:
        lines += _suite(suite, report.window)
    lines.append(f"<sub>last {report.last} runs per suite · baseline = mean of the eligible runs "
                 f"before each run (up to {report.window}), as its verdict read them · generated "
                 f"{report.generated_at:%Y-%m-%d %H:%M} UTC by evalloop</sub>")
    return "\n".join(lines) + "\n"


def _suite(suite: SuiteTrend, window: int) -> list[str]:
    latest = suite.runs[-1] if suite.runs else None
    head = f"#### {_code(suite.suite, cell=False)}"
    if latest is None:
        return [f"{head} — {suite.progress_note or 'no finished run yet'}", ""]
    if latest is not None:
        head += f" — run {_code(latest.run_id, cell=False)}, {latest.n_cases} cases"
        if latest.cost_usd:
            head += f", ${latest.cost_usd:.4f}"
        if latest.latency_p95_ms is not None:
            head += f", p95 latency {ms(latest.latency_p95_ms)}"
        if not latest.valid:
            head += f" — ⚠️ invalid run: {_cell(latest.invalid_reason or '')}"
        if suite.progress_note:
            head += f" · {suite.progress_note}"
    lines = [head, "",
             "| scorer | latest | baseline | change | threshold | detects | verdict | trend |",
             "|---|--:|--:|--:|--:|--:|---|---|"]
    for t in suite.scorers:
        p = t.latest
        change = -p.drop if p is not None and p.drop is not None else None
        lines.append(f"| {_code(t.scorer)} | {num(p.mean if p else None)} | "
                     f"{num(p.baseline if p else None)} | {pct(change, True)} | "
                     f"{pct(t.threshold)} | {pct(p.mdd if p else None)} | {_verdict(p)} | "
                     f"{sparkline([q.mean for q in t.points])} |")
    lines.append("")
    said = [(t.scorer, t.latest) for t in suite.scorers if t.latest is not None and t.latest.reason
            and t.latest.verdict not in ("steady", "improved", "no baseline yet")]
    if said:  # the verdict's own words, as `run`, `show` and the sinks give them
        lines += [f"- {_code(name, cell=False)} **{p.verdict}**: {_cell(p.reason)}" for name, p in said] + [""]
    if suite.strata is not None:
        lines += _strata(suite.strata)
    for t in suite.scorers:
        lines += _failing(t)
        lines += _flips(t)
    if suite.memories:
        active = [m for m in suite.memories if m.status in ACTIVE]  # open, held by a lesson, promoted
        states = ", ".join(f"{sum(m.status == s for m in active)} {State(s).label}" for s in ACTIVE
                           if any(m.status == s for m in active)) or "0 open"
        lines += ["<details><summary>"
                  f"{len(suite.memories)} failure memor{'y' if len(suite.memories) == 1 else 'ies'} "
                  f"stored for this suite: {states}, {len(suite.memories) - len(active)} closed</summary>", ""]
        for m in sorted(suite.memories, key=lambda m: m.status not in ACTIVE)[:MAX_MEMORIES]:
            about = " · ".join(x for x in (f"run {_code(m.run_id, cell=False)}" if m.run_id else "",
                                           _code(m.scorer, cell=False) if m.scorer else "") if x)
            cases = ", ".join(_code(c, cell=False) for c in m.chronic_cases[:8])
            chronic = f" (chronic, failing before it too: {cases})" if m.chronic_cases else ""
            lines += [f"**{m.status}**" + (f" · {about}" if about else "") + chronic + ":", "", "```text",
                      *_clip_lines(m.information.replace("```", "ʼʼʼ")), "```", ""]
        lines += ["</details>", ""]
    return lines


def _failing(t: ScorerTrend) -> list[str]:
    """The cases that keep failing (in the latest run and the runs before it), longest first,
    folded open: a steady score can hide cases that never pass. Newly failing ones are flips."""
    stuck = t.still_failing
    if not stuck:
        return []
    summary = (f"<code>{html.escape(t.scorer)}</code>: {len(stuck)} case{'s' if len(stuck) != 1 else ''} "
               f"keep{'s' if len(stuck) == 1 else ''} failing (in the latest run and the runs before it)")
    lines = [f"<details open><summary>{summary}</summary>", "",
             "| case | failing for | score | message |", "|---|--:|--:|---|"]
    for c in stuck[:MAX_CASES]:
        lines.append(f"| {_code(c.case_id)} | {c.runs} runs | {num(c.value)} | {_cell(c.message or c.error or '')} |")
    if len(stuck) > MAX_CASES:
        lines.append(f"| … | {len(stuck) - MAX_CASES} more | | |")
    lines += ["", "</details>", ""]
    return lines


def _strata(report: StrataReport) -> list[str]:
    """The latest run's per-stratum (tag) and per-scope means, each table folded."""
    lines: list[str] = []
    for label, rows, shown, macro in (("stratum", report.strata, report.strata, report.macro),
                                      ("scope", report.scopes, report.lowest_scopes(MAX_SCOPE_ROWS),
                                       report.scope_macro)):
        if not rows:
            continue
        note = f", the {len(shown)} lowest of {len(rows)}" if len(shown) < len(rows) else ""
        lines += [f"<details><summary>per {label} — run <code>{html.escape(report.run_id)}</code>{note}"
                  "</summary>", "",
                  f"| {label} | n | " + " | ".join(_code(s) for s in report.scorers) + " |",
                  "|---|--:|" + "--:|" * len(report.scorers)]

        def row(name: str, n: int, means: dict[str, float | None]) -> str:
            return f"| {name} | {n} | " + " | ".join(num(means.get(s)) for s in report.scorers) + " |"

        lines += [row(_code(r.tag), r.n, r.means) for r in shown]
        lines.append(row("**overall**", report.n, report.overall))
        if len(rows) > 1:
            lines.append(row("macro", len(rows), macro))
        lines += ["", "</details>", ""]
    return lines


def _flips(t: ScorerTrend) -> list[str]:
    p = t.latest
    if p is None or not (p.newly_failing or p.newly_passing):
        return []
    summary = (f"<code>{html.escape(t.scorer)}</code>: {len(p.newly_failing)} newly failing, "
               f"{len(p.newly_passing)} newly passing vs run "
               f"<code>{html.escape(p.previous_run or '')}</code>")
    lines = [f"<details{' open' if p.regression else ''}><summary>{summary}</summary>", "",
             "| case | flip | before → after | message |", "|---|---|---|---|"]
    for c in p.newly_failing[:MAX_CASES]:
        lines.append(f"| {_code(c.case_id)} | pass → **fail** | {c.before:.2f} → {c.after:.2f} | "
                     f"{_cell(c.message or c.error or '')} |")
    for c in p.newly_passing[:MAX_CASES]:
        lines.append(f"| {_code(c.case_id)} | fail → pass | {c.before:.2f} → {c.after:.2f} | "
                     f"{_cell(c.message)} |")
    hidden = max(0, len(p.newly_failing) - MAX_CASES) + max(0, len(p.newly_passing) - MAX_CASES)
    if hidden:
        lines.append(f"| … | {hidden} more | | |")
    lines += ["", "</details>", ""]
    return lines
