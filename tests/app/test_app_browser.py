"""The explorer in a real browser (headless Chromium driven by Playwright's sync API).

Upload a corpus PDF, wait for indexing, read a node of its outline, ask a question in text mode,
check the answer, the cited nodes and the routing tree the browser drew (against the route the
engine logged), open a cited node, then compare two modes. Screenshots go to the test's output
folder and are copied to docs/screenshots/. Nothing may load from outside the app's own server.
"""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

from app.figures import visible_tree
from app.ui import route_from_log

pytestmark = pytest.mark.real_model

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CORPUS_PDF = "camlidl-manual_no-outline.pdf"
QUESTION = "How do I declare an array parameter in an IDL file?"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
TIMEOUT_MS = 240_000

PLOT_SUMMARY_JS = """(sel) => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  if (!gd || !gd.data) return null;
  const counts = {};
  let collapsedText = [];
  for (const t of gd.data) {
    const s = t.meta && t.meta.status;
    if (!s) continue;
    counts[s] = (t.customdata || []).length;
    if (s === 'collapsed') collapsedText = Array.from(t.text || []);
  }
  return {counts, collapsedText, colorbar: !!gd.querySelector('.colorbar'),
          points: gd.querySelectorAll('.scatterlayer .point').length};
}"""


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _shot(page, tmp_path: Path, name: str) -> None:
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out, SCREENSHOTS / f"{name}.png")


def _rows_js(table: str) -> str:
    """JS expression: rows rendered by a (virtualised) Gradio dataframe."""
    return f"document.querySelectorAll('{table} [data-testid^=\\'cell-\\'][data-col=\\'0\\']').length"


def _cell(page, table: str, row: int, col: int):
    return page.locator(f"{table} [data-testid='cell-{row}-{col}']")


def _value(page, selector: str) -> str:
    return page.locator(selector).input_value()


def test_upload_ask_tree_compare(browser, explorer_server, shared_dir, tmp_path):
    url, rt = explorer_server
    origin = urlparse(url).netloc
    outside: list[str] = []
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.on("request", lambda r: outside.append(r.url)
            if urlparse(r.url).scheme in ("http", "https") and urlparse(r.url).netloc != origin
            else None)
    page.set_default_timeout(60_000)
    page.goto(url)

    # -- upload and index -------------------------------------------------------------------
    pdf = shared_dir / "corpus" / CORPUS_PDF
    page.locator("#upload-files input[type=file]").set_input_files(str(pdf))
    page.wait_for_function(
        "() => (document.querySelector('#index-status textarea')?.value || '').includes('✓')",
        timeout=TIMEOUT_MS)
    status = _value(page, "#index-status textarea")
    assert CORPUS_PDF in status, status
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    # the new manual is picked, its outline listed; selecting a row opens the node
    page.wait_for_function(f"(n) => {_rows_js('#outline-table')} >= n", arg=min(doc.n_nodes, 5))
    _cell(page, "#outline-table", 2, 1).click()
    page.wait_for_function(
        "() => (document.querySelector('#library-node-text textarea')?.value || '').length > 0")
    assert "manual #" in page.locator("#library-node-head").inner_text()
    _shot(page, tmp_path, "upload")

    # -- ask in text mode ------------------------------------------------------------------
    page.get_by_role("tab", name="Ask").click()
    page.locator("#ask-mode input[value='text']").check()
    page.locator("#ask-max-new input").fill("32")
    page.locator("#ask-max-new input").press("Tab")
    page.locator("#ask-question textarea").fill(QUESTION)
    n_before = len(rt.library.list_queries(doc.id))
    page.locator("#ask-button").click()
    page.wait_for_function(
        "() => (document.querySelector('#answer-text textarea')?.value || '').trim().length > 0"
        " && document.querySelector('#route-plot .js-plotly-plot')?.data",
        timeout=TIMEOUT_MS)
    queries = rt.library.list_queries(doc.id)
    assert len(queries) == n_before + 1
    rec = queries[-1]
    assert rec.mode == "text" and rec.settings["max_new_tokens"] == 32
    assert _value(page, "#answer-text textarea").strip() == rec.answer.strip()

    # the tree the browser drew matches the route the engine logged
    route = route_from_log(rec.route, rec.settings)
    status_counts = Counter(n.status for n in route.nodes)
    vt = visible_tree(route)
    drawn = page.evaluate(PLOT_SUMMARY_JS, "#route-plot")
    assert drawn["counts"] == {"root": 1, "selected": status_counts["selected"],
                               "pruned": status_counts["pruned"],
                               "collapsed": len(vt.collapsed)}, drawn
    assert sorted(drawn["collapsedText"]) == sorted(f"+{c}" for _, c in vt.collapsed.values())
    assert drawn["colorbar"], "the routing tree has a colour bar"
    assert (1 + status_counts["selected"] + status_counts["pruned"]
            + sum(c for _, c in vt.collapsed.values())) == doc.n_nodes

    # cited nodes are listed; selecting one opens its text and pages
    n_cited = page.evaluate(f"() => {_rows_js('#cited-table')}")
    assert 1 <= n_cited <= status_counts["selected"]  # text mode cites selected nodes
    _cell(page, "#cited-table", 0, 1).click()
    page.wait_for_function(
        "() => (document.querySelector('#ask-node-text textarea')?.value || '').length > 0")
    head = page.locator("#ask-node-head").inner_text()
    assert "p." in head, head
    # the history lists the question
    assert QUESTION in page.locator("#history-table").inner_text()
    page.locator("#route-plot").scroll_into_view_if_needed()
    _shot(page, tmp_path, "tree")

    # -- compare two modes -----------------------------------------------------------------
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-question textarea").fill(QUESTION)
    page.locator("#compare-max-new input").fill("32")
    page.locator("#compare-max-new input").press("Tab")
    page.locator("#compare-button").click()
    page.wait_for_function(
        f"() => {_rows_js('#compare-table')} === 2"
        " && document.querySelector('#compare-plot-a .js-plotly-plot')?.data"
        " && document.querySelector('#compare-plot-b .js-plotly-plot')?.data",
        timeout=TIMEOUT_MS)
    table = page.locator("#compare-table").inner_text()
    assert "memory" in table and "text" in table
    assert _value(page, "#compare-answer-a textarea").strip()
    assert _value(page, "#compare-answer-b textarea").strip()
    for sel in ("#compare-plot-a", "#compare-plot-b"):
        d = page.evaluate(PLOT_SUMMARY_JS, sel)
        assert d["counts"]["root"] == 1 and d["counts"]["selected"] >= 1
    _shot(page, tmp_path, "compare")

    assert not outside, f"requests left the app's server: {outside[:5]}"
    page.close()
