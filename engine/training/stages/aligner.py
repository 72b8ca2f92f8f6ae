"""ArcAligner's three stages (ArcAligner 3.5): the projector from memories to input slots, the
masked LoRA, and the gates, trained on memories written by the trained writer (cached).

- ``align_recon`` ArcAligner stage I: L_AE, decode a node's text from its slot; projector +
                  masked LoRA, gate off.
- ``align_task``  ArcAligner stage II: L_gen on routed memories (the product's own prompt, the
                  router's own hard top-k selection, the gold leaf added if the route missed it),
                  projector + LoRA, gate off.
- ``align_gate``  ArcAligner stage III: the same with the gate on, straight-through estimator
                  (eq. 7), projector + LoRA + gates.
"""
from __future__ import annotations

import random

import torch

from engine.answer.generation.prompts import prompt_around_slots
from engine.memory.parts import H2MTParts
from engine.routing.router import route
from engine.training.config import StageConfig
from engine.training.losses import answer_loss, reconstruction_loss
from engine.training.run import Run, ensure_memories
from engine.training.stages.base import Stage, nodes_with_text, query_rows
from engine.training.supervision import routing_hit


class ReconStage(Stage):
    """``align_recon`` (stage I): L_AE on the training documents' nodes with text."""

    name = "align_recon"

    @staticmethod
    def trainable(parts: H2MTParts) -> list[torch.nn.Parameter]:
        a = parts.aligner
        return [*a.projector.parameters(), *a.lora.parameters()]

    def examples(self, start_step: int) -> list[tuple[str, int]]:
        return nodes_with_text(self.run, self.run.data.train_docs)

    def loss(self, batch: list[tuple[str, int]], rng: random.Random) -> dict[str, torch.Tensor]:
        return recon_loss(self.run, self.st, batch)


class TaskStage(Stage):
    """``align_task`` (stage II): L_gen on the training queries that have an answer."""

    name = "align_task"
    trainable = staticmethod(ReconStage.trainable)  # projector + LoRA, as stage I

    def examples(self, start_step: int) -> list[int]:
        queries = self.run.data.queries
        return [r for r in query_rows(self.run, self.run.data.train_docs) if queries[r].answer]

    def loss(self, batch: list[int], rng: random.Random) -> dict[str, torch.Tensor]:
        return gen_loss(self.run, self.st, batch)


class GateStage(TaskStage):
    """``align_gate`` (stage III): stage II's loss and examples with the gates on and trained."""

    name = "align_gate"
    gate = True

    @staticmethod
    def trainable(parts: H2MTParts) -> list[torch.nn.Parameter]:
        a = parts.aligner
        return [*a.projector.parameters(), *a.lora.parameters(), *a.gates.parameters()]


def recon_loss(run: Run, st: StageConfig, batch: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
    """ArcAligner stage I: L_AE from the projected slot through the masked LoRA."""
    bb, aligner = run.backbone, run.parts.aligner
    cache = ensure_memories(run)
    mem = torch.stack([cache.memories[d][n] for d, n in batch]).to(bb.device)
    texts = [bb.encode(run.data.trees[d].node(n).local_text)[: st.max_tokens] for d, n in batch]
    loss = reconstruction_loss(bb, aligner.project(mem), texts, aligner=aligner)
    return {"ae": loss, "loss": loss}


def retrieved_slots(run: Run, st: StageConfig, row: int) -> list[int]:
    """The memories L_gen conditions on: the router's hard top-k route for the query (the
    product's retrieval), the gold nodes added when it missed them, at most ``max_slots``."""
    q = run.data.queries[row]
    cache = ensure_memories(run)
    rt = run.routing_tree(q.doc)
    selected = route(rt, cache.query_vectors[row], run.parts.router, k=st.k).selected
    tree = run.data.trees[q.doc]
    if not routing_hit(tree, selected, q.gold):
        selected = list(q.gold) + selected
    keep = list(dict.fromkeys([g for g in selected if g in q.gold] + selected))[: st.max_slots]
    return sorted(keep)  # document order, as the memory mode


def gen_loss(run: Run, st: StageConfig, rows: list[int]) -> dict[str, torch.Tensor]:
    """ArcAligner stages II/III: L_gen with the memory mode's prompt (engine.answer.generation.prompts)."""
    bb, aligner = run.backbone, run.parts.aligner
    cache = ensure_memories(run)
    prefixes, masks, answers = [], [], []
    for r in rows:
        q = run.data.queries[r]
        ids = retrieved_slots(run, st, r)
        slots = aligner.project(cache.memories[q.doc][ids].to(bb.device))
        head, tail = prompt_around_slots(bb, q.question)
        prefixes.append(torch.cat([head.to(bb.device), slots, tail.to(bb.device)]))
        masks.append(torch.cat([torch.zeros(len(head), dtype=torch.bool),
                                torch.ones(len(ids), dtype=torch.bool),
                                torch.zeros(len(tail), dtype=torch.bool)]))
        answers.append(bb.decode(bb.encode(q.answer)[: st.max_tokens]))
    loss = answer_loss(bb, prefixes, answers, slot_masks=masks, aligner=aligner)
    return {"gen": loss, "loss": loss}
