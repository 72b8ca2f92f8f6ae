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

Candidate path (issue 25): a routed tree that carries a ``CandidateIndex`` (a big library:
``Settings.candidates_min_nodes``) is routed by the leaf walks on candidates
(``routing.candidates``): the fused own score of the candidates is propagated up their paths
only, a child the walk scores gets the best candidate below it or its own fused score, whichever
is higher (its own scores computed then), and the rescue keeps the paths to the best candidates.
The z-statistics are every node's, so a candidate's fused score equals the exact path's; what
can differ is a branch whose best node is no candidate of any text channel. The ``topk`` and
``rescue`` walks fuse subtree scores, which need every node: they keep the exact path.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from engine.memory.projections import RouterProjections, normalise
from engine.routing.candidates import ChannelOnDemand, ScoredOnly, top_scores
from engine.routing.channels import (CHANNELS, ChannelScores, channel, dense_scores,
                                     lexical_scores)
from engine.routing.fusion import FusionWeights, fuse
from engine.routing.router import WalkLimits, walk
from engine.routing.routing_tree import RoutingTree
from engine.routing.trace import Found, LazySelections, Route
from engine.settings import ROUTERS, WALKS  # the names are the settings' (one list each)

# Each router as the page offers it: (a visitor's phrase, the paper's name for it).
ROUTER_WORDS = {
    "fused": ("all clues together", "fused: BM25, dense and H2MT memory scores combined"),
    "memory": ("the sections' memories", "memory: the H2MT memory router alone"),
    "lexical": ("the question's words", "lexical: BM25 alone"),
    "dense": ("the question's meaning", "dense: the sentence encoder alone"),
}

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
    qk = proj.query(normalise(q.float().cpu(), tree.centre))
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


@dataclass(frozen=True)
class RouteBy:
    """How to route: the router (``ROUTERS``: the channels whose fusion weights rank the nodes),
    the fusion weights (None: the defaults), the walk (``WALKS``) and its limits."""

    router: str = "fused"
    weights: FusionWeights | None = None
    walk: str = WALKS[0]
    limits: WalkLimits = WalkLimits()


def _selection(tree: RoutingTree, fused: np.ndarray, pack: np.ndarray, by: RouteBy
               ) -> list[int]:
    score, keep = walk_scores(tree, fused, pack, by.walk)
    return walk(tree, lambda kids: score[kids].tolist(), by.limits, keep)[3]


def route_on_evidence(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None,
                      by: RouteBy = RouteBy()) -> Route:
    """Score the channels, fuse them as ``by.router`` says, and walk the tree (H2MT 3.3) the
    way ``by.walk`` says (WALKS)."""
    router, weights, walk_how, limits = by.router, by.weights, by.walk, by.limits
    if router not in ROUTERS:
        raise RouterUnavailable(f"unknown router {router!r}; choose one of {', '.join(ROUTERS)}")
    if tree.candidates is not None and walk_how in ("leaf-rescue", "leaf"):
        return route_on_candidates(tree, query, proj, by)
    t0 = time.perf_counter()
    channels = score_channels(tree, query, proj)
    if router != "fused" and router not in channels:
        raise RouterUnavailable(_missing(router))
    if not channels:
        raise RouterUnavailable("no routing evidence is available for this library: re-index it")
    use = channels if router == "fused" else {router: channels[router]}
    fused, pack = fuse(use, router_weights(router, weights))
    score, keep = walk_scores(tree, fused, pack, walk_how)
    walked = walk(tree, lambda kids: score[kids].tolist(), limits, keep)
    route_ms = (time.perf_counter() - t0) * 1e3
    result = Route(tree, walked, limits, Found(router, walk_how, channels, pack,
                                               route_ms=route_ms))
    # What the other router of the pair would have selected (the disagreement view), walked
    # when it is first read.
    walks = {}
    for other in ("fused", "memory"):
        if other != router and (other == "fused" or other in channels):
            use_o = channels if other == "fused" else {other: channels[other]}
            walks[other] = functools.partial(_exact_alternative, tree, use_o,
                                             router_weights(other, weights), by)
    result.alternatives = LazySelections(walks)
    return result


def channels_on_demand(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None
                       ) -> tuple[dict[str, ChannelOnDemand], np.ndarray]:
    """Every available channel, scored on demand, and the candidates: the union of the best
    nodes by BM25 and the dense index's nearest nodes (``routing.candidates``), sorted ids."""
    has = tree.has_evidence
    n_ev = max(tree.candidates.moments.n, 1)  # the index holds every node with evidence
    out: dict[str, ChannelOnDemand] = {}
    found: list[np.ndarray] = []
    if tree.tokens is not None and query.tokens is not None:
        bm = np.asarray(tree.lexical_index().scores(query.tokens), dtype=np.float32)
        b64 = bm.astype(np.float64)  # rows without evidence score 0: the sums are theirs
        mu = float(b64.sum()) / n_ev
        sd = math.sqrt(max(float((b64 * b64).sum()) / n_ev - mu * mu, 0.0))
        out["lexical"] = ChannelOnDemand(lambda ids: np.where(has[ids], bm[ids], np.nan), mu, sd)
        found.append(top_scores(bm, tree.candidates.count))
    if tree.dense is not None and query.dense is not None:
        qd = np.asarray(query.dense, dtype=np.float32)
        dense = tree.dense
        mu, sd = tree.candidates.moments.stats(qd)
        out["dense"] = ChannelOnDemand(
            lambda ids: np.where(has[ids], dense[ids] @ qd, np.nan), mu, sd)
        found.append(tree.candidates.search(qd))
    if tree.memories is not None and query.memory is not None and proj is not None:
        keys = tree.memory_keys(proj).numpy()  # a view, no copy
        qk = proj.query(normalise(query.memory.float().cpu(), tree.centre)).numpy()
        scale = 1.0 / math.sqrt(proj.d_head)
        mu, sd = tree.memory_key_moments(proj).stats(qk, scale)
        virtual = tree.origin[0] == (None, -1)

        def memory_own(ids: np.ndarray) -> np.ndarray:
            s = (keys[ids] @ qk).astype(np.float32) * np.float32(scale)
            if virtual:
                s[ids == 0] = np.nan
            return s

        out["memory"] = ChannelOnDemand(memory_own, mu, sd)
    cands = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return out, cands[has[cands]] if len(cands) else cands


def _candidate_walk(tree: RoutingTree, cands: np.ndarray, use: dict[str, ChannelOnDemand],
                    weights: FusionWeights, by: RouteBy):
    """The leaf walk on candidates (module docstring): walk()'s result and the fused own score
    of every node scored on the way (the candidates and the visited nodes; NaN elsewhere)."""
    wt = {c: weights.subtree.get(c, 0.0) + weights.own.get(c, 0.0) for c in use}

    def pack(ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.float32)
        for c, ch in use.items():
            if wt[c]:
                out += wt[c] * ch.z(ids)
        return out

    pack_c = pack(cands)
    # best candidate below each node on a candidate's path; own fused score of each scored node
    below = np.full(len(tree), -np.inf)
    parent = tree.parent_index
    up, vals = cands, pack_c.astype(np.float64)
    while len(up):  # max-propagation along the candidates' paths only, a level a step
        np.maximum.at(below, up, vals)
        up = parent[up]
        vals, up = vals[up >= 0], up[up >= 0]
    own = np.full(len(tree), np.nan, dtype=np.float32)
    own[cands] = pack_c

    def score_level(kids: np.ndarray) -> np.ndarray:
        new = kids[np.isnan(own[kids])]
        if len(new):
            own[new] = pack(new)
        return np.maximum(below[kids], own[kids])

    keep: set[int] = set()
    if by.walk.endswith("rescue"):
        for u in cands[np.lexsort((cands, -pack_c))[:RESCUE]].tolist():
            while u is not None and u not in keep:
                keep.add(u)
                u = tree.parent[u]
    return walk(tree, score_level, by.limits, frozenset(keep)), own


def _exact_alternative(tree, use, weights, by: RouteBy) -> list[int]:
    return _selection(tree, *fuse(use, weights), by)


def _alternative_walk(tree, cands, use, weights, by: RouteBy) -> list[int]:
    return _candidate_walk(tree, cands, use, weights, by)[0][3]


def route_on_candidates(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None,
                        by: RouteBy = RouteBy()) -> Route:
    """``route_on_evidence`` for a big library: the leaf walks on candidates (module docstring);
    the trace holds channel scores for the scored nodes, NaN elsewhere."""
    router, weights, walk_how, limits = by.router, by.weights, by.walk, by.limits
    if walk_how not in ("leaf-rescue", "leaf"):
        raise RouterUnavailable(f"the candidate stage walks leaf or leaf-rescue, not {walk_how!r}")
    t0 = time.perf_counter()
    chans, cands = channels_on_demand(tree, query, proj)
    if router != "fused" and router not in chans:
        raise RouterUnavailable(_missing(router))
    if not chans:
        raise RouterUnavailable("no routing evidence is available for this library: re-index it")
    use = chans if router == "fused" else {router: chans[router]}
    walked, own = _candidate_walk(tree, cands, use, router_weights(router, weights), by)
    route_ms = (time.perf_counter() - t0) * 1e3
    # The trace: the packing score of the scored nodes (NaN elsewhere), their channel scores
    # when first read.
    pack_scores = own
    channels = {name: ScoredOnly(ch, own, tree, propagate=name != "memory")
                for name, ch in chans.items()}
    result = Route(tree, walked, limits, Found(router, walk_how, channels, pack_scores,
                                               route_ms=route_ms))
    walks = {}  # the disagreement view, over the same candidates, walked when first read
    for other in ("fused", "memory"):
        if other != router and (other == "fused" or other in chans):
            use_o = chans if other == "fused" else {other: chans[other]}
            walks[other] = functools.partial(_alternative_walk, tree, cands, use_o,
                                             router_weights(other, weights), by)
    result.alternatives = LazySelections(walks)
    result.candidates = len(cands)
    return result


def _missing(router: str) -> str:
    if router == "memory":
        return ("the memory router needs the manual's memories, which are not written yet; "
                "use the fused, lexical or dense router meanwhile")
    if router == "dense":
        return "the dense router needs sentence-encoder vectors, which this library lacks"
    return f"the {router} router needs evidence this library lacks: re-index it"
