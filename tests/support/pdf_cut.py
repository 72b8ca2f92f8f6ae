"""A real manual's first pages as a PDF of their own: the product's PDF path on a corpus
manual, at a fraction of the nodes (and so of the real backbone's memory writing)."""
from __future__ import annotations

from pathlib import Path

import pymupdf


def first_pages(src: Path, pages: int, dest: Path) -> Path:
    """``dest``: pages 1..``pages`` of ``src``, fonts and text layer as they are."""
    with pymupdf.open(src) as whole, pymupdf.open() as cut:
        cut.insert_pdf(whole, from_page=0, to_page=pages - 1)
        cut.save(dest)
    return dest
