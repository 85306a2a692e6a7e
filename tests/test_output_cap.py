"""A case's output is stored up to a cap; its full size and hash are kept and the case is marked.

Real runs on real SQLite, through the CLI where a user sees it: the scorers grade the whole
output, the history keeps its first ``max_output_bytes`` (cut on a character boundary), the
output's full size in bytes and its SHA-256, and ``show`` and ``--json`` say it was truncated.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from evalloop.history.outputs import cap_output
from support.project import TARGET, make_project

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

BIG_TARGET = TARGET + '''
def big(input):
    return input.get("char", "x") * input["size"]
'''

LENGTH_SCORER = '''
from evalloop import Score, scorer

@scorer("whole-length")
def whole_length(input, output, expected):
    """Passes when the scorer saw the whole output."""
    return Score(value=float(len(output) == input["size"]))
'''


def _project(root: Path, cases: list[dict], config: str = "") -> Path:
    suite = {"name": "big", "target": "sut:big", "scorers": ["whole-length"], "cases": cases}
    made = make_project(root, {"big": suite}, target=BIG_TARGET, scorers=LENGTH_SCORER)
    if config:
        (made / "evalloop.toml").write_text(config)
    return made


def test_a_large_output_is_stored_capped_with_its_size_and_hash_and_graded_whole(tmp_path):
    root = _project(tmp_path, [{"id": "huge", "input": {"size": 3_000_000}},
                               {"id": "small", "input": {"size": 10}}])
    report = run_suite("big", settings=load_settings(root))
    assert report.executed.summaries["whole-length"].mean == 1.0  # graded on the whole output
    rows = {r.case_id: r for r in HistoryStore(load_settings(root).database_url).case_results(report.executed.run.id)}
    whole = json.dumps("x" * 3_000_000).encode()
    huge = rows["huge"]
    assert huge.output_bytes == len(whole) and huge.output_sha256 == hashlib.sha256(whole).hexdigest()
    assert len(huge.output.encode()) <= 1_000_000 and whole.startswith(huge.output.encode())
    assert rows["small"].output == json.dumps("x" * 10)
    assert rows["small"].output_bytes is None and rows["small"].output_sha256 is None


def test_the_cap_is_a_setting_and_show_says_a_case_was_truncated(tmp_path):
    root = _project(tmp_path, [{"id": "long", "input": {"size": 5000}}, {"id": "short", "input": {"size": 5}}],
                    config="max_output_bytes = 2000\n")
    ran = subprocess.run([EVALLOOP, "run", "--suite", "big"], cwd=root, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    shown = subprocess.run([EVALLOOP, "show", "last"], cwd=root, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "truncated: 2,000 of 5,002 bytes stored" in shown.stdout
    assert shown.stdout.count("truncated:") == 1
    doc = json.loads(subprocess.run([EVALLOOP, "show", "last", "--json"], cwd=root, capture_output=True,
                                    text=True, timeout=120).stdout)
    by_id = {c["case_id"]: c for c in doc["cases"]}
    assert by_id["long"]["output_bytes"] == 5002 and len(by_id["long"]["output_sha256"]) == 64
    assert by_id["short"]["output_bytes"] is None


def test_no_cap_with_zero(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALLOOP_MAX_OUTPUT_BYTES", "0")
    root = _project(tmp_path, [{"id": "huge", "input": {"size": 1_500_000}}])
    report = run_suite("big", settings=load_settings(root))
    row = HistoryStore(load_settings(root).database_url).case_results(report.executed.run.id)[0]
    assert row.output_bytes is None and len(row.output) == 1_500_002


def test_the_cut_keeps_whole_characters():
    text = json.dumps("é" * 2000, ensure_ascii=False)  # 2 bytes a character
    stored, size, sha = cap_output(text, 1001)
    assert size == len(text.encode()) and sha == hashlib.sha256(text.encode()).hexdigest()
    assert len(stored.encode()) <= 1001 and text.startswith(stored) and len(stored) == 501  # '"' + 500 × 'é'
    assert cap_output("short", 1001) == ("short", None, None)
    assert cap_output("x" * 5000, None) == ("x" * 5000, None, None)
