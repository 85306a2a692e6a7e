"""The rough edges a newcomer hits: encodings, 80 columns, -h and -C, help text, notices, the
closing line, truncated lists, scores out of range, a read-only history."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from evalloop.cli import app
from evalloop.config import load_settings
from evalloop.loop.pipeline import run_suite
from support.cli import EVALLOOP, cli
from support.project import make_project

ECHO = {"name": "echo", "target": "sut:echo", "scorers": ["equals", "value"],
        "cases": [{"id": f"c{i}", "input": 1, "expected": 1} for i in range(3)]}
LATIN1 = "name: x\ndescription: caf\xe9\n".encode("latin-1")


def invoke(*args, env=None):
    return CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", **(env or {})})


@pytest.mark.parametrize("which", ["suite", "jsonl", "toml"])
def test_a_file_that_is_not_utf8_is_one_line_and_exit_2(tmp_path, which):
    root = make_project(tmp_path, {"echo": ECHO})
    if which == "suite":
        (root / "fixtures" / "echo.yaml").write_bytes(b"name: echo\ntarget: sut:echo\n# caf\xe9\n")
        where = f"{root / 'fixtures' / 'echo.yaml'}:3"
    elif which == "jsonl":
        (root / "fixtures" / "echo.yaml").write_text("name: echo\ntarget: sut:echo\nscorers: [equals]\n"
                                                    "cases: cases.jsonl\n")
        (root / "fixtures" / "cases.jsonl").write_bytes(b'{"id": "a", "input": 1}\n{"id": "b", "input": "\xe9"}\n')
        where = f"{root / 'fixtures' / 'cases.jsonl'}:2"
    else:
        (root / "evalloop.toml").write_bytes(b'window = 5\n# caf\xe9\n')
        where = str(root / "evalloop.toml")
    result = cli(root, "run", "--suite", "echo")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {where}: not valid UTF-8 (byte 0xe9{'' if which != 'toml' else ' at offset 16'}) "
        "— save the file as UTF-8"]
    assert not (root / "history" / "evalloop.db").exists() or which == "toml"


def test_the_results_table_reads_at_80_columns(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO})
    for _ in range(2):
        result = cli(root, "run", "--suite", "echo", env={"COLUMNS": "80"})
        assert result.returncode == 0, result.stderr
    table = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in table), table
    header = next(line for line in table if line.startswith("scorer"))
    assert header.split() == ["scorer", "current", "baseline", "drop", "p", "verdict"]
    rows = [line for line in table if line.startswith(("equals", "value"))]
    assert len(rows) == 2 and not any("…" in line for line in rows)
    assert rows[0].split()[-1] == "steady" and "1.000 (1)" in rows[0]
    hist = cli(root, "history", env={"COLUMNS": "80"}).stdout.splitlines()
    assert all(len(line) <= 80 for line in hist) and not any("…" in line for line in hist)
    wide = cli(root, "run", "--suite", "echo", env={"COLUMNS": "200"}).stdout
    assert "95% CI" in wide and "threshold" in wide


def test_dash_h_global_dash_c_and_help_without_type_placeholders(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO})
    for args in (["-h"], ["run", "-h"], ["history", "-h"], ["schedule", "add", "-h"]):
        result = subprocess.run([EVALLOOP, *args], capture_output=True, text=True, env={"COLUMNS": "120",
                                "PATH": "/usr/bin:/bin"}, timeout=120)
        assert result.returncode == 0, (args, result.stderr)
        assert "Usage:" in result.stdout
        assert not re.search(r"<(bool|list\[str\]|str|int|int range|float|path)>", result.stdout), result.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = cli(elsewhere, "-C", str(root), "run", "--suite", "echo")
    after = cli(elsewhere, "run", "--suite", "echo", "-C", str(root))
    assert before.returncode == 0 and after.returncode == 0, before.stderr + after.stderr
    assert len(load_settings(root).database_url) and (root / "history" / "echo.jsonl").read_text().count("\n") == 2
    assert not (elsewhere / "history").exists()


def test_the_no_key_notice_only_for_suites_that_use_an_llm(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO})
    env = {"ANTHROPIC_API_KEY": "", "EVALLOOP_LLM_BASE_URL": ""}
    plain = cli(root, "run", "--suite", "echo", env=env)
    assert plain.returncode == 0 and "ANTHROPIC_API_KEY" not in plain.stderr
    assert plain.stderr.strip().splitlines()[-1].startswith("ok: 1 suite run, 0 regressions, 0 watches, "
                                                           "0 invalid runs in ")
    llm = cli(root, "run", "--suite", "exact-match", env=env)  # the reference memory operations
    assert llm.returncode == 0 and "no ANTHROPIC_API_KEY" in llm.stderr


def test_history_says_how_many_runs_it_left_out(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO})
    settings = load_settings(root)
    for _ in range(22):
        run_suite("echo", settings=settings)
    result = invoke("history", "-C", str(root))
    assert result.exit_code == 0, result.output
    assert "showing 20 of 22 runs (newest first; --limit N for more)" in result.stdout
    assert "showing" not in invoke("history", "--limit", "30", "-C", str(root)).stdout


def test_a_score_out_of_range_is_one_clear_line(tmp_path):
    scorers = "from evalloop import Score, scorer\n\n@scorer('big')\ndef big(i, o, e):\n    return 1.5\n\n" \
              "@scorer('bigger')\ndef bigger(i, o, e):\n    return Score(value=2)\n"
    suite = {"name": "s", "target": "sut:echo", "scorers": ["big", "bigger"], "cases": [{"id": "a", "input": 1}]}
    root = make_project(tmp_path, {"s": suite}, scorers=scorers)
    result = invoke("run", "-s", "s", "--json", "-C", str(root))
    doc = json.loads(result.stdout)
    errors = {s["scorer"]: s["first_error"] for s in doc["scorers"]}
    assert errors["big"] == ("scorer big returned 1.5, outside [0, 1] (ScoreOutOfRange) — return a value in "
                             "[0, 1]: scale or clamp it")
    assert errors["bigger"].startswith("scorer bigger returned 2") and "pydantic" not in result.output
    assert result.exit_code == 1  # every grade errored: an invalid run


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) for a read-only bind mount")
def test_history_and_report_read_a_read_only_database(tmp_path):
    root = make_project(tmp_path, {"echo": ECHO})
    run_suite("echo", settings=load_settings(root))
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    history = root / "history"
    script = (f"mount --bind {history} {history} && mount -o remount,bind,ro {history} && "
              f"touch {history}/x 2>/dev/null && exit 9; "
              f"{EVALLOOP} history -C {root} && {EVALLOOP} report --suite echo -C {root} && "
              f"{EVALLOOP} show last -C {root} --json")
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                            env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "read-only" in result.stderr and "echo" in result.stdout and '"case_id": "c0"' in result.stdout
