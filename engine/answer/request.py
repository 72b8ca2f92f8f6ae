"""One ask from its check to its answer (``Request``): the typed record every stage reads and
extends. ``engine.ask.check`` makes it (the mode, the options, the question read once, the
documents); each stage of ``engine.ask`` returns it with its own slot filled, once: ``route``,
``passages``, ``step``, ``generated``, ``finished``, ``review``, ``query_id``. The Answer is a
view of the finished record (``engine.answer.response.Answer.of``)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping

from engine.answer.question import Question

if TYPE_CHECKING:
    from engine.answer.checks.check import Check
    from engine.answer.checks.form import Form
    from engine.answer.checks.key_line import KeyLine
    from engine.answer.checks.verdict import Verdict
    from engine.answer.generation.decoding import Plan
    from engine.answer.measure import Metrics
    from engine.answer.passages.evidence import EvidenceLine
    from engine.answer.passages.quote import Quote
    from engine.answer.passages.sentences import Sentence
    from engine.answer.passages.short_answer import ShortAnswer
    from engine.document.tree import Tree
    from engine.routing.router import Route, RoutingTree
    from engine.serving.reader import Reader
    from engine.serving.request import GenerationResult
    from storage import MemoryProgress
# Named and not imported: ``Runtime`` (engine.runtime), ``Mode`` (engine.answer.modes.base) and
# ``AskOptions`` (engine.answer.options) import this module, through the modes, and an import
# under TYPE_CHECKING is an import all the same (tests/test_layout.py: no import circle).


@dataclass(frozen=True)
class LogAs:
    """An ask logged in the question log as ``asker``'s (a signed-in name; None: nobody signed
    in): ``engine.ask.ask``'s ``log`` (True: logged with no name, False: not logged)."""
    asker: str | None = None


@dataclass(frozen=True)
class Passages:
    """Where the answer stands in the manual: the routed sections' units ranked against the
    question (best first), the quote (None: below the bar), the quote and up to two more
    entries' passages, the manual's term that answers (``passages.short_answer``), and whether
    no unit reached the bar (``not_covered``: the stage ran and found no quote)."""

    ranked: tuple[Sentence, ...] = ()
    quote: Quote | None = None
    shown: tuple[Quote, ...] = ()
    short_answer: ShortAnswer | None = None
    not_covered: bool = False


@dataclass(frozen=True)
class Generated:
    """What the plan's generation gave: its text as streamed, its result (None: nothing was
    generated, or a served reader failed) and a served reader's failure (one line)."""

    text: str
    result: GenerationResult | None = None
    reader_error: str | None = None


@dataclass(frozen=True)
class Finished:
    """The generated text made an answer (``engine.ask.finish``): cleaned as the mode says, the
    warnings so far, the evidence lines, the gate, why the output is no answer (``degenerate``),
    its form, whether a loop was cut off (``trimmed``), whether it now ends where it was cut
    (``ended``) and whether it stopped mid-answer at a limit (``cut``)."""

    text: str
    warnings: tuple[str, ...] = ()
    evidence: tuple[EvidenceLine, ...] = ()
    gate: Mapping[int, list[int]] = field(default_factory=dict)
    degenerate: str | None = None
    form: Form | None = None
    trimmed: bool = False
    ended: bool = False
    cut: bool = False


@dataclass(frozen=True)
class Step:
    """A mode's plan for one question: the prompt (None: nothing is generated), the routed ids
    it reads or cites, a warning for the user (or None), the texts the answer is checked
    against (``engine.answer.checks.check``: what the model was given to read), and the text
    the answer must be a span of (``Decoding.copy_from``; None: decoded freely)."""

    plan: Plan | None
    cited: list[int]
    warning: str | None = None
    sources: tuple[str, ...] = ()
    copy_from: str | None = None


@dataclass(frozen=True)
class Review:
    """What the check stage found: the key line, the check and the verdict (each None when it
    does not apply), and a line for the user (None: nothing to say)."""

    key_line: KeyLine | None = None
    check: Check | None = None
    verdict: Verdict | None = None
    warning: str | None = None


@dataclass(frozen=True)
class Request:
    rt: Runtime
    mode: Mode  # which reads this request
    opts: AskOptions
    question: Question
    doc_ids: tuple[int, ...]
    trees: Mapping[int, Tree]  # doc_id -> its tree, in the request's order
    routing: RoutingTree  # of the documents
    pending: MemoryProgress | None  # memories still being written (None: all written)
    reader: Reader | None  # the model that reads text, when the mode needs one
    metrics: Metrics  # each stage's time and the generation's counts (the runner writes them)
    asker: str | None = None  # who asked (the query log's)
    started: float = 0.0  # perf_counter the answer's clock (TTFT, total) runs from
    route: Route | None = None  # once routed
    passages: Passages | None = None
    step: Step | None = None  # the mode's plan
    generated: Generated | None = None
    finished: Finished | None = None
    review: Review | None = None
    query_id: int | None = None  # its row in the query log, once logged

    def filled(self, **slots) -> Request:
        """This request with stage slots filled (each once: refilling one is a bug)."""
        again = [k for k in slots
                 if k not in ("question", "started") and getattr(self, k) is not None]
        if again:
            raise RuntimeError(f"request slots filled twice: {again}")
        return replace(self, **slots)

    @property
    def ranked(self) -> list[Sentence]:
        """The ranked units (empty until the passages stage ran)."""
        return list(self.passages.ranked) if self.passages is not None else []

    @property
    def quote(self) -> Quote | None:
        """The quote (None until the passages stage ran, or below the bar)."""
        return self.passages.quote if self.passages is not None else None
