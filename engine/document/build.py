"""File -> semantic tree: the raw builder chosen by content, token-limit splitting, then evidence
hygiene (tables of contents and indexes marked, so routing and answers leave them out)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from engine.document.builders import build_raw_tree
from engine.document.hygiene import mark_evidence_hygiene
from engine.document.split import split_long_nodes
from engine.document.tree import TokenCounter, Tree


def build_tree(path: str | Path, encode: TokenCounter, decode: Callable[[list[int]], str],
               limit: int = 256) -> Tree:
    """Build the semantic tree of one file, choosing the builder by content and extension.

    PDF: the outline when it has one, else headings from font statistics. Markdown, HTML, plain
    text, and the ORD-QA documentation JSON. Raises DocumentError for files users can get wrong.
    """
    raw = build_raw_tree(Path(path))
    return mark_evidence_hygiene(split_long_nodes(raw, encode, decode, limit))
