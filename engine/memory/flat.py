"""The HMT-style flat baseline (hmt.txt): fixed-length segments, one memory each, no tree.

The manual's text (document order) is cut into segments of ``segment_tokens`` tokens; each
segment's memory comes from the same writer as a leaf ([e_write; E_seg; e_read], H2MT 3.2.1).
Memory search is HMT's cross-attention of the query over all cached segment memories: the same
scaled dot-product as the router, softmax over every segment, and the top-n segments (n = the
number of nodes the tree route would feed, so both use the same slot budget) become the slots.
Segment memories are computed on first use per (document, writer fingerprint) and kept in memory
for the process (they are a baseline, not stored).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.document.tree import Tree
from engine.memory.writer import _Item, batches_by_length, read_out


@dataclass
class FlatIndex:
    texts: list[str]
    memories: torch.Tensor  # [S, d]


def segment_text(tree: Tree, encode, decode, segment_tokens: int) -> list[str]:
    ids: list[int] = []
    for n in tree.preorder():
        if n.local_text.strip():
            ids.extend(encode(n.local_text + "\n\n"))
    return [decode(ids[i:i + segment_tokens]) for i in range(0, len(ids), segment_tokens)]


@torch.no_grad()
def build_flat_index(tree: Tree, backbone, parts, segment_tokens: int = 256,
                     max_batch_nodes: int = 32, max_batch_tokens: int = 8192) -> FlatIndex:
    texts = segment_text(tree, backbone.encode, backbone.decode, segment_tokens)
    items = [_Item(i, backbone.encode(t), None) for i, t in enumerate(texts)]
    mem = torch.zeros(len(items), backbone.hidden_size)
    for batch in batches_by_length(items, max_batch_nodes, max_batch_tokens):
        out = read_out(backbone, parts, batch).cpu()
        for j, it in enumerate(batch):
            mem[it.key] = out[j]
    return FlatIndex(texts, mem)


def search(index: FlatIndex, q: torch.Tensor, proj, n: int) -> tuple[list[int], torch.Tensor]:
    """Top-n segments by softmax attention of q over all segment memories; (ids, weights)."""
    from engine.memory.projections import normalise, centre

    mu = centre(index.memories)
    scores = proj.host_score(normalise(q.float().cpu(), mu), normalise(index.memories, mu))
    weights = torch.softmax(scores, 0)
    top = weights.topk(min(n, len(weights))).indices.sort().values
    return top.tolist(), weights


def flat_index(rt, doc_id: int, tree: Tree, segment_tokens: int) -> FlatIndex:
    """The document's segment index, kept per runtime (engine.runtime.Runtime) by document
    content, writer fingerprint and segment size."""
    cache = rt.cache.setdefault("flat", {})
    key = (doc_id, rt.library.get_document(doc_id).sha256, rt.fingerprint, segment_tokens)
    if key not in cache:
        cache[key] = build_flat_index(tree, rt.backbone, rt.parts, segment_tokens,
                                      **rt.settings.write_batches)
    return cache[key]
