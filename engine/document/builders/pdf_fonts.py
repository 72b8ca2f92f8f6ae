"""Tree of a PDF without an outline: headings found from font size and weight statistics.

H2MT 3.1 needs a section tree; when the PDF has no bookmarks we rebuild it from typography:
- body size = the most common font size by character count;
- a heading line is bold and clearly larger than the body (>= HEADING_SIZE_RATIO x body); bold
  at body size is *not* taken (run-in paragraph heads and keywords would flood the tree);
- heading levels = the distinct heading sizes, largest first;
- adjacent lines of one heading style are one heading, joined with a space ("3.2" + "Pointers");
- the largest style seen only on the first page is the document title (the root's title);
- no heading at all: one untitled paragraph node per page, so that ``build_tree`` induces a
  hierarchy (H2MT 4.3) with page numbers on every chunk.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import pymupdf

from engine.document.builders.pdf_pages import (TextLine, drop_running_lines, join_lines,
                                                read_lines, require_text_layer)
from engine.document.tree import Tree, TreeAssembler

# 1.1: LaTeX \large (12 pt) over an 11 pt body is a subsection (camlidl); 10.9 pt bold keywords
# over a 10 pt body are not (pseudo).
HEADING_SIZE_RATIO = 1.1
HEADING_MAX_CHARS = 150  # a longer "heading" is a bold paragraph
FRONT_TITLE = "Front matter"


@dataclass(frozen=True)
class Heading:
    size: float
    title: str
    page: int  # 0-based
    first_line: int  # index into the flat line list
    last_line: int  # inclusive


def build_fonts_tree(doc: pymupdf.Document, path: Path, fallback_title: str) -> Tree:
    """Headings from typography, nested by size; each heading's text runs to the next heading."""
    pages = read_lines(doc)
    require_text_layer(pages, path.name)
    lines = [ln for page in drop_running_lines(doc, pages) for ln in page]

    body = body_size(lines)
    title_idx = _title_lines(lines, body)
    title = " ".join(lines[i].text for i in title_idx) or fallback_title
    headings = find_headings(lines, body, skip=set(title_idx))
    level_of = {size: i + 1 for i, size in enumerate(sorted({h.size for h in headings}, reverse=True))}

    asm = TreeAssembler("fonts", title, doc.page_count)
    if not headings:  # no typographic levels: one paragraph node per page (build.py induces)
        body = [ln for i, ln in enumerate(lines) if i not in title_idx]
        for page, on_page in groupby(body, key=lambda ln: ln.page):
            asm.add(0, text=join_lines(list(on_page)), page_start=page + 1, page_end=page + 1,
                    kind="paragraph")
        return asm.finish()
    first = headings[0].first_line if headings else len(lines)
    front = [ln for i, ln in enumerate(lines[:first]) if i not in title_idx]
    if front:
        asm.add(0, title=FRONT_TITLE, text=join_lines(front), page_start=front[0].page + 1,
                page_end=front[-1].page + 1, kind="front")
    stack: list[tuple[int, int]] = [(0, 0)]  # (level, node id)
    for k, h in enumerate(headings):
        end = headings[k + 1].first_line if k + 1 < len(headings) else len(lines)
        body_lines = [ln for i, ln in enumerate(lines[h.last_line + 1:end], h.last_line + 1)
                      if i not in title_idx]
        level = level_of[h.size]
        while stack[-1][0] >= level:
            stack.pop()
        page_end = max([h.page] + [ln.page for ln in body_lines]) + 1
        nid = asm.add(stack[-1][1], title=h.title, text=join_lines(body_lines),
                      page_start=h.page + 1, page_end=page_end)
        stack.append((level, nid))
    return asm.finish()


def body_size(lines: list[TextLine]) -> float:
    """The most common font size, weighted by characters."""
    chars: Counter[float] = Counter()
    for ln in lines:
        chars[ln.size] += ln.chars
    return chars.most_common(1)[0][0]


def _title_lines(lines: list[TextLine], body: float) -> list[int]:
    """Indices of the document title: the largest size on page 1, if that size occurs only there."""
    first_page = [i for i, ln in enumerate(lines) if ln.page == lines[0].page]
    if not first_page:
        return []
    top = max(lines[i].size for i in first_page)
    if top < body * HEADING_SIZE_RATIO:
        return []
    if any(ln.size == top for ln in lines if ln.page != lines[0].page):
        return []
    return [i for i in first_page if lines[i].size == top]


def _is_heading_line(ln: TextLine, body: float) -> bool:
    return (ln.bold and ln.size >= body * HEADING_SIZE_RATIO - 0.01 and len(ln.text) <= HEADING_MAX_CHARS
            and re.search(r"\w", ln.text) is not None)


def _continues(prev: TextLine, ln: TextLine) -> bool:
    """Same heading: same page and style, on the same baseline or the next line down."""
    return (ln.page == prev.page and ln.size == prev.size and ln.bold == prev.bold
            and -1.0 <= ln.y0 - prev.y0 <= 2.0 * ln.size)


def find_headings(lines: list[TextLine], body: float, skip: set[int]) -> list[Heading]:
    """Runs of adjacent heading-style lines, each run joined into one heading title."""
    out: list[Heading] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if i in skip or not _is_heading_line(ln, body):
            i += 1
            continue
        j = i
        while (j + 1 < len(lines) and j + 1 not in skip and _is_heading_line(lines[j + 1], body)
               and _continues(lines[j], lines[j + 1])):
            j += 1
        title = " ".join(" ".join(lines[k].text for k in range(i, j + 1)).split())
        out.append(Heading(ln.size, title, ln.page, i, j))
        i = j + 1
    return out
