"""The document tree as data (H2MT 3.1): ``Node`` records in a networkx DiGraph, edges parent ->
child, children kept in document order by ``Node.order``, with read-only navigation.

It is what the library stores and returns (``Library.add_document``, ``Library.get_tree``), so it
lives here, below the engine: storage imports nothing from ``engine``. The engine builds trees
(``engine.document``: builders, ``TreeAssembler``, the token-limit split) and re-exports ``Node``
and ``Tree`` from ``engine.document.tree``, where the rest of the code imports them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import networkx as nx

ROOT = 0


@dataclass(frozen=True)
class Node:
    id: int
    parent: int | None  # None only for the root
    order: int  # position among its siblings, 0-based, document order
    depth: int  # root = 0
    title: str
    text: str  # the node's own body text (not its descendants')
    page_start: int | None = None  # 1-based physical pages, inclusive; None for non-paged sources
    page_end: int | None = None
    tokens: int = 0  # backbone tokens of local_text
    ref: str | None = None  # external id where the source has one (ORD-QA chunk id)
    kind: str = "section"  # root | front | section | paragraph | chunk | cluster (induced)

    @property
    def local_text(self) -> str:
        """x_v of H2MT 3.2: heading then body; what the memory writer reads."""
        if self.title and self.text:
            return f"{self.title}\n{self.text}"
        return self.title or self.text


@dataclass
class Tree:
    """A rooted, ordered tree of ``Node`` records over a networkx DiGraph."""

    graph: nx.DiGraph
    source: str  # one of SOURCES
    title: str = ""
    pages: int = 0
    # The printed page label of each physical page (index 0 = page 1; "" where the PDF defines
    # none, empty when it defines none at all: ``pymupdf.Page.get_label``) and the 1-based pages
    # whose text was read by OCR.
    page_labels: tuple[str, ...] = ()
    ocr_pages: frozenset[int] = frozenset()
    # The PDF with the OCR'd text written in as an invisible layer (what the library keeps as
    # the document's file, so its pages can be searched and highlighted); None: the file as is.
    text_layer_pdf: bytes | None = field(default=None, repr=False, compare=False)

    # -- access ---------------------------------------------------------------------------
    def node(self, node_id: int) -> Node:
        return self.graph.nodes[node_id]["node"]

    @property
    def root(self) -> Node:
        return self.node(ROOT)

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def children(self, node_id: int) -> list[Node]:
        kids = [self.node(c) for c in self.graph.successors(node_id)]
        return sorted(kids, key=lambda n: n.order)

    def parent(self, node_id: int) -> Node | None:
        p = self.node(node_id).parent
        return None if p is None else self.node(p)

    def is_leaf(self, node_id: int) -> bool:
        return self.graph.out_degree(node_id) == 0

    def preorder(self) -> Iterator[Node]:
        """Nodes in document order (parent before children, siblings by order)."""
        stack = [ROOT]
        while stack:
            nid = stack.pop()
            yield self.node(nid)
            stack.extend(c.id for c in reversed(self.children(nid)))

    def leaves(self) -> list[Node]:
        return [n for n in self.preorder() if self.is_leaf(n.id)]

    @property
    def depth(self) -> int:
        return max(n.depth for n in self.preorder())

    def heights(self) -> dict[int, int]:
        """Height of every node (leaves 0): nodes of equal height can be written together."""
        height: dict[int, int] = {}
        for nid in reversed(list(nx.topological_sort(self.graph))):
            kids = list(self.graph.successors(nid))
            height[nid] = 0 if not kids else 1 + max(height[c] for c in kids)
        return height

    def levels_bottom_up(self) -> list[list[Node]]:
        """Nodes grouped by height, leaves first: a valid post-order schedule (H2MT 3.2)."""
        h = self.heights()
        levels: list[list[Node]] = [[] for _ in range(max(h.values()) + 1)]
        for n in self.preorder():
            levels[h[n.id]].append(n)
        return levels

    def path(self, node_id: int) -> list[Node]:
        """Root ... node."""
        out = []
        cur: int | None = node_id
        while cur is not None:
            n = self.node(cur)
            out.append(n)
            cur = n.parent
        return out[::-1]

    def labels(self) -> dict[int, str]:
        """What a reader calls each node: its title; an untitled node (a paragraph, a piece of
        a token-limit split) is "<nearest titled ancestor> › part i of n", i counting its
        untitled siblings ("› text" when it is the only one), so no sentence fragment of a body ever reads as a heading."""
        out: dict[int, str] = {}
        stack: list[tuple[int, str]] = [(ROOT, "")]  # (node, nearest titled ancestor's title)
        while stack:
            nid, above = stack.pop()
            node = self.node(nid)
            own = node.title.strip()
            if nid == ROOT and not own:
                out[nid] = self.title or preview(node.text) or "(untitled)"
            elif own:
                out[nid] = node.title
            heading = own or above
            kids = self.children(nid)
            untitled = [k.id for k in kids if not k.title.strip()]
            for i, kid in enumerate(untitled, 1):
                part = f"part {i} of {len(untitled)}" if len(untitled) > 1 else "text"
                out[kid] = f"{heading} › {part}" if heading else part
            stack.extend((k.id, heading) for k in reversed(kids))
        return out

    def label(self, node_id: int) -> str:
        """``labels()`` of one node (a titled node's title at once; else one pass)."""
        node = self.node(node_id)
        return node.title if node.title.strip() and node.parent is not None else self.labels()[node_id]

    def page_label(self, page: int | None) -> str | None:
        """The printed label of a 1-based physical page (None: the PDF gives it none)."""
        if page is None or not 1 <= page <= len(self.page_labels):
            return None
        return self.page_labels[page - 1] or None

    def page_name(self, page: int | None) -> str:
        """How a page is shown: "p. 8 (PDF page 10)" where the printed label differs from the
        physical number, else "p. 10" (``page_name``)."""
        return page_name(page, self.page_label(page))

    def pages_name(self, start: int | None, end: int | None) -> str:
        """A page range as shown ("pp. 8–9 (PDF pages 10–11)"); "—" without pages."""
        return pages_name(start, end, self.page_label(start), self.page_label(end))

    def is_ocr(self, node: Node) -> bool:
        """Whether any page of the node was read by OCR."""
        if node.page_start is None or not self.ocr_pages:
            return False
        return any(p in self.ocr_pages for p in range(node.page_start, (node.page_end or node.page_start) + 1))

    def subtree_ids(self, node_id: int) -> set[int]:
        return {node_id} | nx.descendants(self.graph, node_id)

    def outline(self, max_depth: int | None = None) -> str:
        """Indented outline, one node a line, for the CLI and quick inspection."""
        labels = self.labels()
        lines = []
        for n in self.preorder():
            if max_depth is not None and n.depth > max_depth:
                continue
            pages = f"  {self.pages_name(n.page_start, n.page_end)}" if n.page_start else ""
            label = labels[n.id]
            ref = f"  [{n.ref}]" if n.ref else ""
            lines.append(f"{'  ' * n.depth}{n.id:>5} {label}{pages}  ({n.tokens} tok){ref}")
        return "\n".join(lines)

    def validate(self) -> None:
        """Programming-error checks: a single rooted tree with consistent records."""
        g = self.graph
        assert g.has_node(ROOT) and self.node(ROOT).parent is None
        assert nx.is_arborescence(g), "tree graph is not an arborescence"
        for nid in g.nodes:
            n = self.node(nid)
            assert n.id == nid
            if nid != ROOT:
                assert n.parent is not None and g.has_edge(n.parent, nid)
                assert n.depth == self.node(n.parent).depth + 1
            orders = [c.order for c in self.children(nid)]
            assert orders == list(range(len(orders))), f"child orders of {nid}: {orders}"


def preview(text: str, n: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def page_name(page: int | None, label: str | None = None) -> str:
    """A physical 1-based page as shown: its printed label first where it has one that differs
    ("p. 8 (PDF page 10)"), else the physical number ("p. 10"); "—" without a page."""
    if page is None:
        return "—"
    if label and label != str(page):
        return f"p. {label} (PDF page {page})"
    return f"p. {page}"


def pages_name(start: int | None, end: int | None, start_label: str | None = None,
               end_label: str | None = None) -> str:
    """A physical page range as shown, printed labels first ("pp. 8–9 (PDF pages 10–11)")."""
    if start is None:
        return "—"
    if end in (None, start):
        return page_name(start, start_label)
    physical = f"{start}–{end}"
    if (start_label or end_label) and (start_label, end_label) != (str(start), str(end)):
        return f"pp. {start_label or start}–{end_label or end} (PDF pages {physical})"
    return f"pp. {physical}"
