"""The H2MT memory writer (section 3.2): one memory vector per tree node, bottom-up.

Leaf v:      m_v = h_L( [e_write; E_v; e_read] )[last]                      (3.2.1)
Internal v:  m~_v = Agg(stack(m_u : u in C(v)))                              (3.2.2)
             m_v = h_L( [e_write; m~_v; E_v; e_read] )[last], or m~_v if x_v is empty

h_L is the backbone's final hidden state (after its last norm). The schedule is post-order by
height: every node of one height goes through the backbone together, in length-sorted batches
bounded by a node count and a padded-token count, without gradients, on the backbone's device.
Sequences are right-padded with an attention mask, so a node's memory does not depend on what
it was batched with (up to float rounding).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from engine.memory.aggregate import pad_children
from engine.memory.backbone import Backbone
from engine.memory.parts import H2MTParts
from engine.document.tree import Tree

ProgressFn = Callable[[int, int], None]  # (nodes done, nodes total)


@dataclass
class WriteStats:
    nodes: int = 0
    backbone_nodes: int = 0  # nodes that went through the backbone (not bypassed)
    tokens: int = 0  # sequence positions the backbone ran over, padding excluded
    padded_tokens: int = 0  # the same with padding
    forwards: int = 0
    seconds: float = 0.0


@dataclass
class _Item:
    """One backbone sequence: optional prefix vector (m~_v) then text ids, between the slots."""

    key: int
    ids: list[int]
    prefix: torch.Tensor | None  # [d] already at input scale, or None

    @property
    def length(self) -> int:
        return len(self.ids) + 2 + (self.prefix is not None)


def batches_by_length(items: list[_Item], max_nodes: int, max_tokens: int) -> list[list[_Item]]:
    """Length-sorted batches (longest first) bounded by node count and padded tokens."""
    ordered = sorted(items, key=lambda it: it.length, reverse=True)
    out: list[list[_Item]] = []
    cur: list[_Item] = []
    for it in ordered:
        width = cur[0].length if cur else it.length  # longest first: the first sets the width
        if cur and (len(cur) >= max_nodes or width * (len(cur) + 1) > max_tokens):
            out.append(cur)
            cur = []
        cur.append(it)
    if cur:
        out.append(cur)
    return out


def read_out_differentiable(backbone: Backbone, parts: H2MTParts, batch: list[_Item]) -> torch.Tensor:
    """Final hidden state at e_read for each item of one batch: [B, d] (float32).

    Builds [e_write; (prefix); E; e_read] per item, right-pads to the longest, runs the
    backbone's decoder stack (no LM head: only the hidden state is needed). Gradients reach
    e_write, e_read and the prefixes (training); ``read_out`` is the same without them.
    """
    device, dtype = backbone.device, backbone.dtype
    width = max(it.length for it in batch)
    d = backbone.hidden_size
    embeds = torch.zeros(len(batch), width, d, device=device, dtype=dtype)
    mask = torch.zeros(len(batch), width, device=device, dtype=torch.long)
    all_ids = [torch.tensor(it.ids, dtype=torch.long) for it in batch]
    flat = torch.cat(all_ids) if any(len(x) for x in all_ids) else torch.zeros(0, dtype=torch.long)
    flat_emb = backbone.embed(flat).to(dtype) if len(flat) else None
    e_write = parts.e_write.to(device, dtype)
    e_read = parts.e_read.to(device, dtype)
    offset = 0
    last = []
    for row, it in enumerate(batch):
        pos = 0
        embeds[row, pos] = e_write
        pos += 1
        if it.prefix is not None:
            embeds[row, pos] = it.prefix.to(device, dtype)
            pos += 1
        n = len(it.ids)
        if n:
            embeds[row, pos:pos + n] = flat_emb[offset:offset + n]
            offset += n
            pos += n
        embeds[row, pos] = e_read
        mask[row, :pos + 1] = 1
        last.append(pos)
    body = backbone.model.get_decoder() if hasattr(backbone.model, "get_decoder") else backbone.model.model
    hidden = body(inputs_embeds=embeds, attention_mask=mask, use_cache=False).last_hidden_state
    idx = torch.tensor(last, device=device)
    return hidden[torch.arange(len(batch), device=device), idx].float()


read_out = torch.no_grad()(read_out_differentiable)


@torch.no_grad()
def write_memories(tree: Tree, backbone: Backbone, parts: H2MTParts, *,
                   max_batch_nodes: int = 32, max_batch_tokens: int = 8192,
                   progress: ProgressFn | None = None,
                   stats: WriteStats | None = None,
                   known: Mapping[int, torch.Tensor] | None = None,
                   on_level: Callable[[dict[int, torch.Tensor]], None] | None = None
                   ) -> dict[int, torch.Tensor]:
    """All node memories of ``tree`` (H2MT 3.2), as float32 CPU tensors [d] keyed by node id.

    Bottom-up by height. ``known``: memories already written (an interrupted run being
    resumed); those nodes are not written again. ``on_level`` receives each height's new
    memories once the height is done (ingest stores them, one transaction per height)."""
    stats = stats if stats is not None else WriteStats()
    t0 = time.perf_counter()
    total = len(tree)
    memories: dict[int, torch.Tensor] = {i: m.float().cpu() for i, m in (known or {}).items()}
    device = backbone.device
    for level in tree.levels_bottom_up():
        level = [n for n in level if n.id not in memories]
        if not level:
            continue
        before = set(memories)
        # 1) Agg over children for the internal nodes of this height, batched (appendix B).
        internal = [n for n in level if not tree.is_leaf(n.id)]
        aggregated: dict[int, torch.Tensor] = {}
        if internal:
            stacks = [torch.stack([memories[c.id] for c in tree.children(n.id)]) for n in internal]
            children, mask = pad_children(stacks)
            agg = parts.agg(children.to(device), mask.to(device)).float().cpu()
            aggregated = {n.id: agg[i] for i, n in enumerate(internal)}
        # 2) Backbone pass for every node with text; empty text bypasses it (m_v = m~_v).
        items = []
        for n in level:
            ids = backbone.encode(n.local_text) if n.local_text.strip() else []
            if not ids:
                if n.id in aggregated:
                    memories[n.id] = aggregated[n.id]
                    continue
                # An empty leaf: nothing to bypass to; read out the bare slots so it still has
                # a (content-free) memory rather than none.
            prefix = parts.memory_as_input(aggregated[n.id].to(device)) if n.id in aggregated else None
            items.append(_Item(n.id, ids, prefix))
        for batch in batches_by_length(items, max_batch_nodes, max_batch_tokens):
            out = read_out(backbone, parts, batch).cpu()
            for i, it in enumerate(batch):
                memories[it.key] = out[i]
            stats.forwards += 1
            stats.backbone_nodes += len(batch)
            stats.tokens += sum(it.length for it in batch)
            stats.padded_tokens += len(batch) * max(it.length for it in batch)
            if progress is not None:
                progress(len(memories), total)
        if progress is not None:
            progress(len(memories), total)
        if on_level is not None:
            on_level({i: m for i, m in memories.items() if i not in before})
    stats.nodes = len(memories)
    stats.seconds += time.perf_counter() - t0
    assert len(memories) == total, "every node must get a memory"
    return memories
