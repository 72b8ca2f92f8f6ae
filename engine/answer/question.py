"""The question as every stage reads it, read once per ask: its text, its words (the lexical
channel's tokens), the kind of passage it asks for, whether it asks for front or back matter,
the pages it names, and the vectors routing encodes it as (H2MT 3.3). Routing, the passages,
the modes and the check all take this one object; the ask's options are the request's
(``engine.answer.request.Request``), not the question's."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from engine.answer.passages.answer_type import question_type
from engine.document.matter import asks_for_matter
from engine.routing import lexical
from engine.routing.named_pages import page_references


@dataclass(frozen=True)
class Question:
    """A read question. ``dense`` (the sentence encoder's vector) and ``vector`` (H2MT's query
    vector) are set once routing has encoded it (``encoded``); None where a channel is off."""

    text: str
    tokens: tuple[str, ...]
    kind: str | None  # engine.answer.passages.answer_type: HOWTO, OPTION, SYNTAX, DEFINITION
    matter: bool = False  # asks for front or back matter (engine.document.matter)
    page_refs: tuple[tuple[bool, str], ...] = ()  # the pages it names (routing.named_pages)
    dense: np.ndarray | None = None
    vector: torch.Tensor | None = None

    @classmethod
    def read(cls, text: str) -> Question:
        return cls(text, tuple(lexical.tokenize(text)), question_type(text),
                   asks_for_matter(text), page_references(text))

    @property
    def words(self) -> frozenset[str]:
        return frozenset(self.tokens)

    def encoded(self, dense, vector) -> Question:
        return replace(self, dense=dense, vector=vector)
