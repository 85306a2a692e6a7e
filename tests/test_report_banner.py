"""The HTML report's banner says what the latest runs mean: a watch is neither green nor red."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def test_a_drop_without_evidence_gets_an_amber_banner_naming_the_scorers(tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([EVALLOOP, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "NO_COLOR": "1"})

    assert cli("init").returncode == 0
    assert cli("run", "--all").returncode == 0
    greeter = tmp_path / "greeter.py"
    greeter.write_text(greeter.read_text().replace("Hello", "Bye"))  # the greeting cases fail now
    ran = cli("run", "--all")
    assert ran.returncode == 0, ran.stderr  # 2 shared cases cannot show significance: watch
    assert "2 watches" in ran.stderr
    assert cli("report", "--html", "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    assert 'class="banner watch"' in html and "2 scorers to watch" in html
    assert 'class="banner good"' not in html and 'class="banner bad"' not in html
