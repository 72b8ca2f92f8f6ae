"""The reader in this process (a ``Reader``: ``engine.serving.reader``): a local model that reads
the manual's text, its prompt rendered by its own chat template into input embeddings."""
from __future__ import annotations

from dataclasses import dataclass

from engine.answer.generation.decoding import Plan
from engine.answer.generation.prompts import embed_text, render_chat
from engine.memory.backbone import Backbone, model_title


@dataclass(frozen=True)
class InProcessReader:
    """A loaded model as the reader: the backbone itself, or another model ``H2MT_READER`` names."""

    backbone: Backbone

    def encode(self, text: str) -> list[int]:
        return self.backbone.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.backbone.decode(ids)

    @property
    def name(self) -> str:
        return self.backbone.name

    @property
    def label(self) -> str:
        return f"{self.backbone.name} (in this process)"

    @property
    def title(self) -> str:
        """The model and where it runs, in a visitor's words."""
        return f"{model_title(self.backbone.name)}, on this computer"

    def context_window(self) -> int:
        """The model's config's window."""
        return int(getattr(self.backbone.model.config, "max_position_embeddings", 2048))

    def chat_plan(self, messages: list[dict]) -> Plan:
        return Plan(self.backbone, [embed_text(self.backbone, render_chat(self.backbone, messages))])
