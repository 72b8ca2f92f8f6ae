"""What an answer is: its text, citations, metrics, route, quote and evidence (the CLI's --json,
the app's view, the query log)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Mapping

from engine.answer.checks.form import Form
from engine.answer.checks.verdict import folds
from engine.answer.modes import MODES, ModeTraits
from engine.answer.passages.evidence import EvidenceLine
from engine.answer.passages.grounding import label_citations
from engine.answer.measure import Metrics
from engine.answer.request import Passages, Review
from engine.answer.shown import key_line_on_screen, places
from engine.routing.router import Route

if TYPE_CHECKING:
    from engine.answer.request import Request


@dataclass
class Citation:
    id: int  # routed node id
    doc_id: int | None
    node_id: int
    title: str
    page_start: int | None
    page_end: int | None
    page_label: str | None = None  # printed label of page_start where the PDF gives one
    ocr: bool = False  # the section's text was read by OCR


def citation(r, rid: int) -> Citation:
    """The citation of routed node ``rid`` of RoutingTree ``r``."""
    return Citation(id=rid, doc_id=r.origin[rid][0], node_id=r.origin[rid][1], title=r.title[rid],
                    page_start=r.pages[rid][0], page_end=r.pages[rid][1])


@dataclass(frozen=True)
class Generation:
    """What the model generated, made an answer (``engine.ask.generate`` and ``finish``): the
    gate's loops, why generation ended, the cut, why the output is no answer and its form, the
    evidence lines, the log-probabilities and sources, and who read the text."""

    gate: Mapping[int, list[int]] = field(default_factory=dict)  # routed id -> loops per layer
    stop: str | None = None  # why generation ended (GenerationResult.stop); None: no generation
    cut: bool = False  # stopped at the token (or time) limit, mid-answer
    cut_at: int | None = None  # generated tokens when cut
    degenerate: str | None = None  # why the output is not an answer (generation.cleanup)
    repetition_cut: bool = False  # a loop at the end was cut off (generation.cleanup.trim_loop)
    form: Form | None = None  # what makes it no answer whatever its score (checks.form)
    evidence: list[EvidenceLine] = field(default_factory=list)  # supporting lines, best first
    logprobs: list[float] | None = None  # the generated tokens' log-probabilities (not in JSON)
    sources: tuple[str, ...] = ()  # the texts the reader was given (not in JSON)
    reader: str | None = None  # who read the text (Runtime.reader_label); None: no reader
    reader_error: str | None = None  # a served reader's failure, one line; the answer is empty


def _read(part: str, name: str) -> property:
    """A read of one field of a part, under the name the readers of an answer use."""
    return property(lambda self: getattr(getattr(self, part), name),
                    doc=f"``self.{part}.{name}``")


@dataclass(frozen=True)
class Answer:
    """The finished ask as the CLI, the app, the API and the query log read it: a frozen view
    of the request's record (``Answer.of``), in parts: the route, the passages
    (``engine.answer.request.Passages``), the generation, the review
    (``engine.answer.checks.review.Review``) and the metrics; ``as_json`` is its one JSON."""

    text: str
    mode: str
    cited: list[Citation]
    metrics: Metrics
    route: Route | None = None
    warning: str | None = None  # shown to the user beside the answer (e.g. a left-out channel)
    passages: Passages = field(default_factory=Passages)
    generation: Generation = field(default_factory=Generation)
    review: Review = field(default_factory=Review)
    traits: ModeTraits | None = None  # what its mode does (None: its mode's, from MODES)
    query_id: int | None = None  # its row in the query log (None: not logged)

    quote = _read("passages", "quote")  # the manual's best passage, verbatim (passages.quote)
    short_answer = _read("passages", "short_answer")  # the manual's term (passages.short_answer)
    not_covered = _read("passages", "not_covered")  # no unit of the routed sections reached the bar
    check = _read("review", "check")  # the generated answer against its sources (checks.check)
    verdict = _read("review", "verdict")  # the calibrated confidence (checks.verdict)
    key_line = _read("review", "key_line")  # the manual's line that answers (checks.key_line)
    gate = _read("generation", "gate")
    stop = _read("generation", "stop")
    cut = _read("generation", "cut")
    cut_at = _read("generation", "cut_at")
    degenerate = _read("generation", "degenerate")
    repetition_cut = _read("generation", "repetition_cut")
    form = _read("generation", "form")
    evidence = _read("generation", "evidence")
    logprobs = _read("generation", "logprobs")
    sources = _read("generation", "sources")
    reader = _read("generation", "reader")
    reader_error = _read("generation", "reader_error")

    def __post_init__(self) -> None:
        if self.traits is None:
            object.__setattr__(self, "traits", MODES[self.mode].traits())

    @classmethod
    def of(cls, req: Request) -> Answer:
        """The answer of a request whose stages ran to its review (``engine.ask``): its text
        with " (cut at N tokens)" when cut mid-answer, its warnings in one line."""
        mode, done, made = req.mode, req.finished, req.generated
        result, said = made.result, req.review
        cut = done.cut
        text = f"{done.text} (cut at {result.generated_tokens} tokens)" if cut else done.text
        warnings = [*done.warnings, *([said.warning] if said.warning is not None else [])]
        cited = label_citations([citation(req.routing, i) for i in req.step.cited], req.trees)
        generation = Generation(
            gate=done.gate, stop=result.stop if result is not None else None, cut=cut,
            cut_at=result.generated_tokens if cut else None, degenerate=done.degenerate,
            repetition_cut=done.trimmed, form=done.form, evidence=list(done.evidence),
            logprobs=result.logprobs if result is not None else None,
            sources=tuple(req.step.sources),
            reader=req.rt.reader_label if req.reader is not None else None,
            reader_error=made.reader_error if req.reader is not None else None)
        return cls(text=text, mode=mode.name, cited=cited, metrics=req.metrics,
                   route=req.route if mode.shows_route else None,
                   warning=" ".join(warnings) or None, passages=req.passages,
                   generation=generation, review=said, traits=mode.traits(),
                   query_id=req.query_id)

    @property
    def folded(self) -> bool:
        """Shown folded under a line saying why: no answer by its form (a preamble alone, cut
        short, a sentence said twice, only a prompt line), below the confidence threshold
        (flagged by the rule check where there is no score: ``checks.verdict.folds``), or
        degenerate."""
        return self.degenerate is not None \
            or (self.form is not None and self.form.fault is not None) \
            or folds(self.check, self.verdict)

    @property
    def fold_line(self) -> str | None:
        """The one line said above a folded answer (its form's fault first, then the check's
        findings: they name the terms; then the confidence's reason); None when not folded for
        any of them."""
        if self.form is not None and self.form.fault is not None:
            return self.form.line
        if not folds(self.check, self.verdict):
            return None
        return self.check.line if self.check is not None and self.check.flagged \
            else self.verdict.reason

    def as_json(self) -> dict:
        """The answer as JSON: the CLI's --json, the app's API and its figure data."""
        route, where = None, places([p.as_json() for p in self.passages.shown])
        if self.route is not None:
            route = [{k: r[k] for k in ("id", "parent", "doc_id", "node_id", "title", "depth",
                                        "page_start", "page_end", "score", "prob", "status",
                                        "visit", "channels")}
                     for r in self.route.as_records()]
        out = {"answer": self.text, "mode": self.mode, "mode_traits": self.traits.as_json(),
                "route": route,
                "router": self.route.router if self.route is not None else None,
                "alternatives": dict(self.route.alternatives) if self.route is not None else {},
                "warning": self.warning,
                "degenerate": self.degenerate is not None,
                "cut": self.cut, "cut_at": self.cut_at, "stop": self.stop,
                "repetition_cut": self.repetition_cut,
                "evidence": [asdict(e) for e in self.evidence],
                "quote": self.quote.as_json() if self.quote is not None else None,
                "passages": [p.as_json() for p in self.passages.shown],
                "short_answer": (self.short_answer.as_json() if self.short_answer is not None
                                 else None),
                "not_covered": self.not_covered,
                "unsupported": [u.as_json() for u in self.check.unsupported] if self.check else [],
                "folded": self.folded,
                "form": self.form.as_json() if self.form is not None else None,
                "check": ({k: v for k, v in self.check.as_json().items() if k != "unsupported"}
                          if self.check is not None else None),
                "confidence": self.verdict.as_json() if self.verdict is not None else None,
                "key_line": self.key_line.as_json() if self.key_line is not None else None,
                # a whole term of the quote's entry, one clear place, and the answer shown and
                # naming its term (engine.answer.shown)
                "key_line_shown": None,
                # one clear place in the manual, or more than one candidate (engine.answer.shown)
                "places": where.as_json(),
                "reader": self.reader, "reader_error": self.reader_error,
                "query_id": self.query_id,
                "cited": [asdict(c) for c in self.cited],
                "gate": {str(k): v for k, v in self.gate.items()},
                "metrics": {k: round(v, 2) if isinstance(v, float) else v
                            for k, v in asdict(self.metrics).items()}}
        out["key_line_shown"] = key_line_on_screen(out)
        return out
