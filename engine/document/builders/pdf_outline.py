"""Tree of a PDF from its outline (bookmarks): H2MT 3.1 for documents that carry their own TOC.

Every outline entry becomes one node titled exactly as ``get_toc`` gives it. Text is cut at each
heading's *position* on its page, not at page boundaries: a text line belongs to the last entry
whose anchor (page, y) lies at or above the line's middle.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from engine.document.builders.pdf_pages import (TextLine, drop_running_lines, join_lines,
                                                read_lines, require_text_layer)
from engine.document.tree import Tree, TreeAssembler

FRONT_TITLE = "Front matter"


@dataclass(frozen=True)
class OutlineEntry:
    level: int
    title: str
    page: int  # 0-based page index, already repaired for broken destinations
    y: float  # anchor height in pymupdf coordinates (0 = top of page)


def build_outline_tree(doc: pymupdf.Document, path: Path, title: str,
                       toc: list | None = None) -> Tree:
    """Outline entries (``toc``: ``get_toc(simple=False)``, repaired; default the PDF's own)
    -> nested nodes; body text cut at heading anchors."""
    pages = read_lines(doc)
    require_text_layer(pages, path.name)
    pages = drop_running_lines(doc, pages)
    entries = locate_entries(doc, toc if toc is not None else doc.get_toc(simple=False), pages)

    # Assign every line to the entry above it; index -1 is the front matter.
    keys = [(e.page, e.y) for e in entries]
    owned: list[list[TextLine]] = [[] for _ in range(len(entries) + 1)]
    for lines in pages:
        for ln in lines:
            owned[bisect.bisect_right(keys, (ln.page, ln.y_mid))].append(ln)
    front, owned = owned[0], owned[1:]

    asm = TreeAssembler("outline", title, doc.page_count)
    if front:
        # Front matter (title page, printed contents) is its own node, so the root's local text
        # stays short and the front pages still reach the memory.
        asm.add(0, title=FRONT_TITLE, text=join_lines(front), page_start=front[0].page + 1,
                page_end=front[-1].page + 1, kind="front")
    stack: list[tuple[int, int]] = [(0, 0)]  # (level, node id); the root is level 0
    for entry, lines in zip(entries, owned):
        # Level jumps (1 -> 3) attach to the nearest shallower ancestor.
        while stack[-1][0] >= entry.level:
            stack.pop()
        body = _drop_heading_lines(lines, entry.title)
        page_end = max([entry.page] + [ln.page for ln in lines]) + 1
        nid = asm.add(stack[-1][1], title=entry.title, text=join_lines(body),
                      page_start=entry.page + 1, page_end=page_end)
        stack.append((entry.level, nid))
    return asm.finish()


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _drop_heading_lines(lines: list[TextLine], title: str) -> list[TextLine]:
    """Leave out the printed heading at the top of a node's lines (the title is stored apart).

    Lines are dropped while their text, accumulated, is still a prefix of the title (ignoring
    case, spaces and punctuation); the heading may come out as "3.2" and "Pointers" lines.
    """
    want = _norm(title)
    if not want:
        return lines
    got = ""
    for i, ln in enumerate(lines[:6]):
        got += _norm(ln.text)
        if not got or not want.startswith(got):
            return lines
        if got == want:
            return lines[i + 1:]
    return lines


# -- anchors ------------------------------------------------------------------------------------

def locate_entries(doc: pymupdf.Document, toc: list, pages: list[list[TextLine]]) -> list[OutlineEntry]:
    """(page, y) of every outline entry, in outline order, never going backwards.

    - A destination point is taken when the entry has one; whether PyMuPDF gave it in PDF
      coordinates (y from the bottom) or page coordinates is decided once per document by which
      reading puts more anchors just above a printed copy of the title.
    - Entries without a point (e.g. ReportLab's bare page links) are placed at the title's printed
      position on the page (at or after the previous anchor), else at the top of the page.
    - A missing or broken destination (page -1, out of range) takes the previous entry's place.
    """
    n_pages = doc.page_count
    raw: list[tuple[int, str, int | None, pymupdf.Point | None]] = []
    for item in toc:
        level, title, page1 = item[0], item[1], item[2]
        dest = item[3] if len(item) > 3 and isinstance(item[3], dict) else {}
        page = page1 - 1 if isinstance(page1, int) and 1 <= page1 <= n_pages else None
        point = dest.get("to")
        has_point = isinstance(point, pymupdf.Point) and (point.x != 0 or point.y != 0)
        raw.append((level, title, page, point if has_point else None))

    flip = _points_are_pdf_coordinates(doc, raw)
    entries: list[OutlineEntry] = []
    prev = (0, 0.0)
    for level, title, page, point in raw:
        if page is None:
            anchor = prev
        elif point is not None:
            anchor = (page, _point_y(doc[page], point, flip))
        else:
            start = prev[1] if page == prev[0] else 0.0
            found = _find_title(doc[page], title, start)
            anchor = (page, found if found is not None else start)
        anchor = max(anchor, prev)  # the outline is in document order; keep anchors monotone
        entries.append(OutlineEntry(level, title, anchor[0], anchor[1]))
        prev = anchor
    return entries


def _point_y(page: pymupdf.Page, point: pymupdf.Point, flip: bool) -> float:
    if flip:
        # PDF user space -> page space, honouring the crop box offset and rotation.
        y = (point * page.transformation_matrix).y
    else:
        y = point.y
    return min(max(y, 0.0), page.rect.height)


def _points_are_pdf_coordinates(doc: pymupdf.Document, raw: list) -> bool:
    """Vote over up to 40 entries: is the title printed just below y (flipped) or y (as is)?"""
    votes_flip = votes_keep = 0
    checked = 0
    for _, title, page, point in raw:
        if page is None or point is None or checked >= 40:
            continue
        p = doc[page]
        hits = _title_hits(p, title)
        if not hits:
            continue
        checked += 1
        flipped, kept = _point_y(p, point, True), _point_y(p, point, False)
        d_flip = min(abs(h - flipped) for h in hits)
        d_keep = min(abs(h - kept) for h in hits)
        if d_flip < d_keep:
            votes_flip += 1
        elif d_keep < d_flip:
            votes_keep += 1
    # PyMuPDF 1.2x/2.0 report PDF coordinates for named destinations: the default on no evidence.
    return votes_flip >= votes_keep


def _title_hits(page: pymupdf.Page, title: str) -> list[float]:
    words = title.split()
    for probe in (title, " ".join(words[1:]) if len(words) > 1 else "", " ".join(words[:4])):
        if len(probe) >= 3:
            rects = page.search_for(probe)
            if rects:
                return [r.y0 for r in rects]
    return []


def _find_title(page: pymupdf.Page, title: str, at_or_below: float) -> float | None:
    """Top of the first printed copy of the title at or below a height, a little above it."""
    hits = [y for y in _title_hits(page, title) if y >= at_or_below - 1]
    return max(min(hits) - 1.0, at_or_below) if hits else None
