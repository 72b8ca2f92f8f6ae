"""The page view on real manuals: an evidence sentence highlighted on its PDF page (the pixels of
the rendered page are yellow where the sentence's words are, nowhere else), a sentence that runs
over a page break highlighted at the foot of one page and the head of the next, no highlight
when no evidence passed the threshold or the sentence is not on the page, and Markdown sections
with their lines marked (and escaped). The file comes back from the library byte for byte."""
from __future__ import annotations

import io
import re

import pytest

from app.views.pages import Line, page_view, render_pdf, render_text

CAMLIDL = "camlidl-manual_no-outline.pdf"
# 2.4 "Types and declarators": this sentence starts at the foot of page 5 and ends on page 6.
BREAK_START, BREAK_END = "For instance, int x declares", "pointer to an array of integers."


def _pdf(shared_dir, name: str = CAMLIDL) -> bytes:
    path = shared_dir / "corpus" / name
    if not path.exists():
        pytest.skip(f"{path} missing")
    return path.read_bytes()


def _yellow_rows(png: bytes) -> list[int]:
    """The image rows (y) holding highlight-yellow pixels."""
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    yellow = (a[..., 0] > 220) & (a[..., 1] > 190) & (a[..., 2] < 90)
    return np.nonzero(yellow.sum(axis=1) > 5)[0].tolist()


def _page_height_px(data: bytes, page: int, dpi: int = 110) -> float:
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as d:
        return d[page - 1].rect.height * dpi / 72


def _words_in(data: bytes, page: int, rects) -> str:
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as d:
        p = d[page - 1]
        return " ".join(p.get_textbox(pymupdf.Rect(r) + (-1, -1, 1, 1)) for r in rects)


def _sentence(tree, start: str, end: str):
    """The node holding the sentence from ``start`` to ``end`` and the sentence as the tree's
    text has it (line breaks and all)."""
    for n in tree.preorder():
        m = re.search(re.escape(start) + r".*?" + re.escape(end), n.text, re.S)
        if m:
            return n, m.group(0)
    pytest.fail(f"no node of the tree holds {start!r}…{end!r}")


def test_evidence_line_is_highlighted_on_its_page(shared_dir, corpus_tree):
    data = _pdf(shared_dir)
    tree = corpus_tree(CAMLIDL)
    node, text = _sentence(tree, "The declaration of an identifier along with its type",
                           "denote pointers and array types.")
    view = render_pdf(data, [Line(text, 5)], node.page_start, node.page_end, title=node.title)
    assert view.pages == [5] and view.highlights >= 1, view.caption
    (placement,) = view.placements
    assert list(placement.rects) == [5] and not placement.split
    boxed = " ".join(_words_in(data, 5, placement.rects[5]).split())
    assert "declaration of an identifier" in boxed and "array types" in boxed, boxed
    assert "1 of 1 evidence line highlighted" in view.caption and "p. 5" in view.caption
    # yellow on the rendered page exactly where the words are
    rows = _yellow_rows(view.png)
    y0 = min(r[1] for r in placement.rects[5]) * 110 / 72
    y1 = max(r[3] for r in placement.rects[5]) * 110 / 72
    assert rows and y0 - 3 <= rows[0] and rows[-1] <= y1 + 3, (rows[:3], rows[-3:], y0, y1)


def test_a_page_named_wrongly_is_corrected_within_the_section(shared_dir, corpus_tree):
    data = _pdf(shared_dir)
    node, text = _sentence(corpus_tree(CAMLIDL), "The declaration of an identifier along",
                           "denote pointers and array types.")
    view = render_pdf(data, [Line(text, node.page_end)], node.page_start, node.page_end)
    assert view.pages == [5] and view.highlights >= 1


def test_highlight_spans_a_page_break(shared_dir, corpus_tree):
    data = _pdf(shared_dir)
    node, text = _sentence(corpus_tree(CAMLIDL), BREAK_START, BREAK_END)
    assert (node.page_start, node.page_end) == (5, 6)
    view = render_pdf(data, [Line(text, 5)], node.page_start, node.page_end, title=node.title)
    (placement,) = view.placements
    assert placement.split and view.pages == [5, 6], view.caption
    assert "over the page break from p. 5 to p. 6" in view.caption
    foot = " ".join(_words_in(data, 5, placement.rects[5]).split())
    head = " ".join(_words_in(data, 6, placement.rects[6]).split())
    assert foot.startswith("For instance") and "pointer to an array" not in foot, foot
    assert "pointer to an array of integers" in head and "For instance" not in head, head
    # the beginning at the foot of page 5, the rest at the head of page 6 (stacked image)
    h5 = _page_height_px(data, 5)
    rows = _yellow_rows(view.png)
    on5 = [y for y in rows if y < h5]
    on6 = [y for y in rows if y > h5]
    assert on5 and on6, "both pages carry a highlight"
    assert min(on5) > 0.6 * h5, "page 5: at its foot"
    assert max(on6) - h5 < 0.4 * _page_height_px(data, 6), "page 6: at its head"


def test_no_highlight_when_no_evidence_passed_the_threshold(shared_dir):
    data = _pdf(shared_dir)
    view = render_pdf(data, [], 5, 6, title="2.4 Types and declarators")
    assert view.pages == [5] and view.highlights == 0
    assert "passed the evidence threshold" in view.caption
    assert not _yellow_rows(view.png)


def test_sentence_not_on_the_page_is_shown_without_highlight_and_said(shared_dir):
    data = _pdf(shared_dir)
    view = render_pdf(data, [Line("Zebras cross the river <b>twice</b> a year.", 5)], 5, 5)
    assert view.pages == [5] and view.highlights == 0 and not _yellow_rows(view.png)
    assert "Not found on the page" in view.caption and "0 of 1" in view.caption
    assert "<b>" not in view.caption


def test_markdown_section_marks_its_lines_and_escapes_the_rest():
    text = ("Open the <b>bleed</b> valve first.\n\nTurn the screw a quarter\nturn until water "
            "comes out. Then close it.")
    view = render_text(text, [Line("Turn the screw a quarter turn until water comes out."),
                              Line("Not in this section.")], title="Bleeding *the* valve",
                       file_name="valve.md")
    assert view.marked == 1 and view.png is None
    assert ("<mark>Turn the screw a quarter</mark>  \n<mark>turn until water comes out\\.</mark> "
            "Then") in view.markdown
    assert "&lt;b&gt;bleed&lt;/b&gt;" in view.markdown and "<b>" not in view.markdown
    assert "1 of 2 evidence lines marked" in view.caption and "\\*the\\*" in view.caption
    none = render_text(text, [])
    assert none.marked == 0 and "<mark>" not in none.markdown
    assert "passed the evidence threshold" in none.caption


def test_page_view_reads_the_file_the_library_stored(shared_dir, tmp_path, tiny_backbone,
                                                    tiny_parts):
    """Ingest stores the PDF with its document; the page view renders from those bytes; a
    Markdown manual shows its section text."""
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings(data_dir=tmp_path, dense_encoder="none")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    try:
        r = ingest_file(shared_dir / "corpus" / CAMLIDL, rt, memories=False)
        source = rt.library.get_source(r.doc_id)
        assert source.is_pdf and source.data == _pdf(shared_dir)
        node, text = _sentence(rt.library.get_tree(r.doc_id), BREAK_START, BREAK_END)
        view = page_view(source, node, [Line(text, node.page_start)])
        assert view.pages == [5, 6] and view.placements[0].split
        md = tmp_path / "valve.md"
        md.write_text("# Valve\n\n## Bleeding\n\nTurn the bleed screw until water comes out. "
                      "Then close it.\n")
        m = ingest_file(md, rt, memories=False)
        tree = rt.library.get_tree(m.doc_id)
        node = next(n for n in tree.preorder() if n.title == "Bleeding")
        view = page_view(rt.library.get_source(m.doc_id), node,
                         [Line("Turn the bleed screw until water comes out.")])
        assert view.png is None and view.marked == 1 and "valve\\.md" in view.caption
        old = page_view(None, node, [])  # a document stored without its file
        assert old.png is None and "Bleeding" in old.caption
    finally:
        rt.library.close()
