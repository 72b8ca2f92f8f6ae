"""The calibrated answer check in a real browser (headless Chromium), on the real etoolbox
manual (and beamer's guide, its first 40 pages) and the real model: a wrong answer is folded
under one line saying why in words, and a right one is shown unfolded with the manual's key
line and its page above it."""
from __future__ import annotations

import pytest

from tests.support.browser import ask_page, ask_and_wait, browser, no_error_badge, shot  # noqa: F401
from tests.support.pdf_cut import first_pages

from engine.answer.checks.confidence import ASSET, Confidence

pytestmark = pytest.mark.real_model

PDF = "etoolbox-manual.pdf"
WRONG_PDF = "beamer-userguide.pdf"
WRONG_PAGES = 40  # the tutorial's fonts (3.15, 5.6): phase one on a sixth of the guide
# Text mode, 128 tokens, the shipped answer_check.json (refitted on the dev probe, issue 67:
# docs/results.md, "The answer check on the screen (issue 67)"). The model answers the first
# question rightly, naming \newbool, the key line's command, at a confidence of 0.694 against
# the threshold 0.680 (measured with the engine's ask on a fresh library; the margin is small:
# the check folds nine right answers in ten on unseen manuals, this is one it shows); on
# beamer's guide it answers the second wrongly (the dev probe's beamer-08: on the whole guide
# "use a font that is designed to be read with serif fonts", at 0.110; on its first 40 pages
# "you need to use serif fonts", at 0.036, where the guide says to use the serif theme). Before
# the refit the second question was "What is the default size of a beamer frame?": its wrong
# answer "125 mm by 100 mm" now scores 0.744 and is shown, one of the wrong answers the check
# misses (docs/results.md).
RIGHT_Q = "How do I define a new boolean flag?"
WRONG_Q = "How do I switch the presentation's text to a serif font?"


def test_a_wrong_answer_is_folded_with_its_reason_and_a_right_one_shows_its_key_line(
        browser, explorer_server, shared_dir, tmp_path, monkeypatch):  # noqa: F811
    from engine.ingest import ingest_file

    url, rt = explorer_server
    # the shipped model, as the default H2MT_ANSWER_CHECK=auto gives it, whatever the environment
    monkeypatch.setitem(rt.cache, "answer_check", Confidence.load(ASSET))
    doc = rt.library.get_document(
        ingest_file(shared_dir / "corpus" / PDF, rt, memories=False).doc_id)
    wrong_pdf = first_pages(shared_dir / "corpus" / WRONG_PDF, WRONG_PAGES,
                            tmp_path / f"beamer-1-{WRONG_PAGES}.pdf")
    wrong_doc = rt.library.get_document(ingest_file(wrong_pdf, rt, memories=False).doc_id)
    with ask_page(browser, url, wrong_doc.id, "text", max_new_tokens=128) as page:
        rec = ask_and_wait(page, rt, wrong_doc.id, WRONG_Q)
        fold = page.locator("#answer-fold details.answer-fold")
        assert fold.count() == 1, f"the wrong answer was not folded: {rec.answer!r}"
        assert "serif theme" not in rec.answer
        line = page.locator("#answer-fold summary").inner_text()
        assert line[0].isupper() and line.endswith(".") and len(line) < 200, line
        # said as the model's reading, folded because the check does not support it
        label = page.locator("#answer-fold .fold-label").inner_text()
        assert label.startswith("The model's reading of the passages"), label
        assert "_" not in line and "lp_" not in line  # words, not a signal's name
        assert not page.locator("#answer-text").is_visible()
        no_error_badge(page)
        shot(page, tmp_path, "answer-check-low-confidence")

    with ask_page(browser, url, doc.id, "text", max_new_tokens=128) as page:
        rec = ask_and_wait(page, rt, doc.id, RIGHT_Q)
        try:
            page.wait_for_function("() => !document.querySelector('#answer-fold details')")
        except Exception:
            pytest.fail(f"the right answer was folded: {rec.answer!r}")
        assert "\\newbool" in rec.answer
        assert page.locator("#answer-text").is_visible()
        key = page.locator("#key-line")
        key.wait_for(state="visible")
        shown = key.inner_text()
        assert "From the manual (p. " in shown and "\\newbool" in shown, shown
        # the key line stands above the model's prose
        assert key.bounding_box()["y"] < page.locator("#answer-text").bounding_box()["y"]
        no_error_badge(page)
        shot(page, tmp_path, "answer-check-key-line")
