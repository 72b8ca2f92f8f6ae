"""Selective LoRA of ArcAligner (eq. 3): A(H) = F(H) + M_r * dF(H), a low-rank update added to
a frozen Linear only at the memory-slot rows, and the thread-local slot context (armed mask,
LoRA mask, loop counts) the wrappers of one aligner share (see ``engine.memory.aligner``)."""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class SlotContext(threading.local):
    """State shared by the wrappers of one attached aligner, one copy per thread.

    ``slot_mask`` (bool [B, S]) is armed by ``ArcAligner.slots`` and used by the first forward of
    length S; ``lora_mask`` ([B, S', 1] or None) is set only while a wrapped layer runs on slots.
    Being thread-local, a mask armed in one thread never reaches a forward run by another.
    """

    def __init__(self) -> None:
        self.slot_mask: Tensor | None = None
        self.done = False
        self.lora_mask: Tensor | None = None
        self.loops: dict[int, Tensor] = {}  # gated-layer number -> int [B, S]
        self.last_loops: Tensor | None = None

    def arm(self, slot_mask: Tensor) -> None:
        self.slot_mask, self.done, self.loops, self.last_loops = slot_mask, False, {}, None

    def disarm(self) -> None:
        self.slot_mask, self.lora_mask = None, None

    def mask_for(self, hidden_states: Tensor) -> Tensor | None:
        """The slot mask if this forward is the armed one, else None."""
        m = self.slot_mask
        if m is None or self.done or tuple(hidden_states.shape[:2]) != tuple(m.shape):
            return None
        return m.to(hidden_states.device)

    @contextmanager
    def lora(self, mask: Tensor | None) -> Iterator[None]:
        """Make the LoRA wrappers add their update at ``mask`` rows (bool [B, S']) meanwhile."""
        previous = self.lora_mask
        self.lora_mask = None if mask is None else mask.unsqueeze(-1)  # [B, S', 1]
        try:
            yield
        finally:
            self.lora_mask = previous

    def finish(self, n_gated: int) -> None:
        """End of the armed forward: gather loop counts per slot into ``last_loops``."""
        mask = self.slot_mask  # [B, S]
        B = mask.shape[0]
        n_max = int(mask.sum(1).max()) if mask.numel() else 0
        out = torch.zeros(B, n_max, n_gated, dtype=torch.long)  # [B, n_slots_max, G]
        for j, loops in self.loops.items():
            for b in range(B):
                row = loops[b][mask[b].to(loops.device)].cpu()  # [n_b]
                out[b, : row.numel(), j] = row
        self.last_loops, self.done = out, True


class LoRAAdapter(nn.Module):
    """The low-rank update dF = B A x * (alpha / r); B starts at 0 (Hu et al. 2022)."""

    def __init__(self, d_in: int, d_out: int, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        self.d_in, self.d_out, self.rank = d_in, d_out, rank
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, d_in))
        self.lora_B = nn.Parameter(torch.zeros(d_out, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x: Tensor) -> Tensor:
        """x: [.., d_in] -> [.., d_out] in float32."""
        return F.linear(F.linear(x.float(), self.lora_A), self.lora_B) * self.scaling


class MaskedLoRALinear(nn.Module):
    """ArcAligner eq. (3) at one Linear: base(x) + mask * (B A x) * (alpha / r).

    The mask ([B, S, 1]) is the context's current slot mask; with none active the output is
    exactly ``base(x)``. peft's LoRA cannot do this: it adds the adapter at every position and
    its forward has no per-token mask, whereas here prompt tokens must stay on the frozen path.
    The base Linear is the model's own module (frozen, shared, not copied).
    """

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0,
                 context: SlotContext | None = None, adapter: LoRAAdapter | None = None):
        super().__init__()
        self.base = base
        self.adapter = adapter if adapter is not None else LoRAAdapter(
            base.in_features, base.out_features, rank, alpha)
        if (self.adapter.d_in, self.adapter.d_out) != (base.in_features, base.out_features):
            raise ValueError(f"LoRA adapter {self.adapter.d_in}->{self.adapter.d_out} does not fit "
                             f"Linear {base.in_features}->{base.out_features}")
        self.context = context if context is not None else SlotContext()

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)  # [B, S, d_out]
        mask = self.context.lora_mask  # [B, S, 1] or None
        if mask is None:
            return y
        if tuple(mask.shape[:2]) != tuple(x.shape[:2]):
            raise RuntimeError(f"slot mask {tuple(mask.shape)} does not match input {tuple(x.shape)}")
        delta = self.adapter(x) * mask.to(device=x.device, dtype=torch.float32)  # [B, S, d_out]
        return y + delta.to(y.dtype)
