"""The Evaluation tab and the answer thumbs in a real browser (headless Chromium, Playwright):
upload a small question file for the example manual, run it, see the per-question table, the
summary and the risk-coverage plot, and open the routing tree of the failed question; then a
thumbs down in the Ask tab, listed in the Library tab's answers marked wrong."""
from __future__ import annotations

import json

import pytest

from app.evaluation.evaluation_tab import ROW_COLUMNS
from tests.support.browser import (TABLE_JS, browser, cell, no_error_badge,  # noqa: F401
                                  open_folds, shot)

pytestmark = pytest.mark.real_model

QUESTIONS = [
    {"id": "append", "question": "How do I append code to a macro?", "key": "appto"},
    {"id": "never", "question": "How do I patch a command?", "key": "no manual says this"},
]


def test_evaluation_tab_runs_a_question_file_and_opens_a_failed_tree(browser, explorer_server,
                                                                     tmp_path):
    from app.shared.examples import EXAMPLE_FILE
    from engine.ingest import ingest_file

    url, rt = explorer_server
    doc_id = ingest_file(EXAMPLE_FILE, rt, memories=False).doc_id
    qfile = tmp_path / "two.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(240_000)
    page.goto(url)
    page.get_by_role("tab", name="Evaluation").click()
    page.locator("#eval-doc input").click()
    page.get_by_role("option", name=f"#{doc_id} ").first.click()
    page.locator("#eval-file input[type=file]").set_input_files(str(qfile))
    page.locator("#eval-file td.filename[aria-label='two.jsonl']").wait_for()
    page.locator("#eval-run").click()
    page.wait_for_function("() => (document.querySelector('#eval-status')?.innerText || '')"
                           ".startsWith('Done')")
    rows = page.evaluate(TABLE_JS, "#eval-table")
    assert len(rows) == 2, rows
    holds = ROW_COLUMNS.index("answer holds")
    assert rows[0][holds] == "✓" and rows[1][holds] == "✗", rows
    assert rows[0][ROW_COLUMNS.index("passages (best first)")].startswith("1. ")
    assert rows[0][ROW_COLUMNS.index("quote page")]
    summary = page.evaluate(TABLE_JS, "#eval-summary")
    assert ["answer holds", "1/2", "50%"] in summary, summary
    page.wait_for_function("() => !!document.querySelector('#eval-risk .js-plotly-plot')")
    page.locator("#eval-download td.filename[aria-label='two-quote-results.jsonl']").wait_for()
    # the failed question's routing tree, one click away
    cell(page, "#eval-table", 1, 1).click()
    page.wait_for_function("() => (document.querySelector('#eval-row-head')?.innerText || '')"
                           ".includes('How do I patch a command?')")
    page.wait_for_function("""() => {
      const gd = document.querySelector('#eval-route-plot .js-plotly-plot');
      return !!(gd && gd.data && gd.data.some(t => t.meta && t.meta.status === 'selected'));
    }""")
    no_error_badge(page)
    shot(page, tmp_path, "evaluation")

    # -- a thumbs down in the Ask tab, then the Library tab lists it -----------------------
    page.get_by_role("tab", name="Ask").click()
    page.locator("#ask-doc input").click()
    page.get_by_role("option", name=f"#{doc_id} ").first.click()
    page.locator("#ask-mode input[value='quote']").check()
    page.locator("#ask-question textarea").fill("How do I loop over a comma-separated list?")
    page.locator("#ask-button").click()
    # the answer's last step (its text, in quote mode the quote) carries its query id
    page.wait_for_function("() => (document.querySelector('#answer-text textarea')?.value || '')"
                           ".trim().length > 0")
    page.locator("#feedback-note :is(input, textarea)").fill("wrong loop macro")
    page.locator("#feedback-down").click()
    page.wait_for_function("() => (document.querySelector('#feedback-line')?.innerText || '')"
                           ".includes('Kept')")
    logged = rt.library.list_queries(doc_id)[-1]
    assert f"query {logged.id}" in page.locator("#feedback-line").inner_text()
    page.get_by_role("tab", name="Library").click()
    page.locator("#library-doc input").click()
    page.get_by_role("option", name=f"#{doc_id} ").first.click()
    open_folds(page, "Answers marked wrong")
    page.wait_for_function("(q) => (document.querySelector('#wrong-answers-table')?.innerText"
                           " || '').includes(q)", arg="How do I loop over a comma-separated list?")
    assert "wrong loop macro" in page.locator("#wrong-answers-table").inner_text()
    no_error_badge(page)
    page.close()
