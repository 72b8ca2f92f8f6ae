"""Routing supervision (H2MT 3.4): a query's gold paths from the root to its gold nodes, gold
sets propagated to ancestors, and the evaluation's hit rule for a routed selection."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.document.tree import Tree
from engine.routing import hits
from engine.training.data import Query


@dataclass
class RoutingPairs:
    """Every (query, routed parent on a gold path) pair, padded: H2MT 3.4's gold paths with
    gold sets propagated to ancestors."""

    query: torch.Tensor  # [P] query row
    children: torch.Tensor  # [P, C] global node rows (0 at padding)
    mask: torch.Tensor  # [P, C] a child exists
    gold: torch.Tensor  # [P, C] the child is on a gold path (the gold set G(p))
    single: torch.Tensor  # [P] index of the gold child when G(p) has one element, else -1


def gold_sets(tree: Tree, gold: list[int]) -> dict[int, set[int]]:
    """parent -> its children that lie on a path from the root to a gold node."""
    out: dict[int, set[int]] = {}
    for g in gold:
        path = [n.id for n in tree.path(g)]
        for parent, child in zip(path, path[1:]):
            out.setdefault(parent, set()).add(child)
    return out


def routing_pairs(trees: dict[str, Tree], offsets: dict[str, int], queries: list[Query],
                  rows: list[int]) -> RoutingPairs:
    qs, kids, golds = [], [], []
    for r in rows:
        q = queries[r]
        tree = trees[q.doc]
        for parent, gset in gold_sets(tree, q.gold).items():
            ch = [c.id for c in tree.children(parent)]
            qs.append(r)
            kids.append([offsets[q.doc] + c for c in ch])
            golds.append([c in gset for c in ch])
    width = max(len(c) for c in kids)
    P = len(kids)
    children = torch.zeros(P, width, dtype=torch.long)
    mask = torch.zeros(P, width, dtype=torch.bool)
    gold = torch.zeros(P, width, dtype=torch.bool)
    for i, (c, g) in enumerate(zip(kids, golds)):
        children[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = True
        gold[i, : len(g)] = torch.tensor(g)
    n_gold = gold.sum(1)
    single = torch.where(n_gold == 1, gold.float().argmax(1), torch.full_like(n_gold, -1))
    return RoutingPairs(torch.tensor(qs), children, mask, gold, single)


def routing_hit(tree: Tree, selected: list[int], gold: list[int]) -> bool:
    """The evaluation's hit rule (engine.routing.hits) for one query whose gold items are nodes."""
    return hits.routing_hit(selected, hits.gold_regions(tree, [{g} for g in gold])).hit
