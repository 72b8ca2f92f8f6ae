"""Where a route lost its gold (bench.routers.gold_loss) and the per-depth table of bench.qa."""
from __future__ import annotations

import pytest

from bench.qa import loss_table
from bench.routers import gold_loss, parse_router
from engine.routing.router import Route, RoutingTree, WalkLimits, walk

# root 0 -> 1, 2 ; 1 -> 3, 4 ; 2 -> 5 ; 5 -> 6
PARENTS = [None, 0, 0, 1, 1, 2, 5]


def _route(scores: list[float], k: int = 1) -> Route:
    n = len(PARENTS)
    depth = []
    for p in PARENTS:
        depth.append(0 if p is None else depth[p] + 1)
    tree = RoutingTree(parent=PARENTS, children=[[c for c in range(n) if PARENTS[c] == i]
                                                 for i in range(n)], depth=depth,
                       title=[str(i) for i in range(n)], pages=[(None, None)] * n,
                       origin=[(7, i) for i in range(n)], memories=None)
    limits = WalkLimits(k=k)
    return Route(tree, walk(tree, lambda kids: [scores[c] for c in kids], limits), limits)


def test_gold_loss_names_the_depth_of_the_pruned_ancestor():
    r = _route([0, 0.9, 0.1, 0.5, 0.2, 0.3, 0.3])  # k=1: 1 then 3 selected
    assert r.selected == [1, 3]
    assert gold_loss(r, [{3}]) == (None, None)  # reached
    assert gold_loss(r, [{6}]) == (1, "pruned")  # its chapter 2 lost at the first level
    assert gold_loss(r, [{4}]) == (2, "pruned")
    # two gold items: the one that got deepest counts
    assert gold_loss(r, [{6}, {4}]) == (2, "pruned")
    # a region (the gold node's subtree) is reached by any node inside it
    assert gold_loss(r, [{2, 5, 6}]) == (1, "pruned")


def test_loss_table_counts_questions_per_depth():
    rows = [{"set": "s", "mode": "route[fused]", "lost_depth": d, "lost_as": a, "walk_ms": 1.0}
            for d, a in ((None, None), (1, "pruned"), (2, "pruned"), (2, "unvisited"))]
    rows.append({"set": "s", "mode": "flat-rrf"})
    table = loss_table(rows, "s").splitlines()
    assert "lost at depth 1 | lost at depth 2" in table[0]
    assert table[2] == "| route[fused] | 4 | 3 (1 never scored) | 1 | 2 | 1.00 |"


def test_router_specs():
    assert parse_router("fused") == ("fused", None)
    assert parse_router("fused/topk") == ("fused", "topk")
    for bad in ("fuzed", "fused/beam"):
        with pytest.raises(ValueError, match="unknown router"):
            parse_router(bad)
