"""Font-statistics builder on the two real manuals without an outline."""
from __future__ import annotations

import re

import pymupdf
import pytest

from engine.document.tree import DocumentError


def test_camlidl_sections_and_subsections(corpus_tree):
    tree = corpus_tree("camlidl-manual_no-outline.pdf")
    assert tree.source == "fonts"
    assert tree.title.startswith("Camlidl user")
    sections = [n for n in tree.children(0) if n.kind == "section"]
    assert [n.title for n in sections] == [
        "1 Overview", "2 IDL syntax", "3 The Caml-IDL mapping", "4 Using camlidl",
        "5 Module Com: run-time library for COM components", "6 Hints on writing IDL files",
        "7 Release notes"]
    subs = [c for s in sections for c in tree.children(s.id)]
    assert len(subs) == 26
    assert all(re.match(r"\d\.\d+ \S", c.title) for c in subs)
    assert [len(tree.children(s.id)) for s in sections] == [2, 8, 10, 3, 0, 3, 0]
    pointers = next(c for c in subs if c.title == "3.2 Pointers")
    assert pointers.page_start == 9 and pointers.text


def test_pseudo_sections_and_long_leaf(corpus_tree):
    tree = corpus_tree("pseudo-manual_no-outline.pdf")
    sections = [n for n in tree.children(0) if n.kind == "section"]
    assert [n.title.split()[0] for n in sections] == [str(i) for i in range(1, 9)] + ["References"]
    subs = {s.title: [c.title for c in tree.children(s.id)] for s in sections}
    assert len(subs["1 Introduction"]) == 3
    assert len(subs["4 Reference"]) == 2
    assert len(subs["5 But how do I . . ."]) == 14
    assert len(subs["6 Implementation"]) == 9
    long_leaf = next(c for c in tree.children(sections[3].id)
                     if c.title == "4.2 Command and key reference")
    assert (long_leaf.page_start, long_leaf.page_end) == (20, 45)
    assert tree.is_leaf(long_leaf.id) and len(long_leaf.text) > 20000


def test_running_heads_and_page_numbers_left_out(corpus_tree):
    tree = corpus_tree("camlidl-manual_no-outline.pdf")
    for n in tree.preorder():
        assert not any(re.fullmatch(r"\d{1,3}", ln.strip()) for ln in n.text.splitlines()[-1:]), n.title


def test_pdf_without_text_layer(tmp_path):
    from engine.document.builders import build_raw_tree

    doc = pymupdf.open()
    page = doc.new_page()
    page.draw_rect(pymupdf.Rect(50, 50, 200, 200), fill=(0, 0, 0))
    doc.save(tmp_path / "scan.pdf")
    with pytest.raises(DocumentError, match="no text layer"):
        build_raw_tree(tmp_path / "scan.pdf")
