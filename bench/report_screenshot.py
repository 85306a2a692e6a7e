"""The HTML report in a real browser: build a history, render it, screenshot it with Chromium.

Builds a throwaway project with two suites, runs ``similarity`` ten times (steady, then a
drop in the last run that flips some cases and regresses, so the learning loop stores failure
memories) and ``exact`` six times, writes ``report.html`` and, when Debian's ``chromium`` is installed, a PNG
screenshot of it taken headless. Prints the time to build the trend data and to render the
HTML, the file size, and where the files are.

Usage: ``python bench/report_screenshot.py [--out DIR] [--chromium PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TARGET = '''
import json, os, time

def answer(input):
    """Answers from a file the script rewrites between runs: {case_id: number}."""
    with open(os.environ["EVALLOOP_DEMO_ANSWERS"]) as f:
        answers = json.load(f)
    time.sleep(answers.get("_sleep", 0.002))
    return answers.get(input["id"], 0.0)
'''

SCORERS = '''
from evalloop import Score, scorer

@scorer("closeness", kind="llm_operation")
def closeness(input, output, expected):
    """How close the answer is: the target's number is the score."""
    return Score(value=max(0.0, min(1.0, float(output))), message=f"answer scored {float(output):.2f}")

@scorer("passes", kind="heuristic", binary=True)
def passes(input, output, expected):
    """Pass/fail at 0.5."""
    ok = float(output) >= 0.5
    return Score(value=float(ok), message="" if ok else f"answer {float(output):.2f} below 0.5")
'''


def build_project(root: Path, n_cases: int = 12) -> Path:
    """A project with suites ``similarity`` and ``exact`` and their scorers."""
    import yaml

    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    (root / "scorers").mkdir(exist_ok=True)
    (root / "demo_sut.py").write_text(textwrap.dedent(TARGET))
    (root / "scorers" / "demo_scorers.py").write_text(textwrap.dedent(SCORERS))
    cases = [{"id": f"case-{i:02d}", "input": {"id": f"case-{i:02d}"}} for i in range(n_cases)]
    for name, scorers in (("similarity", ["closeness", "passes"]), ("exact", ["passes"])):
        suite = {"name": name, "target": "demo_sut:answer", "scorers": scorers, "cases": cases}
        (root / "fixtures" / f"{name}.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def run_history(root: Path, answers: Path, exact_runs: int = 6) -> None:
    """Ten ``similarity`` runs (the last one regresses) and ``exact_runs`` ``exact`` runs."""
    from evalloop import load_settings, run_suite

    settings = load_settings(root)
    levels = [0.80, 0.82, 0.79, 0.83, 0.81, 0.84, 0.80, 0.82, 0.81, 0.62]
    for k, level in enumerate(levels):
        values = {f"case-{i:02d}": round(min(1.0, level + 0.03 * ((i * 7 + k * 3) % 5 - 2)), 3)
                  for i in range(12)}
        if k == len(levels) - 1:
            values.update({"case-02": 0.2, "case-05": 0.3, "case-09": 0.1})
        values["_sleep"] = 0.002 + 0.001 * (k % 4)
        answers.write_text(json.dumps(values))
        run_suite("similarity", settings=settings)
    for _ in range(exact_runs):
        answers.write_text(json.dumps({f"case-{i:02d}": 0.9 for i in range(12)}))
        run_suite("exact", settings=settings)


def screenshot(chromium: str, html: Path, png: Path, size: str = "1400,2000",
               timeout: float = 90.0) -> None:
    """A headless Chromium screenshot of a local file (no network, throwaway profile)."""
    with tempfile.TemporaryDirectory(prefix="evalloop-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--screenshot={png}", f"--window-size={size}", html.resolve().as_uri()]
        subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot at {png}")


#: measures the laid-out page in the browser: what sticks out of the page's column, and which
#: chart labels overlap (text boxes of one chart that intersect) or leave their chart
PROBE = """<script>
addEventListener('load', () => {
  const main = document.querySelector('main');
  const box = main.getBoundingClientRect();
  const right = box.right - parseFloat(getComputedStyle(main).paddingRight);
  const name = el => (el.closest('[id]') || {}).id + ' ' + el.tagName + '.' + el.className.baseVal;
  const out = {page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
               overflowing: [], collisions: [], outside: []};
  for (const el of main.querySelectorAll('table, figure, details, p, h1, h2, h3, div')) {
    const over = Math.max(el.getBoundingClientRect().right - right, el.scrollWidth - el.clientWidth);
    if (over > 1) out.overflowing.push([el.tagName + '.' + el.className + ' in ' +
                                        ((el.closest('[id]') || {}).id || 'main'), Math.round(over)]);
  }
  for (const svg of document.querySelectorAll('svg.chart')) {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
    const boxes = texts.map(t => t.getBoundingClientRect());
    boxes.forEach((a, i) => {
      if (a.left < frame.left - 1 || a.right > frame.right + 1) out.outside.push(texts[i].textContent);
      for (let j = i + 1; j < boxes.length; j++) {
        const b = boxes[j];
        if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
          out.collisions.push([texts[i].textContent, texts[j].textContent]);
      }
    });
  }
  document.body.setAttribute('data-probe', JSON.stringify(out));
});
</script>"""


def layout_probe(chromium: str, html: Path, width: int = 1280, timeout: float = 90.0) -> dict:
    """Lay ``html`` out in headless Chromium ``width`` pixels wide and measure it (:data:`PROBE`):
    ``page`` (horizontal scroll of the page), ``overflowing`` (elements wider than the column),
    ``collisions`` (pairs of chart labels that overlap) and ``outside`` (labels past their chart)."""
    import html as html_lib
    import re

    probed = html.with_name(html.stem + ".probe.html")
    probed.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="evalloop-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},2000",
               "--virtual-time-budget=5000", "--dump-dom", probed.resolve().as_uri()]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False).stdout
    found = re.search(r'data-probe="([^"]*)"', dom)
    if not found:
        raise RuntimeError(f"chromium did not lay out {html}")
    return json.loads(html_lib.unescape(found.group(1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write report.html / .png")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from evalloop import HistoryStore, load_settings
    from evalloop.report.html import render_html
    from evalloop.report.markdown import render_markdown
    from evalloop.report.trends import build_trends

    root = Path(tempfile.mkdtemp(prefix="evalloop-report-demo-"))
    out = args.out or root
    out.mkdir(parents=True, exist_ok=True)
    build_project(root)
    answers = root / "answers.json"
    os.environ["EVALLOOP_DEMO_ANSWERS"] = str(answers)
    sys.path.insert(0, str(root))
    started = time.perf_counter()
    run_history(root, answers)  # the regression's failure memories come from the learning loop
    history_s = time.perf_counter() - started

    settings = load_settings(root)
    store = HistoryStore(settings.database_url)
    t0 = time.perf_counter()
    trends = build_trends(store, last=20, window=settings.window, memory_file=settings.memory_file)
    t1 = time.perf_counter()
    html = render_html(trends, title="evalloop report — demo project")
    t2 = time.perf_counter()
    markdown = render_markdown(trends)
    t3 = time.perf_counter()
    page = out / "report.html"
    page.write_text(html, encoding="utf-8")
    (out / "report.md").write_text(markdown, encoding="utf-8")
    print(f"history: 16 runs in {history_s:.2f} s")
    print(f"build_trends: {(t1 - t0) * 1000:.1f} ms   render_html: {(t2 - t1) * 1000:.1f} ms   "
          f"render_markdown: {(t3 - t2) * 1000:.1f} ms")
    print(f"report.html: {len(html.encode()) / 1024:.1f} KiB, {html.count('<svg')} charts -> {page}")
    if not Path(args.chromium).exists():
        print(f"no chromium at {args.chromium}: screenshot skipped")
        return
    png = out / "report.png"
    t4 = time.perf_counter()
    screenshot(args.chromium, page, png)
    print(f"screenshot: {png} ({png.stat().st_size / 1024:.0f} KiB) in {time.perf_counter() - t4:.1f} s")


if __name__ == "__main__":
    main()
