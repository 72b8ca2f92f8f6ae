"""Front and back matter by shape: title and copyright pages, command summaries, glossaries and
pages of single words, whatever their headings say.

A manual's outline does not name these parts reliably (a 90-page command summary at the back is
an ordinary chapter in the tree; the title page is the text before the first outline entry), so
``matter_kind`` reads the shape of a node's text (tables of contents and indexes are
``engine.document.hygiene``'s):

- ``TITLE_PAGE``: a short text (at most ``TITLE_WORDS`` words, its heading aside) on the
  manual's first ``TITLE_PAGES`` pages (or its first 3 %) that reads as a title block (at least
  ``SHORT_SHARE`` of its lines are short lines without a sentence's end or code punctuation, at most
  ``TITLE_SENTENCES`` lines end a sentence), or that carries a
  copyright or licence mark (a copyright page is prose, but its mark gives it away);
- ``LISTING``: at least ``LIST_MIN_LINES`` lines of which at least ``SINGLE_SHARE`` are a single
  word (a page of single words), or at least ``ENTRY_SHARE`` are one-line entries (at most
  ``ENTRY_WORDS`` words, no sentence end) whose first words run alphabetically (at least
  ``ALPHA_SHARE`` of consecutive pairs in order): a command summary or a glossary's term list.

These nodes stay in the tree, the routing and the flat passage index; they are left out of the
quote and the reader's context unless the question asks for them (``asks_for_matter``).
Hand-written: no library classifies the pages of a manual by their layout.
"""
from __future__ import annotations

import re

TITLE_PAGE = "titlepage"
LISTING = "listing"

TITLE_PAGES = 4
TITLE_WORDS = 220
SHORT_SHARE = 0.6
TITLE_SENTENCES = 2
LIST_MIN_LINES = 30
SINGLE_SHARE = 0.7
ENTRY_WORDS = 6
ENTRY_SHARE = 0.85
ALPHA_SHARE = 0.85

_SENTENCE_END = re.compile(r"[.!?:;]['\")]?$")
_COPYRIGHT = re.compile(r"©|\(c\)\s*\d{4}|\bcopyright\b|\bISBN\b|\bpermission is granted\b"
                        r"|\blicen[cs]ed?\b", re.I)
_CODE = re.compile(r"[=|(){}<>;\\\[\]]")  # a grammar or code line is no title line
_KEY = re.compile(r"[^\W\d_]+")
# A question that asks for the front or back matter itself.
_ASKS = re.compile(r"\b(table of contents|contents|index|glossary|summary|copyright|licen[cs]e|"
                   r"authors?|title page|edition|version of (the|this) (manual|document))\b", re.I)


def matter_kind(text: str, page_start: int | None, pages: int | None,
                title: str = "") -> str | None:
    """``TITLE_PAGE``, ``LISTING`` or None for a node's text (module docstring); ``title``: the
    node's heading, which its text may open with (a heading alone is no title page)."""
    lines = [" ".join(ln.split()) for ln in (text or "").splitlines() if ln.strip()]
    head = " ".join((title or "").split())
    if lines and head and lines[0].endswith(head):
        lines = lines[1:]
    if not lines:
        return None
    words = sum(len(ln.split()) for ln in lines)
    early = TITLE_PAGES if not pages else max(TITLE_PAGES, int(0.03 * pages))
    if page_start is not None and page_start <= early and words <= TITLE_WORDS:
        ends = sum(bool(_SENTENCE_END.search(ln)) for ln in lines)
        short = sum(len(ln.split()) <= ENTRY_WORDS and not _SENTENCE_END.search(ln)
                    and not _CODE.search(ln) for ln in lines)
        if (short >= SHORT_SHARE * len(lines) and ends <= TITLE_SENTENCES) or _COPYRIGHT.search(text):
            return TITLE_PAGE
    if len(lines) < LIST_MIN_LINES:
        return None
    if sum(len(ln.split()) == 1 for ln in lines) >= SINGLE_SHARE * len(lines):
        return LISTING
    entries = [ln for ln in lines
               if len(ln.split()) <= ENTRY_WORDS and not _SENTENCE_END.search(ln)]
    if len(entries) < ENTRY_SHARE * len(lines):
        return None
    keys = [m.group(0).lower() for ln in entries if (m := _KEY.search(ln))]
    if len(keys) < LIST_MIN_LINES:
        return None
    in_order = sum(a <= b for a, b in zip(keys, keys[1:])) / (len(keys) - 1)
    return LISTING if in_order >= ALPHA_SHARE else None


def asks_for_matter(question: str) -> bool:
    """Whether a question asks for the front or back matter itself (its contents, index,
    glossary, summary, copyright, authors)."""
    return bool(_ASKS.search(question or ""))
