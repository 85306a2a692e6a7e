"""Reading commands read: `history`, `show`, `compare` and `report` in a folder with no history
create nothing (no history/ folder, no database)."""

from __future__ import annotations

import pytest

from support.cli import cli


@pytest.mark.parametrize(("args", "code"), [
    (["history"], 0), (["history", "--json"], 0), (["show", "last"], 2), (["compare", "a", "b"], 2),
    (["report"], 2),
])
def test_a_reading_command_in_an_empty_folder_creates_nothing(tmp_path, args, code):
    proc = cli(tmp_path, *args)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    said = "no history yet" if args[0] == "report" else "[]" if "--json" in args else "no runs yet"
    assert said in proc.stdout + proc.stderr, proc.stdout + proc.stderr
