"""What an answer mode is (``Mode``): what it needs, when its quote is found, its plan (the
prompt it generates from, or none), how its output is cleaned and whether evidence lines are kept.
The pipeline that runs a mode is ``engine.ask``; the table of modes is ``engine.answer.modes``."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar


from engine.answer.generation.decoding import GenerationResult
from engine.answer.passages.quote import Quote
from engine.answer.passages.sentences import Sentence
from engine.answer.request import Request, Step


@dataclass(frozen=True)
class ModeTraits:
    """What a mode does, as its events and its Answer carry it to the app, the CLI and the API
    (``Mode.traits``): they read these, never the mode's name."""

    name: str
    generates: bool  # a model writes the answer (False: the route or the quote is the answer)
    has_evidence: bool  # a generated answer gets evidence lines
    offers_text_mode: bool  # a degenerate output offers asking again in text mode
    reads_memories: bool  # reads the sections' memories (refused until they are written)
    quote_is_answer: bool  # the quote is the whole answer (not shown twice)

    def as_json(self) -> dict:
        return asdict(self)


class Mode:
    """One answer mode. Subclasses set ``name``, ``help`` and ``label`` and write ``plan``; the class
    attributes say what the pipeline does around it."""

    name: ClassVar[str]
    help: ClassVar[str]  # the app's line about the mode
    label: ClassVar[str]  # the mode's choice on the page, in a visitor's words
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
    generates: ClassVar[bool] = True  # its plan generates (False: ``text_without_generation``)
    has_evidence: ClassVar[bool] = False  # a generated answer gets evidence lines
    offers_text_mode: ClassVar[bool] = False  # a degenerate output offers text mode instead
    quote_is_answer: ClassVar[bool] = False  # ``text_without_generation`` is the quote

    @classmethod
    def traits(cls) -> ModeTraits:
        """The declarations the app, the CLI and the API read (``ModeTraits``)."""
        return ModeTraits(cls.name, cls.generates, cls.has_evidence, cls.offers_text_mode,
                          cls.needs_memories, cls.quote_is_answer)

    def plan(self, inputs: Request, ranked: list[Sentence], quote: Quote | None) -> Step:
        """The prompt and cited ids (``ranked``, ``quote``: found already when ``quote_first``,
        else empty and None)."""
        raise NotImplementedError

    def text_without_generation(self, quote: Quote | None) -> str:
        """The answer's text when the plan generates nothing."""
        return ""

    def keeps_evidence(self, reason: str | None) -> bool:
        """Whether a generated answer degenerate for ``reason`` (None: not) gets evidence lines."""
        return self.has_evidence and reason is None

    def gate(self, result: GenerationResult, cited: list[int]) -> dict[int, list[int]]:
        """Routed node id -> the gate's extra loops per gated layer (empty: no gate shown)."""
        return {}
