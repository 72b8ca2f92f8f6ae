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
from typing import Callable, NamedTuple

import numpy as np
import torch

from engine.memory.projections import RouterProjections, normalise
from engine.routing.candidates import ChannelOnDemand, Moments, ScoredOnly, top_scores
from engine.routing.channels import CHANNELS, ChannelScores, channel
from engine.routing.fusion import RESCUE, FusionWeights, fuse, walk_scores
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

class RouterUnavailable(ValueError):
    """The chosen router needs a channel this library does not have (yet)."""


@dataclass
class RouteQuery:
    """The question as each channel reads it; None for a channel not computed."""

    tokens: list[str] | None = None  # lexical tokens
    dense: np.ndarray | None = None  # unit sentence-encoder vector
    memory: torch.Tensor | None = None  # H2MT query vector q (3.3)


@dataclass(frozen=True)
class QueryEvidence:
    """The question read against one routed tree, as plain arrays: what each channel scores
    with (None: the tree or the question lacks that channel). Read once a route
    (``read_query``); the exact path and the candidate path both score from it."""

    bm25: np.ndarray | None = None  # [N] float32 BM25 of every routed node (0: no match)
    dense: np.ndarray | None = None  # [dim] float32 the question's sentence-encoder vector
    keys: torch.Tensor | None = None  # [N, d_h] W_k of every routed node's memory (H2MT 3.3)
    query_key: torch.Tensor | None = None  # [d_h] W_q of the question's centred vector
    d_head: int = 1  # the projections' width (the score is divided by its root)
    key_moments: Moments | None = None  # the keys' moments, on a big library only (candidates)

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels it has, in ``CHANNELS`` order."""
        have = {"lexical": self.bm25, "dense": self.dense, "memory": self.keys}
        return tuple(c for c in CHANNELS if have[c] is not None)


@torch.no_grad()
def read_query(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None
               ) -> QueryEvidence:
    """The one place a route reads the tree's evidence and the learned projections for the
    question: BM25 of every node, the sentence vector, the memory keys and the question's key."""
    bm25 = dense = keys = query_key = moments = None
    d_head = 1
    if tree.memories is not None and query.memory is not None and proj is not None:
        keys, d_head = tree.memory_keys(proj), proj.d_head
        query_key = proj.query(normalise(query.memory.float().cpu(), tree.centre))
        if tree.candidates is not None:
            moments = tree.memory_key_moments(proj)
    if tree.tokens is not None and query.tokens is not None:
        bm25 = np.asarray(tree.lexical_index().scores(query.tokens), dtype=np.float32)
    if tree.dense is not None and query.dense is not None:
        dense = np.asarray(query.dense, dtype=np.float32)
    return QueryEvidence(bm25, dense, keys, query_key, d_head, moments)


def score_channels(tree: RoutingTree, ev: QueryEvidence) -> dict[str, ChannelScores]:
    """Own and subtree scores of every channel that both the tree and the query have, over
    every routed node."""
    out: dict[str, ChannelScores] = {}
    levels, has = tree.levels, tree.has_evidence
    if ev.bm25 is not None:
        out["lexical"] = channel(np.where(has, ev.bm25, np.nan).astype(np.float32), levels)
    if ev.dense is not None:
        out["dense"] = channel(np.where(has, tree.dense @ ev.dense, np.nan).astype(np.float32),
                               levels)
    if ev.keys is not None:
        # Unchanged H2MT score (3.3): a memory already summarises its subtree (no propagation).
        s = (ev.keys @ ev.query_key / math.sqrt(ev.d_head)).numpy().astype(np.float32)
        if tree.origin[0] == (None, -1):  # a library's virtual root has no memory
            s[0] = np.nan
        out["memory"] = channel(s, levels, propagate=False)
    return out


def router_weights(router: str, weights: FusionWeights | None) -> FusionWeights:
    if router == "fused":
        return weights or FusionWeights()
    return FusionWeights(subtree={c: float(c == router) for c in CHANNELS},
                         own={c: 0.0 for c in CHANNELS}, source=f"{router} alone")


@dataclass(frozen=True)
class RouteBy:
    """How to route: the router (``ROUTERS``: the channels whose fusion weights rank the nodes),
    the fusion weights (None: the defaults), the walk (``WALKS``) and its limits."""

    router: str = "fused"
    weights: FusionWeights | None = None
    walk: str = WALKS[0]
    limits: WalkLimits = WalkLimits()


class Scoring(NamedTuple):
    """How one route scores the walk (plain data between the scoring and the walk): the
    channels for the trace, the score of a level's children, the nodes the walk must keep, the
    packing score per node, the other routers' selections (walked when first read) and the
    candidates scored (None: the exact path)."""

    channels: dict
    score_level: Callable[[np.ndarray], list]
    keep: frozenset[int]
    pack_scores: np.ndarray
    alternatives: dict[str, Callable[[], list[int]]]
    candidates: int | None = None


def route_on_evidence(tree: RoutingTree, query: RouteQuery, proj: RouterProjections | None,
                      by: RouteBy = RouteBy()) -> Route:
    """Score the channels, fuse them as ``by.router`` says, and walk the tree (H2MT 3.3) the
    way ``by.walk`` says (WALKS): over every node, or over the candidates on a big library
    (module docstring), whose leaf walks the library's candidate index serves."""
    if by.router not in ROUTERS:
        raise RouterUnavailable(
            f"unknown router {by.router!r}; choose one of {', '.join(ROUTERS)}")
    t0 = time.perf_counter()
    ev = read_query(tree, query, proj)
    plan = fusing(by, ev.channels)
    if by.walk not in WALKS:
        raise RouterUnavailable(f"unknown walk {by.walk!r}; choose one of {', '.join(WALKS)}")
    if tree.candidates is not None and by.walk in ("leaf-rescue", "leaf"):
        scoring = candidate_scoring(tree, ev, by, plan)
    else:
        scoring = exact_scoring(tree, ev, by, plan)
    walked = walk(tree, scoring.score_level, by.limits, scoring.keep)
    result = Route(tree, walked, by.limits, Found(
        by.router, by.walk, scoring.channels, scoring.pack_scores,
        route_ms=(time.perf_counter() - t0) * 1e3))
    result.alternatives = LazySelections(scoring.alternatives)
    result.candidates = scoring.candidates
    return result


class Fusing(NamedTuple):
    """What a route fuses, from its router and the channels the question has: the channels the
    router ranks by and their weights, and, for the disagreement view, those of the other
    router of the pair (fused | memory)."""

    used: tuple[str, ...]
    weights: FusionWeights
    others: dict[str, tuple[tuple[str, ...], FusionWeights]]


def fusing(by: RouteBy, names: tuple[str, ...]) -> Fusing:
    """``by.router``'s channels among ``names`` (those the tree and the question have) and its
    weights; RouterUnavailable when it has none of its own."""
    if by.router != "fused" and by.router not in names:
        raise RouterUnavailable(_missing(by.router))
    if not names:
        raise RouterUnavailable("no routing evidence is available for this library: re-index it")
    others = {other: (names if other == "fused" else (other,), router_weights(other, by.weights))
              for other in ("fused", "memory")
              if other != by.router and (other == "fused" or other in names)}
    return Fusing(names if by.router == "fused" else (by.router,),
                  router_weights(by.router, by.weights), others)


def exact_scoring(tree: RoutingTree, ev: QueryEvidence, by: RouteBy, plan: Fusing) -> Scoring:
    """Every node scored by every channel, fused, and the walk's score (``walk_scores``)."""
    channels = score_channels(tree, ev)
    walks = {other: functools.partial(_exact_alternative, tree, {c: channels[c] for c in used},
                                      weights, by)
             for other, (used, weights) in plan.others.items()}
    fused, pack = fuse({c: channels[c] for c in plan.used}, plan.weights)
    score, keep = walk_scores(tree, fused, pack, by.walk)
    return Scoring(channels, lambda kids: score[kids].tolist(), keep, pack, walks)


def candidate_scoring(tree: RoutingTree, ev: QueryEvidence, by: RouteBy, plan: Fusing
                      ) -> Scoring:
    """The leaf walks on candidates (module docstring); the trace holds channel scores for the
    scored nodes, NaN elsewhere."""
    if by.walk not in ("leaf-rescue", "leaf"):
        raise RouterUnavailable(f"the candidate stage walks leaf or leaf-rescue, not {by.walk!r}")
    chans, cands = channels_on_demand(tree, ev)
    # the fused own score of the nodes the walk scores (NaN elsewhere), filled in as it walks;
    # the trace reads their channel scores once the walk is done
    own = np.full(len(tree), np.nan, dtype=np.float32)
    channels = {name: ScoredOnly(ch, own, tree, propagate=name != "memory")
                for name, ch in chans.items()}
    walks = {other: functools.partial(_alternative_walk, tree, cands,
                                      {c: chans[c] for c in used}, weights, by)
             for other, (used, weights) in plan.others.items()}
    pack = _packer({c: chans[c] for c in plan.used}, plan.weights)
    score_level, keep = _candidate_levels(tree, cands, pack, by, own)
    return Scoring(channels, score_level, keep, own, walks, len(cands))


def channels_on_demand(tree: RoutingTree, ev: QueryEvidence
                       ) -> tuple[dict[str, ChannelOnDemand], np.ndarray]:
    """Every available channel, scored on demand, and the candidates: the union of the best
    nodes by BM25 and the dense index's nearest nodes (``routing.candidates``), sorted ids."""
    has = tree.has_evidence
    n_ev = max(tree.candidates.moments.n, 1)  # the index holds every node with evidence
    out: dict[str, ChannelOnDemand] = {}
    found: list[np.ndarray] = []
    if ev.bm25 is not None:
        bm = ev.bm25
        b64 = bm.astype(np.float64)  # rows without evidence score 0: the sums are theirs
        mu = float(b64.sum()) / n_ev
        sd = math.sqrt(max(float((b64 * b64).sum()) / n_ev - mu * mu, 0.0))
        out["lexical"] = ChannelOnDemand(lambda ids: np.where(has[ids], bm[ids], np.nan), mu, sd)
        found.append(top_scores(bm, tree.candidates.count))
    if ev.dense is not None:
        qd, dense = ev.dense, tree.dense
        mu, sd = tree.candidates.moments.stats(qd)
        out["dense"] = ChannelOnDemand(
            lambda ids: np.where(has[ids], dense[ids] @ qd, np.nan), mu, sd)
        found.append(tree.candidates.search(qd))
    if ev.keys is not None:
        keys = ev.keys.numpy()  # a view, no copy
        qk = ev.query_key.numpy()
        scale = 1.0 / math.sqrt(ev.d_head)
        mu, sd = ev.key_moments.stats(qk, scale)
        virtual = tree.origin[0] == (None, -1)

        def memory_own(ids: np.ndarray) -> np.ndarray:
            s = (keys[ids] @ qk).astype(np.float32) * np.float32(scale)
            if virtual:
                s[ids == 0] = np.nan
            return s

        out["memory"] = ChannelOnDemand(memory_own, mu, sd)
    cands = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return out, cands[has[cands]] if len(cands) else cands


def _packer(use: dict[str, ChannelOnDemand], weights: FusionWeights
            ) -> Callable[[np.ndarray], np.ndarray]:
    """The fused own score of some nodes, their channels scored on demand and z-scored."""
    wt = {c: weights.subtree.get(c, 0.0) + weights.own.get(c, 0.0) for c in use}

    def pack(ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.float32)
        for c, ch in use.items():
            if wt[c]:
                out += wt[c] * ch.z(ids)
        return out

    return pack


def _candidate_levels(tree: RoutingTree, cands: np.ndarray, pack, by: RouteBy,
                      own: np.ndarray):
    """The leaf walk on candidates (module docstring): the score of a level's children and the
    nodes to keep; ``own`` (all NaN) gets the fused own score (``pack``) of every node scored
    on the way (the candidates, then the nodes the walk visits)."""
    pack_c = pack(cands)
    # best candidate below each node on a candidate's path; own fused score of each scored node
    below = np.full(len(tree), -np.inf)
    parent = tree.parent_index
    up, vals = cands, pack_c.astype(np.float64)
    while len(up):  # max-propagation along the candidates' paths only, a level a step
        np.maximum.at(below, up, vals)
        up = parent[up]
        vals, up = vals[up >= 0], up[up >= 0]
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
    return score_level, frozenset(keep)


def _exact_alternative(tree, use, weights, by: RouteBy) -> list[int]:
    score, keep = walk_scores(tree, *fuse(use, weights), by.walk)
    return walk(tree, lambda kids: score[kids].tolist(), by.limits, keep)[3]


def _alternative_walk(tree, cands, use, weights, by: RouteBy) -> list[int]:
    own = np.full(len(tree), np.nan, dtype=np.float32)
    score_level, keep = _candidate_levels(tree, cands, _packer(use, weights), by, own)
    return walk(tree, score_level, by.limits, keep)[3]


def _missing(router: str) -> str:
    if router == "memory":
        return ("the memory router needs the manual's memories, which are not written yet; "
                "use the fused, lexical or dense router meanwhile")
    if router == "dense":
        return "the dense router needs sentence-encoder vectors, which this library lacks"
    return f"the {router} router needs evidence this library lacks: re-index it"
