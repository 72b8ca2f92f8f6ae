"""The routed structure (``RoutingTree``): one document's tree, or a library of trees under a
virtual root (as H2MT does for LVS), as parallel per-node lists with the routing evidence
(memories, lexical tokens, dense vectors) and the indexes the walk and the channels build once.

The memories are centred on the mean memory of the routed tree before W_q/W_k (``centre``):
final hidden states share a large common component (they collapse onto a few "hub" nodes
otherwise: DESIGN's measurement); the centre is a property of the routed memories, computed at
routing time, not a learned parameter."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from engine.document.induce import INDUCED_KIND
from engine.document.tree import Tree
from engine.memory.projections import RouterProjections, centre, normalise
from engine.routing.candidates import CandidateIndex, Moments
from engine.routing.channels import TreeLevels
from engine.routing.lexical import LexicalIndex
from storage.records import NodeEvidence


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
            self._cache[key] = proj.keys(normalise(self.memories, self.centre))
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
