"""The training stages, one handler per name (H2MT 3.4 / appendix E, ArcAligner 3.5).

The backbone stays frozen; each stage trains its own parameters of ``H2MTParts``
(``trainable``) on its own loss and data:

- ``writer``, ``route_writer``                  the writer (``stages.writer``)
- ``router``                                    W_q, W_k (``stages.router``)
- ``align_recon``, ``align_task``, ``align_gate`` ArcAligner's stages I-III (``stages.aligner``)

``HANDLERS`` maps a stage's name to its handler (``stages.base.Stage``); it holds exactly the
names of ``engine.training.config.STAGES``, in that order.
"""
from __future__ import annotations

import torch

from engine.memory.parts import H2MTParts
from engine.training.config import STAGES
from engine.training.stages.aligner import GateStage, ReconStage, TaskStage
from engine.training.stages.base import Stage
from engine.training.stages.router import RouterStage
from engine.training.stages.writer import RouteWriterStage, WriterStage

HANDLERS: dict[str, type[Stage]] = {
    s.name: s for s in (WriterStage, RouteWriterStage, RouterStage, ReconStage, TaskStage,
                        GateStage)}
if tuple(HANDLERS) != STAGES:
    raise RuntimeError(f"stage handlers {tuple(HANDLERS)} do not match STAGES {STAGES}")


def trainable(parts: H2MTParts, stage: str) -> list[torch.nn.Parameter]:
    """The parameters one stage trains (everything else in the parts stays as it is)."""
    return HANDLERS[stage].trainable(parts)
