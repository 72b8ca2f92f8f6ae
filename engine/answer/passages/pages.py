"""Where a passage is in the PDF: the pages of a stored PDF, read once per content hash and
runtime (``PageTexts``, ``page_texts``, ``pages_lookup``), and the page a sentence begins on
(``locate_page``; a ranked sentence's: ``grounding.sentence_pager``).

A sentence of a one-page section is on that page. For a section over several pages the PDF is
read (PyMuPDF) and the sentence's opening words are looked up, normalised (case, spacing,
punctuation), on the section's pages; without the file the page is None (unknown, never
guessed). The file is the library's stored copy (``Library.get_source``).
"""
from __future__ import annotations

import re
import threading
import unicodedata

_NORM = re.compile(r"[^0-9a-z]+")


def _norm(text: str) -> str:
    """Letters and digits only, lower case, ligatures unfolded (NFKC: "ﬁ" -> "fi")."""
    return _NORM.sub("", unicodedata.normalize("NFKC", text).lower())


class PageTexts:
    """Normalised text of every page of a PDF, read once per content hash (``get``), from the
    bytes a loader returns (the library's stored copy)."""

    def __init__(self):
        self._pages: dict[str, list[str] | None] = {}
        self._lock = threading.Lock()

    def get(self, sha256: str, load) -> list[str] | None:
        """The pages of the file with this hash; ``load()`` gives its bytes (None: unknown)."""
        with self._lock:
            if sha256 not in self._pages:
                import pymupdf

                data = load()
                if not data:
                    return None  # not cached: the file may be stored later
                with pymupdf.open(stream=data, filetype="pdf") as doc:
                    self._pages[sha256] = [_norm(page.get_text()) for page in doc]
            return self._pages[sha256]


def locate_page(sentence: str, start: int | None, end: int | None,
                pages: list[str] | None) -> int | None:
    """The 1-based page in [start, end] whose text holds the sentence's opening (or, when it
    runs over a page break, its close); None when unknown."""
    if start is None:
        return None
    if end is None or end <= start:
        return start
    if pages is None:
        return None
    key = _norm(sentence)
    probes = [key[:60], key[-60:], key[:30], key[-30:]]
    # A table row quoted under its header ("cell | cell", engine/document/builders/pdf_tables.py)
    # is not a run of the page's text: its cells are, the row's own (last line) first.
    cells = [c for line in reversed(sentence.splitlines()) for c in line.split(" | ")]
    probes += sorted((_norm(c) for c in cells if " | " in sentence), key=len, reverse=True)
    for probe in probes:
        if len(probe) < 12:
            continue
        for p in range(start, min(end, len(pages)) + 1):
            if probe in pages[p - 1]:
                return p
    if " | " in sentence:  # a table row whose cells the page's text runs differently: the
        return start       # table's section begins there (a multi-page section's row may be later)
    return None


def page_texts(rt) -> PageTexts:
    """The runtime's cache of PDF page texts (for the pages of evidence lines)."""
    if "page_texts" not in rt.cache:
        rt.cache["page_texts"] = PageTexts()
    return rt.cache["page_texts"]


def pages_lookup(rt):
    """``pages_of(item)``: the normalised page texts of ``item.doc_id``'s stored PDF (None when
    not a PDF or unknown), read once per content hash (``page_texts``)."""
    cache = page_texts(rt)
    shas: dict[int, str] = {}

    def pages_of(item):
        if item.doc_id is None:
            return None
        if item.doc_id not in shas:
            shas[item.doc_id] = rt.library.get_document(item.doc_id).sha256

        def stored() -> bytes | None:  # the file kept in the library with its document
            src = rt.library.get_source(item.doc_id)
            return src.data if src is not None and src.is_pdf else None

        return cache.get(shas[item.doc_id], stored)

    return pages_of
