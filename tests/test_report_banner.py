"""The HTML report's banner says what the latest runs mean: a watch is neither green nor red."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from support.cli import cli as _cli


def _similarity_means(tmp_path: Path) -> dict[str, float]:
    """Run the tagged `similarity` suite once; its scorers' means as the run reported them."""
    ran = _cli(tmp_path, "run", "--suite", "similarity", "--json", "--no-cases")
    assert ran.returncode == 0, ran.stderr
    return {s["scorer"]: s["current"] for s in json.loads(ran.stdout)["scorers"]}


def test_a_drop_without_evidence_gets_an_amber_banner_naming_the_scorers(tmp_path):
    cli = functools.partial(_cli, tmp_path)
    assert cli("init").returncode == 0
    assert cli("run", "--all").returncode == 0
    greeter = tmp_path / "greeter.py"
    greeter.write_text(greeter.read_text().replace("Hello", "Bye"))  # the greeting cases fail now
    suite = tmp_path / "fixtures" / "greeting.yaml"  # (and would be under their floors: not this test)
    suite.write_text(suite.read_text() + "verdict: {min_score: 0}\n")
    ran = cli("run", "--all")
    assert ran.returncode == 0, ran.stderr  # 2 shared cases cannot show significance: watch
    assert "2 watches" in ran.stderr
    assert cli("report", "--html", "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    assert 'class="banner watch"' in html and "2 scorers to watch" in html
    assert 'class="banner good"' not in html and 'class="banner bad"' not in html


def test_the_html_report_shows_the_latest_runs_strata(tmp_path):
    """A tagged suite's latest run gets a per-stratum table whose overall is the run's mean."""
    cli = functools.partial(_cli, tmp_path)
    means = _similarity_means(tmp_path)
    assert cli("report", "--suite", "similarity", "--html", "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    table = html.split("<h3>Per stratum", 1)[1].split("</table>", 1)[0]
    assert "<td>false-friend</td>" in table and "<td>paraphrase</td>" in table
    overall = table.split("<td><b>overall</b></td>", 1)[1].split("</tr>", 1)[0]
    assert f"{means['similarity-detection']:.3f}" in overall


def test_the_markdown_report_shows_the_latest_runs_strata(tmp_path):
    """The pull-request comment carries the same per-stratum table as the HTML report, folded."""
    cli = functools.partial(_cli, tmp_path)
    means = _similarity_means(tmp_path)
    assert cli("report", "--suite", "similarity", "--markdown-file", "r.md").returncode == 0
    md = (tmp_path / "r.md").read_text()
    assert "<summary>per stratum" in md, md
    table = md.split("<summary>per stratum", 1)[1].split("</details>", 1)[0]
    header = next(line for line in table.splitlines() if line.startswith("| stratum"))
    assert "`similarity-detection`" in header
    assert "| `false-friend` |" in table and "| `paraphrase` |" in table
    overall = next(line for line in table.splitlines() if line.startswith("| **overall** |"))
    assert f"{means['similarity-detection']:.3f}" in overall
