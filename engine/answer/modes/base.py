"""What an answer mode is (``Mode``): what it needs, when its quote is found, its plan (the
prompt it generates from, or none), how its output is cleaned and whether evidence lines are kept.
The pipeline that runs a mode is ``engine.ask``; the table of modes is ``engine.answer.modes``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping

import torch

from engine.answer.decoding import GenerationResult, Plan
from engine.answer.quote import Quote
from engine.answer.sentences import Sentence


@dataclass(frozen=True)
class ModeInputs:
    """What a mode's plan reads: the request and its route (plain, not written to)."""

    rt: object  # engine.runtime.Runtime
    question: str
    opts: object  # engine.answer.options.AskOptions
    doc_ids: tuple[int, ...]
    routing: object  # engine.routing.router.RoutingTree of the documents
    trees: Mapping[int, object]  # doc_id -> engine.document.tree.Tree, in the request's order
    route: object  # engine.routing.router.Route (full mode's: routed for its quote only)
    query_vector: torch.Tensor | None  # H2MT's query vector (None: memory channel not scored)
    reader: object | None  # the model that reads text when the mode ``needs_reader``


@dataclass(frozen=True)
class Step:
    """A mode's plan for one question: the prompt (None: nothing is generated), the routed ids
    it reads or cites, and a warning for the user (or None)."""

    plan: Plan | None
    cited: list[int]
    warning: str | None = None


class Mode:
    """One answer mode. Subclasses set ``name`` and ``help`` and write ``plan``; the class
    attributes say what the pipeline does around it."""

    name: ClassVar[str]
    help: ClassVar[str]  # the app's line about the mode
    needs_memories: ClassVar[bool] = False  # refuse until phase two of ingest wrote them
    needs_reader: ClassVar[bool] = False  # reads text with the reader (Settings.reader)
    needs_query_vector: ClassVar[bool] = False  # H2MT's query vector even without the channel
    one_document: ClassVar[str | None] = None  # the refusal for several documents; None: any
    # False: the mode routes only for its quote; its answer shows no route and its clock (TTFT,
    # total) starts after routing.
    shows_route: ClassVar[bool] = True
    # True: the quote is found before generation (the plan reads the ranked sentences, or the
    # quote is the answer), so it counts in TTFT; else after the answer, leaving TTFT the mode's.
    quote_first: ClassVar[bool] = False
    # True: a loop at the end is cut off and the rest kept (``guard.clean_answer``); False: a
    # degenerate output is said, never trimmed (``guard.degeneracy``).
    trims_loops: ClassVar[bool] = False
    fast_path: ClassVar[bool] = False  # the memory path: a degenerate output offers text mode

    def plan(self, inputs: ModeInputs, ranked: list[Sentence], quote: Quote | None) -> Step:
        """The prompt and cited ids (``ranked``, ``quote``: found already when ``quote_first``,
        else empty and None)."""
        raise NotImplementedError

    def text_without_generation(self, quote: Quote | None) -> str:
        """The answer's text when the plan generates nothing."""
        return ""

    def keeps_evidence(self, reason: str | None) -> bool:
        """Whether a generated answer degenerate for ``reason`` (None: not) gets evidence lines."""
        return False

    def gate(self, result: GenerationResult, cited: list[int]) -> dict[int, list[int]]:
        """Routed node id -> the gate's extra loops per gated layer (empty: no gate shown)."""
        return {}
