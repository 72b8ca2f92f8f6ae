"""Step 4 of the fusion's training: the weights [N_CH, 2] (subtree, own per channel) fitted to
L_route of H2MT 3.4 plus w_sel * L_sel (appendix E) over the cached features, with channel
dropout and an L2 pull toward the untrained z-sum."""
from __future__ import annotations

import torch

from engine.routing.channels import CHANNELS
from engine.routing.fusion import FusionWeights
from engine.training.fusion.features import N_CH, Features
from engine.training.losses import route_losses, selection_losses


def untrained_vector() -> torch.Tensor:
    """[N_CH, 2] (subtree, own) weights of the untrained z-sum."""
    w0 = FusionWeights()
    return torch.tensor([[w0.subtree[c], w0.own[c]] for c in CHANNELS], dtype=torch.float32)


def to_weights(w: torch.Tensor, source: str) -> FusionWeights:
    w = w.detach().cpu()
    return FusionWeights(subtree={c: round(float(w[i, 0]), 4) for i, c in enumerate(CHANNELS)},
                         own={c: round(float(w[i, 1]), 4) for i, c in enumerate(CHANNELS)},
                         source=source)


def fused_scores(f: Features, w: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """[P, C] fused score per child: sum over kept channels of w_sub z_sub + w_own z_own."""
    per_channel = (f.x * w[None, None]).sum(-1)  # [P, C, N_CH]
    return (per_channel * keep[:, None, :].float()).sum(-1)


def fit(f: Features, *, steps: int, lr: float, tau: float = 1.0, w_sel: float = 0.0,
        l2: float = 1e-3, channel_dropout: float = 0.3, seed: int = 0,
        log_every: int = 50, progress=None) -> tuple[torch.Tensor, list[dict]]:
    """Full-batch Adam on the weights [N_CH, 2] with channel dropout; returns (weights, log).
    Each parent's L_route (and L_sel) term is weighted by its query's kind share."""
    g = torch.Generator().manual_seed(seed)
    w0 = untrained_vector()
    w = w0.clone().requires_grad_(True)
    opt = torch.optim.Adam([w], lr=lr)
    n_q = len(f.weight)
    gold_mask = torch.zeros_like(f.mask)
    gold_mask[torch.arange(len(f.gold)), f.gold] = True
    history = []
    for step in range(1, steps + 1):
        # Channel dropout per query: drop each channel with probability p, keep at least one
        # of the channels the query has.
        drop = torch.rand(n_q, N_CH, generator=g) < channel_dropout
        keep_q = ~drop
        keep = keep_q[f.query] & f.present
        empty = ~keep.any(-1)
        keep[empty] = f.present[empty]
        s = fused_scores(f, w, keep)
        pw = f.weight[f.query]
        loss = (route_losses(s, f.mask, f.gold, tau) * pw).sum() / n_q
        if w_sel:
            loss = loss + w_sel * (selection_losses(s, f.mask, gold_mask, tau) * pw).sum() / n_q
        loss = loss + l2 * ((w - w0) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 1 or step % log_every == 0 or step == steps:
            rec = {"step": step, "loss": round(float(loss.detach()), 5)}
            history.append(rec)
            if progress is not None:
                progress(rec, w)
    return w.detach(), history
