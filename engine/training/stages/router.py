"""The router's stage (H2MT 3.4, appendix E): W_q and W_k on cached memories.

- ``router``      L_route + L_sel (softmax relaxation of top-k, appendix E) on cached memories:
                  W_q, W_k. Costs seconds. The best step by validation hit@k with the real hard
                  top-k router (``engine.routing.router.route``) on held-out documents is kept.
"""
from __future__ import annotations

import math
import random

import torch

from engine.memory.parts import H2MTParts
from engine.memory.projections import centre, normalise
from engine.routing.router import route
from engine.training.config import StageConfig
from engine.training.losses import route_loss, selection_loss
from engine.training.run import Run, ensure_memories
from engine.training.stages.base import Stage, query_rows
from engine.training.supervision import RoutingPairs, routing_hit, routing_pairs


class RouterStage(Stage):
    """``router``: L_route + L_sel over every (query, parent on a gold path) pair of a batch of
    training queries; validation every ``eval_every`` steps, the best step kept."""

    name = "router"

    @staticmethod
    def trainable(parts: H2MTParts) -> list[torch.nn.Parameter]:
        return list(parts.router.parameters())

    def optimised(self) -> list[torch.nn.Parameter]:
        # The router learns from the cached memories and query vectors, which stay on the CPU
        # beside the routing trees its validation walks; its two small projections go there too
        # (in place, so they stay the parts' parameters) when the backbone runs on a GPU.
        self.run.parts.router.to("cpu")
        if self.st.tied:  # W_k follows W_q (after_step)
            return [self.run.parts.router.w_q.weight]
        return super().optimised()

    def examples(self, start_step: int) -> list[int]:
        run, cfg = self.run, self.run.cfg
        rows = query_rows(run, run.data.train_docs)
        val_rows = query_rows(run, run.data.val_docs)
        self.val_rows = random.Random(cfg.seed).sample(val_rows,
                                                       min(len(val_rows), cfg.max_val_queries))
        self.mn, self.offsets = _normalised_tables(run, list(run.data.trees))
        cache = ensure_memories(run)
        mu = {d: centre(cache.memories[d]) for d in run.data.trees}
        self.qn = torch.stack([normalise(cache.query_vectors[i], mu[q.doc])
                               for i, q in enumerate(run.data.queries)])
        self.best = {"hit": -1.0, "state": None, "step": 0}
        if start_step and (cfg.out_dir / "router_best.pt").exists():
            self.best = torch.load(cfg.out_dir / "router_best.pt")
        return rows

    def loss(self, batch: list[int], rng: random.Random) -> dict[str, torch.Tensor]:
        run = self.run
        pairs = routing_pairs(run.data.trees, self.offsets, run.data.queries, batch)
        return router_loss(run, self.st, pairs, self.mn, self.qn, len(batch))

    def after_step(self) -> None:
        if self.st.tied:
            with torch.no_grad():
                self.run.parts.router.w_k.weight.copy_(self.run.parts.router.w_q.weight)

    def evaluate(self, done: int) -> dict[str, float]:
        """Validation hit@k every ``eval_every`` steps and at the last; the best step's router
        is recorded in the run folder (``router_best.pt``)."""
        st = self.st
        if not (done % st.eval_every == 0 or done == st.steps):
            return {}
        val = validate_routing(self.run, st.k, self.val_rows)
        hit = val[f"hit@{st.k}_all"]
        if hit > self.best["hit"]:
            state = self.run.parts.router.state_dict()
            self.best = {"hit": hit, "step": done,
                         "state": {k: v.clone() for k, v in state.items()}}
            torch.save(self.best, self.run.cfg.out_dir / "router_best.pt")
        return val

    def finish(self) -> None:
        """The router of the best validated step is the one kept."""
        best, k = self.best, self.st.k
        if best["state"] is not None:
            self.run.parts.router.load_state_dict(best["state"])
            self.run.log(f"router: kept step {best['step']} (validation hit@{k} {best['hit']:.3f})")


def router_loss(run: Run, st: StageConfig, pairs: RoutingPairs, mn: torch.Tensor,
                qn: torch.Tensor, n_queries: int) -> dict[str, torch.Tensor]:
    """L_route + L_sel over the pairs, per query (scores as router.RouterProjections.score).

    ``tied``: keys go through W_q too (W_k is set to W_q after each step, see RouterStage), so
    the score is a learned metric (W q)^T (W m) on the shared space of the writer's read-outs.
    q and m come from the same writer; with half the parameters it did slightly better on a
    held-out manual than separate W_q, W_k in side runs (docs/results.md, "H2MT parts against
    the untrained initialisation"; assets/MODEL_CARD.md). Used by configs/train_cpu_more.toml,
    not by the shipped recipe."""
    proj = run.parts.router
    keys = (proj.w_q if st.tied else proj.w_k)(mn)  # [N, d_h], every node once
    q = proj.w_q(qn[pairs.query])  # [P, d_h]
    scores = torch.einsum("pcd,pd->pc", keys[pairs.children], q) / math.sqrt(proj.d_head)
    one = pairs.single >= 0
    l_route = (route_loss(scores[one], pairs.mask[one], pairs.single[one], st.tau)
               if one.any() else scores.sum() * 0)
    l_sel = selection_loss(scores, pairs.mask, pairs.gold, st.tau)
    return {"route": l_route / n_queries, "sel": l_sel / n_queries,
            "loss": (st.w_route * l_route + st.w_sel * l_sel) / n_queries}


@torch.no_grad()
def validate_routing(run: Run, k: int, rows: list[int]) -> dict[str, float]:
    """hit@k of the real hard top-k router on held-out queries, overall and per kind."""
    cache = ensure_memories(run)
    trees = {d: run.routing_tree(d) for d in {run.data.queries[r].doc for r in rows}}
    hits: dict[str, list[bool]] = {}
    for r in rows:
        q = run.data.queries[r]
        sel = route(trees[q.doc], cache.query_vectors[r], run.parts.router, k=k).selected
        h = routing_hit(run.data.trees[q.doc], sel, q.gold)
        hits.setdefault("all", []).append(h)
        hits.setdefault(q.kind, []).append(h)
    return {f"hit@{k}_{kind}": sum(v) / len(v) for kind, v in hits.items()}


def _normalised_tables(run: Run, docs: list[str]):
    """Centred, normalised memories of ``docs`` stacked (the router's inputs) and offsets."""
    cache = ensure_memories(run)
    offsets, rows = {}, []
    n = 0
    for d in docs:
        mem = cache.memories[d]
        offsets[d] = n
        rows.append(normalise(mem, centre(mem)))  # as RoutingTree.centre
        n += len(mem)
    return torch.cat(rows), offsets
