"""A suite is found by the name at the top of its file, and ``--limit N`` reads a YAML suite only as
far as its first N cases when the rest is not needed.

Shown by what a full parse could not do: a case further down that does not parse neither hides its
suite from lookup nor stops a run of the cases before it — and a run without ``--limit`` says
what is wrong, in one line with the file and line. Real files, the real CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalloop.errors import FixtureError
from evalloop.suites import yamlhead
from evalloop.suites.lookup import discover_suites, find_suite
from evalloop.suites.models import load_suite
from evalloop.suites.yamlhead import cases_head, declared_name
from support.project import make_project

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

HEADER = "name: declared\ntarget: sut:echo\nscorers: [equals]\ncases:\n"


def _cases(n: int, broken_at: int | None = None) -> str:
    out = []
    for i in range(n):
        if i == broken_at:
            out.append(f"  - id: c{i}\n    input: {{unclosed: [1, 2\n")
        else:
            out.append(f"  - id: c{i}\n    input: {i}\n    expected: {i}\n")
    return "".join(out)


def _write(root: Path, name: str, text: str) -> Path:
    make_project(root, {}, scorers=None)
    path = root / "fixtures" / name
    path.write_text(text)
    return path


def test_a_suite_is_found_by_its_declared_name_whatever_follows_it(tmp_path):
    path = _write(tmp_path, "odd-file.yaml", HEADER + _cases(40, broken_at=30))
    assert declared_name(path) == "declared"
    assert discover_suites(tmp_path)["declared"] == path  # a full parse failed: listed as 'odd-file'
    with pytest.raises(FixtureError) as typo:
        find_suite("declard", tmp_path)
    assert "unknown suite 'declard'" in typo.value.one_line() and "did you mean 'declared'?" in typo.value.one_line()
    with pytest.raises(FixtureError) as broken:  # loading it whole says what is wrong, and where
        find_suite("declared", tmp_path)
    line = broken.value.one_line()
    assert "\n" not in line and f"{path}:" in line and "invalid YAML" in line


PADDING = "# a large suite: only a file of a megabyte or more is read in part\n" * 16_000


def test_limit_reads_a_yaml_suite_only_as_far_as_it_needs(tmp_path):
    _write(tmp_path, "declared.yaml", HEADER + _cases(40, broken_at=30) + PADDING)
    ran = subprocess.run([EVALLOOP, "run", "--suite", "declared", "--limit", "3", "--json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["n_cases"] == 3 and [c["case_id"] for c in doc["cases"]] == ["c0", "c1", "c2"]
    from evalloop import load_settings
    from evalloop.history import HistoryStore

    assert HistoryStore(load_settings(tmp_path).database_url).get_run(doc["run_id"]).partial  # never a baseline
    whole = subprocess.run([EVALLOOP, "run", "--suite", "declared"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert whole.returncode == 2
    assert "fixtures/declared.yaml:" in whole.stderr and "invalid YAML" in whole.stderr


def test_a_small_suite_is_always_read_whole(tmp_path):
    path = _write(tmp_path, "s.yaml", HEADER + _cases(40))
    assert cases_head(path.read_text(), 3) is None and load_suite(path, limit=3).head_only is None


@pytest.mark.parametrize("layout", ["keys-after", "flow", "dash-alone", "few", "root-indented"])
def test_the_head_is_the_suite_with_its_first_cases_or_the_whole_file_is_read(tmp_path, layout, monkeypatch):
    monkeypatch.setattr(yamlhead, "HEAD_ONLY_CHARS", 0)  # small files stand in for large ones
    texts = {
        "keys-after": "name: s\ncases:\n" + _cases(5) + "target: sut:echo\nscorers: [equals]\n",
        "flow": "name: s\ntarget: sut:echo\nscorers: [equals]\ncases: [{id: a, input: 1}, {id: b, input: 2}, "
                "{id: c, input: 3}]\n",
        "dash-alone": "name: s\ntarget: sut:echo\nscorers: [equals]\ncases:\n"
                      + "".join(f"-\n  id: c{i}\n  input: {i}\n" for i in range(5)),
        "few": "name: s\ntarget: sut:echo\nscorers: [equals]\ncases:\n" + _cases(2),
        "root-indented": "  name: s\n  target: sut:echo\n  scorers: [equals]\n  cases:\n"
                         + "".join(f"    - id: c{i}\n      input: {i}\n" for i in range(5)),
    }
    path = _write(tmp_path, "s.yaml", texts[layout])
    whole = load_suite(path)
    limited = load_suite(path, limit=2)
    assert [c.id for c in limited.iter_cases()][:2] == [c.id for c in whole.iter_cases()][:2]
    assert (limited.target, limited.scorers) == (whole.target, whole.scorers)
    cut = cases_head(path.read_text(), 2)
    assert cases_head(path.read_text() + PADDING, 2) == (None if cut is None else cut)  # comments after: the same
    if layout in ("dash-alone", "root-indented"):
        assert cut is not None and limited.head_only == 2 and len(list(limited.iter_cases())) == 2
    else:  # the whole file is needed (a key after the cases, a flow list) or there is nothing to leave out
        assert cut is None and limited.head_only is None
