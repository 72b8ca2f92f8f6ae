"""app.views.quote_view: the quote block keeps the lines a passage introduces on lines of their
own."""
from markdown_it import MarkdownIt

from app.views.quote_view import NOT_COVERED, quote_markdown
from engine.answer.passages.quote import Quote


def _quote(text: str) -> Quote:
    return Quote(text=text, doc_id=1, node_id=2, rid=3, heading="Installation > Opam", page=4,
                 score=0.9)


def test_a_command_line_stays_on_its_own_line():
    md = quote_markdown(_quote("Installing Why3 with opam is as simple as\nopam install why3"),
                        False, True)
    html = MarkdownIt().render(md)
    assert "as simple as<br />\nopam install why3" in html
    assert "p. 4)" in md


def test_the_printed_page_label_comes_first_and_ocr_is_said():
    q = _quote("Text")
    q.page_label, q.ocr = "ii", True
    md = quote_markdown(q, False, False)
    assert "p. ii (PDF page 4)" in md and "read by OCR" in md


def test_markup_in_the_manuals_words_is_shown_as_written():
    html = MarkdownIt().render(quote_markdown(_quote(r"Use \patchcmd{*_x}"), False, False))
    assert r"\patchcmd{*_x}" in html


def test_no_quote():
    assert quote_markdown(None, True, True) == NOT_COVERED
    assert quote_markdown(None, False, True) == ""
