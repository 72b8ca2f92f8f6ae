"""Top-down routing over a document tree with per-parent top-k pruning (H2MT 3.3).

Query vector (3.3): q = h_L([e_write; E_q[1:n_q]; e_read])[last], n_q = floor(T * fraction) with
fraction 1/2 as in the paper (a setting). Score (3.3):

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

import math
import time
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from engine.tree import Tree

SELECTED, PRUNED, UNVISITED, ROOT_STATUS = "selected", "pruned", "unvisited", "root"


class RouterProjections(nn.Module):
    """W_q, W_k of the routing score (H2MT 3.3)."""

    def __init__(self, d_model: int, d_head: int = 64, seed: int = 0):
        super().__init__()
        self.d_head = d_head
        self.w_q = nn.Linear(d_model, d_head, bias=False)
        self.w_k = nn.Linear(d_model, d_head, bias=False)
        gen = torch.Generator().manual_seed(seed)
        basis, _ = torch.linalg.qr(torch.randn(d_model, d_head, generator=gen))  # [d, d_h]
        with torch.no_grad():
            proj = basis.T * math.sqrt(d_model / d_head) * d_head ** 0.25
            self.w_q.weight.copy_(proj)
            self.w_k.weight.copy_(proj)

    def score(self, q: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """s(u|q) for q [d] (already centred+normalised) against m [n, d] -> [n]."""
        return (self.w_k(m) @ self.w_q(q)) / math.sqrt(self.d_head)


@dataclass
class RoutingTree:
    """The routed structure: one tree (or a library of trees under a virtual root) with its
    memories stacked in id order. ``origin[i]`` = (doc_id, node_id in that document)."""

    parent: list[int | None]
    children: list[list[int]]
    depth: list[int]
    title: list[str]
    pages: list[tuple[int | None, int | None]]
    origin: list[tuple[int | None, int]]
    memories: torch.Tensor  # [N, d]; row 0 of a library tree is unused (virtual root)

    def __len__(self) -> int:
        return len(self.parent)

    @classmethod
    def from_tree(cls, tree: Tree, memories: dict[int, torch.Tensor], doc_id: int | None = None):
        """One document: routed ids are the tree's own node ids."""
        ids = sorted(tree.graph.nodes)
        assert ids == list(range(len(ids))), "tree ids must be 0..n-1"
        nodes = [tree.node(i) for i in ids]
        return cls(parent=[n.parent for n in nodes],
                   children=[[c.id for c in tree.children(i)] for i in ids],
                   depth=[n.depth for n in nodes],
                   title=[n.title or _preview(n.text) for n in nodes],
                   pages=[(n.page_start, n.page_end) for n in nodes],
                   origin=[(doc_id, i) for i in ids],
                   memories=torch.stack([memories[i] for i in ids]).float())

    @classmethod
    def from_library(cls, docs: dict[int, tuple[Tree, dict[int, torch.Tensor]]]):
        """A virtual root (id 0) over each document's root: H2MT's library-wide hierarchy."""
        if len(docs) == 1:
            (doc_id, (tree, mem)), = docs.items()
            return cls.from_tree(tree, mem, doc_id)
        d = next(iter(docs.values()))[1][0].shape[0]
        parent: list[int | None] = [None]
        children: list[list[int]] = [[]]
        depth, title, pages = [0], ["Library"], [(None, None)]
        origin: list[tuple[int | None, int]] = [(None, -1)]
        rows = [torch.zeros(d)]
        for doc_id, (tree, mem) in docs.items():
            offset = len(parent)
            children[0].append(offset)
            for i in sorted(tree.graph.nodes):
                n = tree.node(i)
                parent.append(0 if n.parent is None else n.parent + offset)
                children.append([c.id + offset for c in tree.children(i)])
                depth.append(n.depth + 1)
                title.append(n.title or _preview(n.text))
                pages.append((n.page_start, n.page_end))
                origin.append((doc_id, i))
                rows.append(mem[i].float())
        return cls(parent, children, depth, title, pages, origin, torch.stack(rows))


def _preview(text: str, n: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


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


@dataclass
class Route:
    nodes: list[RouteNode]  # every node of the routed tree, by id
    selected: list[int]  # selected ids in the order they were selected (depth by depth)
    k: int
    max_depth: int | None
    budget: int | None
    temperature: float
    stop_reason: str  # leaves | depth cap | budget
    route_ms: float = 0.0  # scoring and selection (excludes the query vector)
    query_ms: float = 0.0  # the backbone pass for the query vector
    scored: int = 0

    def as_records(self) -> list[dict]:
        return [asdict(n) for n in self.nodes]

    def selected_nodes(self) -> list[RouteNode]:
        return [self.nodes[i] for i in self.selected]


def centre(memories: torch.Tensor) -> torch.Tensor:
    """The mean memory of the routed tree (the shared component removed before scoring)."""
    return memories.mean(0)


def _normalise(x: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    x = x - mu
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


@torch.no_grad()
def route(tree: RoutingTree, q: torch.Tensor, proj: RouterProjections, *, k: int = 3,
          max_depth: int | None = None, budget: int | None = None,
          temperature: float = 1.0) -> Route:
    """Per-parent top-k routing from the root (H2MT 3.3): S_0 = {r}, S_{l+1} = U_p TopK(C(p))."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if budget is not None and budget < 1:
        raise ValueError("the node budget must be at least 1")
    t0 = time.perf_counter()
    nodes = [RouteNode(id=i, parent=tree.parent[i], doc_id=tree.origin[i][0],
                       node_id=tree.origin[i][1], title=tree.title[i], depth=tree.depth[i],
                       page_start=tree.pages[i][0], page_end=tree.pages[i][1])
             for i in range(len(tree))]
    nodes[0].status = ROOT_STATUS
    proj = proj.float()
    mu = centre(tree.memories[1:] if len(tree) > 1 else tree.memories)
    qn = _normalise(q.float().cpu(), mu)
    selected: list[int] = []
    frontier = [0]
    visit = 0
    scored = 0
    stop = "leaves"
    while frontier:
        depth_next = tree.depth[frontier[0]] + 1
        if max_depth is not None and depth_next > max_depth:
            stop = "depth cap"
            break
        parents = [p for p in frontier if tree.children[p]]
        if not parents:
            break
        kids = [c for p in parents for c in tree.children[p]]
        s = proj.score(qn, _normalise(tree.memories[kids], mu))  # one matmul per level
        scores = dict(zip(kids, s.tolist()))
        scored += len(kids)
        winners: list[int] = []
        for p in parents:
            ch = tree.children[p]
            sc = torch.tensor([scores[c] for c in ch])
            probs = torch.softmax(sc / temperature, 0).tolist()
            order = sorted(range(len(ch)), key=lambda j: -sc[j].item())
            for j, c in enumerate(ch):
                nodes[c].score, nodes[c].prob, nodes[c].visit = scores[c], probs[j], visit + j
                nodes[c].status = PRUNED
            visit += len(ch)
            winners.extend(ch[j] for j in order[:k])
        if budget is not None and len(selected) + len(winners) > budget:
            room = budget - len(selected)
            winners = sorted(winners, key=lambda c: -scores[c])[:room]
            stop = "budget"
        for c in winners:
            nodes[c].status = SELECTED
        winners.sort()  # document order within the level
        selected.extend(winners)
        if stop == "budget":
            break
        frontier = winners
    route_ms = (time.perf_counter() - t0) * 1e3
    return Route(nodes=nodes, selected=selected, k=k, max_depth=max_depth, budget=budget,
                 temperature=temperature, stop_reason=stop, route_ms=route_ms, scored=scored)


@torch.no_grad()
def query_vector(question: str, backbone, parts, fraction: float = 0.5) -> torch.Tensor:
    """q = h_L([e_write; E_q[1:n_q]; e_read])[last] with n_q = floor(T * fraction) (H2MT 3.3)."""
    from engine.writer import _Item, read_out

    ids = backbone.encode(question.strip())
    n_q = max(1, math.floor(len(ids) * fraction)) if ids else 0
    return read_out(backbone, parts, [_Item(0, ids[:n_q], None)])[0].cpu()
