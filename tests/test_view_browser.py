"""The viewer's pages, and the static report, in headless Chromium (the system's, driven by
Playwright): at 1280 and 390 px no page scrolls sideways and no element pokes out of it, and the
main pages show what a reader came for. Screenshots land in ``/tmp/evalloop-view-*.png``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evalloop import HistoryStore
from evalloop.report.html import render_html
from evalloop.report.trends import build_trends
from support.viewer import regression_project, serving

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
WIDTHS = (1280, 390)
SHOTS = Path("/tmp")

#: what overflows: the page wider than the window, or an element (not inside a scroll box) whose
#: right edge passes the window's
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const inScroller = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p); if (s.overflowX === 'auto' || s.overflowX === 'scroll') return true; }
    return false; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 1 && !inScroller(el))
      out.push(el.tagName.toLowerCase() + '.' + el.className + ' ' + Math.round(r.right));
  }
  return {scroll: document.documentElement.scrollWidth, width: width, out: out.slice(0, 10)};
}"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewb")
    settings, ids = regression_project(root)
    return root, settings, ids


@pytest.fixture(scope="module")
def base(project):
    _, settings, _ = project
    with serving(settings) as url:
        yield url


@pytest.fixture(scope="module")
def browser(base):
    """Chromium (started after the project is built: Playwright's loop holds this thread)."""
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _check(browser, url: str, name: str) -> dict[int, str]:
    """The page at each width: no sideways overflow; its text per width; a screenshot each."""
    texts = {}
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        try:
            assert page.goto(url).status == 200, url
            found = page.evaluate(OVERFLOW)
            page.screenshot(path=str(SHOTS / f"evalloop-view-{name}-{width}.png"), full_page=True)
            assert found["scroll"] <= found["width"] and not found["out"], (name, width, found)
            texts[width] = page.inner_text("main")
        finally:
            page.close()
    return texts


def test_home_at_both_widths(browser, base):
    texts = _check(browser, base + "/", "home")
    assert "controlled" in texts[390] and "The latest run fails in" in texts[390]


def test_suite_page_at_both_widths(browser, base):
    texts = _check(browser, base + "/suites/controlled", "suite")
    assert "value" in texts[390]


def test_run_page_at_both_widths(browser, base, project):
    _, _, ids = project
    texts = _check(browser, f"{base}/runs/{ids[-1]}", "run")
    assert "c11" in texts[390] and "failing" in texts[390]


def test_compare_at_both_widths_shows_the_newly_failing_first(browser, base, project):
    _, _, ids = project
    texts = _check(browser, f"{base}/compare/{ids[-2]}/{ids[-1]}", "compare")
    cards = texts[390][texts[390].index("The cases"):]
    assert cards.index("newly failing") < cards.index("still passing")
    assert cards.index("c1") < cards.index("c0")


def test_incidents_at_both_widths(browser, base):
    texts = _check(browser, base + "/incidents", "incidents")
    assert "open" in texts[390]


def test_the_static_report_at_both_widths(browser, project, tmp_path):
    _, settings, _ = project
    report = build_trends(HistoryStore(settings.database_url, readonly=True), window=settings.window,
                          memory_file=settings.memory_file)
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    texts = _check(browser, page.as_uri(), "report")
    assert "controlled" in texts[390]
