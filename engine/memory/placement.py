"""Where tensors meet: one device for the model side, the host for the evidence side.

The backbone and the trained parts live on one device, chosen once (``Settings.device``,
``H2MT_DEVICE``; ``backbone.pick_device``). What storage returns (memories) and what routing
scores with (BM25, sentence vectors, numpy) lives on the host. The two sides meet only here:
an input goes to a module's device with ``onto``, a result comes back with ``to_host``. The
router's projections (H2MT 3.3) use both, so the memory score runs where its weights are and
only its [n, d_h] result crosses back.
"""
from __future__ import annotations

import torch
from torch import nn


def device_of(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (the parts keep all theirs on one device)."""
    return next(module.parameters()).device


def onto(x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    """``x`` on ``module``'s device and in its parameters' dtype, ready to be multiplied."""
    p = next(module.parameters())
    return x.to(device=p.device, dtype=p.dtype)


def to_host(x: torch.Tensor) -> torch.Tensor:
    """A model-side result as a float32 tensor on the host, detached (numpy can view it)."""
    return x.detach().float().cpu()
