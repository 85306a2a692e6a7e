"""The HTML report in headless Chromium: the screenshot shows the trend chart (skips without it)."""

from __future__ import annotations

import importlib.util
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from evalloop import HistoryStore, load_settings
from evalloop.report.html import write_html
from evalloop.report.trends import build_trends

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BENCH = Path(__file__).resolve().parents[1] / "bench" / "report_screenshot.py"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


def _bench():
    spec = importlib.util.spec_from_file_location("report_screenshot_bench", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_png(path: Path) -> np.ndarray:
    """An 8-bit RGB(A) PNG as an (h, w, 3) array (stdlib zlib + NumPy; enough for Chromium's PNGs)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.int32)
    prev = np.zeros(width * bpp, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            row = line
        elif kind == 2:
            row = (line + prev) % 256
        elif kind == 1:
            row = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        else:
            row = _sequential(line.tolist(), prev.tolist(), bpp, kind)
        out[y] = row
        prev = out[y]
    return out.reshape(height, width, bpp)[:, :, :3].astype(np.uint8)


def _sequential(line: list[int], prev: list[int], bpp: int, kind: int) -> np.ndarray:
    row = [0] * len(line)
    for i, x in enumerate(line):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        if kind == 3:
            row[i] = (x + (a + b) // 2) & 255
            continue
        c = prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        row[i] = (x + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.array(row, dtype=np.int32)


def _pixels_near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> np.ndarray:
    return np.argwhere(np.abs(img.astype(np.int32) - np.array(rgb)).max(axis=2) <= tol)


def test_screenshot_shows_band_mean_line_and_regression(tmp_path, monkeypatch):
    bench = _bench()
    root = bench.build_project(tmp_path / "project")
    monkeypatch.setenv("EVALLOOP_DEMO_ANSWERS", str(root / "answers.json"))
    monkeypatch.syspath_prepend(str(root))
    bench.run_history(root, root / "answers.json", exact_runs=0)
    settings = load_settings(root)
    trends = build_trends(HistoryStore(settings.database_url), ["similarity"])
    page = write_html(trends, tmp_path / "report.html")
    png = tmp_path / "report.png"
    bench.screenshot(CHROMIUM, page, png, size="1200,900")
    shutil.copy(png, Path("/tmp") / "evalloop-test-report.png") if Path("/tmp").is_dir() else None
    img = read_png(png)
    assert img.shape == (900, 1200, 3)
    mean_line = _pixels_near(img, (0x1F, 0x4E, 0x9C))  # --mean
    band = _pixels_near(img, (0xD9, 0xE7, 0xF8), tol=8)  # --band at 75 % over the plot background
    red = _pixels_near(img, (0xD1, 0x3B, 0x3B))  # regression marker, its label, threshold line
    counts = (len(mean_line), len(band), len(red))
    assert counts[0] > 500 and counts[1] > 2000 and counts[2] > 150, counts
    # the first chart sits under the overview: mean line and band inside the same rows
    top, bottom = np.percentile(band[:, 0], [5, 95])
    assert 250 < top < bottom < 900 and np.median(mean_line[:, 0]) < bottom + 60
    # the regressed point is the right-most red blob, lower than the band
    right_red = red[red[:, 1] > np.percentile(red[:, 1], 90)]
    assert np.median(right_red[:, 0]) > bottom
