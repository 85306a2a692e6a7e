"""Every table of the CLI reads at 80 and at 120 columns: no line wider than the terminal, no
name cut with an ellipsis, every figure there, and prose that wraps under its own indent.
The real console script on a real project with two long, similar scorer names."""

from __future__ import annotations

import json
import re

import pytest
from rich.cells import cell_len

from support.cli import cli
from support.project import make_project, write_answers

FIVE, FIFTY = "substring-hit-at-five-documents", "substring-hit-at-fifty-documents"
LONG = "expected substring 'the quick brown fox jumps over the lazy dog' not found in the top five documents"
SCORERS = f'''
from evalloop import Score, scorer

@scorer("{FIVE}", kind="heuristic")
def five(input, output, expected):
    """Whether the expected substring appears among the first five retrieved documents, per query."""
    v = float(output)
    return Score(value=v, message="ok" if v >= 0.5 else "{LONG} for " + input["id"])

@scorer("{FIFTY}", kind="heuristic")
def fifty(input, output, expected):
    """Whether the expected substring appears among the first fifty retrieved documents."""
    return Score(value=min(1.0, float(output) + 0.1))
'''
CASES = [f"case-{i:02d}" for i in range(36)]
SUITE = {"name": "retrieval-substring-long", "description": "Long scorer names at 80 columns.",
         "target": "sut:controlled", "scorers": [FIVE, FIFTY], "cases": [{"id": c, "input": {"id": c}} for c in CASES]}
WIDTHS = [80, 120]


def answers(regressed: bool) -> dict[str, float]:
    """Five cases fail on every run; the regressed run fails ten more."""
    return {c: 0.0 if i < 5 or (regressed and i < 15) else 1.0 for i, c in enumerate(CASES)}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("columns"), {"retrieval-substring-long": SUITE}, scorers=SCORERS)
    env = {"EVALLOOP_TEST_ANSWERS": str(root / "answers.json")}
    for k in range(4):
        write_answers(root / "answers.json", answers(regressed=k == 3))
        result = cli(root, "run", "--suite", "retrieval-substring-long", env={**env, "COLUMNS": "80"})
    runs = json.loads(cli(root, "history", "--json").stdout)
    return root, [r["id"] for r in runs], result


def run_cli(root, width: int, *args: str) -> list[str]:
    result = cli(root, *args, env={"COLUMNS": str(width)})
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.splitlines()


def fits(lines: list[str], width: int) -> None:
    wide = [line for line in lines if cell_len(line) > width]
    assert not wide, "\n".join(wide)
    assert not [line for line in lines if "…" in line], "\n".join(lines)


def flat(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def whole(name: str, lines: list[str]) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line) for line in lines)


def test_run_output_at_80_columns(project):
    root, _, result = project
    lines = result.stdout.splitlines()
    fits(lines, 80)
    assert whole(FIVE, lines) and whole(FIFTY, lines)
    notes = lines[next(i for i, line in enumerate(lines) if line.startswith(f"  {FIVE}: Significant")):]
    assert all(line.startswith("  ") for line in notes), "\n".join(notes)  # wrapped under their indent
    assert f"{LONG} for case-05" in flat(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_compare(project, width):
    root, ids, _ = project
    lines = run_cli(root, width, "compare", ids[1], ids[0])
    fits(lines, width)
    assert whole(FIVE, lines) and whole(FIFTY, lines)
    text = flat(lines)
    for figure in ("0.861", "0.583", "-0.278", "-32.3%", "0.875", "0.625", "-28.6%"):
        assert figure in text, figure
    assert "case-05" in text and "case-14" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_history_and_show_headers_keep_each_run_on_one_line(project, width):
    root, ids, _ = project
    for args in (("history",), ("show", "last", "--failed")):
        lines = run_cli(root, width, *args)
        fits(lines, width)
        assert any(ids[0] in line and "retrieval-substring-long" in line for line in lines), "\n".join(lines)
        assert whole(FIVE, lines) and whole(FIFTY, lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    cases = lines[start:next(i for i, line in enumerate(lines) if line.startswith("15 case(s)"))]
    assert all(line.startswith(("FAIL", "pass", " ")) for line in cases), "\n".join(cases)
    assert f"{LONG} for case-00" in flat(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_memories_list_stacks_each_memory(project, width):
    root, _, _ = project
    memories = json.loads(cli(root, "memories", "list", "--json").stdout)
    assert len(memories) == 2
    lines = run_cli(root, width, "memories", "list")
    fits(lines, width)
    text = flat(lines)
    for m in memories:
        assert m["id"] in text and " ".join(m["information"].split()) in text
        assert all(tag in text for tag in m["tags"])
    longest = sum(len(m["information"].splitlines()) for m in memories)
    assert len(lines) <= longest * 1.5 + 8 * len(memories), len(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_scorers_list(project, width):
    root, _, _ = project
    scorers = json.loads(cli(root, "scorers", "list", "--json").stdout)
    lines = run_cli(root, width, "scorers", "list")
    fits(lines, width)
    text = flat(lines)
    for s in scorers:
        assert whole(s["name"], lines), s["name"]
        assert " ".join(s["description"].split()) in text, s["name"]
    assert len(lines) <= 3.5 * len(scorers), len(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_report_and_suites_tables(project, width):
    root, _, _ = project
    for args in (("suites", "list"), ("report",)):
        lines = run_cli(root, width, *args)
        fits(lines, width)
        assert whole("retrieval-substring-long", lines)
    assert whole(FIVE, lines) and whole(FIFTY, lines)  # the report's rows


@pytest.mark.parametrize("width", WIDTHS)
def test_schedule_list(project, width):
    root, _, _ = project
    if width == WIDTHS[0]:
        for job, trigger in (("nightly-retrieval-substring-long", ["--cron", "0 3 * * *", "--tz", "Europe/Berlin"]),
                             ("every-six-hours", ["--every", "6h"])):
            assert cli(root, "schedule", "add", "-s", "retrieval-substring-long", "--id", job, *trigger).returncode == 0
    lines = run_cli(root, width, "schedule", "list")
    fits(lines, width)
    assert whole("nightly-retrieval-substring-long", lines) and whole("every-six-hours", lines)
    assert "Europe/Berlin" in flat(lines) and "retrieval-substring-long" in flat(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_shipped_suite_with_strata_and_five_similar_scorers(project, width):
    root, _, _ = project
    lines = run_cli(root, width, "run", "--suite", "memory-substring")
    fits(lines, width)
    for name in ("substring-hit", "substring-mrr", "relevance-density", "change-detection", "null-rejection"):
        assert whole(name, lines), name
    text = flat(lines)
    assert "change_awareness" in text and "current_state" in text and "overall" in text
