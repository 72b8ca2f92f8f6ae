"""The PDF builders tried in turn (outline, fonts, pages), so that a PDF whose pages hold text
always gets a tree: a junk outline is repaired or left out, and a builder that fails on an odd
file hands over to the next one, with the reason logged. The last one, ``pages``, makes one
paragraph node per page; ``build_tree`` then induces its hierarchy (H2MT 4.3).

Junk outlines seen in PDFs as they come (the thresholds are chosen, not fitted):
- repeated entries: the same title on the same page, one after the other (dropped);
- an outline with every entry on one page of a longer document, or with more entries than
  ``MAX_ENTRIES_PER_PAGE`` per page, or where most titles repeat: left out.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pymupdf

from engine.document.tree import DocumentError, Tree, TreeAssembler

log = logging.getLogger(__name__)

MAX_ENTRIES_PER_PAGE = 8  # the densest real outline in the corpus has under 3 per page
MIN_DISTINCT_TITLES = 0.5  # fewer distinct titles than this share of entries: junk


def repaired_outline(toc: list, page_count: int) -> tuple[list, str | None]:
    """(the outline with consecutive repeated entries dropped, why it is junk or None)."""
    kept = []
    for item in toc:
        if kept and (item[1], item[2]) == (kept[-1][1], kept[-1][2]):
            continue
        kept.append(item)
    if not kept:
        return kept, "it is empty"
    pages = {item[2] for item in kept}
    if page_count > 2 and len(kept) > 2 and len(pages) == 1:
        return kept, f"all its {len(kept)} entries point to one page"
    if len(kept) > MAX_ENTRIES_PER_PAGE * page_count:
        return kept, f"{len(kept)} entries for {page_count} pages"
    titles = Counter(" ".join(str(item[1]).lower().split()) for item in kept)
    if len(kept) > 4 and len(titles) < MIN_DISTINCT_TITLES * len(kept):
        return kept, f"only {len(titles)} distinct titles in {len(kept)} entries"
    return kept, None


def build_pdf_tree(doc: pymupdf.Document, path: Path, title: str, *, fonts: bool = True) -> Tree:
    """Outline, then fonts (unless ``fonts`` is False: OCR'd pages have no typography), then
    pages: the first builder that succeeds (module docstring).
    DocumentError (a problem of the file itself, e.g. no text layer) ends the chain."""
    from engine.document.builders.pdf_fonts import build_fonts_tree
    from engine.document.builders.pdf_outline import build_outline_tree

    builders = []
    toc = doc.get_toc(simple=False)
    if toc:
        toc, junk = repaired_outline(toc, doc.page_count)
        if junk:
            log.warning("%s: outline left out (%s)", path.name, junk)
        else:
            builders.append(("outline", lambda: build_outline_tree(doc, path, title, toc)))
    if fonts:
        builders.append(("fonts", lambda: build_fonts_tree(doc, path, title)))
    builders.append(("pages", lambda: build_pages_tree(doc, title)))
    for i, (name, build) in enumerate(builders):
        last = i == len(builders) - 1
        try:
            tree = build()
        except DocumentError:
            raise
        except Exception as exc:  # an odd file a builder does not handle: the next one reads it
            if last:
                raise
            why = f"{type(exc).__name__}: {exc}"
        else:
            if last or any(n.text.strip() for n in tree.preorder()):
                return tree
            why = "its tree holds no body text"
        log.warning("%s: the %s builder failed (%s); trying the %s builder", path.name, name,
                    why, builders[i + 1][0])
    raise AssertionError("unreachable")


def build_pages_tree(doc: pymupdf.Document, title: str) -> Tree:
    """One untitled paragraph node per page with text (``build_tree`` induces the hierarchy)."""
    from engine.document.builders.pdf_pages import join_lines, read_lines

    asm = TreeAssembler("pages", title, doc.page_count)
    for lines in read_lines(doc):
        if lines:
            page = lines[0].page + 1
            asm.add(0, text=join_lines(lines), page_start=page, page_end=page, kind="paragraph")
    return asm.finish()
