"""The writer's stages (H2MT 3.2, 3.4, appendix E): e_write, e_read, the memory scale (and
Agg's parameters, when the policy has any), trained on L_LM (``writer``) or on L_route
(``route_writer``).

- ``writer``       L_LM (+ L_AE when weighted). Node memories are computed with gradients
                   through the backbone on short texts (``max_tokens``). Choice: an internal
                   node's aggregated prefix m~_v comes from its first children's memories
                   computed without gradients on their own local text (one level of the
                   bottom-up schedule, not the whole subtree) to keep steps short.
- ``route_writer`` L_route backpropagated into the writer (appendix E: "gradients to the
                   routing projections (and upstream memory construction)"): the same
                   parameters, so that the read slot's final hidden state separates a parent's
                   children for the questions asked about them. Per query, one parent on its
                   gold path is drawn; the gold child and up to ``negatives`` other children get
                   memories with gradients (their texts cut to ``max_tokens``), the query vector
                   too, and the loss is the per-parent cross-entropy (3.4) over that sample of
                   C(p) with the router's projections as they are (not trained here). Choices:
                   an internal child's prefix m~_v and each document's centre come from the
                   memories written when the stage started (detached; a snapshot that goes stale
                   as the writer moves, refreshed only by the stages after it), because
                   recomputing a subtree per example would cost minutes a step on a CPU.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

import torch

from engine.memory.parts import H2MTParts
from engine.memory.projections import centre, normalise
from engine.memory.writer import _Item, read_out, read_out_differentiable
from engine.routing.query import query_ids
from engine.training.config import StageConfig
from engine.training.losses import memory_lm_loss, reconstruction_loss, route_loss
from engine.training.run import Run, ensure_memories, memory_path
from engine.training.stages.base import Stage, nodes_with_text, query_rows
from engine.training.supervision import gold_sets


class WriterStage(Stage):
    """``writer``: L_LM (+ L_AE) on the training documents' nodes with text."""

    name = "writer"

    @staticmethod
    def trainable(parts: H2MTParts) -> list[torch.nn.Parameter]:
        return [parts.e_write, parts.e_read, parts.log_memory_scale, *parts.agg.parameters()]

    def examples(self, start_step: int) -> list[tuple[str, int]]:
        return nodes_with_text(self.run, self.run.data.train_docs)

    def loss(self, batch: list[tuple[str, int]], rng: random.Random) -> dict[str, torch.Tensor]:
        return writer_loss(self.run, self.st, batch)


class RouteWriterStage(Stage):
    """``route_writer``: L_route into the writer's parameters, from the snapshot of memories
    the stage started from."""

    name = "route_writer"
    trainable = staticmethod(WriterStage.trainable)  # the same parameters, trained on L_route

    def examples(self, start_step: int) -> list[int]:
        rows = query_rows(self.run, self.run.data.train_docs)
        self.snap = writer_snapshot(self.run, self.index, start_step)
        return rows

    def loss(self, batch: list[int], rng: random.Random) -> dict[str, torch.Tensor]:
        return writer_route_loss(self.run, self.st, batch, self.snap, rng)


def writer_loss(run: Run, st: StageConfig, batch: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
    """L_LM (+ L_AE) of H2MT 3.4 with memories computed with gradients (see module docstring)."""
    bb, parts = run.backbone, run.parts
    items, texts = [], []
    for i, (doc, nid) in enumerate(batch):
        tree = run.data.trees[doc]
        ids = bb.encode(tree.node(nid).local_text)[: st.max_tokens]
        prefix = None
        if not tree.is_leaf(nid):
            kids = tree.children(nid)[:8]
            kid_items = [_Item(c.id, bb.encode(c.local_text)[: st.max_tokens], None) for c in kids]
            km = read_out(bb, parts, kid_items)  # [c, d], no gradients
            agg = parts.agg(km[None], torch.ones(1, len(kids), dtype=torch.bool, device=km.device))[0]
            prefix = parts.memory_as_input(agg.float())
        items.append(_Item(i, ids, prefix))
        texts.append(ids)
    m = read_out_differentiable(bb, parts, items)
    slots = parts.memory_as_input(m)
    out = {"lm": memory_lm_loss(bb, slots, texts)}
    if st.w_ae:
        out["ae"] = reconstruction_loss(bb, slots, texts)
    out["loss"] = st.w_lm * out["lm"] + st.w_ae * out.get("ae", 0.0)
    return out


@dataclass
class WriterSnapshot:
    """The memories written when the ``route_writer`` stage started: internal children's
    prefixes m~_v and the documents' centres during that stage (module docstring)."""

    fingerprint: str
    memories: dict[str, torch.Tensor]
    centres: dict[str, torch.Tensor]


def writer_snapshot(run: Run, index: int, start_step: int) -> WriterSnapshot:
    """Memories under the writer the stage started from: the current one at step 0 (recorded
    in the run folder), the recorded one when the stage resumes (its caches are kept)."""
    path = run.cfg.out_dir / f"snapshot-stage{index}.json"
    if start_step and path.exists():
        fp = json.loads(path.read_text())["fingerprint"]
        mems = {k: torch.load(memory_path(run, fp, k)) for k in run.data.trees}
    else:
        cache = ensure_memories(run)
        fp, mems = cache.fingerprint, cache.memories
        path.write_text(json.dumps({"fingerprint": fp}))
    return WriterSnapshot(fp, mems, {k: centre(m) for k, m in mems.items()})


def _snapshot_item(run: Run, st: StageConfig, snap: WriterSnapshot, doc: str, nid: int,
                   key: int) -> _Item:
    """A node's writer input: its text (cut to max_tokens) and, for an internal node, the
    aggregated prefix of its children's snapshot memories."""
    bb, parts, tree = run.backbone, run.parts, run.data.trees[doc]
    text = tree.node(nid).local_text
    ids = bb.encode(text)[: st.max_tokens] if text.strip() else []
    prefix = None
    if not tree.is_leaf(nid):
        kids = [c.id for c in tree.children(nid)]
        km = snap.memories[doc][kids].to(bb.device)
        agg = parts.agg(km[None], torch.ones(1, len(kids), dtype=torch.bool, device=km.device))[0]
        prefix = parts.memory_as_input(agg.float())
    return _Item(key, ids, prefix)


def writer_route_loss(run: Run, st: StageConfig, rows: list[int], snap: WriterSnapshot,
                      rng: random.Random) -> dict[str, torch.Tensor]:
    """L_route (3.4) with gradients into the writer (appendix E), on a sample of each drawn
    parent's children: the gold child first, then up to ``negatives`` others."""
    bb, parts = run.backbone, run.parts
    q_items: list[_Item] = []
    m_items: list[_Item] = []
    groups: list[tuple[str, int, int]] = []  # (doc, first candidate row, candidates)
    for r in rows:
        q = run.data.queries[r]
        tree = run.data.trees[q.doc]
        choices = [(p, g) for p, g in gold_sets(tree, q.gold).items()
                   if len(tree.children(p)) > len(g)]  # a parent with something to prune
        if not choices:
            continue
        parent, gold = rng.choice(choices)
        others = [c.id for c in tree.children(parent) if c.id not in gold]
        cands = [rng.choice(sorted(gold))] + rng.sample(others, min(st.negatives, len(others)))
        q_items.append(_Item(len(q_items), query_ids(bb, q.question, run.cfg.query_fraction), None))
        groups.append((q.doc, len(m_items), len(cands)))
        m_items.extend(_snapshot_item(run, st, snap, q.doc, c, len(m_items)) for c in cands)
    if not groups:
        zero = parts.e_read.sum() * 0
        return {"route": zero, "acc": zero.detach(), "loss": zero}
    qv = read_out_differentiable(bb, parts, q_items)
    mv = read_out_differentiable(bb, parts, m_items)
    width = max(n for _, _, n in groups)
    scores = torch.zeros(len(groups), width, device=qv.device)
    mask = torch.zeros(len(groups), width, dtype=torch.bool, device=qv.device)
    for i, (doc, start, n) in enumerate(groups):
        mu = snap.centres[doc].to(qv.device)
        s = parts.router.score(normalise(qv[i], mu), normalise(mv[start:start + n], mu))
        scores[i, :n] = s
        mask[i, :n] = True
    gold = torch.zeros(len(groups), dtype=torch.long, device=qv.device)
    loss = route_loss(scores, mask, gold, st.tau) / len(groups)
    acc = (scores.masked_fill(~mask, float("-inf")).argmax(1) == 0).float().mean()
    return {"route": loss, "acc": acc.detach(), "loss": loss}
