"""Tidy top-down layout of an ordered tree: "leaf order x, depth y".

Written by hand because the usual tools do not fit: networkx only offers force-directed and
shell-style layouts (its tree layouts need graphviz/pygraphviz, a system package a Hugging Face
Space or this project does not ship), and a force layout neither keeps siblings in document
order nor puts each depth on its own row. The layout below is the simple member of the
Reingold-Tilford family: leaves get consecutive x positions in document (pre-)order, every
parent sits midway between its first and last child, y is the depth. Subtrees never overlap,
sibling order is kept, and it is O(n) and iterative (no recursion limit on deep trees).
"""
from __future__ import annotations

from typing import Mapping, Sequence


def tidy_layout(children: Mapping[int, Sequence[int]], root: int = 0,
                leaf_gap: float = 1.0) -> dict[int, tuple[float, float]]:
    """Positions {id: (x, y)} with y = -depth; ``children`` lists each node's children in order.

    Nodes missing from ``children`` are leaves. Only nodes reachable from ``root`` are placed.
    """
    pos: dict[int, tuple[float, float]] = {}
    next_x = 0.0
    # iterative post-order: (node, depth, children-done flag)
    stack: list[tuple[int, int, bool]] = [(root, 0, False)]
    while stack:
        nid, depth, done = stack.pop()
        kids = children.get(nid) or ()
        if not kids:
            pos[nid] = (next_x, -float(depth))
            next_x += leaf_gap
            continue
        if done:
            xs = (pos[kids[0]][0], pos[kids[-1]][0])
            pos[nid] = ((xs[0] + xs[1]) / 2.0, -float(depth))
            continue
        stack.append((nid, depth, True))
        for c in reversed(kids):  # leftmost child popped first
            stack.append((c, depth + 1, False))
    return pos
