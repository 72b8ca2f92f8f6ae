"""The manual's title: the PDF's metadata title, else the one printed on its title page, never
the file's stem when the first page prints a title."""
from __future__ import annotations

import pymupdf
import pytest

from engine.document.builders import build_raw_tree
from engine.document.builders.pdf_pages import title_page_title


@pytest.mark.parametrize("name, title", [
    ("r-intro.pdf", "An Introduction to R"),  # outline, no metadata title
    ("beamer-userguide.pdf", "The beamer class"),  # outline, no metadata title
    ("etoolbox-manual.pdf", "The etoolbox Package"),  # metadata title kept
])
def test_outline_pdfs_are_titled_from_metadata_or_title_page(shared_dir, name, title):
    assert build_raw_tree(shared_dir / "corpus" / name).title == title


def test_title_page_title_needs_a_line_well_above_the_body(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 100), "Plain body text on the first page, all one size.", fontsize=11)
    page.insert_text((72, 120), "More body text in the same size as the line above.", fontsize=11)
    assert title_page_title(doc) == ""
    page.insert_text((72, 60), "Widget Manual", fontsize=24)
    assert title_page_title(doc) == "Widget Manual"
