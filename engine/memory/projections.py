"""The memory score's learned projections and the centring of memories (H2MT 3.3).

    s(u | q) = (W_q q)^T (W_k m_u) / sqrt(d_h)

They live beside the memories, not in the router, so that the learned parts (``parts.py``) do
not import the router; the router, the flat baseline and training all take them from here.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from engine.memory import placement


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
        """s(u|q) for q [d] (already centred+normalised) against m [n, d] -> [n], on the
        parts' device and differentiable (training)."""
        return (self.w_k(m) @ self.w_q(q)) / math.sqrt(self.d_head)

    # Serving: the inputs come from the host (storage, the question's vector), the projection
    # runs where the weights are, and only the result comes back (``placement``).
    @torch.no_grad()
    def keys(self, m: torch.Tensor) -> torch.Tensor:
        """W_k m for centred, normalised memories [n, d] from anywhere -> [n, d_h] on the host."""
        return self._served(self.w_k, m)

    @torch.no_grad()
    def query(self, q: torch.Tensor) -> torch.Tensor:
        """W_q q for a centred, normalised query [d] from anywhere -> [d_h] on the host."""
        return self._served(self.w_q, q)

    def _served(self, w: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return placement.to_host(w(placement.onto(x, self)))

    def host_score(self, q: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """``score`` for host inputs, computed as ``keys`` and ``query``: [n] on the host."""
        return self.keys(m) @ self.query(q) / math.sqrt(self.d_head)


def centre(memories: torch.Tensor) -> torch.Tensor:
    """The mean memory of the routed tree (the shared component removed before scoring)."""
    return memories.mean(0)


def normalise(x: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Centre on ``mu`` and L2-normalise (the router's choice before W_q/W_k, H2MT 3.3)."""
    x = x - mu
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)
