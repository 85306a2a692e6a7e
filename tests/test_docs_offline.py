"""The documentation site works offline: no page loads a script, stylesheet or font from elsewhere
(the mkdocs theme's highlight.js comes from a CDN unless it is turned off)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FETCHED = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


def test_the_built_site_fetches_nothing(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    pages = list((tmp_path / "site").rglob("*.html"))
    assert pages
    fetching = {p.name: FETCHED.findall(p.read_text(encoding="utf-8")) for p in pages}
    assert not {k: v for k, v in fetching.items() if v}, fetching
