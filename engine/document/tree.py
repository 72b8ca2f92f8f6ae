"""The semantic hierarchy tree of a document (H2MT 3.1).

One Tree type for every input kind: a networkx DiGraph whose nodes are integer ids carrying a
``Node`` record, edges parent -> child, children kept in document order by ``Node.order``
(``storage.tree``: the tree is the data the library stores, so it lives below the engine).
Builders (``engine/document/builders/``) only decide *where the headings are*; they all assemble the tree
through ``TreeAssembler``, and ``split_long_nodes`` (``split.py``) enforces the per-node token limit the same way
for every source.

Choices the paper leaves open:
- A node's local text x_v is its heading followed by its body (``Node.local_text``), so the
  heading words reach the node's memory; the token limit applies to that whole string.
- When a unit is too long, its body moves into children (paragraphs, then token chunks, H2MT 3.1)
  placed before its sub-headings, since that text precedes them in the document; the unit keeps
  only its heading as local text.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Protocol

import networkx as nx

# The tree as data is storage's (the library stores and returns it); named here as well.
from storage.tree import ROOT, Node, Tree, page_name, pages_name, preview

__all__ = ["ROOT", "SOURCES", "DocumentError", "Node", "TokenCounter", "Tree", "TreeAssembler",
           "clean_title", "page_name", "pages_name", "preview"]


# Which builder produced a tree (recorded with the document); "pages": one node per PDF page
# (the last PDF builder, before induction); "induced": the hierarchy was
# guessed by clustering (H2MT 4.3, ``induce.py``), the document had no headings.
SOURCES = ("outline", "fonts", "pages", "markdown", "html", "json", "text", "induced")


class TokenCounter(Protocol):
    """Anything that turns text into backbone token ids (a tokenizer's ``encode``-like call)."""

    def __call__(self, text: str) -> list[int]: ...


class DocumentError(ValueError):
    """A problem with the user's file (empty, unreadable, unsupported): shown to the user as is."""


class TreeAssembler:
    """Builds a Tree node by node in document order; the only way builders create trees."""

    def __init__(self, source: str, title: str, pages: int = 0, root_text: str = "",
                 root_ref: str | None = None):
        if source not in SOURCES:
            raise ValueError(f"unknown tree source {source!r}")
        self.graph = nx.DiGraph()
        self.source = source
        self.title = title
        self.pages = pages
        self._next = ROOT
        self.add(None, title=title, text=root_text, page_start=1 if pages else None,
                 page_end=pages or None, kind="root", ref=root_ref)

    def add(self, parent: int | None, *, title: str = "", text: str = "",
            page_start: int | None = None, page_end: int | None = None,
            ref: str | None = None, kind: str = "section") -> int:
        nid = self._next
        self._next += 1
        if parent is None:
            depth, order = 0, 0
        else:
            depth = self.graph.nodes[parent]["node"].depth + 1
            order = self.graph.out_degree(parent)
        node = Node(id=nid, parent=parent, order=order, depth=depth, title=clean_title(title),
                    text=text.strip(), page_start=page_start, page_end=page_end, ref=ref,
                    kind=kind)
        self.graph.add_node(nid, node=node)
        if parent is not None:
            self.graph.add_edge(parent, nid)
        return nid

    def set_text(self, node_id: int, text: str) -> None:
        n = self.graph.nodes[node_id]["node"]
        self.graph.nodes[node_id]["node"] = replace(n, text=text.strip())

    def set_pages(self, node_id: int, page_start: int | None, page_end: int | None) -> None:
        n = self.graph.nodes[node_id]["node"]
        self.graph.nodes[node_id]["node"] = replace(n, page_start=page_start, page_end=page_end)

    def node(self, node_id: int) -> Node:
        return self.graph.nodes[node_id]["node"]

    def finish(self) -> Tree:
        tree = Tree(self.graph, self.source, self.title, self.pages)
        tree.validate()
        return tree


TITLE_MAX_CHARS = 200


def clean_title(title: str) -> str:
    """One line, no control characters, at most TITLE_MAX_CHARS (headings can be huge or junk)."""
    t = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", title or "")
    t = " ".join(t.split())
    return t if len(t) <= TITLE_MAX_CHARS else t[: TITLE_MAX_CHARS - 1] + "…"
