"""An ArcAligner whose gates always say loop, for tests that need the loops exercised."""
from __future__ import annotations

import torch

from engine.memory.aligner import ArcAligner


def looping_aligner(model, max_loops: int, *, lora_std: float = 0.0) -> ArcAligner:
    """An aligner on layer 0 whose every gate says loop (its MLP's last bias at 4, so the
    sigmoid is near 1); ``lora_std`` > 0 draws the LoRA B matrices at that spread (0: as built,
    zero). Draws from torch's global generator: seed it first."""
    aligner = ArcAligner.for_model(model, gated_layers=(0,), max_loops=max_loops)
    with torch.no_grad():
        if lora_std:
            for adapter in aligner.lora.values():
                adapter.lora_B.normal_(0, lora_std)
        for gate in aligner.gates.values():
            gate.mlp[-1].bias.fill_(4.0)
    return aligner
