"""Open every page of the built book in headless Chromium and check what a reader would see.

A page fails when an image did not load, an output shows an error or traceback, math is left
unrendered (or MathJax reports a TeX error), Sphinx left a warning box, the browser console
logged an error (a missing file, a blocked network request: the book must work offline), a
table is wider than the text column without a scroll container around it, a table must be
scrolled sideways to be read in a desktop window (1280 px; on a phone a wide table scrolls in
its box by design), a table or figure has no caption, or an in-text reference (a link to
``#anchor``, or "Fig. 2a.1" / "Table 2a.1" in the prose) points at nothing on the page.
Run after `make book`: `make browser-test` (needs Debian's `chromium` and `chromium-driver`).
Negative controls check that the checks can fail.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from symlib.book import plotting

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# Evaluated in the page once it has loaded whole and MathJax (if the page loads it) has finished
# typesetting.
PAGE_PROBE = r"""
const done = arguments[arguments.length - 1];
const [WHITE_FACTOR, FIG_TEXT_PX, MIN_TEXT_PX, MAX_DUMP_LINES] = [3, %(fig_text_px).2f, %(min_text_px)d, 5];
// Tables, figures and references, inside the page's text (not the navigation).
const layoutProbe = () => {
  const main = document.querySelector('article') || document.body;
  // Every collapsed box (a long table, this build's numbers, a published run's figures) is
  // checked opened, as the reader who opens it sees it, and closed again after.
  const closed = Array.from(main.querySelectorAll('details:not([open])'));
  closed.forEach((d) => { d.open = true; });
  const width = main.getBoundingClientRect().width;
  const scrolls = (el) => {
    for (let e = el.parentElement; e && e !== main.parentElement; e = e.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) return true;
    }
    return false;
  };
  const name = (el) => (el.querySelector('caption, figcaption') || el).innerText.slice(0, 60);
  const tables = Array.from(main.querySelectorAll('table'));
  const wideTables = tables.filter((t) => t.getBoundingClientRect().width > width + 1 && !scrolls(t)).map(name);
  const uncaptionedTables = tables.filter((t) => !t.querySelector(':scope > caption')).map((t) => t.innerText.slice(0, 60));
  const uncaptionedFigures = Array.from(main.querySelectorAll('img'))
    .filter((i) => !(i.closest('figure') && i.closest('figure').querySelector('figcaption')))
    .map((i) => i.getAttribute('alt') || i.getAttribute('src').slice(0, 60));
  const ids = new Set(Array.from(document.querySelectorAll('[id]')).map((e) => e.id));
  const deadAnchors = Array.from(main.querySelectorAll('a[href^="#"]'))
    .map((a) => decodeURIComponent(a.getAttribute('href').slice(1))).filter((id) => id && !ids.has(id));
  const numbers = new Set(Array.from(main.querySelectorAll('.caption-number'))
    .map((e) => e.innerText.trim().replace(/^Figure /, 'Fig. ')));
  const mentioned = Array.from(main.querySelectorAll('p, li'))
    .filter((p) => !p.closest('caption, figcaption, table'))
    .flatMap((p) => Array.from(p.innerText.matchAll(/\b(Fig\.|Figure|Table)\s+(\d+[a-z]?\.\d+)\b/g)))
    .map((m) => `${m[1] === 'Figure' ? 'Fig.' : m[1]} ${m[2]}`);
  const unresolved = [...deadAnchors.map((id) => `#${id}`), ...mentioned.filter((m) => !numbers.has(m))];
  // What a reader sees, beyond "it scrolls": a ledger card wider than the text column, a table
  // read by scrolling sideways, a page wider than the window, a row that is mostly empty white,
  // a figure scaled so far down that its text is unreadable.
  const textWidth = (main.querySelector('section') || main).getBoundingClientRect().width;
  const wideCards = Array.from(main.querySelectorAll('.symlib-claim-card, .symlib-ledger-cards, .symlib-glance'))
    .filter((c) => c.getBoundingClientRect().width > textWidth + 1 || c.scrollWidth > c.clientWidth + 1)
    .map((c) => c.innerText.slice(0, 60));
  const pageWidth = document.documentElement.scrollWidth;
  const widePage = pageWidth > window.innerWidth + 1 ? [`${pageWidth} px in a ${window.innerWidth}-px window`] : [];
  // A row mostly white: taller than 200 px, and filled by the text of one cell only: every
  // other cell's text is under 1/WHITE_FACTOR of the row's height (a long text squeezed into a
  // narrow column beside short ones, or an empty tall cell).
  const textHeight = (cell) => {
    const w = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let top = Infinity, bottom = -Infinity;
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      if (!n.textContent.trim()) continue;
      const r = document.createRange();
      r.selectNodeContents(n);
      for (const b of r.getClientRects()) { top = Math.min(top, b.top); bottom = Math.max(bottom, b.bottom); }
    }
    return bottom > top ? bottom - top : 0;
  };
  const whiteRows = Array.from(main.querySelectorAll('tr')).filter((tr) => {
    const h = tr.getBoundingClientRect().height;
    const heights = Array.from(tr.children).map(textHeight).sort((a, b) => b - a);
    return h > 200 && heights.length > 1 && heights[1] * WHITE_FACTOR < h;
  }).map((tr) => tr.innerText.slice(0, 60));
  const smallFigures = Array.from(main.querySelectorAll('figure img, .cell_output img'))
    .filter((i) => i.naturalWidth > 0 && i.getBoundingClientRect().width > 0)
    .filter((i) => FIG_TEXT_PX * i.getBoundingClientRect().width / i.naturalWidth < MIN_TEXT_PX)
    .map((i) => `${i.getAttribute('alt') || 'figure'}: ${i.naturalWidth} px shown at ${Math.round(i.getBoundingClientRect().width)}`);
  // Output a reader should not see: a dict, list or object repr printed as text over a few lines.
  const dumps = Array.from(main.querySelectorAll('.cell_output .output.text_plain pre, .cell_output pre'))
    .map((e) => e.innerText).filter((t) => /^\s*[{[(<]/.test(t) && t.split('\n').length > MAX_DUMP_LINES)
    .map((t) => t.slice(0, 60));
  // TeX that never became math: a $...$ left in the text outside code and rendered math.
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const rawMath = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('code, pre, script, style, mjx-container, .math')) continue;
    const m = n.textContent.match(/\$[^$\s][^$]{0,80}\$/);
    if (m) rawMath.push(m[0]);
  }
  // One search box in view: the theme puts one in the header and another atop the sidebar.
  const searches = Array.from(document.querySelectorAll('.search-button-field, .search-button'))
    .filter((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; })
    .map((e) => (e.closest('header') ? 'header' : e.closest('.bd-sidebar-primary') ? 'sidebar' : 'page'));
  const searchBoxes = searches.length > 1 ? [searches.join(' + ')] : [];
  // A table read by scrolling sideways: its scroll box (the nearest ancestor that scrolls
  // sideways, else the table itself) holds more than it shows.
  const scrollBox = (t) => {
    for (let e = t.parentElement; e && e !== main.parentElement; e = e.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) return e;
    }
    return t;
  };
  const scrollingTables = tables.map((t) => [t, scrollBox(t)])
    .filter(([t, box]) => box.clientWidth > 0 && Math.max(box.scrollWidth, t.scrollWidth) > box.clientWidth + 1)
    .map(([t, box]) => `${name(t)} (${Math.round(Math.max(box.scrollWidth, t.scrollWidth))} px in ${box.clientWidth})`);
  closed.forEach((d) => { d.open = false; });
  return {wideTables, uncaptionedTables, uncaptionedFigures, unresolved, wideCards, scrollingTables, widePage,
          whiteRows, smallFigures, dumps, rawMath, searchBoxes, textWidth};
};
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
    ...layoutProbe(),
  });
};
const start = () => {
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
    window.MathJax.startup.promise.then(finish, finish);
  } else {
    setTimeout(finish, 200);
  }
};
// ChromeDriver's get() now and then returns while the page is still being parsed (the tail of a
// long page not yet in the DOM, its anchors "dead"): the probe waits for the whole document.
if (document.readyState === 'complete') {
  start();
} else {
  window.addEventListener('load', start, {once: true});
}
"""


READER_CHECKS = {
    "wideCards": "claim card or ledger wider than the text column",
    "scrollingTables": "table scrolls sideways in its box",
    "widePage": "page wider than the window",
    "whiteRows": "table row mostly empty white (one cell over 3x the height of the others' text)",
    "smallFigures": f"figure scaled so its text is under {plotting.MIN_TEXT_PX} px",
    "dumps": "a dict or repr printed over more than 5 lines",
    "rawMath": "raw $...$ left in the text",
    "searchBoxes": "more than one search box in view",
}
"""The checks of what a reader sees: report key -> what fails."""


def _figure_text_px() -> float:
    """The smallest text of a figure at full size, in pixels: the house style's smallest font
    (legend, 9 pt) at its dpi (110): 13.75 px. A figure shown at less than 9/13.75 of its width
    has text under 9 px (the chapters' tests check each figure's own smallest text)."""
    style = plotting.HOUSE_STYLE
    sizes = [v for k, v in style.items() if k.endswith("size") and isinstance(v, (int, float))]
    return min(sizes) * style["savefig.dpi"] / 72


PAGE_MIN_TEXT_PX = plotting.MIN_TEXT_PX
"""The smallest figure text this page check accepts, from the house style's smallest font and
the width an image is shown at: the 9 px the chapters' tests check each figure for, at the
:data:`symlib.book.plotting.TEXT_COLUMN_PX` they assume."""

PAGE_PROBE = (PAGE_PROBE.replace("%(fig_text_px).2f", f"{_figure_text_px():.2f}")
              .replace("%(min_text_px)d", str(PAGE_MIN_TEXT_PX)))


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
    if report["wideTables"]:
        out.append(f"table wider than the text without a scroll container: {report['wideTables'][:3]}")
    if report["uncaptionedTables"]:
        out.append(f"table without a caption: {report['uncaptionedTables'][:3]}")
    if report["uncaptionedFigures"]:
        out.append(f"figure without a caption: {report['uncaptionedFigures'][:3]}")
    if report["unresolved"]:
        out.append(f"reference that does not resolve: {report['unresolved'][:5]}")
    for key, what in READER_CHECKS.items():
        if report.get(key):
            out.append(f"{what}: {report[key][:3]}")
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
    return probe(driver)


def probe(driver) -> tuple[dict, list[str]]:
    """The report and failures of the page open in ``driver`` (:data:`PAGE_PROBE`)."""
    report = driver.execute_async_script(PAGE_PROBE)
    return report, problems(report, driver.get_log("browser"))


def built_pages() -> list[Path]:
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    skip = {"genindex.html", "search.html", "py-modindex.html"}  # Sphinx's generated indexes
    return sorted(
        p for p in HTML.rglob("*.html") if not {"_static", "_sources", "_images"} & set(p.relative_to(HTML).parts) and p.name not in skip
    )


WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
"""The windows every page is read in; at the phone's only the page and card widths are checked
(a wide table scrolls in its box there by design)."""
PHONE_CHECKS = ("widePage", "wideCards")


def phone_problems(report: dict) -> list[str]:
    """The failures of a page read in the phone's window: those of :data:`PHONE_CHECKS` only (what
    does not depend on the width, images, math, errors, is checked in the desktop window)."""
    issues = problems({k: v for k, v in report.items() if k not in READER_CHECKS or k in PHONE_CHECKS}, [])
    return [i for i in issues if any(READER_CHECKS[k] in i for k in PHONE_CHECKS)]


SCREENSHOTS = ROOT / "_build" / "screenshots"
"""Where a screenshot of the top of every page, at each width, is kept (a CI artefact)."""


def test_every_page_renders(browser):
    pages = built_pages()
    server = serve(HTML)
    failures, reports = {}, {}
    try:
        for device, (width, height) in WIDTHS.items():
            browser.set_window_size(width, height)
            (SCREENSHOTS / device).mkdir(parents=True, exist_ok=True)
            for page in pages:
                rel = page.relative_to(HTML).as_posix()
                report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/{rel}")
                browser.save_screenshot(str(SCREENSHOTS / device / (rel.replace("/", "__")[:-5] + ".png")))
                if device == "phone":
                    issues = phone_problems(report)
                else:
                    reports[rel] = report
                if issues:
                    failures[f"{rel} at {width} px"] = issues
    finally:
        server.shutdown()
    assert not failures, "\n".join(f"{page}: {'; '.join(i)}" for page, i in failures.items())
    # The book's fixed pages exist, and the chapters really show figures and math.
    assert {"book/intro.html", "executed/00_symmetries.html", "executed/reproducibility.html"} <= set(reports)
    chapter0 = reports["executed/00_symmetries.html"]
    assert chapter0["nImages"] >= 1 and chapter0["mathNodes"] >= 3, chapter0



LATE_TAIL = """<!doctype html><html><head><title>late</title></head><body><article>
<p>See <a href="#late">the end</a>.</p></article></body></html>"""

STILL_LOADING = """
Object.defineProperty(document, 'readyState', {get: () => 'loading', configurable: true});
setTimeout(() => {
  const end = document.createElement('span');
  end.id = 'late';
  document.querySelector('article').appendChild(end);
  delete document.readyState;
  window.dispatchEvent(new Event('load'));
}, 1000);
"""
"""Puts a loaded page back into the state ChromeDriver's get() sometimes returns in: still being
parsed, its last anchor not yet in the DOM; a second later the tail "arrives" and the page loads."""


def test_the_probe_waits_for_a_page_still_loading(browser, tmp_path):
    """Regression (a CI failure): the probe read a long page before its tail was parsed and called
    the tail's anchors dead. Started on a page still loading, it waits for the load, and sees the
    anchor; the control, probed before the tail arrives, would have reported it."""
    (tmp_path / "late.html").write_text(LATE_TAIL)
    server = serve(tmp_path)
    try:
        check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/late.html")
        browser.execute_script(STILL_LOADING)
        early = browser.execute_script("return [document.readyState, Boolean(document.getElementById('late'))]")
        report, issues = probe(browser)
    finally:
        server.shutdown()
    assert early == ["loading", False]
    assert report["unresolved"] == [] and not issues, (report, issues)


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


LAYOUT_CONTROL = """<!doctype html><html><head><title>layout</title></head><body><article style="width:400px">
<table><tr>""" + "<td>wide&nbsp;cell&nbsp;number&nbsp;one</td>" * 8 + """</tr></table>
<div style="overflow-x:auto"><table><caption>Table 9.1 fine</caption><tr><td>x</td></tr></table></div>
<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==" alt="bare">
<figure><img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==" alt="ok">
<figcaption><span class="caption-number">Fig. 9.1 </span>fine</figcaption></figure>
<p>See <a href="#nowhere">there</a>, Fig. 9.1 (fine), Table 9.1 (no number: its caption has no
caption-number) and Fig. 9.7.</p></article></body></html>"""


def test_layout_checks_catch_wide_uncaptioned_and_dangling(browser, tmp_path):
    """Negative control for the table, caption and reference checks: each one fires, and only on
    what is wrong (the scrolled, captioned table and the captioned figure pass)."""
    (tmp_path / "layout.html").write_text(LAYOUT_CONTROL)
    server = serve(tmp_path)
    try:
        report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/layout.html")
    finally:
        server.shutdown()
    assert len(report["wideTables"]) == 1 and "wide" in report["wideTables"][0]
    assert len(report["uncaptionedTables"]) == 1 and "wide" in report["uncaptionedTables"][0]
    assert report["uncaptionedFigures"] == ["bare"]
    assert report["unresolved"] == ["#nowhere", "Table 9.1", "Fig. 9.7"]
    text = " ".join(issues)
    for expected in ("wider than the text", "table without a caption", "figure without a caption", "does not resolve"):
        assert expected in text, (expected, issues)


READER_CONTROL = """<!doctype html><html><head><title>reader</title></head><body>
<header><button class="search-button-field">Search</button></header>
<div class="bd-sidebar-primary"><button class="search-button-field">Search</button></div><article style="width:400px">
<section><div class="symlib-claim-card" style="width:900px">a card wider than the text</div>
<div style="overflow-x:auto"><table><caption>Table 9.2 wide</caption><tr>""" + "<td>wide&nbsp;cell&nbsp;number&nbsp;one</td>" * 8 + """</tr></table></div>
<div style="overflow-x:auto"><table><caption>Table 9.3 white</caption><tr><td>short</td><td style="width:3em">""" + "long text squeezed into a narrow column " * 12 + """</td></tr></table></div>
<figure><img style="width:100px" alt="shrunk" src="data:image/png;base64,""" + "iVBORw0KGgoAAAANSUhEUgAAAZAAAAABCAIAAAB/kG/JAAAAEklEQVR4nGNoGAWjYBSMgiECAMMiWB+acMO3AAAAAElFTkSuQmCC" + """">
<figcaption><span class="caption-number">Fig. 9.2 </span>shrunk</figcaption></figure>
<div class="cell_output"><pre>{'a': 1,
 'b': 2,
 'c': 3,
 'd': 4,
 'e': 5,
 'f': 6}</pre></div>
<p>An Improved $\\widehat R$ for MCMC, and <code>$HOME$</code> is code.</p>
<div style="width:2000px">a page wider than the window</div></section></article></body></html>"""


def test_reader_checks_catch_what_a_reader_cannot_read(browser, tmp_path):
    """Negative control for the checks of issue 29: each fires on its own fault, and only there."""
    (tmp_path / "reader.html").write_text(READER_CONTROL)
    server = serve(tmp_path)
    try:
        browser.set_window_size(*WIDTHS["desktop"])
        report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/reader.html")
    finally:
        server.shutdown()
    assert report["wideCards"] == ["a card wider than the text"]
    assert len(report["scrollingTables"]) == 1 and "Table 9.2" in report["scrollingTables"][0]
    assert len(report["whiteRows"]) == 1 and report["whiteRows"][0].startswith("short")
    assert len(report["smallFigures"]) == 1 and report["smallFigures"][0].startswith("shrunk: 400 px shown at 100")
    assert len(report["dumps"]) == 1 and report["rawMath"] == ["$\\widehat R$"]
    assert report["widePage"] and report["widePage"][0].endswith("in a 1280-px window")
    assert report["searchBoxes"] == ["header + sidebar"]
    text = " ".join(issues)
    for what in READER_CHECKS.values():
        assert what in text, (what, issues)


TABLE_CONTROL = """<!doctype html><html><head><title>tables</title></head><body><article style="width:400px">
<section><div style="overflow-x:auto"><table style="width:440px"><caption>Table 9.4 a tenth too wide</caption>
<tr><td>x</td></tr></table></div>
<details><summary>closed</summary><div style="overflow-x:auto"><table><caption>Table 9.5 hidden</caption><tr>""" + \
    "<td>wide&nbsp;cell&nbsp;number&nbsp;one</td>" * 4 + """</tr></table></div></details>
<table style="display:block; overflow-x:auto"><caption>Table 9.6 its own box</caption><tr>""" + \
    "<td>wide&nbsp;cell&nbsp;number&nbsp;one</td>" * 4 + """</tr></table>
<div style="overflow-x:auto"><table><caption>Table 9.7 fits</caption><tr><td>a cell</td><td>""" + \
    "words that wrap " * 20 + """</td></tr></table></div>
<details><summary>closed</summary><div style="overflow-x:auto"><table><caption>Table 9.8 hidden, fits</caption>
<tr><td>x</td></tr></table></div></details></section></article></body></html>"""


def test_table_check_catches_a_table_that_scrolls(browser, tmp_path):
    """Negative control for the desktop table check: a table a tenth wider than its scroll box, a
    too-wide one inside a closed ``<details>`` (measured opened, and closed again after) and one
    that scrolls in its own box each fail; tables that fit pass; the phone's window ignores it."""
    (tmp_path / "tables.html").write_text(TABLE_CONTROL)
    server = serve(tmp_path)
    try:
        browser.set_window_size(*WIDTHS["desktop"])
        report, issues = check_page(browser, f"http://127.0.0.1:{server.server_address[1]}/tables.html")
        still_closed = browser.execute_script("return document.querySelectorAll('details[open]').length === 0")
    finally:
        server.shutdown()
    assert [t.split(" ", 2)[1] for t in report["scrollingTables"]] == ["9.4", "9.5", "9.6"], report["scrollingTables"]
    assert "(440 px in 400)" in report["scrollingTables"][0]
    assert still_closed
    assert any(READER_CHECKS["scrollingTables"] in i for i in issues), issues
    assert not phone_problems(report)


def test_the_table_width_estimate_agrees_with_chromium(browser):
    """The estimate that sets a table compact and bounds its columns of sentences
    (:func:`symlib.book.tables.too_wide`) against the narrowest width Chromium gives the same
    tables in the built book's own style (``width: min-content``): within 10%."""
    import pandas as pd

    from symlib.book import tables
    from symlib.book.results import ChapterResults

    frames = [
        pd.DataFrame({"method": ["MFVI + orthogonal skips", "deep ensemble (10)"],
                      **{f"metric {i}": ["-0.253 ± 0.003", "0.919 ± 0.001"] for i in range(5)}}),
        pd.DataFrame({"model": ["unconstrained", "constrained"], "mean tree depth": [7.71, 6.34],
                      "divergences": [0, 104], "max split R-hat f(x)": [1.002, 2.417], "NUTS s": [19.27, 5.42]}),
        pd.DataFrame({"chapter": ["04_constrained_models"], "id": ["wilcoxon-mse-p"], "where": ["Sec. 4.2"]}),
    ]
    scratch = ChapterResults("00_symmetries", "quick", 0, "cpu")
    stored = []
    for i, frame in enumerate(frames):
        scratch.add_table(str(i), frame)
        stored.append(scratch.tables[str(i)])
    rendered = "".join(tables.render_table(t, label=f"Table 9.{i}", anchor=f"t{i}") for i, t in enumerate(stored))
    server = serve(HTML)
    try:
        browser.set_window_size(*WIDTHS["desktop"])
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/book/intro.html")
        measured = browser.execute_script("""
            const article = document.querySelector('article');
            article.innerHTML = arguments[0];
            return Array.from(article.querySelectorAll('table.symlib-table')).map((t) => {
              t.style.width = 'min-content';
              return t.getBoundingClientRect().width / parseFloat(getComputedStyle(t).fontSize);
            });""", rendered)
    finally:
        server.shutdown()
    estimated = [sum(tables._narrowest(c) for c in tables.shown_columns(t)[0]) for t in stored]
    assert len(measured) == len(estimated)
    for got, want in zip(measured, estimated, strict=True):
        assert abs(want / got - 1) < 0.1, (estimated, measured)
