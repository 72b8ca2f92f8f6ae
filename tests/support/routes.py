"""A routed tree built by hand for the figure and table tests (``make_route``), and the one
they share (``PARENTS``, ``STATUS``)."""
from __future__ import annotations

import torch

from engine.routing.router import Route, RoutingTree, Walked, WalkLimits


def make_route(parents: list[int | None], status: dict[int, str], titles: dict[int, str] | None = None,
               k: int = 2) -> Route:
    depth = []
    for p in parents:
        depth.append(0 if p is None else depth[p] + 1)
    n = len(parents)
    tree = RoutingTree(parent=list(parents),
                       children=[[c for c in range(n) if parents[c] == i] for i in range(n)],
                       depth=depth, title=[(titles or {}).get(i, f"Section {i}") for i in range(n)],
                       pages=[(i + 1, i + 2) for i in range(n)], origin=[(1, i) for i in range(n)],
                       memories=torch.zeros(n, 4))
    scored = [i for i in range(n) if status.get(i) in ("selected", "pruned")]
    selected = [i for i in scored if status[i] == "selected"]
    return Route(tree, Walked({i: 0.1 * i for i in scored}, {i: 0.5 for i in scored},
                              {i: i for i in scored}, selected, "leaves"), WalkLimits(k=k))


# root 0 -> 1, 2, 3 ; 1 -> 4, 5 ; 2 -> 6, 7 ; 3 -> 8 ; 4 -> 9, 10 ; 6 -> 11 ; 8 -> 12 -> 13
PARENTS = [None, 0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 6, 8, 12]
# level 1 scored: 1, 2 selected, 3 pruned; level 2: 4 selected, 5 pruned (children of 1),
# 6 selected, 7 pruned (children of 2); depth cap stops there: 9, 10, 11 unvisited below
# selected nodes; 8, 12, 13 unvisited below the pruned 3.
STATUS = {0: "root", 1: "selected", 2: "selected", 3: "pruned", 4: "selected", 5: "pruned",
          6: "selected", 7: "pruned"}
