"""The HTML report: one self-contained file with inline SVG trend charts, rendered with Jinja2.

No script, no stylesheet or font from the network: the file opens offline in any browser.
Chart geometry is computed here; ``templates/report.html.j2`` only places what it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from evalloop.report.failing import MAX_CASES
from evalloop.report.format import ms
from evalloop.report.templating import TEMPLATES, environment
from evalloop.report.trends import ScorerTrend, SuiteTrend, TrendPoint, TrendReport
from evalloop.verdicts.verdict import VerdictStatus

__all__ = ["TEMPLATES", "Chart", "ChartPair", "latency_chart", "latency_charts", "render_html", "score_chart",
           "score_charts", "verdict_class", "write_html"]

WIDTH, HEIGHT, SMALL_HEIGHT = 1064, 290, 170
#: the chart a phone shows instead (CSS picks one): fewer pixels, so its labels stay readable
NARROW_WIDTH, NARROW_HEIGHT, NARROW_SMALL_HEIGHT = 400, 260, 170
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 22, 44
INSET = 30  # room inside the plot so the first and last points' labels fit
MAX_XLABELS = 12
MAX_FLIP_RUNS = 8


@dataclass
class Marker:
    x: float
    y: float
    r: float
    css: str
    title: str
    label: str = ""
    label_x: float = 0.0
    label_y: float = 0.0
    href: str = ""  # the run's page, where a viewer serves one


@dataclass
class Change:
    """A vertical mark between two runs: the product changed (solid), the measurement (dashed),
    or a person accepted the run as the new normal (dotted)."""

    x: float
    css: str  # "change-product", "change-measurement" or "change-acceptance"
    label: str
    title: str
    row: int = 0  # which line of labels under the plot's top edge


@dataclass
class Chart:
    """An SVG line chart: polygons (bands), polylines, point markers and axis labels."""

    width: int
    height: int
    lo: float
    hi: float
    n: int
    yticks: list[tuple[float, str]] = field(default_factory=list)
    xlabels: list[tuple[float, str]] = field(default_factory=list)
    polygons: list[tuple[str, str]] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    title: str = ""
    changes: list[Change] = field(default_factory=list)  # vertical marks: product, measurement, acceptance
    variant: str = "wide"  # "wide" (a screen) or "narrow" (a phone): the stylesheet shows one

    @property
    def plot_left(self) -> int:
        return LEFT

    @property
    def plot_right(self) -> int:
        return self.width - RIGHT

    @property
    def plot_top(self) -> int:
        return TOP

    @property
    def plot_bottom(self) -> int:
        return self.height - BOTTOM

    def x(self, i: int) -> float:
        span = self.plot_right - self.plot_left - 2 * INSET
        return self.plot_left + INSET + (span / 2 if self.n <= 1 else span * i / (self.n - 1))

    def y(self, value: float) -> float:
        frac = (self.hi - value) / (self.hi - self.lo)
        return self.plot_top + frac * (self.plot_bottom - self.plot_top)

    def segments(self, values: Sequence[float | None]) -> list[list[tuple[float, float]]]:
        """Runs of consecutive present values, as (x, y) points."""
        out: list[list[tuple[float, float]]] = [[]]
        for i, v in enumerate(values):
            if v is None:
                if out[-1]:
                    out.append([])
                continue
            out[-1].append((self.x(i), self.y(v)))
        return [s for s in out if s]

    def add_line(self, values: Sequence[float | None], css: str) -> None:
        for seg in self.segments(values):
            if len(seg) == 1:  # a lone value still shows, as a short tick
                (x, y), = seg
                seg = [(x - 6, y), (x + 6, y)]
            self.lines.append((_pts(seg), css))

    def add_band(self, low: Sequence[float | None], high: Sequence[float | None], css: str) -> None:
        run: list[tuple[float, float, float]] = []  # x, y of low, y of high
        pairs = [*zip(low, high, strict=True), (None, None)]
        for i, (a, b) in enumerate(pairs):
            if a is not None and b is not None:
                run.append((self.x(i), self.y(a), self.y(b)))
                continue
            if not run:
                continue
            if len(run) == 1:
                x, y_low, y_high = run[0]
                run = [(x - 6, y_low, y_high), (x + 6, y_low, y_high)]
            top = [(x, y_high) for x, _, y_high in run]
            bottom = [(x, y_low) for x, y_low, _ in reversed(run)]
            self.polygons.append((_pts(top + bottom), css))
            run = []


@dataclass
class ChartPair:
    """One chart drawn for a screen and for a phone."""

    wide: Chart
    narrow: Chart


def _pts(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def nice_range(values: Sequence[float], floor: float | None = None,
               ceiling: float | None = None) -> tuple[float, float, float]:
    """An axis range around ``values`` on round numbers, and its tick step."""
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-9:
        pad = abs(hi) * 0.1 or 0.1
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    if floor is not None:
        lo = max(lo, floor)
    if ceiling is not None:
        hi = min(hi, ceiling)
    return lo, hi, step


def _ticks(lo: float, hi: float, step: float) -> list[float]:
    count = int(round((hi - lo) / step))
    return [lo + k * step for k in range(count + 1)] if count <= 12 else [lo, hi]


def _text_width(text: str, px: float = 7.0) -> float:
    """A generous estimate of a label's width in the chart's font (no font metrics here)."""
    return len(text) * px + 6


def _xlabels(chart: Chart, stamps: Sequence[datetime]) -> None:
    """Run start times under the x axis, as precise as the span of the runs needs; as many as fit
    side by side, and a time equal to the one shown before it is left out."""
    if not stamps:
        return
    span = (max(stamps) - min(stamps)).total_seconds()
    fmt = "%H:%M:%S" if span < 3600 else "%H:%M" if span < 86400 else "%m-%d %H:%M"
    labels = [at.strftime(fmt) for at in stamps]
    gap = chart.x(1) - chart.x(0) if len(stamps) > 1 else chart.width
    every = max(1, math.ceil(len(stamps) / MAX_XLABELS), math.ceil(max(map(_text_width, labels)) / gap))
    right = -math.inf
    for i, label in enumerate(labels):
        if (i % every and i != len(labels) - 1) or (i and label == labels[i - 1]):
            continue
        x = chart.x(i)
        if x - _text_width(label) / 2 < right:  # the last label would touch the one before it
            continue
        chart.xlabels.append((x, label))
        right = x + _text_width(label) / 2


def place_labels(chart: Chart) -> None:
    """Put each marker's label above its point, else below it, where it overlaps no label placed
    before it and stays inside the plot; a label with no room is left out (the point's tooltip
    still says it)."""
    taken: list[tuple[float, float, float, float]] = []
    for m in sorted((m for m in chart.markers if m.label), key=lambda m: m.x):
        half = _text_width(m.label, 8.0) / 2
        x = min(max(m.x, chart.plot_left + half), chart.plot_right - half)
        for y in (m.y - m.r - 6, m.y + m.r + 16):
            box = (x - half - 4, x + half + 4, y - 12, y + 3)  # a little air between two labels
            inside = box[2] >= chart.plot_top - TOP + 2 and box[3] <= chart.plot_bottom
            if inside and not any(a < box[1] and box[0] < b and c < box[3] and box[2] < d for a, b, c, d in taken):
                m.label_x, m.label_y = x, y
                taken.append(box)
                break
        else:
            m.label = ""


def score_chart(trend: ScorerTrend, *, width: int = WIDTH, height: int = HEIGHT, variant: str = "wide",
                link: Callable[[str], str] | None = None) -> Chart:
    """The scorer's mean per run with the rolling band, baseline, threshold and floor lines;
    ``link`` gives a run's page (each point then links to it)."""
    pts = trend.points
    seen = [v for p in pts for v in (p.mean, p.band_low, p.band_high, p.threshold_line, p.floor)
            if v is not None]
    lo, hi, step = nice_range(seen, floor=0.0, ceiling=1.0)
    chart = Chart(width, height, lo, hi, len(pts), title=f"{trend.scorer} over {len(pts)} runs", variant=variant)
    digits = 2 if step < 0.1 else 1
    chart.yticks = [(chart.y(t), f"{t:.{digits}f}") for t in _ticks(lo, hi, step)]
    _xlabels(chart, [p.started_at for p in pts])
    chart.add_band([p.band_low for p in pts], [p.band_high for p in pts], "band")
    chart.add_line([p.baseline for p in pts], "baseline")
    chart.add_line([p.threshold_line for p in pts], "threshold")
    if any(p.floor for p in pts):
        chart.add_line([p.floor or None for p in pts], "floor")
    chart.add_line([p.mean for p in pts], "mean")
    _change_marks(chart, trend)
    for i, p in enumerate(pts):
        if p.mean is None:
            continue
        css, label = _marker_style(p)
        chart.markers.append(Marker(chart.x(i), chart.y(p.mean), 6.5 if p.regression else 4.5, css,
                                    _marker_title(trend, p), label, href=link(p.run_id) if link else ""))
    place_labels(chart)
    return chart


def score_charts(trend: ScorerTrend, link: Callable[[str], str] | None = None) -> ChartPair:
    """The scorer's chart for a screen and for a phone."""
    return ChartPair(score_chart(trend, link=link),
                     score_chart(trend, width=NARROW_WIDTH, height=NARROW_HEIGHT, variant="narrow", link=link))


def _change_marks(chart: Chart, trend: ScorerTrend) -> None:
    """A vertical line just before each run whose product (solid) or whose scorer's measurement
    (dashed: a judge model, a rubric, the scorer's code) changed since the run before it, and on
    each run a person accepted as the new normal (dotted)."""
    for i, p in enumerate(trend.points):
        if p.accepted is not None:
            chart.changes.append(Change(chart.x(i), "change-acceptance", "accepted",
                                        f"run {p.run_id} accepted as the new normal: {p.accepted}", row=2))
        if i == 0 or not (p.product_changed or p.measurement_changed):
            continue
        x = (chart.x(i - 1) + chart.x(i)) / 2
        both = bool(p.product_changed and p.measurement_changed)
        if p.product_changed:
            chart.changes.append(Change(x - (2 if both else 0), "change-product", "product",
                                        f"run {p.run_id}: the product changed ({', '.join(p.product_changed)})"))
        if p.measurement_changed:
            chart.changes.append(Change(x + (2 if both else 0), "change-measurement", "measurement",
                                        f"run {p.run_id}: {trend.scorer}'s measurement changed "
                                        f"({', '.join(p.measurement_changed)}): compared under the new one", row=1))


def _marker_style(p: TrendPoint) -> tuple[str, str]:
    drop = f"−{p.drop:.0%}" if p.drop is not None and p.drop > 0 else ""
    if p.regression:
        return "regressed", f"▼ {drop}".strip()
    if p.status is VerdictStatus.WATCH:
        return "weak", "watch"
    if p.status is VerdictStatus.SCORER_BROKEN:
        return "broken", "broken"
    if not p.eligible:
        return "ineligible", ""
    if p.status is VerdictStatus.IMPROVED:
        return "improved", ""
    return "ok", ""


def _marker_title(trend: ScorerTrend, p: TrendPoint) -> str:
    parts = [f"run {p.run_id}", p.started_at.strftime("%Y-%m-%d %H:%M UTC"),
             f"{trend.scorer}: {p.mean:.3f} (n={p.n}" + (f", {p.errored} errored)" if p.errored else ")")]
    if p.baseline is not None:
        parts.append(f"baseline {p.baseline:.3f} over {p.window_runs} runs"
                     + (f", threshold line {p.threshold_line:.3f}" if p.threshold_line is not None else ""))
    if p.drop is not None:
        parts.append(f"drop {p.drop:+.1%}")
    parts.append(f"verdict: {p.verdict or '—'}")
    if p.newly_failing:
        parts.append(f"newly failing: {', '.join(c.case_id for c in p.newly_failing[:8])}")
    return "\n".join(parts)


def latency_chart(suite: SuiteTrend, *, width: int = WIDTH, height: int = SMALL_HEIGHT,
                  variant: str = "wide") -> Chart | None:
    """Target latency per run (mean and p95, milliseconds)."""
    runs = suite.runs
    values = [v for r in runs for v in (r.latency_mean_ms, r.latency_p95_ms) if v is not None]
    if not values:
        return None
    lo, hi, step = nice_range([0.0, *values], floor=0.0)
    chart = Chart(width, height, lo, hi, len(runs), title="target latency per run", variant=variant)
    chart.yticks = [(chart.y(t), _ms_tick(t, step, hi)) for t in _ticks(lo, hi, step)]
    _xlabels(chart, [r.started_at for r in runs])
    chart.add_line([r.latency_p95_ms for r in runs], "p95")
    chart.add_line([r.latency_mean_ms for r in runs], "latency")
    for i, r in enumerate(runs):
        if r.latency_mean_ms is not None:
            chart.markers.append(Marker(chart.x(i), chart.y(r.latency_mean_ms), 3.5, "latency",
                                        f"run {r.run_id}\nmean {ms(r.latency_mean_ms)}, "
                                        f"p95 {ms(r.latency_p95_ms)}\ncost ${r.cost_usd:.4f}"))
    return chart


def latency_charts(suite: SuiteTrend) -> ChartPair | None:
    """The latency chart for a screen and for a phone (None: no latency recorded)."""
    wide = latency_chart(suite)
    narrow = latency_chart(suite, width=NARROW_WIDTH, height=NARROW_SMALL_HEIGHT, variant="narrow")
    return ChartPair(wide, narrow) if wide is not None and narrow is not None else None


def _ms_tick(value: float, step: float, top: float) -> str:
    """A latency axis tick in the unit the axis needs (µs under a millisecond, s from a second),
    with as many decimals as the tick step."""
    scale, unit = (1000.0, "µs") if top < 1 else (0.001, "s") if top >= 1000 else (1.0, "ms")
    digits = max(0, -math.floor(math.log10(step * scale) + 1e-9)) if step * scale < 1 else 0
    return "0" if value == 0 else f"{value * scale:.{digits}f} {unit}"


def _slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return "".join(ch if ch.isalnum() else "-" for ch in text)


def verdict_class(point: TrendPoint | None) -> str:
    """The CSS class of a verdict."""
    status = point.status if point else None
    if status is None:
        return "v-none"
    return {VerdictStatus.REGRESSED: "v-regressed", VerdictStatus.SCORER_BROKEN: "v-regressed",
            VerdictStatus.WATCH: "v-weak", VerdictStatus.IMPROVED: "v-improved",
            VerdictStatus.INVALID: "v-invalid", VerdictStatus.SKIPPED: "v-skipped"}.get(status, "")


def render_html(report: TrendReport, title: str = "evalloop report") -> str:
    """The report as one self-contained HTML document."""
    charts = {(s.suite, t.scorer): score_charts(t) for s in report.suites for t in s.scorers}
    latency = {s.suite: latency_charts(s) for s in report.suites}
    flips = {(s.suite, t.scorer): [p for p in reversed(t.points)
                                   if p.newly_failing or p.newly_passing][:MAX_FLIP_RUNS]
             for s in report.suites for t in s.scorers}
    return environment().get_template("report.html.j2").render(
        report=report, title=title, charts=charts, latency=latency, flips=flips, slug=_slug,
        vclass=verdict_class, max_cases=MAX_CASES,
    )


def write_html(report: TrendReport, path: Path, title: str = "evalloop report") -> Path:
    """Render and write the report; returns the path written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, title), encoding="utf-8")
    return path
