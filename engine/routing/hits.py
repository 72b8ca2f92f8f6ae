"""The routing hit rule (../shared/bench/README.md): a gold item is reached when some selected
node is the gold node or lies inside its subtree. One definition for training's validation
(engine/train.py) and the evaluation harness (bench/)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from engine.document.tree import Tree


def gold_regions(tree: Tree, gold: list[set[int]]) -> list[set[int]]:
    """Each gold item's region: the union of its nodes' subtrees."""
    regions = []
    for ids in gold:
        region: set[int] = set()
        for i in ids:
            region |= tree.subtree_ids(i)
        regions.append(region)
    return regions


@dataclass
class HitResult:
    hit: bool  # some gold item reached
    full: bool  # every gold item reached
    coverage: float  # fraction of gold items reached
    reached: list[bool]


def routing_hit(selected: Iterable[int], regions: list[set[int]]) -> HitResult:
    """Hit/coverage of selected node ids against gold regions (see gold_regions)."""
    sel = set(selected)
    reached = [bool(sel & r) for r in regions]
    if not reached:
        return HitResult(False, False, 0.0, [])
    return HitResult(any(reached), all(reached), sum(reached) / len(reached), reached)
