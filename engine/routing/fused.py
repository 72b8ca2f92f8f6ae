"""Routing on evidence: every available channel scored over the routed tree, fused per node, then
the per-parent top-k walk of H2MT 3.3 on the fused score.

Routers (a setting of every entry point: CLI, API, UI, benches):
- ``fused``   (default) the channels present, fused (``routing.fusion``);
- ``memory``  the H2MT memory score alone (the paper's router);
- ``lexical`` BM25 alone; ``dense`` the sentence encoder alone.
A single-channel router ranks by that channel's subtree score (z-scoring does not change a
ranking). Whatever routes, the trace carries every available channel's own and subtree score
for each scored node, and the selections the fused and memory routers would have made, so the
UI can show where they disagree.

Walks (issue 24; ``walk=`` of ``route_on_evidence``, ``AskOptions.walk``, ``Settings.walk``):
- ``topk``   the paper's per-parent top-k on the fused score as above (channels max-propagated
             one by one, then fused): the walk before issue 24, kept for comparison;
- ``leaf``   fuse at the nodes first (the z-scored *own* scores, weighted as ``fuse`` weights
             the packing score), then max-propagate that one fused score, then the same walk: a
             chapter is as good as its best section on the fused score, not the lexical best of
             one section plus the dense best of another;
- ``rescue`` the ``topk`` walk, but a child that is an ancestor of one of the ``RESCUE`` best
             nodes ranked flat on the fused own score is never pruned (LATTICE blends a node's
             score with its path's for the same reason: a first-level mistake is otherwise
             final);
- ``leaf-rescue`` both.
The choice among them is measured (docs/results.md, issue 24).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from engine.memory.projections import RouterProjections, normalise
from engine.routing.channels import (CHANNELS, ChannelScores, channel, dense_scores,
                                     lexical_scores)
from engine.routing.fusion import FusionWeights, fuse
from engine.routing.router import Route, RoutingTree, walk

ROUTERS = ("fused", "memory", "lexical", "dense")
WALKS = ("leaf-rescue", "rescue", "leaf", "topk")
# How many flat-ranked best nodes the rescue walks keep reachable. Measured on the dev sets
# (docs/results.md, issue 24): 6 left one manual question's gold at flat rank 9 pruned; 10
# reaches gold as often as flat RRF on both sets for about 5 more selected nodes a question.
# Rescuing each channel's own top nodes instead (the memory channel's too) selected twice as
# many nodes on ORD-QA for the same hits, so the rescue ranks by the one fused own score.
RESCUE = 10


class RouterUnavailable(ValueError):
    """The chosen router needs a channel this library does not have (yet)."""


@dataclass
class RouteQuery:
    """The question as each channel reads it; None for a channel not computed."""

    tokens: list[str] | None = None  # lexical tokens
    dense: np.ndarray | None = None  # unit sentence-encoder vector
    memory: torch.Tensor | None = None  # H2MT query vector q (3.3)


@torch.no_grad()
def memory_scores(tree: RoutingTree, q: torch.Tensor, proj: RouterProjections) -> np.ndarray:
    """s(u|q) for every routed node at once (H2MT 3.3), with the node keys W_k m cached."""
    keys = tree.memory_keys(proj)
    qk = proj.float().w_q(normalise(q.float().cpu(), tree.centre))
    s = (keys @ qk / math.sqrt(proj.d_head)).numpy().astype(np.float32)
    if tree.origin[0] == (None, -1):  # a library's virtual root has no memory
        s[0] = np.nan
    return s


def score_channels(tree: RoutingTree, query: RouteQuery,
                   proj: RouterProjections | None) -> dict[str, ChannelScores]:
    """Own and subtree scores of every channel that both the tree and the query have."""
    out: dict[str, ChannelScores] = {}
    if tree.tokens is not None and query.tokens is not None:
        own = lexical_scores(tree.lexical_index(), query.tokens, tree.has_evidence)
        out["lexical"] = channel(own, tree.levels)
    if tree.dense is not None and query.dense is not None:
        out["dense"] = channel(dense_scores(tree.dense, query.dense, tree.has_evidence),
                               tree.levels)
    if tree.memories is not None and query.memory is not None and proj is not None:
        # Unchanged H2MT score: a memory already summarises its subtree (no propagation).
        out["memory"] = channel(memory_scores(tree, query.memory, proj), tree.levels,
                                propagate=False)
    return out


def router_weights(router: str, weights: FusionWeights | None) -> FusionWeights:
    if router == "fused":
        return weights or FusionWeights()
    return FusionWeights(subtree={c: float(c == router) for c in CHANNELS},
                         own={c: 0.0 for c in CHANNELS}, source=f"{router} alone")


def walk_scores(tree: RoutingTree, fused: np.ndarray, pack: np.ndarray, how: str
                ) -> tuple[np.ndarray, frozenset[int]]:
    """The score the walk ranks children by, and the nodes it must keep (see WALKS)."""
    if how not in WALKS:
        raise RouterUnavailable(f"unknown walk {how!r}; choose one of {', '.join(WALKS)}")
    score = tree.levels.propagate_max(pack) if how.startswith("leaf") else fused
    keep: set[int] = set()
    if how.endswith("rescue"):
        has = (np.flatnonzero(tree.has_evidence) if tree.tokens is not None
               else np.arange(1, len(tree)))  # the root is never a hit
        best = has[np.lexsort((has, -pack[has]))[:RESCUE]]
        for u in best.tolist():
            while u is not None and u not in keep:
                keep.add(u)
                u = tree.parent[u]
    return score, frozenset(keep)


def _selection(tree: RoutingTree, fused: np.ndarray, pack: np.ndarray, how: str,
               **walk_kw) -> list[int]:
    score, keep = walk_scores(tree, fused, pack, how)
    return walk(tree, lambda kids: score[kids].tolist(), keep=keep, **walk_kw)[3]


def route_on_evidence(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None, *,
                      router: str = "fused", weights: FusionWeights | None = None, k: int = 3,
                      max_depth: int | None = None, budget: int | None = None,
                      temperature: float = 1.0, walk_how: str = WALKS[0]) -> Route:
    """Score the channels, fuse them as ``router`` says, and walk the tree (H2MT 3.3) the way
    ``walk_how`` says (WALKS)."""
    if router not in ROUTERS:
        raise RouterUnavailable(f"unknown router {router!r}; choose one of {', '.join(ROUTERS)}")
    t0 = time.perf_counter()
    channels = score_channels(tree, query, proj)
    if router != "fused" and router not in channels:
        raise RouterUnavailable(_missing(router))
    if not channels:
        raise RouterUnavailable("no routing evidence is available for this library: re-index it")
    use = channels if router == "fused" else {router: channels[router]}
    fused, pack = fuse(use, router_weights(router, weights))
    walk_kw = dict(k=k, max_depth=max_depth, budget=budget, temperature=temperature)
    score, keep = walk_scores(tree, fused, pack, walk_how)
    scores, probs, visits, selected, stop = walk(
        tree, lambda kids: score[kids].tolist(), keep=keep, **walk_kw)
    route_ms = (time.perf_counter() - t0) * 1e3
    result = Route(tree, scores, probs, visits, selected, k=k, max_depth=max_depth, budget=budget,
                   temperature=temperature, stop_reason=stop, route_ms=route_ms, router=router,
                   channels=channels, pack_scores=pack, walk=walk_how)
    # What the other router of the pair would have selected (the disagreement view).
    for other in ("fused", "memory"):
        if other != router and (other == "fused" or other in channels):
            use_o = channels if other == "fused" else {other: channels[other]}
            result.alternatives[other] = _selection(
                tree, *fuse(use_o, router_weights(other, weights)), walk_how, **walk_kw)
    return result


def _missing(router: str) -> str:
    if router == "memory":
        return ("the memory router needs the manual's memories, which are not written yet; "
                "use the fused, lexical or dense router meanwhile")
    if router == "dense":
        return "the dense router needs sentence-encoder vectors, which this library lacks"
    return f"the {router} router needs evidence this library lacks: re-index it"
