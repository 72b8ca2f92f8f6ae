"""Evidence channels scored over a routed tree: words matched, meaning, memory.

Each channel gives every routed node an *own* score (its own evidence against the question) and
a *subtree* score (the best own score in its subtree: max-propagation). A parent's subtree score
keeps a deep answer's branch alive; averaging children dilutes it (measured before this was
built: the H2MT mean over child vectors lost the signal that the max keeps).

- ``lexical``: BM25 over the nodes' evidence tokens (``routing.lexical``), the index built over
  the routed nodes (one manual, or the whole library) on first use and cached with the tree.
- ``dense``: cosine between the question's and the nodes' sentence-encoder vectors.
- ``memory``: the H2MT score s(u|q) = (W_q q)^T (W_k m_u) / sqrt(d_h) (H2MT 3.3), unchanged: a
  node's memory already summarises its subtree, so its own score is its subtree score.

Nodes without evidence (the root, tables of contents, indexes, the library's virtual root) have
NaN own scores; a subtree with no evidence at all has a NaN subtree score.

Scoring is vectorised over all routed nodes: one sparse BM25 pass, one matrix-vector product per
dense/memory channel, and one ``fmax`` scatter per tree level for the propagation. That is what
keeps a 100k-node library within a small factor of a 1k-node one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHANNELS = ("lexical", "dense", "memory")
# What the UI calls them: plain words, not the paper's.
LABELS = {"lexical": "words matched", "dense": "meaning", "memory": "memory"}


@dataclass
class ChannelScores:
    """One channel's scores for every routed node (row = routed id)."""

    own: np.ndarray  # [N] float32; NaN where the node has no evidence
    subtree: np.ndarray  # [N] float32; max of ``own`` over the node's subtree (NaN if none)


class TreeLevels:
    """The routed tree's nodes grouped by depth and, within a depth, by parent: each level is
    (children sorted by parent, their distinct parents, segment starts), so one ``reduceat``
    per level takes every parent's max over its children."""

    def __init__(self, parent: list[int | None], depth: list[int]):
        par = np.array([-1 if p is None else p for p in parent], dtype=np.int64)
        depth_arr = np.asarray(depth, dtype=np.int64)
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for d in range(int(depth_arr.max(initial=0)), 0, -1):
            ids = np.flatnonzero((depth_arr == d) & (par >= 0))
            if not len(ids):
                continue
            ids = ids[np.argsort(par[ids], kind="stable")]
            parents, starts = np.unique(par[ids], return_index=True)
            self.levels.append((ids, parents, starts))

    def propagate_max(self, own: np.ndarray) -> np.ndarray:
        """subtree[u] = max(own[u], max_c subtree[c]), NaN-aware (fmax ignores NaN), deepest
        level first so every child is final before its parent reads it."""
        sub = own.astype(np.float32, copy=True)
        with np.errstate(invalid="ignore"):
            for ids, parents, starts in self.levels:
                best = np.fmax.reduceat(sub[ids], starts)
                sub[parents] = np.fmax(sub[parents], best)
        return sub


def channel(own: np.ndarray, levels: TreeLevels, propagate: bool = True) -> ChannelScores:
    own = np.asarray(own, dtype=np.float32)
    return ChannelScores(own=own, subtree=levels.propagate_max(own) if propagate else own.copy())
