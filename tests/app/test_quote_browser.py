"""A how-to question in a real browser: the quote holds the command line the manual gives, and
the page beside it is the quote's page, highlighted.

Headless Debian Chromium driven by Playwright's sync API, against the app served in-process
(``explorer_server``). The Why3 manual (a real PDF of the corpus) is stored without memories;
the question is asked in quote mode (no generation). Checked only on what the page shows: the
quote block's text, the page view's caption and the highlight's yellow pixels on its image.
"""
from __future__ import annotations

import pytest

from tests.support.browser import TIMEOUT_MS, YELLOW_JS, ask_page, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.real_model

PDF = "why3-manual.pdf"
QUESTION = "How do I install Why3 with opam?"
COMMAND = "opam install why3"


def test_how_to_quote_holds_the_command_on_its_highlighted_page(browser, explorer_server,
                                                               shared_dir):
    from engine.ingest import ingest_file

    url, rt = explorer_server
    doc = rt.library.get_document(
        ingest_file(shared_dir / "corpus" / PDF, rt, memories=False).doc_id)
    with ask_page(browser, url, doc.id, "quote") as page:
        page.locator("#ask-question textarea").fill(QUESTION)
        page.locator("#ask-button").click()
        page.wait_for_function(
            "() => (document.querySelector('#quote-view')?.innerText || '').includes('Where the manual answers')"
            " && document.querySelector('#passages .passage')"
            " && (document.querySelector('#page-view-head')?.innerText || '').includes('p. ')",
            timeout=TIMEOUT_MS)
        quote = page.locator("#passages .passage[data-rank='1']").inner_text()
        assert COMMAND in " ".join(quote.split()), quote  # the line the sentence introduces
        assert "Opam" in quote, quote  # and the sentence it leans on names the tool
        # the quote's page: "p. N" (or "PDF page N") under its signature, and over the image
        loc = page.locator("#passages .passage[data-rank='1'] .loc").inner_text()
        number = loc.split("PDF page ")[-1].split("p. ")[-1].split()[0].rstrip(").,")
        head = page.locator("#page-view-head").inner_text()
        # over the image: "p. N", or the printed label with "(PDF page N)" where the PDF has one
        assert f"p. {number}" in head or f"PDF page {number}" in head, (head, quote)
        page.wait_for_function(
            "() => { const i = document.querySelector('#page-view-image img');"
            " return i && i.src && i.complete && i.naturalWidth > 0; }")
        assert page.evaluate(YELLOW_JS) > 200, "the quote is not highlighted on its page"
