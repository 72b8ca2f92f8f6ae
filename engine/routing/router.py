"""Top-down routing over a document tree with per-parent top-k pruning (H2MT 3.3).

The query vector q is ``routing.query``'s, the routed structure ``routing.routing_tree``'s, the
trace ``routing.trace``'s (all three re-exported here, where the rest of the code imports them).
Score (3.3):

    s(u | q) = (W_q q)^T (W_k m_u) / sqrt(d_h)

Choices the paper leaves open (said here and in the note):
- Both q and every m_u are centred on the mean memory of the routed tree and L2-normalised
  before W_q/W_k. Final hidden states share a large common component (they collapse onto a few
  "hub" nodes otherwise: DESIGN's measurement); removing it is the cheap first fix. The centre
  is a property of the routed memories, computed at routing time, not a learned parameter.
- Untrained W_q = W_k = one random orthonormal projection d -> d_h (scaled by sqrt(d_h)), so the
  untrained score is a (Johnson-Lindenstrauss) estimate of the cosine of the centred vectors.
- Per-parent top-k from the root, level by level; the candidate set of the next depth is the
  union of the winners. A node budget caps the number of selected nodes: when a level's
  winners would exceed it, the best-scoring winners of that level are kept (across parents)
  and the rest count as pruned. The probability shown is softmax(s / temperature) within each
  parent.
- The library-wide route uses a virtual root over the manuals' roots (as H2MT does for LVS).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Callable, Sequence

import numpy as np
import torch

from engine.memory.projections import RouterProjections, normalise
from engine.routing.query import query_ids, query_vector, query_vectors
from engine.routing.routing_tree import RoutingTree
from engine.routing.trace import (PRUNED, ROOT_STATUS, SELECTED, UNVISITED, Found, LazySelections,
                                  Route, RouteNode, Walked, WalkLimits)

__all__ = ["PRUNED", "ROOT_STATUS", "SELECTED", "UNVISITED", "Found", "LazySelections",
           "LevelValues", "Route", "RouteNode", "RoutingTree", "WalkLimits", "Walked",
           "query_ids", "query_vector", "query_vectors", "route", "walk"]


class LevelValues(Mapping):
    """routed id -> value, filled by the walk one level at a time as arrays; made a dict on the
    first lookup (the trace's), so a walk over thousands of children builds none."""

    def __init__(self):
        self._ids: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._n = 0
        self._dict: dict | None = None

    def add(self, ids: np.ndarray, values: np.ndarray) -> None:
        self._ids.append(ids)
        self._values.append(values)
        self._n += len(ids)
        self._dict = None

    def _as_dict(self) -> dict:
        if self._dict is None:
            self._dict = {}
            for ids, values in zip(self._ids, self._values):
                self._dict.update(zip(ids.tolist(), values.tolist()))
        return self._dict

    def __getitem__(self, key):
        return self._as_dict()[key]

    def __contains__(self, key) -> bool:
        return key in self._as_dict()

    def __iter__(self):
        return iter(self._as_dict())

    def __len__(self) -> int:
        return self._n




def walk(tree: RoutingTree, score_level: Callable[[np.ndarray], "Sequence[float]"],
         limits: WalkLimits = WalkLimits(), keep: set[int] | frozenset[int] = frozenset()):
    """Per-parent top-k from the root (H2MT 3.3): S_0 = {r}, S_{l+1} = U_p TopK(C(p)).

    ``score_level(kids)`` scores the children of one level's parents (an int64 array of routed
    ids, parent by parent, each parent's children in order; one call per level, so a lazy
    scorer touches only the explored part). A child in ``keep`` is a winner beyond the top k
    (the rescue walk of ``routing.fused``: ancestors of the best nodes scored flat); empty
    ``keep`` is the paper's walk. Ties go to the earlier child. Each level is one set of array
    operations (segment softmax, one lexsort for every parent's ranking), not a loop over its
    parents: a big library's walk scores thousands of children. Returns ``Walked``: (scores,
    probs, visits, selected, stop reason)."""
    k, max_depth, budget = limits.k, limits.max_depth, limits.budget
    temperature = limits.temperature
    if k < 1:
        raise ValueError("k must be at least 1")
    if budget is not None and budget < 1:
        raise ValueError("the node budget must be at least 1")
    ptr, flat = tree.child_index
    keep_mask = None
    if keep:
        keep_mask = np.zeros(len(tree), dtype=bool)
        keep_mask[np.fromiter(keep, dtype=np.int64, count=len(keep))] = True
    scores, probs, visits = LevelValues(), LevelValues(), LevelValues()
    selected: list[int] = []
    frontier = np.zeros(1, dtype=np.int64)
    stop = "leaves"
    while len(frontier):
        depth_next = tree.depth[int(frontier[0])] + 1
        if max_depth is not None and depth_next > max_depth:
            stop = "depth cap"
            break
        lens = ptr[frontier + 1] - ptr[frontier]
        parents, lens = frontier[lens > 0], lens[lens > 0]
        if not len(parents):
            break
        starts = np.cumsum(lens) - lens  # each parent's first position in ``kids``
        seg = np.repeat(np.arange(len(parents)), lens)
        pos = np.arange(int(lens.sum()))
        kids = flat[ptr[parents][seg] + pos - starts[seg]]
        sc = np.asarray(score_level(kids), dtype=np.float64)
        e = np.exp((sc - np.maximum.reduceat(sc, starts)[seg]) / temperature)
        pr = e / np.add.reduceat(e, starts)[seg]
        order = np.lexsort((pos, -sc, seg))  # parent by parent, best first, ties in order
        rank = np.empty_like(pos)
        rank[order] = pos - starts[seg[order]]
        won = rank < k
        if keep_mask is not None:
            won |= keep_mask[kids]
        win = order[won[order]]  # positions of the winners, parent by parent, best first
        visits.add(kids, np.arange(len(visits), len(visits) + len(kids)))
        probs.add(kids, pr)
        scores.add(kids, sc)
        if budget is not None and len(selected) + len(win) > budget:
            win = win[np.argsort(-sc[win], kind="stable")][: budget - len(selected)]
            stop = "budget"
        winners = np.sort(kids[win])  # document order within the level
        selected.extend(winners.tolist())
        if stop == "budget":
            break
        frontier = winners
    return Walked(scores, probs, visits, selected, stop)


@torch.no_grad()
def route(tree: RoutingTree, q: torch.Tensor, proj: RouterProjections, *, k: int = 3,
          max_depth: int | None = None, budget: int | None = None,
          temperature: float = 1.0) -> Route:
    """The memory router (H2MT 3.3): s(u|q) on the explored children only, level by level."""
    if tree.memories is None:
        raise ValueError("the memory router needs the routed nodes' memories")
    t0 = time.perf_counter()
    mu = tree.centre
    qn = normalise(q.float().cpu(), mu)

    def score_level(kids: np.ndarray) -> list[float]:  # one matmul a level
        return proj.host_score(qn, normalise(tree.memories[torch.from_numpy(kids)], mu)).tolist()

    limits = WalkLimits(k, max_depth, budget, temperature)
    walked = walk(tree, score_level, limits)
    return Route(tree, walked, limits, Found(route_ms=(time.perf_counter() - t0) * 1e3))
