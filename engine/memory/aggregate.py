"""Aggregation of children memories into one parent summary m~_v (H2MT 3.2.2, appendix B).

``Agg`` maps the stacked children memories M in R^{c x d} of an internal node to one vector
m~_v in R^d. Six policies, chosen by name through ``make_aggregator``:

- "mean"        H2MT appendix B (1)
- "self_attn"   H2MT appendix B (2)
- "cross_attn"  H2MT appendix B (3), query-conditioned cross-attention
- "gat"         H2MT appendix B (4)
- "parent_attn" H2MT appendix B (5)
- "multiview"   HiCI 3.3 eq. (3)-(10), multi-view statistical pooling

All of them work on a batch of B parents whose child stacks are padded to a common length C,
with ``mask[b, i]`` True for a real child. Padded slots are zeroed before anything else, and
every softmax / statistic ignores them, so whatever they hold cannot change the output.

Initialisation: these modules run before any training, so every learned policy is initialised
to return (exactly or to float rounding) the mean of the real children. Each class docstring
says how, and where that forces a deviation from the papers' text.

None of the policies uses child positions, so all are invariant to permuting the children.
Parameters live in float32; inputs of any float dtype are cast in and the result cast back.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

POLICIES = ("mean", "self_attn", "cross_attn", "gat", "parent_attn", "multiview")


# ----------------------------------------------------------------------------- helpers

def pad_children(children: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Stack per-parent child memories [c_i, d] into (Tensor[B, Cmax, d], BoolTensor[B, Cmax]).

    Padding is zeros; mask is True for real children. dtype/device follow the first tensor.
    """
    if not children:
        raise ValueError("pad_children needs at least one parent")
    d = children[0].shape[-1]
    for i, m in enumerate(children):
        if m.dim() != 2 or m.shape[-1] != d:
            raise ValueError(f"parent {i}: expected a [c, {d}] tensor, got {tuple(m.shape)}")
        if m.shape[0] == 0:
            raise ValueError(f"parent {i} has no children; every parent needs at least one")
    ref = children[0]
    c_max = max(m.shape[0] for m in children)
    out = ref.new_zeros(len(children), c_max, d)
    mask = torch.zeros(len(children), c_max, dtype=torch.bool, device=ref.device)
    for i, m in enumerate(children):
        out[i, : m.shape[0]] = m.to(device=ref.device, dtype=ref.dtype)
        mask[i, : m.shape[0]] = True
    return out, mask


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean over the real children. x: [B, C, d], mask: [B, C] -> [B, d]."""
    m = mask.unsqueeze(-1)  # [B, C, 1]
    total = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum(1)
    return total / m.sum(1).to(x.dtype)


def masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis with padded keys removed. mask broadcasts to logits."""
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


# ----------------------------------------------------------------------------- base class

class Aggregator(nn.Module):
    """Base: checks, dtype/device handling and padding hygiene; subclasses implement ``pool``."""

    def forward(self, children: Tensor, mask: Tensor) -> Tensor:
        """children: [B, C, d], mask: BoolTensor[B, C] (True = real child) -> [B, d]."""
        assert children.dim() == 3 and mask.shape == children.shape[:2], \
            f"expected children [B, C, d] and mask [B, C], got {tuple(children.shape)}, {tuple(mask.shape)}"
        mask = mask.to(dtype=torch.bool)
        assert bool(mask.any(-1).all()), "every parent needs at least one real child"
        p = next(self.parameters(), None)
        device = p.device if p is not None else children.device
        x = children.to(device=device, dtype=torch.float32)  # [B, C, d]
        mask = mask.to(device)
        x = torch.where(mask.unsqueeze(-1), x, torch.zeros((), device=device))  # drop junk
        out = self.pool(x, mask)  # [B, d]
        return out.to(device=children.device, dtype=children.dtype)

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


# ----------------------------------------------------------------------------- policies

class MeanAgg(Aggregator):
    """H2MT appendix B (1): m~ = (1/c) sum_i M_i. No parameters."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        return masked_mean(x, mask)  # [B, d]


class SelfAttnAgg(Aggregator):
    """H2MT appendix B (2): Q = M W_Q, K = M W_K, A = softmax(Q K^T / sqrt(d_h)),
    w_i = sum_j A_ji, w^ = w / sum(w), m~ = sum_i w^_i M_i.

    Single head (W_Q, W_K: d -> d_h, no bias). The column sum runs over real query rows only.
    Init: W_Q = 0, so A is uniform over the real children and m~ is their mean.
    """

    def __init__(self, d_model: int, d_head: int = 64):
        super().__init__()
        self.d_head = d_head
        self.w_q = nn.Linear(d_model, d_head, bias=False)
        self.w_k = nn.Linear(d_model, d_head, bias=False)
        nn.init.zeros_(self.w_q.weight)

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        q, k = self.w_q(x), self.w_k(x)  # [B, C, d_h]
        att = q @ k.transpose(1, 2) / math.sqrt(self.d_head)  # [B, C(query j), C(key i)]
        att = masked_softmax(att, mask.unsqueeze(1))
        att = att * mask.unsqueeze(-1)  # padded query rows do not vote
        w = att.sum(1)  # [B, C]: w_i = sum_j A_ji
        w = w / w.sum(-1, keepdim=True)
        return (w.unsqueeze(-1) * x).sum(1)  # [B, d]


class CrossAttnAgg(Aggregator):
    """H2MT appendix B (3): Q = q W_Q, K = M W_K, S = softmax(Q K^T / sqrt(d_h)) in R^{K x c},
    w = (1/K) sum_k S_k, m~ = sum_i w_i M_i, with q in R^{K x d} learned parent query tokens.

    Init: q ~ N(0, 0.02^2), W_K default, W_Q = 0, so S is uniform and m~ is the children's mean.
    """

    def __init__(self, d_model: int, d_head: int = 64, n_queries: int = 4):
        super().__init__()
        self.d_head = d_head
        self.queries = nn.Parameter(torch.randn(n_queries, d_model) * 0.02)  # q: [K, d]
        self.w_q = nn.Linear(d_model, d_head, bias=False)
        self.w_k = nn.Linear(d_model, d_head, bias=False)
        nn.init.zeros_(self.w_q.weight)

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        q = self.w_q(self.queries)  # [K, d_h]
        k = self.w_k(x)  # [B, C, d_h]
        s = q @ k.transpose(1, 2) / math.sqrt(self.d_head)  # [B, K, C]
        s = masked_softmax(s, mask.unsqueeze(1))
        w = s.mean(1)  # [B, C]
        return (w.unsqueeze(-1) * x).sum(1)  # [B, d]


class GATAgg(Aggregator):
    """H2MT appendix B (4): k_i = W_child M_i, p = W_parent q_bar, q_bar = mean of K parent
    query tokens, e_i = LeakyReLU(a_p^T p + a_c^T k_i), alpha = softmax(e / tau),
    m~ = sum_i alpha_i W_V M_i.

    W_child, W_parent: d -> d_h; W_V: d -> d; LeakyReLU slope 0.2 (the GAT default; the paper
    gives none). The parent term a_p^T p is the same for every child, so it changes alpha only
    through the LeakyReLU kink, as in the paper's formula.
    Init: a_c = 0 (all e_i equal, alpha uniform) and W_V = identity, so m~ is the children's
    mean; a_p, W_child, W_parent default, q ~ N(0, 0.02^2).
    """

    def __init__(self, d_model: int, d_head: int = 64, n_queries: int = 4, tau: float = 1.0,
                 negative_slope: float = 0.2):
        super().__init__()
        assert tau > 0, "tau must be positive"
        self.tau, self.negative_slope = tau, negative_slope
        self.queries = nn.Parameter(torch.randn(n_queries, d_model) * 0.02)  # q: [K, d]
        self.w_child = nn.Linear(d_model, d_head, bias=False)
        self.w_parent = nn.Linear(d_model, d_head, bias=False)
        self.a_p = nn.Parameter(torch.randn(d_head) / math.sqrt(d_head))
        self.a_c = nn.Parameter(torch.zeros(d_head))
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            self.w_v.weight.copy_(torch.eye(d_model))

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        k = self.w_child(x)  # [B, C, d_h]
        p = self.w_parent(self.queries.mean(0))  # [d_h]
        e = F.leaky_relu(p @ self.a_p + k @ self.a_c, self.negative_slope)  # [B, C]
        alpha = masked_softmax(e / self.tau, mask)  # [B, C]
        v = self.w_v(x)  # [B, C, d]
        return (alpha.unsqueeze(-1) * v).sum(1)  # [B, d]


class ParentAttnAgg(Aggregator):
    """H2MT appendix B (5): M~ = [m_par; M], Q~ = M~ W_Q, K~ = M~ W_K, V~ = M~ W_V,
    O~ = softmax(Q~ K~^T / sqrt(d_h)) V~, m~ = O~_1 (the parent position).

    Only the parent row of O~ is computed (in one layer the other rows cannot reach it).
    W_Q, W_K: d -> d_h; W_V: d -> d (the output lives in R^d).
    Deviation (default ``attend_self=False``): the parent row attends to the children only, not
    to its own key. With its own key, uniform attention at init would give
    (W_V m_par + c * mean) / (1 + c), never the mean for a fixed m_par. ``attend_self=True``
    follows the paper literally (parent key included; m_par then starts at zero, so the output
    starts at c/(1+c) times the mean).
    Init: W_Q = 0 (uniform attention), W_V = identity, m_par ~ N(0, 0.02^2) (zero if
    attend_self), W_K default, so m~ starts at the children's mean.
    """

    def __init__(self, d_model: int, d_head: int = 64, attend_self: bool = False):
        super().__init__()
        self.d_head, self.attend_self = d_head, attend_self
        self.m_par = nn.Parameter(torch.zeros(d_model) if attend_self
                                  else torch.randn(d_model) * 0.02)
        self.w_q = nn.Linear(d_model, d_head, bias=False)
        self.w_k = nn.Linear(d_model, d_head, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        nn.init.zeros_(self.w_q.weight)
        with torch.no_grad():
            self.w_v.weight.copy_(torch.eye(d_model))

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        B = x.shape[0]
        seq = torch.cat([self.m_par.expand(B, 1, -1), x], dim=1)  # [B, 1+C, d], parent first
        keep = torch.cat([mask.new_full((B, 1), self.attend_self), mask], dim=1)  # [B, 1+C]
        q = self.w_q(self.m_par)  # [d_h], the parent row's query
        k, v = self.w_k(seq), self.w_v(seq)  # [B, 1+C, d_h], [B, 1+C, d]
        att = masked_softmax(k @ q / math.sqrt(self.d_head), keep)  # [B, 1+C]
        return (att.unsqueeze(-1) * v).sum(1)  # [B, d]


class MultiViewAgg(Aggregator):
    """HiCI 3.3 eq. (3)-(10), applied to one parent's children instead of HiCI's segments.

    Z = [mu; max; min; sigma; mu / ||mu||] over the real children (eq. 3-7; sigma is the
    population std, so one child gives sigma = 0), Z~ = LN(LN(Z W_c) W_b) (eq. 8, d -> d_s -> d_b),
    G_c = MHA(Q_G, Z~) with K learned queries and H heads (eq. 9), G = G_c W_exp softplus(beta)
    (eq. 10), G in R^{K x d}.
    Deviations, to get ONE vector that starts at the mean: m~ = mu + (1/K) sum_k G_k, i.e. the
    K outputs are averaged and added to a residual mean (HiCI has neither; it keeps G as K
    context tokens).
    Init: W_exp = 0 (so m~ = mu exactly), beta = softplus^-1(1) (gate 1), Q_G ~ N(0, 0.02^2),
    other projections default, LayerNorms at identity affine.
    """

    def __init__(self, d_model: int, d_s: int = 32, d_b: int = 64, n_queries: int = 4,
                 n_heads: int = 4):
        super().__init__()
        assert d_b % n_heads == 0, "d_b must be divisible by n_heads"
        self.n_heads = n_heads
        self.w_c = nn.Linear(d_model, d_s, bias=False)
        self.ln_c = nn.LayerNorm(d_s)
        self.w_b = nn.Linear(d_s, d_b, bias=False)
        self.ln_b = nn.LayerNorm(d_b)
        self.queries = nn.Parameter(torch.randn(n_queries, d_b) * 0.02)  # Q_G: [K, d_b]
        self.w_q = nn.Linear(d_b, d_b, bias=False)
        self.w_k = nn.Linear(d_b, d_b, bias=False)
        self.w_v = nn.Linear(d_b, d_b, bias=False)
        self.w_exp = nn.Linear(d_b, d_model, bias=False)
        nn.init.zeros_(self.w_exp.weight)
        self.beta = nn.Parameter(torch.tensor(math.log(math.e - 1.0)))  # softplus(beta) = 1

    @staticmethod
    def statistics(x: Tensor, mask: Tensor) -> Tensor:
        """HiCI eq. (3)-(7) over real children: x [B, C, d] -> Z [B, 5, d]."""
        m = mask.unsqueeze(-1)  # [B, C, 1]
        mu = masked_mean(x, mask)  # [B, d]
        mx = x.masked_fill(~m, float("-inf")).amax(1)  # [B, d]
        mn = x.masked_fill(~m, float("inf")).amin(1)  # [B, d]
        dev = torch.where(m, x - mu.unsqueeze(1), torch.zeros((), device=x.device))
        var = dev.pow(2).sum(1) / m.sum(1)  # [B, d], population variance
        pos = var > 0
        sigma = torch.where(pos, torch.where(pos, var, 1.0).sqrt(), 0.0)  # finite grad at 0
        mu_hat = mu / mu.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return torch.stack([mu, mx, mn, sigma, mu_hat], dim=1)  # [B, 5, d]

    def pool(self, x: Tensor, mask: Tensor) -> Tensor:
        B, H = x.shape[0], self.n_heads
        z = self.statistics(x, mask)  # [B, 5, d]
        mu = z[:, 0]  # [B, d], the residual
        z = self.ln_b(self.w_b(self.ln_c(self.w_c(z))))  # [B, 5, d_b]
        q = self.w_q(self.queries).expand(B, -1, -1)  # [B, K, d_b]
        k, v = self.w_k(z), self.w_v(z)  # [B, 5, d_b]
        q, k, v = (t.unflatten(-1, (H, -1)).transpose(1, 2) for t in (q, k, v))  # [B, H, *, d_b/H]
        g = F.scaled_dot_product_attention(q, k, v)  # [B, H, K, d_b/H], scale sqrt(d_b/H)
        g = g.transpose(1, 2).flatten(2)  # [B, K, d_b]
        g = self.w_exp(g) * F.softplus(self.beta)  # [B, K, d]
        return mu + g.mean(1)  # [B, d]


# ----------------------------------------------------------------------------- factory

_CLASSES: dict[str, type[Aggregator]] = {
    "mean": MeanAgg,
    "self_attn": SelfAttnAgg,
    "cross_attn": CrossAttnAgg,
    "gat": GATAgg,
    "parent_attn": ParentAttnAgg,
    "multiview": MultiViewAgg,
}
assert tuple(_CLASSES) == POLICIES


def make_aggregator(name: str, d_model: int, **opts) -> Aggregator:
    """Build the aggregation policy ``name`` (one of ``POLICIES``) for memories of size d_model.

    opts go to the policy's constructor: d_head (64), n_queries (K=4), tau (1.0),
    negative_slope (0.2), attend_self (False), d_s (32), d_b (64), n_heads (4).
    """
    if name not in _CLASSES:
        raise ValueError(f"unknown aggregation policy {name!r}; choose one of {', '.join(POLICIES)}")
    return _CLASSES[name](d_model, **opts)
