"""The slot-wise gates of ArcAligner (eq. 5-9, Algorithm 1 lines 2-16): ``SlotGate`` and the
decoder-layer wrapper ``ArcLayer`` that runs the mandatory pass and then up to T gated loops on
the slot rows, without the cache and on the prefix up to the last slot (see
``engine.memory.aligner`` for the KV-cache and prefix re-run arguments)."""
from __future__ import annotations

import weakref

import torch
import torch.nn as nn
from torch import Tensor

GATE_BIAS_INIT = -4.0


def default_gated_layers(n_layers: int) -> tuple[int, ...]:
    """Every other layer of the upper half, the last layer excluded: range(N // 2, N - 1, 2).

    The last layer is never gated: a slot row's output there feeds no later position (it only
    changes the slot's own next-token logits, which nothing reads), so its loops could not
    change an answer and its gate would get no gradient. A 2-layer model gates layer 0.
    """
    return tuple(range(n_layers // 2, n_layers - 1, 2)) or (max(0, n_layers - 2),)


class SlotGate(nn.Module):
    """g = sigmoid(MLP(rmsnorm(H_r))), ArcAligner eq. (5); untrained: g = sigmoid(-4)."""

    def __init__(self, d_model: int, hidden: int = 64, bias_init: float = GATE_BIAS_INIT):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))
        with torch.no_grad():
            self.mlp[-1].weight.zero_()
            self.mlp[-1].bias.fill_(bias_init)

    def forward(self, h: Tensor) -> Tensor:
        """h: [B, S, d] -> probabilities [B, S, 1] in float32."""
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # scale-free input
        return torch.sigmoid(self.mlp(x))


def _hidden(out):
    """The hidden states from a decoder layer's return value (tensor, or tuple in old versions)."""
    return out if isinstance(out, Tensor) else out[0]


def _with_hidden(out, h: Tensor):
    return h if isinstance(out, Tensor) else (h, *out[1:])


_CACHE_KWARGS = ("past_key_values", "past_key_value", "layer_past")


def _uncached_kwargs(args: tuple, kwargs: dict, S: int, P: int) -> tuple[dict, int]:
    """Layer kwargs for a loop without the cache, sliced to the first P rows when that is known
    to be exact; returns (kwargs, rows). Unknown sequence-shaped arguments -> all S rows."""
    full = dict(kwargs)
    for k in _CACHE_KWARGS:
        if k in full:
            full[k] = None
    full["use_cache"] = False
    if P >= S or args:
        return full, S
    sliced = {}
    for k, v in full.items():
        if k == "attention_mask" and isinstance(v, Tensor):
            if v.dim() != 4 or v.shape[-2] != S or v.shape[-1] < S:
                return full, S
            v = v[..., :P, :P]  # prefill from position 0: key j is token j
        elif k == "position_embeddings" and isinstance(v, tuple):
            if not all(isinstance(t, Tensor) and t.shape[-2] == S for t in v):
                return full, S
            v = tuple(t[..., :P, :] for t in v)  # (cos, sin) [.., S, head_dim]
        elif k in ("position_ids", "cache_position") and isinstance(v, Tensor):
            if v.shape[-1] != S:
                return full, S
            v = v[..., :P]
        elif isinstance(v, Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(t, Tensor) for t in v)):
            return full, S  # some sequence-shaped argument we do not know how to slice
        sliced[k] = v
    return sliced, P


def _check_fresh_cache(layer: nn.Module, kwargs: dict) -> None:
    cache = kwargs.get("past_key_values")
    if cache is None or not hasattr(cache, "get_seq_length"):
        return
    idx = getattr(getattr(layer, "self_attn", None), "layer_idx", 0)
    try:
        seen = cache.get_seq_length(idx)
    except Exception:  # cache types that cannot say: trust the caller
        return
    if seen:
        raise RuntimeError(f"memory slots need a fresh prefill, but the cache already holds {seen} "
                           f"positions at layer {idx}")


class ArcLayer(nn.Module):
    """One decoder layer with ArcAligner's slot path (Algorithm 1, lines 2-16).

    Outside the armed forward it is exactly the original layer. In it: the mandatory pass
    A(H0) (eq. 4, the ordinary call, writes the cache) and, at gated layers, up to T gated loops
    without the cache (eq. 5-9).
    """

    def __init__(self, layer: nn.Module, index: int, aligner: "ArcAligner", gate: SlotGate | None,
                 gate_index: int | None):
        super().__init__()
        self.layer = layer
        self.index = index
        self.gate = gate
        self.gate_index = gate_index
        self._aligner = weakref.ref(aligner)  # a weak link: the aligner is not our submodule

    def forward(self, hidden_states: Tensor, *args, **kwargs):
        aligner = self._aligner()
        ctx = aligner.context
        slot_mask = ctx.mask_for(hidden_states)  # bool [B, S] or None
        if slot_mask is None:
            return self.layer(hidden_states, *args, **kwargs)
        try:
            _check_fresh_cache(self.layer, kwargs)
            with ctx.lora(slot_mask if aligner.lora_enabled else None):
                out = self.layer(hidden_states, *args, **kwargs)  # eq. (4): H^(l+1,0), cached
            if self.gate is not None and aligner.gate_enabled and slot_mask.any():
                h, loops = self._refine(_hidden(out), slot_mask, args, kwargs, aligner)
                out = _with_hidden(out, h)
                ctx.loops[self.gate_index] = loops
        finally:
            if self.index == aligner.n_layers - 1:
                ctx.finish(len(aligner.gated_layers))
        return out

    def _refine(self, h1: Tensor, slot_mask: Tensor, args: tuple, kwargs: dict,
                aligner: "ArcAligner") -> tuple[Tensor, Tensor]:
        """Gated loops t = 1..T (eq. 5-9). h1: [B, S, d] -> (refined [B, S, d], loops int [B, S])."""
        B, S, _ = h1.shape
        last = int(slot_mask.any(0).nonzero().max())  # last slot position in the batch
        P = last + 1 if aligner.prefix_rerun else S
        loop_kwargs, P = _uncached_kwargs(args, kwargs, S, P)
        prefix_mask = slot_mask[:, :P] if aligner.lora_enabled else None  # [B, P]
        slots = slot_mask.unsqueeze(-1)  # [B, S, 1]
        alive = slots.clone()  # slots that have not said stop yet
        loops = torch.zeros(B, S, dtype=torch.long, device=h1.device)
        h = h1
        for _ in range(aligner.max_loops):
            if not alive.any():
                break
            p = self.gate(h)  # eq. (5): [B, S, 1] float32
            hard = (p >= 0.5) & alive  # [B, S, 1]
            if not aligner.training and not hard.any():
                break  # nothing would change: skip the candidate pass
            with aligner.context.lora(prefix_mask):
                cand = _hidden(self.layer.forward(h[:, :P], *args, **loop_kwargs))  # eq. (6), no cache
            cand = torch.cat([cand, h[:, P:]], dim=1)  # [B, S, d]
            if aligner.training:  # eq. (7)-(8): straight-through gate, dead slots frozen
                g = (p + (hard.float() - p).detach()) * alive.float()
                upd = h + g.to(h.dtype) * (cand - h)
            else:  # hard gate: an exact conditional update
                upd = torch.where(hard, cand, h)
            h = torch.where(slots, upd, h1)  # eq. (9): non-slot rows stay as after the pass
            loops += hard.squeeze(-1).long()
            alive = hard
        return h, loops
