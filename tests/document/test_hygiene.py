"""Evidence hygiene on the real corpus: printed contents and indexes found, everything else kept."""
from __future__ import annotations

import pymupdf
import pytest

from engine.document.hygiene import (MIN_FRACTION, MIN_LINES, entry_counts,
                                     mark_evidence_hygiene, page_kind, title_kind)
from engine.document.split import split_long_nodes
from engine.document.tree import ROOT

# Physical 1-based pages of every printed contents and index in the corpus (checked by hand
# against the PDFs and the corpus README: e.g. R-intro prints its contents on pages 3-6 and its
# two indexes on 108-112; ngspice's contents run over pages 5-29, page 30 holds only a running
# head). Every other page of the nine manuals must come out None.
FLAGGED_PAGES = {
    "beamer-userguide.pdf": {**dict.fromkeys(range(3, 8), "toc"),
                             **dict.fromkeys(range(226, 235), "index")},
    "camlidl-manual_no-outline.pdf": {},
    "etoolbox-manual.pdf": {1: "toc"},  # title block, contents, then the start of section 1
    "gnuplot-manual.pdf": {**dict.fromkeys(range(2, 21), "toc"),
                           **dict.fromkeys(range(304, 312), "index")},
    "ngspice-manual.pdf": dict.fromkeys(range(5, 30), "toc"),
    "pseudo-manual_no-outline.pdf": {},
    "r-intro.pdf": {**dict.fromkeys(range(3, 7), "toc"),
                    **dict.fromkeys(range(108, 113), "index")},
    "reportlab-userguide.pdf": dict.fromkeys(range(2, 6), "toc"),
    "why3-manual.pdf": {**dict.fromkeys(range(3, 7), "toc"),
                        **dict.fromkeys(range(177, 185), "index")},
}


def _pages(shared_dir, name):
    doc = pymupdf.open(shared_dir / "corpus" / name)
    return [page.get_text() for page in doc]


@pytest.mark.parametrize("name", sorted(FLAGGED_PAGES))
def test_every_page_of_the_corpus(shared_dir, name):
    """Raw page text (entries split over lines: "1.1" / "About" / ". . ." / "1")."""
    got = {i + 1: k for i, text in enumerate(_pages(shared_dir, name)) if (k := page_kind(text))}
    assert got == FLAGGED_PAGES[name]


def _page(shared_dir, name, number):
    return pymupdf.open(shared_dir / "corpus" / name)[number - 1].get_text()


@pytest.mark.parametrize("name, page, why", [
    ("r-intro.pdf", 14, "prose"),
    ("r-intro.pdf", 95, "code: the sample session"),
    ("pseudo-manual_no-outline.pdf", 30, "code listings and command reference"),
    ("ngspice-manual.pdf", 153, "parameter table with units (F, A, V, 1/V, K)"),
    ("ngspice-manual.pdf", 325, "numbered list of steps"),
    ("beamer-userguide.pdf", 175, "numbered proof steps in a slide"),
    ("etoolbox-manual.pdf", 40, "revision history: dot leaders to section numbers, not pages"),
    ("why3-manual.pdf", 175, "bibliography"),
])
def test_real_non_toc_pages(shared_dir, name, page, why):
    text = _page(shared_dir, name, page)
    assert len(text) > 500, why
    assert page_kind(text) is None, why


def test_real_toc_and_index_pages_by_shape(shared_dir):
    # dot leaders, one entry per line once joined
    assert page_kind(_page(shared_dir, "r-intro.pdf", 4)) == "toc"
    # unnumbered titles and a page column without leaders ("Canvas size" / "32")
    assert page_kind(_page(shared_dir, "gnuplot-manual.pdf", 3)) == "toc"
    # "term, page, page" entries
    assert page_kind(_page(shared_dir, "beamer-userguide.pdf", 229)) == "index"
    assert page_kind(_page(shared_dir, "gnuplot-manual.pdf", 306)) == "index"
    # an alphabetical index set with dot leaders: pages do not run forward, so not a contents
    toc, index, counted = entry_counts(_page(shared_dir, "r-intro.pdf", 109))
    assert toc == 0 and index >= MIN_FRACTION * counted


def test_small_texts_of_each_shape():
    toc = "Contents\n1 Intro . . . . . . 1\n1.1 About ..... 2\n1.2 The R environment . . . . 3\n"
    assert page_kind(toc) == "toc"
    unnumbered = "Canvas size 32\nCommand-line-editing 32\nComments 33\nCoordinates 33"
    assert page_kind(unnumbered) == "toc"
    index = "\\patchcmd, 12, 15\n\\pretocmd, 13\nfoo 12, 34\nbar baz, 7–9, 40\n"
    assert page_kind(index) == "index"
    # fewer than MIN_LINES entries is never enough
    assert MIN_LINES == 3 and page_kind("Intro . . . . 1\nAbout . . . . 2") is None
    steps = ("1. Open the valve and wait 5 minutes.\n2. Close the valve.\n"
             "3. Set the pressure to 3 bar.\n4. Repeat steps 1 to 3 twice.")
    assert page_kind(steps) is None
    units = "Length 10 m\nWidth 2.5 mm\nVoltage 3.3 V\nCurrent 10 mA\nTemperature 27 °C"
    assert page_kind(units) is None
    table = ("1 Uniform Range 1 Offset 0\n2 Gaussian Standard Dev. 1 Mean 0\n"
             "3 Exponential Mean 1 Offset 0")
    assert page_kind(table) is None
    dates = "Xavier Leroy\nINRIA Rocquencourt\nMay 1, 2002\nJune 3, 2004"
    assert page_kind(dates) is None
    code = "x <- c(1, 2, 3)\nfor (i in 1:10) print(i)\ny <- x[2]\nplot(x, y, 1)"
    assert page_kind(code) is None
    assert page_kind("") is None


@pytest.mark.parametrize("title, kind", [
    ("Contents", "toc"), ("Table of Contents", "toc"), ("table of contents", "toc"),
    ("CONTENTS", "toc"), ("1 Contents", "toc"),
    ("Index", "index"), ("VI Index", "index"), ("Appendix D Function and variable index", "index"),
    ("E Concept index", "index"), ("Index of commands", "index"),
    ("3.6 The Table of Contents", None), ("10.5 Adding a Table of Contents", None),
    ("19.1 Specifying Note Contents", None), ("9.9 SimpleIndex()", None),
    ("Index vectors; selecting and modifying subsets of a data set", None), ("", None),
])
def test_title_kind(title, kind):
    assert title_kind(title) == kind


def _kinds(tree):
    return {n.id: n.kind for n in tree.preorder()}


def _same_but_kind(before, after):
    assert len(after) == len(before)
    after.validate()
    for n in before.preorder():
        m = after.node(n.id)
        assert (m.id, m.parent, m.order, m.depth, m.title, m.text, m.page_start, m.page_end,
                m.tokens, m.ref) == (n.id, n.parent, n.order, n.depth, n.title, n.text,
                                     n.page_start, n.page_end, n.tokens, n.ref)
    assert sorted(after.graph.nodes) == list(range(len(before)))


def _by_title(tree, title):
    return next(n for n in tree.preorder() if n.title == title)


def test_r_intro_tree(corpus_tree):
    raw = corpus_tree("r-intro.pdf")
    before = _kinds(raw)
    marked = mark_evidence_hygiene(raw)
    assert _kinds(raw) == before  # the input tree is left alone
    _same_but_kind(raw, marked)
    # the printed contents sit in the front matter, whose text has "1.1 The R environment . . . 2"
    front = _by_title(marked, "Front matter")
    assert "1.1 The R environment . . ." in front.text and front.kind == "toc"
    assert _by_title(marked, "D Function and variable index").kind == "index"
    assert _by_title(marked, "E Concept index").kind == "index"
    changed = {i for i, k in _kinds(marked).items() if k != before[i]}
    assert changed == {front.id, _by_title(marked, "D Function and variable index").id,
                       _by_title(marked, "E Concept index").id}
    for title in ("Preface", "The R environment", "1 Introduction and preliminaries",
                  "Index vectors; selecting and modifying subsets of a data set",
                  "A A sample session", "F References"):
        assert _by_title(marked, title).kind == "section", title
    assert marked.node(ROOT).kind == "root"


def test_etoolbox_tree(corpus_tree):
    raw = corpus_tree("etoolbox-manual.pdf")
    marked = mark_evidence_hygiene(raw)
    _same_but_kind(raw, marked)
    flagged = [(n.title, n.kind) for n in marked.preorder() if n.kind in ("toc", "index")]
    assert flagged == [("Front matter", "toc")]
    # the revision history points at sections with dot leaders; it is content, not a contents
    history = _by_title(marked, "Revision History")
    assert all(marked.node(i).kind == "section" for i in marked.subtree_ids(history.id))
    assert _by_title(marked, "\\patchcmd").kind == "section"


def test_reportlab_tree(corpus_tree):
    marked = mark_evidence_hygiene(corpus_tree("reportlab-userguide.pdf"))
    assert _by_title(marked, "Table of contents").kind == "toc"
    assert _by_title(marked, "9.8 TableOfContents()").kind == "section"
    assert _by_title(marked, "9.9 SimpleIndex()").kind == "section"
    flagged = [n.title for n in marked.preorder() if n.kind in ("toc", "index")]
    assert flagged == ["Table of contents"]


def test_gnuplot_index_title_needs_index_text(corpus_tree):
    marked = mark_evidence_hygiene(corpus_tree("gnuplot-manual.pdf"))
    indexes = {n.title: n for n in marked.preorder() if title_kind(n.title) == "index"}
    # "Index" under plot/datafile is the `index` keyword's section; "VI Index" is the real one
    assert set(indexes) == {"Index", "VI Index"}
    assert indexes["Index"].kind == "section" and indexes["Index"].depth == 4
    assert indexes["VI Index"].kind == "index"
    assert _by_title(marked, "Front matter").kind == "toc"  # the printed contents, pages 2-20


def _byte_split(tree, limit=1024):
    """Token-limit splitting with one token per UTF-8 byte (no model needed)."""
    return split_long_nodes(tree, lambda s: list(s.encode()),
                            lambda ids: bytes(ids).decode("utf-8", "ignore"), limit)


def test_split_tree_marks_pieces(corpus_tree):
    """After token-limit splitting, the contents and index bodies are pieces: each is judged
    (short ones with their neighbour pieces), and prose pieces of the same body are no contents:
    the title and copyright piece is a title page (engine.document.matter, by its shape)."""
    split = _byte_split(corpus_tree("r-intro.pdf"))
    marked = mark_evidence_hygiene(split)
    _same_but_kind(split, marked)
    front = _by_title(marked, "Front matter")
    pieces = marked.children(front.id)
    kinds = [p.kind for p in pieces]
    assert kinds.count("toc") >= 15
    prose = [p for p in pieces if "Permission is granted" in p.text or "Notes on R" in p.text]
    assert prose and all(p.kind == "titlepage" for p in prose)
    assert all(p.kind == "toc" for p in pieces if p.text.count(". . . .") >= 1
               and "Permission" not in p.text)
    # a one-line piece cut from the middle of the contents is caught through its neighbours
    short = [p for p in pieces if p.kind == "toc" and page_kind(p.text) is None]
    assert short and all(len(p.text.splitlines()) < MIN_LINES for p in short)
    for title in ("D Function and variable index", "E Concept index"):
        node = _by_title(marked, title)
        assert {marked.node(i).kind for i in marked.subtree_ids(node.id)} == {"index"}
    chapter = _by_title(marked, "2 Simple manipulations; numbers and vectors")
    assert {marked.node(i).kind for i in marked.subtree_ids(chapter.id)} <= {"section", "paragraph",
                                                                              "chunk"}
