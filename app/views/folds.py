"""Tables of contents and indexes folded: each run of them is one row of the Library tab's outline
and one marker of the routing tree, saying what it holds ("Contents (pp. 1–8, 46 parts)").

``engine.document.hygiene`` marks the nodes of a printed table of contents or index (kind "toc" /
"index"); routing and answers leave them out. A manual's contents often fill many token-limit
pieces (why3's 48 "Front matter › part i of 48"), which a person had to scroll past to reach
chapter 1. This module only changes how they are shown: routing, evidence and the stored tree are
untouched.

A run (``contents_folds``) is a sequence of siblings, in document order, each of them a marked
node whose whole subtree is marked with the same kind; up to ``MAX_GAP`` untitled unmarked leaves
between two marked siblings belong to the run too (a stray "iii" page number, a contents piece the
line rules did not count), since a reader sees one block of contents there. A run is folded when
it stands for two nodes or more.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from app.views.hover import pages_label
from engine.document.tree import Tree
from engine.routing.evidence import NO_EVIDENCE_KINDS

FOLDED_KINDS = NO_EVIDENCE_KINDS  # "toc", "index"
KIND_NAMES = {"toc": "Contents", "index": "Index"}
MAX_GAP = 3  # untitled unmarked leaves a run may hold between two of its marked siblings
FOLD_MARK = "▸ "  # the outline row of a fold starts with it


@dataclass(frozen=True)
class Fold:
    """One folded run: ``members`` are sibling ids under ``parent`` (document order), ``ids``
    every node folded (the members and their subtrees, document order)."""
    kind: str
    parent: int
    members: tuple[int, ...]
    ids: tuple[int, ...]
    page_start: int | None
    page_end: int | None
    tokens: int = 0

    @property
    def first(self) -> int:
        return self.members[0]

    @property
    def title(self) -> str:
        """What the fold holds, in plain words: "Contents (pp. 3–9, 48 parts)"."""
        pages = pages_label(self.page_start, self.page_end)
        where = "" if pages == "—" else f"{pages}, "
        return f"{KIND_NAMES.get(self.kind, self.kind)} ({where}{len(self.ids)} parts)"


def _subtree(tree: Tree, node_id: int) -> list[int]:
    out, stack = [], [node_id]
    while stack:
        nid = stack.pop()
        out.append(nid)
        stack.extend(c.id for c in reversed(tree.children(nid)))
    return out


def contents_folds(tree: Tree) -> list[Fold]:
    """The folded runs of ``tree``'s contents and index nodes, in document order (rules: module
    docstring). A run inside a folded subtree is not folded again."""
    order = list(tree.preorder())
    # the kind of a node whose whole subtree is marked with one folded kind, else None
    whole: dict[int, str | None] = {}
    for n in reversed(order):
        kind = n.kind if n.kind in FOLDED_KINDS else None
        if kind is not None and all(whole.get(c.id) == kind for c in tree.children(n.id)):
            whole[n.id] = kind
        else:
            whole[n.id] = None
    folds: list[Fold] = []
    folded: set[int] = set()

    def close(parent: int, run: list[int], kind: str | None) -> None:
        if not run:
            return
        ids = [i for m in run for i in _subtree(tree, m)]
        if len(ids) < 2:
            return
        nodes = [tree.node(i) for i in ids]
        starts = [n.page_start for n in nodes if n.page_start is not None]
        ends = [n.page_end for n in nodes if n.page_end is not None]
        folds.append(Fold(kind, parent, tuple(run), tuple(ids), min(starts, default=None),
                          max(ends, default=None), sum(n.tokens for n in nodes)))
        folded.update(ids)

    for parent in order:
        if parent.id in folded:
            continue
        run: list[int] = []
        gap: list[int] = []
        kind: str | None = None
        for c in tree.children(parent.id):
            k = whole[c.id]
            if k is not None and k == kind:
                run += gap + [c.id]
                gap = []
            elif k is not None:  # a new run (the first, or another kind)
                close(parent.id, run, kind)
                run, gap, kind = [c.id], [], k
            elif (run and not c.title.strip() and not tree.children(c.id)
                  and len(gap) < MAX_GAP):
                gap.append(c.id)
            else:
                close(parent.id, run, kind)
                run, gap, kind = [], [], None
        close(parent.id, run, kind)
    position = {n.id: i for i, n in enumerate(order)}
    return sorted(folds, key=lambda f: position[f.first])


def fold_text(tree: Tree, fold: Fold) -> str:
    """The folded nodes' text, one after another (what selecting the fold's row shows)."""
    return "\n\n".join(t for t in (tree.node(i).local_text.strip() for i in fold.ids) if t)


def route_folds(route, trees: Mapping[int, Tree]) -> list[Fold]:
    """The folds of the routed documents in ``route``'s ids (one document: its node ids; the
    whole library: offset under the virtual root). ``trees``: doc_id -> Tree; a document
    missing there (deleted since) has no folds."""
    rid = {(n.doc_id, n.node_id): n.id for n in route.nodes}
    out = []
    for doc_id, tree in trees.items():
        for f in contents_folds(tree):
            try:
                members = tuple(rid[(doc_id, m)] for m in f.members)
                ids = tuple(rid[(doc_id, i)] for i in f.ids)
                parent = rid[(doc_id, f.parent)]
            except KeyError:  # the route is of another version of the tree
                continue
            out.append(Fold(f.kind, parent, members, ids, f.page_start, f.page_end, f.tokens))
    return out
