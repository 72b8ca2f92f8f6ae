"""Questions that name a page ("what is on page 8", "p. iv", "PDF page 10").

A reader names the page printed on the paper; the PDF's page labels (``Tree.page_labels``) turn
that into the physical page, and a number no label carries is taken as the physical page. The
routed sections on a named page are selected first, ahead of the walk's own selection, so the
quote and the answer read that page. Hand-written: no library parses page references.
"""
from __future__ import annotations

import re
from typing import Mapping

_PAGE_REF = re.compile(r"\b(?:(pdf)\s+)?(?:page|p\.|pg\.?)\s*([0-9]{1,5}|[ivxlcdm]{1,8})\b",
                       re.IGNORECASE)


def page_references(text: str) -> tuple[tuple[bool, str], ...]:
    """The pages a question's text names, as written: (whether it says "PDF page", the number
    or roman numeral in lower case) each, in order (empty: none)."""
    return tuple((bool(m.group(1)), m.group(2).lower()) for m in _PAGE_REF.finditer(text))


def named_pages(refs: tuple[tuple[bool, str], ...], tree) -> set[int]:
    """Physical 1-based pages of ``tree`` that the page references ``refs``
    (``page_references``) name (empty: none)."""
    out: set[int] = set()
    labels = {label.lower(): i + 1 for i, label in reversed(list(enumerate(tree.page_labels)))
              if label}
    for pdf, ref in refs:
        if not pdf and ref in labels:
            out.add(labels[ref])
        elif ref.isdigit() and 1 <= int(ref) <= tree.pages:
            out.add(int(ref))
    return out


def pin_named_pages(route, routing, trees: Mapping[int, object],
                    refs: tuple[tuple[bool, str], ...]) -> list[int]:
    """Put the deepest routed nodes on a page the question names (its page references
    ``refs``) first in ``route.selected`` (in document order); the routed ids pinned."""
    if route is None or not refs:
        return []
    wanted = {}
    for doc_id, tree in trees.items():
        pages = named_pages(refs, tree)
        if pages:
            wanted[doc_id] = pages
    if not wanted:
        return []
    on_page = []
    for rid, (doc_id, _) in enumerate(routing.origin):
        start, end = routing.pages[rid]
        if doc_id not in wanted or start is None:
            continue
        if any(start <= p <= (end or start) for p in wanted[doc_id]):
            on_page.append(rid)
    # deepest only: a chapter spanning the page would bring every other page of the chapter
    covered = set(on_page)
    pinned = [rid for rid in on_page if not any(c in covered for c in routing.children[rid])]
    route.selected[:] = pinned + [rid for rid in route.selected if rid not in pinned]
    return pinned
