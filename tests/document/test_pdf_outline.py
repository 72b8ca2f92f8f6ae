"""Outline builder on the real outlined manuals: every entry a node, text cut at headings."""
from __future__ import annotations


import pymupdf
import pytest

from engine.document.tree import clean_title

OUTLINED = ["etoolbox-manual.pdf", "r-intro.pdf", "reportlab-userguide.pdf", "why3-manual.pdf",
            "beamer-userguide.pdf", "gnuplot-manual.pdf", "ngspice-manual.pdf"]


def _toc(shared_dir, name):
    return pymupdf.open(shared_dir / "corpus" / name).get_toc()


def _sections(tree):
    return [n for n in tree.preorder() if n.kind == "section"]


@pytest.mark.parametrize("name", OUTLINED)
def test_every_outline_entry_is_a_node(shared_dir, corpus_tree, name):
    tree = corpus_tree(name)
    toc = _toc(shared_dir, name)
    assert tree.source == "outline"
    assert len(tree) >= len(toc) + 1
    assert tree.depth >= max(level for level, *_ in toc)
    got = [(n.title, n.page_start, n.depth) for n in _sections(tree)]
    want = [(clean_title(title), page, level) for level, title, page in toc]
    assert got == want  # same titles, start pages and nesting, in outline order
    for n in _sections(tree):
        assert n.page_start <= n.page_end


def test_etoolbox_macro_entries(corpus_tree):
    tree = corpus_tree("etoolbox-manual.pdf")
    sections = _sections(tree)
    assert len(sections) == 233
    assert sum(tree.is_leaf(n.id) for n in sections) == 202
    history = next(n for n in sections if n.title == "Revision History")
    assert len(tree.children(history.id)) == 34
    macro = next(n for n in sections if n.title == "\\newrobustcmd")
    assert tree.is_leaf(macro.id) and macro.page_start == 2
    assert macro.text.startswith("\\newrobustcmd{")


def test_beamer_parts_and_chapters(corpus_tree):
    tree = corpus_tree("beamer-userguide.pdf")
    by_title = {n.title: n for n in _sections(tree)}
    assert by_title["1 Introduction"].depth == 1  # chapter 1 at L1 ...
    assert by_title["15 Themes"].depth == 2  # ... later chapters under their Part
    assert tree.parent(by_title["15 Themes"].id).title == "III Changing the Way Things Look"


def test_gnuplot_wide_node(corpus_tree):
    tree = corpus_tree("gnuplot-manual.pdf")
    set_show = next(n for n in _sections(tree) if n.title == "Set-show")
    assert len(tree.children(set_show.id)) == 154
    assert tree.depth == 5


def test_front_matter_before_first_heading(corpus_tree):
    tree = corpus_tree("r-intro.pdf")
    front = tree.children(0)[0]
    assert front.kind == "front" and front.page_start == 1 and front.page_end == 6
    assert "Table of Contents" in front.text


def test_text_cut_at_heading_position_with_destinations(corpus_tree):
    tree = corpus_tree("etoolbox-manual.pdf")
    about, license_ = (next(n for n in _sections(tree) if n.title == t) for t in ("About", "License"))
    assert about.page_start == license_.page_start == 1
    assert "toolbox of programming tools" in about.text
    assert "Copyright" not in about.text
    assert license_.text.startswith("1.2 License")
    assert "toolbox of programming tools" not in license_.text


def test_text_cut_without_destination_points(corpus_tree):
    # ReportLab's outline links carry no point: headings are found by their printed text.
    tree = corpus_tree("reportlab-userguide.pdf")
    s11, s12 = (next(n for n in _sections(tree) if n.title.startswith(p)) for p in ("1.1 ", "1.2 "))
    assert s11.page_start == s12.page_start == 6
    assert s11.text.startswith("This document is an introduction to the ReportLab PDF library")
    assert "lets you directly create documents" not in s11.text
    assert s12.text.startswith("This is a software library that lets you directly create")


@pytest.mark.parametrize("name", ["why3-manual.pdf", "beamer-userguide.pdf", "r-intro.pdf",
                                  "reportlab-userguide.pdf", "etoolbox-manual.pdf"])
def test_neighbours_on_one_page_do_not_share_text(corpus_tree, name):
    """Consecutive headings on the same page: neither node holds the other's words."""
    nodes = [n for n in _sections(corpus_tree(name)) if len(n.text) >= 200]
    pairs = 0
    for prev, nxt in zip(nodes, nodes[1:]):
        if prev.page_end == nxt.page_start:
            pairs += 1
            assert prev.text[-120:] not in nxt.text, (prev.title, nxt.title)
            assert nxt.text[:120] not in prev.text, (prev.title, nxt.title)
    assert pairs >= 5


def test_broken_destination_is_kept(tmp_path):
    """An entry whose destination points nowhere (page -1) sits at the previous entry's place."""
    from engine.document.builders import build_raw_tree

    doc = pymupdf.open()
    for i in range(3):
        page = doc.new_page()
        page.insert_text((72, 100), f"Heading {i}")
        page.insert_text((72, 130), f"Body of page {i}.")
    doc.set_toc([[1, "Heading 0", 1], [2, "Broken", -1], [1, "Heading 2", 3]])
    path = tmp_path / "t.pdf"
    doc.save(path)
    tree = build_raw_tree(path)
    sections = [n for n in tree.preorder() if n.kind == "section"]
    assert [(n.title, n.page_start, n.depth) for n in sections] == [
        ("Heading 0", 1, 1), ("Broken", 1, 2), ("Heading 2", 3, 1)]
    assert sections[0].text == ""  # its heading line only; the body follows the broken entry
    assert sections[2].text.startswith("Body of page 2")
