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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from engine.document.induce import INDUCED_KIND
from engine.document.tree import Tree
from engine.memory.projections import RouterProjections, centre, normalise
from engine.memory.writer import _Item, read_out
from engine.routing.candidates import CandidateIndex, Moments
from engine.routing.channels import ChannelScores, TreeLevels
from engine.routing.lexical import LexicalIndex
from storage.records import NodeEvidence

SELECTED, PRUNED, UNVISITED, ROOT_STATUS = "selected", "pruned", "unvisited", "root"


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
class RoutingTree:
    """The routed structure: one tree (or a library of trees under a virtual root) with, per
    routed node in id order, its memory (when written) and its routing evidence (when stored).
    ``origin[i]`` = (doc_id, node_id in that document)."""

    parent: list[int | None]
    children: list[list[int]]
    depth: list[int]
    title: list[str]
    pages: list[tuple[int | None, int | None]]
    origin: list[tuple[int | None, int]]
    memories: torch.Tensor | None  # [N, d]; row 0 of a library tree is unused (virtual root)
    tokens: list[list[str]] | None = None  # lexical evidence tokens per node
    dense: np.ndarray | None = None  # [N, dim] unit sentence-encoder vectors
    induced: list[bool] | None = None  # per node: a parent guessed by clustering (H2MT 4.3)
    # The candidate stage's index (``routing.candidates``), attached to a big library only: with
    # it, the leaf walks score candidates and visited nodes instead of every node.
    candidates: CandidateIndex | None = None
    _centre: torch.Tensor | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.parent)

    @property
    def centre(self) -> torch.Tensor:
        """Mean memory of the routed nodes (a library's empty virtual-root row excluded), cached."""
        if self._centre is None:
            virtual = self.origin[0][0] is None and self.origin[0][1] == -1
            self._centre = centre(self.memories[1:] if virtual else self.memories)
        return self._centre

    @property
    def has_evidence(self) -> np.ndarray:
        """[N] bool: nodes with lexical evidence (not a root, table of contents or index)."""
        if "has_evidence" not in self._cache:
            self._cache["has_evidence"] = np.array([bool(t) for t in (self.tokens or [])]
                                                   or [False] * len(self), dtype=bool)
        return self._cache["has_evidence"]

    @property
    def levels(self) -> TreeLevels:
        if "levels" not in self._cache:
            self._cache["levels"] = TreeLevels(self.parent, self.depth)
        return self._cache["levels"]

    def lexical_index(self):
        """BM25 over the routed nodes' evidence tokens, built on first use and kept."""
        if "lexical" not in self._cache:
            self._cache["lexical"] = LexicalIndex(self.tokens or [[] for _ in range(len(self))])
        return self._cache["lexical"]

    def memory_keys(self, proj: RouterProjections) -> torch.Tensor:
        """W_k of every centred, normalised memory [N, d_h], kept per projection object."""
        key = ("keys", id(proj))
        if key not in self._cache:
            with torch.no_grad():
                self._cache[key] = proj.float().w_k(normalise(self.memories, self.centre))
        return self._cache[key]

    @property
    def parent_index(self) -> np.ndarray:
        """[N] int64 parent of each routed node, -1 for the root; built once per tree."""
        if "parent_index" not in self._cache:
            self._cache["parent_index"] = np.array(
                [-1 if p is None else p for p in self.parent], dtype=np.int64)
        return self._cache["parent_index"]

    @property
    def child_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The children as arrays (CSR): node u's children in order are
        ``flat[ptr[u]:ptr[u + 1]]``; built once per tree."""
        if "child_index" not in self._cache:
            lens = np.fromiter(map(len, self.children), dtype=np.int64, count=len(self))
            ptr = np.zeros(len(self) + 1, dtype=np.int64)
            np.cumsum(lens, out=ptr[1:])
            flat = np.fromiter((c for ch in self.children for c in ch), dtype=np.int64,
                               count=int(ptr[-1]))
            self._cache["child_index"] = (ptr, flat)
        return self._cache["child_index"]

    def memory_key_moments(self, proj: RouterProjections) -> Moments:
        """Mean and second moment of the memory keys (a library's virtual root left out): the
        memory channel's exact statistics without scoring every node (``routing.candidates``)."""
        key = ("key_moments", id(proj))
        if key not in self._cache:
            keys = self.memory_keys(proj).numpy()
            self._cache[key] = Moments.of(keys[1:] if self.origin[0] == (None, -1) else keys)
        return self._cache[key]

    @classmethod
    def from_tree(cls, tree: Tree, memories: dict[int, torch.Tensor] | None,
                  doc_id: int | None = None, evidence: NodeEvidence | None = None):
        """One document: routed ids are the tree's own node ids."""
        ids = sorted(tree.graph.nodes)
        assert ids == list(range(len(ids))), "tree ids must be 0..n-1"
        nodes = [tree.node(i) for i in ids]
        labels = tree.labels()
        return cls(parent=[n.parent for n in nodes],
                   children=[[c.id for c in tree.children(i)] for i in ids],
                   depth=[n.depth for n in nodes],
                   title=[labels[n.id] for n in nodes],
                   pages=[(n.page_start, n.page_end) for n in nodes],
                   origin=[(doc_id, i) for i in ids],
                   memories=(torch.stack([memories[i] for i in ids]).float()
                             if memories else None),
                   tokens=evidence.tokens if evidence is not None else None,
                   dense=evidence.dense if evidence is not None else None,
                   induced=[n.kind == INDUCED_KIND for n in nodes])

    @classmethod
    def from_library(cls, docs: dict):
        """A virtual root (id 0) over each document's root: H2MT's library-wide hierarchy.

        ``docs``: doc_id -> (tree, memories or None[, evidence or None]). A channel is kept
        only when every document has it (memories, tokens, dense vectors)."""
        docs = {d: (v + (None,))[:3] for d, v in docs.items()}
        if len(docs) == 1:
            (doc_id, (tree, mem, ev)), = docs.items()
            return cls.from_tree(tree, mem, doc_id, ev)
        with_mem = all(m for _, m, _ in docs.values())
        with_ev = all(e is not None for _, _, e in docs.values())
        with_dense = with_ev and all(e.dense is not None for _, _, e in docs.values())
        d = next(iter(docs.values()))[1][0].shape[0] if with_mem else 0
        parent: list[int | None] = [None]
        children: list[list[int]] = [[]]
        depth, title, pages = [0], ["Library"], [(None, None)]
        origin: list[tuple[int | None, int]] = [(None, -1)]
        induced = [False]
        rows = [torch.zeros(d)]
        tokens: list[list[str]] = [[]]
        dense_rows: list[np.ndarray] = []
        for doc_id, (tree, mem, ev) in docs.items():
            offset = len(parent)
            children[0].append(offset)
            labels = tree.labels()
            for i in sorted(tree.graph.nodes):
                n = tree.node(i)
                parent.append(0 if n.parent is None else n.parent + offset)
                children.append([c.id + offset for c in tree.children(i)])
                depth.append(n.depth + 1)
                title.append(labels[i])
                pages.append((n.page_start, n.page_end))
                origin.append((doc_id, i))
                induced.append(n.kind == INDUCED_KIND)
                if with_mem:
                    rows.append(mem[i].float())
            if with_ev:
                tokens.extend(ev.tokens)
            if with_dense:
                dense_rows.append(ev.dense)
        dense = None
        if with_dense:
            dense = np.concatenate([np.zeros((1, dense_rows[0].shape[1]), np.float32),
                                    *dense_rows])
        return cls(parent, children, depth, title, pages, origin,
                   torch.stack(rows) if with_mem else None,
                   tokens=tokens if with_ev else None, dense=dense, induced=induced)

    def available_channels(self) -> tuple[str, ...]:
        """The evidence channels this tree can score (missing ones are left out of fusion)."""
        have = []
        if self.tokens is not None:
            have.append("lexical")
        if self.dense is not None:
            have.append("dense")
        if self.memories is not None:
            have.append("memory")
        return tuple(have)


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

    def __init__(self, tree: "RoutingTree", scores: dict[int, float], probs: dict[int, float],
                 visits: dict[int, int], selected: list[int], *, k: int, max_depth: int | None,
                 budget: int | None, temperature: float, stop_reason: str, route_ms: float = 0.0,
                 router: str = "memory", channels: dict[str, ChannelScores] | None = None,
                 pack_scores: np.ndarray | None = None,
                 node_channels: dict[int, dict] | None = None, walk: str = "topk"):
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
        self.query_ms = 0.0  # the backbone pass for the query vector
        # the question's sentence-encoder vector, kept so the sentence rerank does not encode the
        # question a second time (engine.answer.sentences.score)
        self.query_dense: np.ndarray | None = None
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
    def from_records(cls, records: list[dict], *, k: int = 0, max_depth: int | None = None,
                     budget: int | None = None, temperature: float = 1.0,
                     stop_reason: str = "from the query log", router: str = "memory") -> "Route":
        """Rebuild a Route from ``as_records()`` output (the query log), without memories."""
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
        return cls(tree, {r["id"]: r["score"] for r in scored},
                   {r["id"]: r["prob"] for r in scored if r.get("prob") is not None},
                   {r["id"]: r["visit"] for r in scored if r.get("visit") is not None}, selected,
                   k=k, max_depth=max_depth, budget=budget, temperature=temperature,
                   stop_reason=stop_reason, router=router,
                   node_channels={r["id"]: r["channels"] for r in scored if r.get("channels")})

    def selected_nodes(self) -> list[RouteNode]:
        return [self.nodes[i] for i in self.selected]


def _finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def walk(tree: RoutingTree, score_level: Callable[[np.ndarray], "Sequence[float]"], *, k: int = 3,
         max_depth: int | None = None, budget: int | None = None, temperature: float = 1.0,
         keep: set[int] | frozenset[int] = frozenset()):
    """Per-parent top-k from the root (H2MT 3.3): S_0 = {r}, S_{l+1} = U_p TopK(C(p)).

    ``score_level(kids)`` scores the children of one level's parents (an int64 array of routed
    ids, parent by parent, each parent's children in order; one call per level, so a lazy
    scorer touches only the explored part). A child in ``keep`` is a winner beyond the top k
    (the rescue walk of ``routing.fused``: ancestors of the best nodes scored flat); empty
    ``keep`` is the paper's walk. Ties go to the earlier child. Each level is one set of array
    operations (segment softmax, one lexsort for every parent's ranking), not a loop over its
    parents: a big library's walk scores thousands of children. Returns (scores, probs,
    visits, selected, stop reason)."""
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
    return scores, probs, visits, selected, stop


@torch.no_grad()
def route(tree: RoutingTree, q: torch.Tensor, proj: RouterProjections, *, k: int = 3,
          max_depth: int | None = None, budget: int | None = None,
          temperature: float = 1.0) -> Route:
    """The memory router (H2MT 3.3): s(u|q) on the explored children only, level by level."""
    if tree.memories is None:
        raise ValueError("the memory router needs the routed nodes' memories")
    t0 = time.perf_counter()
    proj = proj.float()
    mu = tree.centre
    qn = normalise(q.float().cpu(), mu)

    def score_level(kids: np.ndarray) -> list[float]:  # one matmul a level
        return proj.score(qn, normalise(tree.memories[torch.from_numpy(kids)], mu)).tolist()

    scores, probs, visits, selected, stop = walk(tree, score_level, k=k, max_depth=max_depth,
                                                 budget=budget, temperature=temperature)
    route_ms = (time.perf_counter() - t0) * 1e3
    return Route(tree, scores, probs, visits, selected, k=k, max_depth=max_depth, budget=budget,
                 temperature=temperature, stop_reason=stop, route_ms=route_ms)


def query_ids(backbone, question: str, fraction: float = 0.5) -> list[int]:
    """E_q[1:n_q] of H2MT 3.3 as token ids: the first n_q = floor(T * fraction) tokens."""
    ids = backbone.encode(question.strip())
    return ids[:max(1, math.floor(len(ids) * fraction))] if ids else []


@torch.no_grad()
def query_vectors(questions: list[str], backbone, parts, fraction: float = 0.5,
                  batch: int = 64) -> torch.Tensor:
    """q = h_L([e_write; E_q[1:n_q]; e_read])[last] with n_q = floor(T * fraction) (H2MT 3.3),
    for many questions in right-padded batches: [len(questions), d] float32 on the CPU."""
    items = [_Item(i, query_ids(backbone, q, fraction), None) for i, q in enumerate(questions)]
    out = torch.zeros(len(items), backbone.hidden_size)
    for j in range(0, len(items), batch):
        chunk = items[j:j + batch]
        out[j:j + len(chunk)] = read_out(backbone, parts, chunk).cpu()
    return out


@torch.inference_mode()
def query_vector(question: str, backbone, parts, fraction: float = 0.5) -> torch.Tensor:
    """The query vector of one question (see ``query_vectors``): [d].

    One unpadded sequence: no attention mask to build, no padding, under inference mode. The
    same function as ``query_vectors`` (equal to it in tests); measured, it saves a few per cent
    of the pass, which is the backbone's weights read once for a handful of positions (the
    trace of issue 25 in docs/results.md)."""
    ids = torch.tensor(query_ids(backbone, question, fraction), dtype=torch.long)
    device, dtype = backbone.device, backbone.dtype
    rows = [parts.e_write.to(device, dtype).view(1, -1)]
    if len(ids):
        rows.append(backbone.embed(ids).to(dtype))
    rows.append(parts.e_read.to(device, dtype).view(1, -1))
    embeds = torch.cat(rows).unsqueeze(0)
    body = (backbone.model.get_decoder() if hasattr(backbone.model, "get_decoder")
            else backbone.model.model)
    hidden = body(inputs_embeds=embeds, use_cache=False).last_hidden_state
    return hidden[0, -1].float().cpu().clone()
