"""The trace of one routing (``Route``): every node scored, its score, probability among its
siblings, visit order and status (root, selected, pruned, unvisited), per-channel scores, and
what the other routers would have selected; stored in the query log as ``as_records`` and read
back with ``from_records``."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch

from engine.routing.channels import ChannelScores
from engine.routing.routing_tree import RoutingTree

SELECTED, PRUNED, UNVISITED, ROOT_STATUS = "selected", "pruned", "unvisited", "root"


@dataclass(frozen=True)
class WalkLimits:
    """How far the top-down walk goes (H2MT 3.3): ``k`` children kept per parent, the depth cap
    (None: none), the node budget (None: none) and the softmax temperature of the
    probabilities shown."""

    k: int = 3
    max_depth: int | None = None
    budget: int | None = None
    temperature: float = 1.0


class Walked(NamedTuple):
    """What a walk found: the scored nodes' scores, probabilities among their siblings and visit
    order ({routed id: value}), the selected ids in the order they were selected (depth by
    depth) and why it stopped (leaves | depth cap | budget)."""

    scores: Mapping[int, float]
    probs: Mapping[int, float]
    visits: Mapping[int, int]
    selected: list[int]
    stop_reason: str


@dataclass(frozen=True)
class Found:
    """How a route was found: the router (fused | memory | lexical | dense) and the walk
    (``engine.routing.fused.WALKS``), the channels' scores of every routed node, the fused
    own-evidence score per node (text packing) or, restored from the query log, each node's
    channel scores; and the time of scoring and selection (the query vector excluded)."""

    router: str = "memory"
    walk: str = "topk"
    channels: dict[str, ChannelScores] | None = None
    pack_scores: np.ndarray | None = None
    node_channels: dict[int, dict] | None = None
    route_ms: float = 0.0


class LazySelections(Mapping):
    """router -> the selection that router would have made (``Route.alternatives``), each
    computed on first read: the disagreement view and the query log need it, the answer does
    not, so its walk is no part of routing time."""

    def __init__(self, walks: dict[str, Callable[[], list[int]]]):
        self._walks, self._done = walks, {}

    def __getitem__(self, router: str) -> list[int]:
        if router not in self._done:
            self._done[router] = self._walks[router]()
        return self._done[router]

    def __iter__(self):
        return iter(self._walks)

    def __len__(self) -> int:
        return len(self._walks)

@dataclass
class RouteNode:
    """One node of the routed tree as the trace records it."""

    id: int
    parent: int | None
    doc_id: int | None
    node_id: int
    title: str
    depth: int
    page_start: int | None
    page_end: int | None
    score: float | None = None  # s(u|q); None when never scored
    prob: float | None = None  # softmax(s/temperature) among its siblings
    status: str = UNVISITED  # root | selected | pruned | unvisited
    visit: int | None = None  # order in which it was scored
    # Per evidence channel, {"own": score, "subtree": score} (None values where the node has no
    # evidence); None when the node was never scored or the router used no channels.
    channels: dict[str, dict[str, float | None]] | None = None
    induced: bool = False  # a parent guessed by clustering (H2MT 4.3), not a heading


class Route:
    """The trace of one routing: who was scored, with what score, and what was kept.

    Routing itself only touches the scored nodes; the per-node records of the whole tree
    (``nodes``, including never-visited nodes) are built on first access, for the trace and
    the UI, so their cost is not routing time.
    """

    def __init__(self, tree: "RoutingTree", walked: Walked, limits: WalkLimits,
                 found: Found = Found()):
        scores, probs, visits, selected, stop_reason = walked
        k, max_depth, budget = limits.k, limits.max_depth, limits.budget
        temperature, route_ms = limits.temperature, found.route_ms
        router, walk, channels = found.router, found.walk, found.channels
        pack_scores, node_channels = found.pack_scores, found.node_channels
        self.tree = tree
        self.router = router  # fused | memory | lexical | dense
        self.walk = walk  # how the tree was walked (engine.routing.fused.WALKS)
        self.channels = channels or {}  # channel -> scores of every routed node
        self.pack_scores = pack_scores  # fused own-evidence score per node (text packing)
        self._node_channels = node_channels  # restored from the query log
        # Other routers' selections over the same channels (for the disagreement view); a
        # LazySelections when routed on evidence.
        self.alternatives: Mapping[str, list[int]] = {}
        self.scores, self.probs, self.visits = scores, probs, visits
        self.selected = selected  # selected ids in the order they were selected (depth by depth)
        self.k, self.max_depth, self.budget = k, max_depth, budget
        self.temperature = temperature
        self.stop_reason = stop_reason  # leaves | depth cap | budget
        self.route_ms = route_ms  # scoring and selection (excludes the query vector)
        self.candidates: int | None = None  # nodes the candidate stage scored (None: exact)
        self._selected_set = set(selected)
        self._nodes: list[RouteNode] | None = None

    @property
    def scored(self) -> int:
        return len(self.scores)

    def status(self, node_id: int) -> str:
        if node_id == 0:
            return ROOT_STATUS
        if node_id not in self.scores:
            return UNVISITED
        return SELECTED if node_id in self._selected_set else PRUNED

    @property
    def nodes(self) -> list[RouteNode]:
        """Every node of the routed tree, by id, with score, probability, status, visit."""
        if self._nodes is None:
            t = self.tree
            self._nodes = [RouteNode(id=i, parent=t.parent[i], doc_id=t.origin[i][0],
                                     node_id=t.origin[i][1], title=t.title[i], depth=t.depth[i],
                                     page_start=t.pages[i][0], page_end=t.pages[i][1],
                                     score=self.scores.get(i), prob=self.probs.get(i),
                                     status=self.status(i), visit=self.visits.get(i),
                                     channels=self.node_channels(i),
                                     induced=bool(t.induced and t.induced[i]))
                           for i in range(len(t))]
        return self._nodes

    def node_channels(self, node_id: int) -> dict[str, dict[str, float | None]] | None:
        """{channel: {"own", "subtree"}} of a scored node; None when unscored or no channels."""
        if self._node_channels is not None:
            return self._node_channels.get(node_id)
        if node_id not in self.scores or not self.channels:
            return None
        return {name: {"own": _finite(ch.own[node_id]), "subtree": _finite(ch.subtree[node_id])}
                for name, ch in self.channels.items()}

    def as_records(self) -> list[dict]:
        return [asdict(n) for n in self.nodes]

    @classmethod
    def from_records(cls, records: list[dict], limits: WalkLimits = WalkLimits(k=0),
                     router: str = "memory") -> "Route":
        """Rebuild a Route from ``as_records()`` output (the query log), without memories; its
        stop reason is "from the query log"."""
        recs = sorted(records, key=lambda r: r["id"])
        n = len(recs)
        children: list[list[int]] = [[] for _ in range(n)]
        for r in recs:
            if r["parent"] is not None:
                children[r["parent"]].append(r["id"])
        tree = RoutingTree(parent=[r["parent"] for r in recs], children=children,
                           depth=[r["depth"] for r in recs], title=[r["title"] for r in recs],
                           pages=[(r.get("page_start"), r.get("page_end")) for r in recs],
                           origin=[(r.get("doc_id"), r.get("node_id", r["id"])) for r in recs],
                           memories=torch.zeros(n, 1),
                           induced=[bool(r.get("induced")) for r in recs])
        scored = [r for r in recs if r.get("score") is not None]
        selected = sorted((r["id"] for r in recs if r["status"] == SELECTED),
                          key=lambda i: (recs[i]["depth"], i))
        walked = Walked({r["id"]: r["score"] for r in scored},
                        {r["id"]: r["prob"] for r in scored if r.get("prob") is not None},
                        {r["id"]: r["visit"] for r in scored if r.get("visit") is not None},
                        selected, "from the query log")
        return cls(tree, walked, limits, Found(router, node_channels={
            r["id"]: r["channels"] for r in scored if r.get("channels")}))

    def selected_nodes(self) -> list[RouteNode]:
        return [self.nodes[i] for i in self.selected]


def _finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
