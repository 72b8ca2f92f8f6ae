"""What ``engine.ask.ask_stream`` yields, in order: one ``RouteReady`` when routing ends (before
any generation, with the quote), zero or more ``TokenChunk`` (the text decoded since the previous chunk), one
``AnswerReady`` with the final Answer (its ``query_id`` once logged)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.answer.modes.base import ModeTraits
from engine.answer.response import Answer, Citation
from engine.answer.passages.quote import Quote
from engine.routing.router import Route


@dataclass
class RouteReady:
    route: Route | None  # None in full mode
    cited: list[Citation]  # the nodes the answer will read (text mode: those packed)
    mode: ModeTraits  # what the answer's mode does (engine.answer.modes.base)
    quote: Quote | None = None  # the manual's best passage (engine.answer.passages.quote)
    not_covered: bool = False  # no sentence reached the threshold: no quote


@dataclass
class TokenChunk:
    text: str


@dataclass
class AnswerReady:
    answer: Answer
    # its row in the query log: set when the stream is read past this event and the answer is
    # logged (None until then, when not logged, or when logging failed); the Answer is frozen
    query_id: int | None = None
