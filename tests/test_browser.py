"""Open every page of the built book in headless Chromium and check what a reader would see.

A page fails when an image did not load, an output shows an error or traceback, math is left
unrendered (or MathJax reports a TeX error), Sphinx left a warning box, or the browser console
logged an error (a missing file, a blocked network request: the book must work offline).
Run after `make book`: `make browser-test` (needs Debian's `chromium` and `chromium-driver`).
Two negative controls check that the checks can fail.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# Evaluated in the page once MathJax (if the page loads it) has finished typesetting.
PAGE_PROBE = r"""
const done = arguments[arguments.length - 1];
const finish = () => {
  const text = (sel) => Array.from(document.querySelectorAll(sel)).map((e) => e.innerText);
  const outputs = text('.cell_output, .output');
  done({
    title: document.title,
    brokenImages: Array.from(document.images)
      .filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.getAttribute('src')),
    nImages: document.images.length,
    errorOutputs: document.querySelectorAll('.output.traceback, .output.error, .output.stderr').length,
    tracebacks: outputs.filter((t) => /Traceback \(most recent call last\)|\b[A-Z]\w*(Error|Exception): /.test(t)),
    systemMessages: text('.system-message, .problematic'),
    mathNodes: document.querySelectorAll('.math').length,
    unrenderedMath: Array.from(document.querySelectorAll('.math'))
      .filter((e) => !e.querySelector('mjx-container')).map((e) => e.innerText.slice(0, 80)),
    mathErrors: text('mjx-merror'),
    hasMathJax: Boolean(window.MathJax && window.MathJax.startup),
  });
};
if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
  window.MathJax.startup.promise.then(finish, finish);
} else {
  setTimeout(finish, 200);
}
"""


def problems(report: dict, console: list[dict]) -> list[str]:
    """Human-readable failures of one page."""
    out = []
    if report["brokenImages"]:
        out.append(f"images did not load: {report['brokenImages']}")
    if report["errorOutputs"] or report["tracebacks"]:
        out.append(f"error output: {report['tracebacks'][:2] or report['errorOutputs']}")
    if report["systemMessages"]:
        out.append(f"Sphinx warning boxes: {report['systemMessages'][:2]}")
    if report["mathNodes"] and not report["hasMathJax"]:
        out.append("page has math but MathJax did not load")
    if report["unrenderedMath"]:
        out.append(f"unrendered math: {report['unrenderedMath'][:3]}")
    if report["mathErrors"]:
        out.append(f"MathJax errors: {report['mathErrors'][:3]}")
    # The browser asks every site for /favicon.ico by itself; that 404 is not the page's fault.
    severe = [e["message"] for e in console if e.get("level") == "SEVERE" and "favicon.ico" not in e["message"]]
    if severe:
        out.append(f"console errors: {severe[:3]}")
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        pytest.fail("headless Chromium is needed: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def serve(directory: Path):
    """A loopback HTTP server for ``directory`` (as GitHub Pages would serve the book)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    # Threaded: Chromium opens speculative connections that would block a one-request-at-a-time server.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check_page(driver, url: str) -> tuple[dict, list[str]]:
    driver.get_log("browser")  # drop earlier pages' messages
    driver.get(url)
    report = driver.execute_async_script(PAGE_PROBE)
    return report, problems(report, driver.get_log("browser"))


def built_pages() -> list[Path]:
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    skip = {"genindex.html", "search.html"}
    return sorted(
        p for p in HTML.rglob("*.html") if not {"_static", "_sources", "_images"} & set(p.relative_to(HTML).parts) and p.name not in skip
    )


def test_every_page_renders(browser):
    pages = built_pages()
    server = serve(HTML)
    try:
        failures, reports = {}, {}
        for page in pages:
            rel = page.relative_to(HTML).as_posix()
            report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/{rel}")
            reports[rel] = report
            if issues:
                failures[rel] = issues
    finally:
        server.shutdown()
    assert not failures, "\n".join(f"{page}: {'; '.join(i)}" for page, i in failures.items())
    # The book's fixed pages exist, and the chapters really show figures and math.
    assert {"book/intro.html", "executed/00_symmetries.html", "executed/reproducibility.html"} <= set(reports)
    chapter0 = reports["executed/00_symmetries.html"]
    assert chapter0["nImages"] >= 1 and chapter0["mathNodes"] >= 3, chapter0


NEGATIVE_CONTROL = """<!doctype html><html><head><title>broken</title>
<script>window.MathJax = undefined;</script></head><body>
<img src="missing.png"><div class="cell_output"><pre>Traceback (most recent call last):
ValueError: boom</pre></div><span class="math">\\(x^2\\)</span></body></html>"""


def test_checks_catch_a_broken_page(browser, tmp_path):
    (tmp_path / "broken.html").write_text(NEGATIVE_CONTROL)
    server = serve(tmp_path)
    try:
        _, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/broken.html")
    finally:
        server.shutdown()
    text = " ".join(issues)
    for expected in ("images did not load", "error output", "MathJax did not load", "unrendered math", "console errors"):
        assert expected in text, (expected, issues)


def test_checks_accept_rendered_math(browser):
    """Positive control: a page with MathJax-rendered math from the built book's own bundle passes."""
    mathjax = HTML / "_static" / "mathjax" / "tex-chtml.js"
    if not mathjax.exists():
        pytest.fail(f"{mathjax} missing: the book must bundle MathJax (run `make book`)")
    page = HTML / "_static" / "_probe_math.html"
    page.write_text('<!doctype html><html><head><script defer src="mathjax/tex-chtml.js"></script></head>'
                    '<body><span class="math">\\(\\sum_i x_i^2\\)</span></body></html>')
    server = serve(HTML)
    try:
        report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/_static/_probe_math.html")
    finally:
        server.shutdown()
        page.unlink()
    assert report["hasMathJax"] and not issues, (report, issues)
