"""What a reader is: the model that reads the manual's text to answer (``Settings.reader``).

Two kinds follow this protocol: the model in this process
(``engine.answer.generation.reader.InProcessReader``) and a model on an OpenAI-compatible server
(``engine.serving.remote_decoding.ServedReader``). The modes and the pipeline use only what is
declared here, never the kind: they count and cut text with ``encode``/``decode``, size the
context with ``context_window``, and get a plan for the chat turns with ``chat_plan``, whose
``streamed(decoding, workers)`` decodes it (in process: by the model's generation worker, which
``workers(model)`` gives; served: by the server, which batches its own asks).
"""
from __future__ import annotations

from typing import Protocol


class Counter(Protocol):
    """Counts and cuts text in a model's tokens."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class Reader(Counter, Protocol):
    """The model that reads text (module docstring)."""

    @property
    def label(self) -> str:
        """Who reads, as the app, the CLI and the JSON show it."""
        ...

    @property
    def title(self) -> str:
        """The model and where it runs, as the page names it to a visitor."""
        ...

    def context_window(self) -> int:
        """The tokens a prompt and its answer may take together."""
        ...

    def chat_plan(self, messages: list[dict]):
        """A plan for these chat turns (system, user), ready to stream."""
        ...
