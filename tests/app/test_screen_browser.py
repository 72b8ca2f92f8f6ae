"""The screen says what it knows once (issue 67), in a real browser at 1440x900 (headless
Chromium): three passages a person can read without a click, and no two lines that contradict
each other in the states visited.

Two explorers on the real backbone: one on an empty library (no manual chosen: one line that
stays, no red badge), and one on an empty data folder that indexes its example manual, shared
with the newcomer's test (``example_explorer``; its memory writer held, so that the CPU goes to
the answers): the Library tab's memory line while it is indexed, when the page catches it; then
an example question asked by its click at 24 tokens: the quote and the passages after it as text
under the answer, a click opening the second on its highlighted page, the key line only as a
whole term of the quote; an empty question: one line that stays until the next ask; a folded
answer when the model's is folded. The answered screen is kept as passages.png (docs/screenshots
with H2MT_UPDATE_SCREENSHOTS=1).
"""
from __future__ import annotations

import pytest

from app.shared.examples import QUESTIONS
from app.shared.lines import EMPTY_QUESTION, NO_MANUAL
from tests.conftest import EXAMPLE_EXPLORER
from tests.support.browser import (TIMEOUT_MS, YELLOW_JS, browser, contradictions,  # noqa: F401
                                  keep_screenshot, no_error_badge,
                                  open_while_the_example_is_indexed, settled)

pytestmark = [pytest.mark.real_model, pytest.mark.xdist_group(EXAMPLE_EXPLORER)]

SCREEN = (1440, 900)
QUESTION = QUESTIONS[2]  # "How do I patch a command?"

# Each passage card as the page draws it: its rank, text, box and whether it is shown open.
CARDS_JS = """() => [...document.querySelectorAll('#passages .passage')].map(c => {
  const r = c.getBoundingClientRect(), t = c.querySelector('.text');
  const s = getComputedStyle(c);
  return {rank: Number(c.dataset.rank), text: c.innerText.trim(), top: r.top, bottom: r.bottom,
          height: r.height, open: c.classList.contains('open'),
          shown: s.visibility !== 'hidden' && s.display !== 'none' && r.height > 0,
          font: parseFloat(s.fontSize), lines: t ? Math.round(t.getBoundingClientRect().height
                                                / parseFloat(getComputedStyle(t).lineHeight))
                                                : 0}; })"""


def _notice(page) -> str:
    return page.locator("#ask-notice").inner_text()


def _no_contradiction(page, state: str) -> None:
    found = contradictions(page)
    assert not found, f"{state}: {found}"


def test_the_three_passages_are_readable_and_no_line_contradicts_another(browser, real_backbone,
                                                                          example_explorer,
                                                                          tmp_path):
    from tests.conftest import serve_explorer

    url, rt = example_explorer
    page = browser.new_page(viewport={"width": SCREEN[0], "height": SCREEN[1]})
    page.set_default_timeout(60_000)
    try:
        open_while_the_example_is_indexed(page, url)  # first: the indexing may still be seen
        with serve_explorer(real_backbone, tmp_path / "empty") as (empty_url, _):
            _no_manual(browser, empty_url)
        _answer(page, rt, tmp_path)
        _empty_question(page, rt)
    finally:
        page.close()


def _ask_for_one_line(page, question: str, line: str) -> None:
    """Ask ``question`` and wait for ``line`` in the notice, the validator's own line gone (it is
    taken away after a few seconds): the line stays, alone, with no red badge."""
    page.locator("#ask-question textarea").fill(question)
    page.locator("#ask-button").click()
    page.wait_for_function("(l) => (document.querySelector('#ask-notice')?.innerText || '')"
                           ".includes(l)", arg=line)
    page.wait_for_function("() => !document.querySelector('.validation-error')",
                           timeout=TIMEOUT_MS)
    assert line in _notice(page)
    no_error_badge(page)


def _no_manual(browser, url: str) -> None:
    """No manual chosen (a page of its own): one line in the notice, no red badge; it stays
    while the page goes on (the validator's own line, which Gradio takes away after a few
    seconds, is gone)."""
    page = browser.new_page(viewport={"width": SCREEN[0], "height": SCREEN[1]})
    page.set_default_timeout(60_000)
    try:
        page.goto(url)
        page.get_by_role("tab", name="Ask").click()
        _ask_for_one_line(page, "How do I patch a command?", NO_MANUAL)
        assert not page.locator("#passages").is_visible()
        _no_contradiction(page, "no manual")
    finally:
        page.close()


def _answer(page, rt, tmp_path) -> None:
    """An example question: the three passages readable on the first screen, in rank order,
    without a click; a click on the second shows it highlighted on its page."""
    page.locator("#ask-max-new input").fill("24")
    page.locator("#ask-max-new input").press("Tab")
    page.locator("#example-questions button", has_text=QUESTION).first.click()
    page.locator("#feedback-up").wait_for(state="visible", timeout=TIMEOUT_MS)
    settled(page, "#answer-text")
    (doc,) = rt.library.list_documents()
    page.wait_for_function("() => document.querySelectorAll('#passages .passage').length >= 2"
                           " && (document.querySelector('#quote-view')?.innerText || '')"
                           ".includes('place')", timeout=TIMEOUT_MS)
    page.evaluate("() => window.scrollTo(0, 0)")
    out = tmp_path / "passages.png"
    page.screenshot(path=str(out), full_page=False)
    keep_screenshot(out)

    cards = page.evaluate(CARDS_JS)
    assert [c["rank"] for c in cards] == list(range(1, len(cards) + 1)), cards
    assert len(cards) == 3, cards  # the example manual gives three entries for this question
    for c in cards:  # readable: shown, at a reading size, two to five lines, on the first screen
        assert c["shown"] and c["font"] >= 12 and len(c["text"]) >= 20, c
        assert 2 <= len(c["text"].splitlines()) <= 6 and c["lines"] <= 5, c
        assert c["top"] >= 0 and c["bottom"] <= SCREEN[1], c
    headline = page.locator("#quote-view").inner_text()
    if "more than one candidate" in headline or "no clear place" in headline:
        assert cards[0]["open"] and cards[1]["open"], cards  # both shown open
    else:
        assert "one clear place" in headline and not cards[1]["open"], (headline, cards)
    # the key line, when shown, is a line of the quote's entry, with its page
    key = page.locator("#key-line")
    if key.is_visible() and "From the manual" in key.inner_text():
        text = key.inner_text()
        assert "p. " in text and "page unknown" not in text, text
    _no_contradiction(page, "after an answer")
    if page.locator("#answer-fold details").count():
        _no_contradiction(page, "a folded answer")
    no_error_badge(page)

    # a click on the second passage: its page, highlighted, said to be the passage
    where = page.locator("#passages .passage[data-rank='2'] .loc").inner_text()
    page.locator("#passages .passage[data-rank='2']").click()
    page.wait_for_function("() => (document.querySelector('#page-view-head')?.innerText || '')"
                           ".includes('passage')", timeout=TIMEOUT_MS)
    head = page.locator("#page-view-head").inner_text()
    assert where.split(", ")[-1].split(" (")[0] in head, (where, head)  # "p. 9"
    assert page.evaluate(YELLOW_JS) > 0
    _no_contradiction(page, "a passage opened")


def _empty_question(page, rt) -> None:
    """An empty question: one line in the notice, the answer and its passages kept; it stays
    until the next ask, which takes it away."""
    # the cards' text (Gradio's wrapper around them may still show the event's loading state)
    cards = page.locator("#passages .passage")
    passages = cards.all_inner_texts()
    assert passages
    _ask_for_one_line(page, "   ", EMPTY_QUESTION)
    assert cards.all_inner_texts() == passages
    _no_contradiction(page, "empty question")
    # the next ask takes the line away
    (doc,) = rt.library.list_documents()
    n = len(rt.library.list_queries(doc.id))
    page.locator("#example-questions button", has_text=QUESTIONS[0]).first.click()
    page.wait_for_function("(l) => !(document.querySelector('#ask-notice')?.innerText || '')"
                           ".includes(l)", arg=EMPTY_QUESTION, timeout=TIMEOUT_MS)
    page.locator("#feedback-up").wait_for(state="visible", timeout=TIMEOUT_MS)
    settled(page, "#answer-text")
    assert len(rt.library.list_queries(doc.id)) == n + 1
    _no_contradiction(page, "the next answer")
