"""What a training stage is (``Stage``): the parameters it trains and, for one pass over its
steps, the examples its batches are drawn from, the losses of a batch, and its hooks around the
optimiser's step. The loop that drives a stage is ``engine.training.loop``; the table of stages
is ``engine.training.stages``."""
from __future__ import annotations

import random
from typing import ClassVar

import torch

from engine.memory.parts import H2MTParts
from engine.training.config import StageConfig
from engine.training.run import Run


class Stage:
    """One stage of a run, built for one pass over its steps: the run, the stage's index in the
    config and its settings. Subclasses set ``name`` and ``trainable`` and write ``examples``
    and ``loss``; the hooks do nothing unless a stage needs them."""

    name: ClassVar[str]
    gate: ClassVar[bool] = False  # ArcAligner's gate on, straight-through (stage III only)

    def __init__(self, run: Run, index: int, st: StageConfig) -> None:
        self.run, self.index, self.st = run, index, st

    @staticmethod
    def trainable(parts: H2MTParts) -> list[torch.nn.Parameter]:
        """The parameters the stage trains (everything else in the parts stays as it is)."""
        raise NotImplementedError

    def optimised(self) -> list[torch.nn.Parameter]:
        """The parameters given to the optimiser: ``trainable`` unless the stage ties some."""
        return self.trainable(self.run.parts)

    def examples(self, start_step: int) -> list:
        """The stage's setup, before its first step (``start_step`` > 0 on resume); returns
        the examples batches are drawn from."""
        raise NotImplementedError

    def loss(self, batch: list, rng: random.Random) -> dict[str, torch.Tensor]:
        """The losses of one batch; ``loss`` is the one minimised, every entry is logged.
        ``rng`` is the step's generator (the one the batch was drawn with)."""
        raise NotImplementedError

    def after_step(self) -> None:
        """Right after the optimiser's step."""

    def evaluate(self, done: int) -> dict[str, float]:
        """Entries for the log line of step ``done`` (1-based), e.g. a validation's."""
        return {}

    def finish(self) -> None:
        """After the last step, before the run folder is saved."""


def nodes_with_text(run: Run, docs: list[str]) -> list[tuple[str, int]]:
    """(document, node id) of every node of ``docs`` with local text."""
    return [(d, n.id) for d in docs for n in run.data.trees[d].preorder() if n.local_text.strip()]


def query_rows(run: Run, docs: list[str]) -> list[int]:
    """Rows of the run's queries about ``docs``."""
    return [i for i, q in enumerate(run.data.queries) if q.doc in docs]
