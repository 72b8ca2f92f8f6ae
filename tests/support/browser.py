"""The browser tests' Chromium (Debian's, headless, one set of flags for every test) as a
module-scoped ``browser`` fixture, and helpers on a page of the explorer."""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 240_000
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

# Red error badges: an error toast, or a component's status tracker showing "Error".
ERRORS_JS = """() => Array.from(document.querySelectorAll(
  "[data-testid='toast-body'].error, [data-testid='status-tracker'] .error"))
  .map(e => (e.closest("[data-testid='toast-body']") || e).innerText.trim())"""


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


# The highlight-yellow pixels of the page image (the page view draws the quote's highlight);
# -1 while no page is shown.
YELLOW_JS = """async () => {
  const img = document.querySelector('#page-view-image img');
  if (!img || !img.src) return -1;
  if (!img.complete || !img.naturalWidth) await img.decode();
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i] > 220 && d[i + 1] > 190 && d[i + 2] < 90) n++;
  return n;
}"""


@contextmanager
def ask_page(browser, url: str, doc_id: int, mode: str, max_new_tokens: int | None = None,
             size: tuple[int, int] = (1440, 1000)) -> Iterator[object]:
    """A new page (``size``: its viewport) on the explorer's Ask tab with manual ``#doc_id``
    and the answer ``mode`` picked (and the reply's token budget, when given); closed on
    leaving the block."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(60_000)
    try:
        open_ask_tab(page, url, doc_id, mode, max_new_tokens)
        yield page
    finally:
        page.close()


def open_ask_tab(page, url: str, doc_id: int, mode: str, max_new_tokens: int | None = None):
    """``page`` at ``url``, on the Ask tab with manual ``#doc_id`` and ``mode`` picked (and the
    reply's token budget, when given)."""
    page.goto(url)
    page.get_by_role("tab", name="Ask").click()
    page.locator("#ask-doc input").click()
    page.get_by_role("option", name=f"#{doc_id} ").first.click()
    page.locator(f"#ask-mode input[value='{mode}']").check()
    if max_new_tokens is not None:
        page.locator("#ask-max-new input").fill(str(max_new_tokens))
        page.locator("#ask-max-new input").press("Tab")


def value(page, selector: str) -> str:
    return page.locator(selector).input_value()


# What the page shows as the answer: a folded answer's text under its line (the check or the
# form rules folded it; the answer box is hidden then), else the answer box's text; '' while
# neither holds one. A function expression, for waits that read it with other conditions.
SHOWN_ANSWER_JS = """() => {
  const d = document.querySelector('#answer-fold details');
  if (d) { const s = d.querySelector('summary');
           return d.textContent.slice(s ? s.textContent.length : 0).trim(); }
  return (document.querySelector('#answer-text textarea')?.value || '').trim(); }"""


def shown_answer(page) -> str:
    """The answer as the page shows it (``SHOWN_ANSWER_JS``)."""
    return page.evaluate(SHOWN_ANSWER_JS)


def same_answer(shown: str, answer: str) -> bool:
    """Whether the page shows ``answer``: the same words (a folded answer is rendered Markdown,
    its backticks gone)."""
    def words(t: str) -> str:
        return " ".join(t.replace("`", "").split())
    return words(shown) == words(answer)


def open_folds(page, *headings: str) -> None:
    """Open the Ask tab's folded sections under these headings (closed by default; Gradio
    mounts a fold's components only once it is opened)."""
    for heading in headings:
        fold = page.locator("button.label-wrap", has_text=heading).first
        if "open" not in (fold.get_attribute("class") or "").split():
            fold.click()


def no_error_badge(page) -> None:
    errors = page.evaluate(ERRORS_JS)
    assert not errors, f"red error badge(s) on the page: {errors}"


def keep_screenshot(path: Path) -> None:
    """Copy a test's screenshot to docs/screenshots when H2MT_UPDATE_SCREENSHOTS=1 (a person
    refreshing the documentation's pictures); a plain test run leaves the checkout clean."""
    if os.environ.get("H2MT_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / path.name)


def shot(page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot in the test's folder (``keep_screenshot``)."""
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out), full_page=True)
    keep_screenshot(out)


def ask_and_wait(page, rt, doc_id: int, question: str) -> object:
    """Asks ``question`` in text mode at 128 tokens and returns its query-log record once the
    engine has logged it, the ask event has ended and the page shows the final answer (folded or
    in the answer box)."""
    import time

    n = len(rt.library.list_queries(doc_id))
    page.locator("#ask-question textarea").fill(question)
    page.locator("#ask-button").click()
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while len(rt.library.list_queries(doc_id)) == n and time.monotonic() < deadline:
        time.sleep(1)
    log = rt.library.list_queries(doc_id)
    assert len(log) == n + 1 and log[-1].question == question
    # The engine logs the question before the page gets the final update: the streamed text
    # already equals the answer then, and a flagged answer is folded only by that update. Wait
    # for the ask event to end (its progress overlay on the answer box hidden).
    settled(page, "#answer-text")
    page.wait_for_function(
        "(answer) => document.querySelector('#answer-fold details') || "
        "(document.querySelector('#answer-text textarea')?.value || '').trim() === answer",
        arg=log[-1].answer.strip(), timeout=TIMEOUT_MS)
    return log[-1]


TABLE_JS = """(sel) => {
  const byRow = {};
  for (const c of document.querySelectorAll(sel + " [data-testid^='cell-']")) {
    const [, r, k] = c.dataset.testid.split('-');
    (byRow[r] = byRow[r] || [])[Number(k)] = c.innerText.trim();
  }
  return Object.keys(byRow).sort((a, b) => a - b).map(r => byRow[r]);
}"""


# A component's progress overlay while an event that writes it is queued or running; Gradio
# marks it ``hide`` when idle. It covers the component and takes its clicks.
BUSY_OVERLAY = "[data-testid='status-tracker']:not(.hide)"


def settled(page, selector: str, timeout_ms: int = TIMEOUT_MS) -> None:
    """Wait until no event is pending on the component ``selector`` (its overlay is hidden);
    on a timeout, the failure says what the overlay showed (pending, an error, a queue place)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    busy = f"{selector} {BUSY_OVERLAY}"
    try:
        page.wait_for_function("(sel) => !document.querySelector(sel)", arg=busy,
                               timeout=timeout_ms)
    except PlaywrightTimeout:
        shown = page.evaluate("(sel) => [...document.querySelectorAll(sel)].map("
                              "e => e.className + ': ' + e.innerText.slice(0, 200))", busy)
        pytest.fail(f"{selector} still busy after {timeout_ms} ms: {shown}")


def cell(page, table: str, row: int, col: int):
    """The table's cell, once the table is not being refilled (a click would hit the overlay)."""
    settled(page, table)
    return page.locator(f"{table} [data-testid='cell-{row}-{col}']")


# Pairs of lines that cannot both be true of one screen (issue 67): each a pair of regular
# expressions over the page's visible text, and why they disagree.
CONTRADICTIONS = [
    (r"not queued|run `?python -m engine worker", r"being indexed",
     "memories 'not queued' while the manual is still being indexed"),
    (r"evidence lines? highlighted", r"No evidence lines",
     "evidence lines highlighted beside 'no evidence lines'"),
    (r"one clear place", r"more than one candidate place|no clear place",
     "one clear place beside more than one candidate"),
    (r"Ranked first \(|via routing|memory router", r"", "a status line in the paper's words"),
]


def contradictions(page) -> list[str]:
    """The pairs of ``CONTRADICTIONS`` the page's visible text holds (an empty second pattern:
    the first alone is wrong)."""
    import re

    body = page.locator("body").inner_text()
    found = [why for a, b, why in CONTRADICTIONS
             if re.search(a, body) and (not b or re.search(b, body))]
    return found


def open_while_the_example_is_indexed(page, url: str) -> None:
    """Open the explorer of ``example_explorer`` (tests/conftest.py) on its Library tab: while
    its example manual is indexed, the memory line never says its memories are not queued (they
    are, once indexing ends) and no line contradicts another, checked when the page catches the
    manual stored while the hint still says it is being indexed (the first test on the app
    can); then the Ask tab, once its hint says the manual is ready ("Try it")."""
    page.goto(url)
    page.get_by_role("tab", name="Library").click()
    caught = page.wait_for_function(
        """() => { const hint = document.querySelector('#start-hint')?.innerText || '';
                   const row = document.querySelector("#library-table [data-testid='cell-0-0']");
                   if (hint.includes('Try it')) return 'ready';
                   return row && row.innerText.trim() && hint.includes('being indexed')
                          ? (document.querySelector('#memory-status')?.innerText || ' ') : null;
                 }""", timeout=TIMEOUT_MS).json_value()
    if caught != "ready":
        assert "not queued" not in caught and "engine worker" not in caught, caught
        found = contradictions(page)
        assert not found, f"indexing: {found}"
    page.get_by_role("tab", name="Ask").click()
    page.wait_for_function("() => (document.querySelector('#start-hint')?.innerText || '')"
                           ".includes('Try it')", timeout=TIMEOUT_MS)
