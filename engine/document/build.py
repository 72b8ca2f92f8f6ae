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
from engine.document.tree import DocumentError, TokenCounter, Tree


def build_tree(path: str | Path, encode: TokenCounter, decode: Callable[[list[int]], str],
               limit: int = 256, embed: Embed | None = None, *,
               check: Callable[[str], None] | None = None, max_nodes: int | None = None,
               ocr_languages: str = "eng",
               progress: Callable[[int, int], None] | None = None) -> Tree:
    """Build the semantic tree of one file, choosing the builder by content and extension.

    PDF: the outline when it has one, else headings from font statistics. Markdown, HTML, plain
    text, and the ORD-QA documentation JSON. A document where no heading was found (plain text,
    Markdown/HTML without headings, a PDF without outline or font levels) gets an induced
    hierarchy (source ``induced``); ``embed`` gives its chunk vectors (the sentence encoder's
    ``encode``; None: an LSA embedding). Scanned PDF pages are read by OCR in
    ``ocr_languages``, ``progress(done, total)`` after each page. Raises DocumentError for files
    users can get wrong. ``check(stage)``: called between steps, after each OCR'd page and for
    every piece of text tokenized (an ingest's deadline, engine/document/deadline.py);
    ``max_nodes``: a tree sure to have more nodes is refused as soon as that is known (before
    its text is tokenized or encoded).
    """
    path = Path(path)
    check = check or (lambda stage: None)

    def ocr_progress(done: int, total: int) -> None:
        check("reading scanned pages")
        if progress is not None:
            progress(done, total)

    raw = build_raw_tree(path, ocr_languages, ocr_progress)
    check("parsing")
    if max_nodes is not None and len(raw) > max_nodes and not is_unstructured(raw):
        raise DocumentError(f"{path.name} makes a tree of {len(raw)} nodes or more; the limit "
                            f"is {max_nodes} (split the document, or raise H2MT_MAX_NODES)")

    def count(text: str) -> int:
        check("chunking")
        return len(encode(text))

    if is_unstructured(raw):
        raw = induce_tree(raw, count, embed, chunk_tokens=min(CHUNK_TOKENS, limit), check=check,
                          max_chunks=max_nodes, name=path.name)
    split = split_long_nodes(raw, encode, decode, limit)
    check("splitting")
    tree = mark_evidence_hygiene(split)
    # The pages' printed labels and OCR marks belong to the file, not to a stage's nodes.
    return replace(tree, page_labels=raw.page_labels, ocr_pages=raw.ocr_pages,
                   text_layer_pdf=raw.text_layer_pdf)
