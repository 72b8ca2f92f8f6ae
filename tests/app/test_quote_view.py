"""app.views.quote_view and app.views.passages_view: the line above the answer names the quote's
section and page in plain words; the passages block shows each passage as readable text, its
signature first, the lines a passage introduces on lines of their own, the manual's markup as
written."""
from app.views.passages_view import passages_html
from app.views.quote_view import NOT_COVERED, quote_markdown
from engine.answer.passages.quote import Quote
from engine.answer.shown import ONE, SEVERAL


def _quote(text: str, score: float = 0.9) -> Quote:
    return Quote(text=text, doc_id=1, node_id=2, rid=3, heading="Installation > Opam", page=4,
                 score=score)


def test_the_line_names_the_page_without_jargon():
    md = quote_markdown(_quote("Installing Why3 with opam is as simple as\nopam install why3"),
                        False, True, ONE)
    assert "(p. 4)" in md
    assert "one clear place" in md and "Ranked" not in md and "routing" not in md


def test_two_candidates_are_said():
    md = quote_markdown(_quote("Text of it"), False, True, SEVERAL)
    assert "more than one candidate" in md and "both" in md


def test_the_printed_page_label_comes_first_and_ocr_is_said():
    q = _quote("Text")
    q.page_label, q.ocr = "ii", True
    md = quote_markdown(q, False, False)
    assert "p. ii (PDF page 4)" in md and "read by OCR" in md


def test_passages_keep_their_lines_and_markup():
    quotes = [_quote("Installing Why3 with opam is as simple as\nopam install why3"),
              _quote(r"\patchcmd{*_x}{<a>}" + "\nUse it.", 0.5)]
    html = passages_html([q.as_json() for q in quotes])
    assert html.count('class="passage') == 2 and 'data-rank="2"' in html
    # prose: no signature, its lines kept; an entry: its signature first, as written
    assert 'class="sig"' not in html.split('data-rank="2"')[0]
    assert "as simple as\nopam install why3</div>" in html
    assert r'<span class="sig">\patchcmd{*_x}{&lt;a&gt;}</span>' in html


def test_no_quote():
    assert quote_markdown(None, True, True) == NOT_COVERED
    assert quote_markdown(None, False, True) == ""
