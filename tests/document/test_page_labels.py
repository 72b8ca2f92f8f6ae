"""Printed page numbers (``Page.get_label``): a PDF whose first two pages are numbered i-ii and
whose page 1 is its third page shows "p. 8 (PDF page 10)" for its tenth page, in the tree, the
library, the quote (app and JSON) and the page view's caption."""
from __future__ import annotations

import pymupdf
import pytest

from engine.document.builders import build_raw_tree
from engine.document.tree import page_name, pages_name


def labelled_pdf(shared_dir, tmp_path):
    """etoolbox's manual with page labels i, ii, then 1, 2, ... (made here with pymupdf)."""
    doc = pymupdf.open(shared_dir / "corpus" / "etoolbox-manual.pdf")
    doc.set_page_labels([{"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                         {"startpage": 2, "prefix": "", "style": "D", "firstpagenum": 1}])
    out = tmp_path / "etoolbox-labelled.pdf"
    doc.save(out)
    return out


def test_page_names():
    assert page_name(10, "8") == "p. 8 (PDF page 10)"
    assert page_name(10, "10") == "p. 10" and page_name(10) == "p. 10"
    assert pages_name(10, 11, "8", "9") == "pp. 8–9 (PDF pages 10–11)"
    assert pages_name(3, 5) == "pp. 3–5" and pages_name(None, None) == "—"


def test_tree_carries_the_printed_labels(shared_dir, tmp_path):
    tree = build_raw_tree(labelled_pdf(shared_dir, tmp_path))
    assert tree.page_labels[:3] == ("i", "ii", "1")
    assert tree.page_name(10) == "p. 8 (PDF page 10)"
    assert tree.page_name(1) == "p. i (PDF page 1)"
    # a PDF without labels is shown by physical page only
    plain = build_raw_tree(shared_dir / "corpus" / "etoolbox-manual.pdf")
    assert plain.page_labels == () and plain.page_name(10) == "p. 10"


def test_library_stores_labels_and_opens_older_databases(shared_dir, tmp_path):
    from sqlalchemy import text

    from storage import Library, DocumentMeta

    tree = build_raw_tree(labelled_pdf(shared_dir, tmp_path))
    url = f"sqlite:///{tmp_path / 'lib.db'}"
    with Library(url) as lib:
        meta = DocumentMeta(title=tree.title, file_name="x.pdf", sha256="a" * 64, pages=tree.pages)
        doc = lib.add_document(meta, tree)
        back = lib.get_tree(doc)
        assert back.page_labels == tree.page_labels and back.page_name(10) == "p. 8 (PDF page 10)"
        # a library made before the table existed: it has no such table and no rows
        with lib.engine.begin() as c:
            c.execute(text("DROP TABLE document_pages"))
    with Library(url) as lib:  # opens, adds the table, shows physical pages
        assert lib.get_tree(doc).page_labels == ()
        assert lib.get_tree(doc).page_name(10) == "p. 10"


def test_quote_on_physical_page_10_says_page_8(tiny_backbone, shared_dir, tmp_path):
    from app.views.pages import Line, render_pdf
    from app.views.quote_view import quote_markdown
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from tests.support.runtime import make_runtime

    rt = make_runtime(tiny_backbone, tmp_path)
    pdf = labelled_pdf(shared_dir, tmp_path)
    doc = ingest_file(pdf, rt).doc_id
    ans = ask(rt, doc, "How do I expand a command only once?", AskOptions(mode="quote", k=2))
    quote = ans.as_json()["quote"]
    assert "prevents further expansion" in quote["text"]
    assert quote["page"] == 10 and quote["page_label"] == "8"
    assert "p. 8 (PDF page 10)" in quote_markdown(ans.quote, False, False)
    assert all(c["page_label"] == rt.library.get_tree(doc).page_label(c["page_start"])
               for c in ans.as_json()["cited"])
    view = render_pdf(pdf.read_bytes(), [Line(ans.quote.text, 10, 1.0)], 10, 10,
                      title="3.2 Expansion Control")
    assert "p. 8 (PDF page 10)" in view.caption
    # the page named by its printed number is routed first
    ans = ask(rt, doc, "What is on page 8?", AskOptions(mode="route", k=2), log=False)
    first = ans.route.nodes[ans.route.selected[0]]
    assert first.page_start <= 10 <= first.page_end


def test_a_question_may_name_the_printed_or_the_physical_page(shared_dir, tmp_path):
    from engine.answer.question import Question
    from engine.routing.named_pages import named_pages

    def named(text, tree):  # the pages the question read once names
        return named_pages(Question.read(text).page_refs, tree)

    tree = build_raw_tree(labelled_pdf(shared_dir, tmp_path))
    assert named("What is on page 8?", tree) == {10}
    assert named("what is on PDF page 8", tree) == {8}
    assert named("see p. ii", tree) == {2}
    assert named("How do I patch a command?", tree) == set()
    assert Question.read("see p. ii and PDF page 8").page_refs == ((False, "ii"), (True, "8"))
    plain = build_raw_tree(shared_dir / "corpus" / "etoolbox-manual.pdf")
    assert named("what is on page 8", plain) == {8}
