"""File -> semantic tree: the raw builder chosen by content, a GMM-induced hierarchy when the
document has no headings at all (H2MT 4.3), token-limit splitting, then evidence hygiene (tables
of contents and indexes marked, so routing and answers leave them out)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from engine.document.builders import build_raw_tree
from engine.document.hygiene import mark_evidence_hygiene
from engine.document.induce import CHUNK_TOKENS, Embed, induce_tree, is_unstructured
from engine.document.split import split_long_nodes
from engine.document.tree import TokenCounter, Tree


def build_tree(path: str | Path, encode: TokenCounter, decode: Callable[[list[int]], str],
               limit: int = 256, embed: Embed | None = None, *, ocr_languages: str = "eng",
               progress: Callable[[int, int], None] | None = None) -> Tree:
    """Build the semantic tree of one file, choosing the builder by content and extension.

    PDF: the outline when it has one, else headings from font statistics. Markdown, HTML, plain
    text, and the ORD-QA documentation JSON. A document where no heading was found (plain text,
    Markdown/HTML without headings, a PDF without outline or font levels) gets an induced
    hierarchy (source ``induced``); ``embed`` gives its chunk vectors (the sentence encoder's
    ``encode``; None: an LSA embedding). Scanned PDF pages are read by OCR in
    ``ocr_languages``, ``progress(done, total)`` after each page. Raises DocumentError for files
    users can get wrong.
    """
    raw = build_raw_tree(Path(path), ocr_languages, progress)
    if is_unstructured(raw):
        raw = induce_tree(raw, lambda text: len(encode(text)), embed,
                          chunk_tokens=min(CHUNK_TOKENS, limit))
    tree = mark_evidence_hygiene(split_long_nodes(raw, encode, decode, limit))
    # The pages' printed labels and OCR marks belong to the file, not to a stage's nodes.
    return replace(tree, page_labels=raw.page_labels, ocr_pages=raw.ocr_pages,
                   text_layer_pdf=raw.text_layer_pdf)
