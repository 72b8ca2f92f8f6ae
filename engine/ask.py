"""Ask: question -> channel queries -> Route -> Answer -> query log (H2MT 3.3).

The one entry point the CLI, the app and the benches call. ``check`` checks the request, loads
its documents (``engine.documents``) and reads the question once (``engine.answer.question``)
into one ``Request`` (``engine.answer.request``); then ``STAGES``, a table, runs on it: route,
passages (the ranked units, the quote, the passages shown and the short answer), plan (the
mode's class, ``engine.answer.modes``), generate (``engine.answer.generation.decoding``), finish
(clean-up, warnings, evidence lines), review (``engine.answer.checks.review``) and log. Each
stage takes the request and returns it with its slot filled; ``run`` times each into the
metrics, holds a CPU place for it (never across an event) and measures the peak memory once. A
mode that does not quote first runs its passages after the generation: the table reordered.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from inspect import isgeneratorfunction
from typing import Callable, Iterator

from engine.answer.checks.check import unsupported_terms
from engine.answer.checks.form import read_form
from engine.answer.checks.review import review as review_answer
from engine.answer.generation.decoding import Decoding
from engine.answer.evaluation import Evaluation, ProbeQuestion, evaluation_row
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.routing.named_pages import pin_named_pages
from engine.answer.passages.short_answer import short_answer
from engine.answer.passages.grounding import answer_evidence, find_passages, find_quote
from engine.answer.generation.cleanup import clean_answer, degeneracy
from engine.answer.measure import PeakMemory
from engine.answer.notices import degenerate_warning
from engine.serving.remote_reader import ReaderError
from engine.answer.modes import MODES, NOT_COVERED
from engine.answer.question import Question
from engine.answer.request import Finished, Generated, LogAs, Passages, Request
from engine.answer.response import Answer, Metrics, citation
from engine.answer.options import (MAX_NEW_TOKENS, AskError, AskOptions, MemoriesPending,
                                   checked_question, parse_doc_id)
from engine.documents import load_documents, memories_pending, pending_line, routing_tree
from engine.routing.fused import RouteBy, RouteQuery, RouterUnavailable, route_on_evidence
from engine.routing.query import gathered_query_vector
from engine.routing.router import RoutingTree, WalkLimits
from engine.runtime import Runtime
from engine.serving.request import GenerationResult
from engine.serving.worker import worker_for
from engine.serving.worker_process import process_worker_for
from engine.settings import SettingsError
from storage import QueryEntry

__all__ = ["MAX_NEW_TOKENS", "NOT_COVERED", "AskError", "AskOptions", "MemoriesPending", "ask",
           "ask_stream", "channel_query", "resolve_docs"]

# The line said when the loop clean-up cut a repetition off (engine.answer.generation.cleanup).
LOOP_CUT = "The answer began to repeat itself; the repetition was cut."
WORDS_ONLY = "Routed by the sections' words only: their meaning is still being prepared."


def resolve_docs(rt: Runtime, doc: int | str | None) -> list[int]:
    if doc in (None, "all"):
        ids = [d.id for d in rt.library.list_documents()]
        if not ids:
            raise AskError("the library is empty: ingest a manual first")
        return ids
    doc_id = parse_doc_id(doc)
    from storage import DocumentNotFound

    try:
        rt.library.get_document(doc_id)
    except DocumentNotFound:
        raise AskError(f"no document with id {doc_id}") from None
    return [doc_id]


def check(rt: Runtime, doc: int | str | None, question: str, opts: AskOptions | None,
          asker: str | None = None) -> Request:
    """The request checked and its documents loaded; AskError (or MemoriesPending) for what the
    user can fix."""
    opts = opts or AskOptions()
    opts.validate(rt.settings)
    question = checked_question(question, rt.settings.max_question_chars)
    mode = MODES[opts.mode]()
    doc_ids = resolve_docs(rt, doc)
    if mode.one_document and len(doc_ids) != 1:
        raise AskError(mode.one_document)
    docs = load_documents(rt, doc_ids)
    pending = memories_pending(docs)
    if pending and mode.needs_memories:
        raise MemoriesPending(f"{pending_line(pending)}; {mode.name} mode needs them, ask in "
                              "text or route mode meanwhile.", pending.done, pending.total)
    if pending and opts.router == "memory":
        raise MemoriesPending(f"{pending_line(pending)}; the memory router needs them, use the "
                              "fused router meanwhile.", pending.done, pending.total)
    routing = routing_tree(rt, docs)
    try:
        reader = rt.reader if mode.needs_reader else None
    except SettingsError as e:
        raise AskError(str(e)) from None
    return Request(rt, mode, opts, Question.read(question), tuple(doc_ids),
                   {d: doc.tree for d, doc in docs.items()}, routing, pending, reader, Metrics(),
                   asker)


def channel_query(rt: Runtime, routing: RoutingTree, q: Question, opts: AskOptions,
                  metrics: Metrics | None = None) -> RouteQuery:
    """The question as every available channel reads it. Every channel is scored whatever the
    router (the router only chooses the fusion weights), so the trace shows all the evidence and
    the fused and memory routers' selections can be compared. ``metrics.query_vector_ms``
    gets the H2MT query vector's share (the backbone pass over the question). The MiniLM vector
    and the query vector are computed with the questions of other asks arriving at the same
    moment (``engine.routing.gather``)."""
    wanted = set(routing.available_channels())
    query = RouteQuery()
    if "lexical" in wanted:
        query.tokens = list(q.tokens)
    if "dense" in wanted and rt.encoder is not None:
        query.dense = rt.encoder.encode_query(q.text)
    if "memory" in wanted:
        t = time.perf_counter()
        query.memory = gathered_query_vector(q.text, rt.backbone, rt.parts, opts.query_fraction)
        if metrics is not None:
            metrics.query_vector_ms = (time.perf_counter() - t) * 1e3
    return query


def route(req: Request) -> Request:
    """The request routed: every mode routes (the quote reads the routed sections), and the
    question gets its vectors. A mode that shows no route starts its clock after it."""
    rt, opts = req.rt, req.opts
    query = channel_query(rt, req.routing, req.question, opts, req.metrics)
    q = query.memory
    if req.mode.needs_query_vector and q is None:
        q = gathered_query_vector(req.question.text, rt.backbone, rt.parts, opts.query_fraction)
    try:
        found = route_on_evidence(req.routing, query, rt.parts.router, RouteBy(
            opts.router, rt.fusion, opts.walk or rt.settings.walk,
            WalkLimits(opts.k, opts.max_depth, opts.budget, opts.temperature)))
    except RouterUnavailable as e:
        raise AskError(str(e)) from None
    pin_named_pages(found, req.routing, req.trees, req.question.page_refs)  # "what is on page 8"
    started = req.started if req.mode.shows_route else time.perf_counter()
    return req.filled(question=req.question.encoded(query.dense, q), route=found,
                      started=started)


def passages(req: Request) -> Request:
    """The routed sections' units ranked, the quote, the quote and two more entries' passages,
    and the short answer (``metrics.rerank_ms``: the second stage's share)."""
    rt, second = req.rt, {}
    ranked, quote = find_quote(req, second)
    req.metrics.rerank_ms = second.get("rerank_ms", 0.0)
    req.metrics.rerank_tokens = second.get("rerank_tokens", 0)
    shown = find_passages(rt, req.trees, ranked, quote, req.opts.quote_threshold)
    short = short_answer(req.question, shown, rt.learned("short_answer"), rt.encoder)
    return req.filled(passages=Passages(tuple(ranked), quote, tuple(shown), short, quote is None))


def plan(req: Request) -> Request:
    """The mode's plan (``Mode.plan``), from the passages when the mode quotes first."""
    return req.filled(step=req.mode.plan(req, req.ranked, req.quote))


def generation_workers(rt: Runtime):
    """``workers(model)``: the generation worker of a model of the runtime (one per model),
    which decodes the asks of the moment together, at most ``max_asks_in_flight`` of them; in a
    process of its own when ``Settings.generation_process`` says so."""
    most = rt.settings.max_asks_in_flight
    if rt.settings.generation_process:
        return lambda model: process_worker_for(rt.cache, model, rt.model_settings(model), most)
    return lambda model: worker_for(rt.cache, model, most)


def start_generation_process(rt: Runtime) -> None:
    """Start the local reader's generation process now (the app, at its start), so that the
    first ask does not wait for it to load the model; nothing when decoding stays in this
    process (``Settings.generation_process``) or the reader is served."""
    if rt.settings.generation_process and not rt.settings.reader_is_remote:
        generation_workers(rt)(rt.reader.backbone.model).start()


def stage_times(metrics: Metrics, result: GenerationResult, submitted: float,
                ended: float) -> None:
    """The generation's stages into ``metrics`` (ms): the wait for a place in the worker, the
    prefill, the decoding (``submitted`` and ``ended``: perf_counter around the generation)."""
    first, began = result.first_token_at, result.prefill_started_at
    if began is not None:
        metrics.queue_ms = max(0.0, began - submitted) * 1e3
        if first is not None:
            metrics.prefill_ms = max(0.0, first - began) * 1e3
    if first is not None:
        metrics.decode_ms = max(0.0, ended - first) * 1e3


def generate(req: Request) -> Iterator[TokenChunk]:
    """Stream the plan's generation as TokenChunks; returns the request with what it generated
    (a served reader's failure is one line and no text). TTFT and total time run from
    ``req.started``; a plan that generates nothing has the mode's text at once."""
    step, metrics, opts = req.step, req.metrics, req.opts
    if step.plan is None:
        metrics.ttft_ms = metrics.route_ms + metrics.quote_ms
        metrics.total_ms = (time.perf_counter() - req.started) * 1e3
        return req.filled(generated=Generated(req.mode.text_without_generation(req.quote)))
    submitted, parts = time.perf_counter(), []
    streamed = step.plan.streamed(Decoding(
        max_new_tokens=opts.max_new_tokens, max_time=req.rt.settings.request_timeout_s,
        repetition_penalty=opts.repetition_penalty, no_repeat_ngram=opts.no_repeat_ngram,
        copy_from=step.copy_from), generation_workers(req.rt))
    try:
        for piece in streamed:
            parts.append(piece)
            yield TokenChunk(piece)
    except ReaderError as e:  # a served reader failed: one line, no answer
        metrics.total_ms = (time.perf_counter() - req.started) * 1e3
        return req.filled(generated=Generated("", None, str(e)))
    result = streamed.result
    stage_times(metrics, result, submitted, time.perf_counter())
    metrics.prefill_tokens = result.prefill_tokens
    metrics.generated_tokens = result.generated_tokens
    if result.first_token_at is not None:
        metrics.ttft_ms = (result.first_token_at - req.started) * 1e3
    metrics.total_ms = (time.perf_counter() - req.started) * 1e3
    return req.filled(generated=Generated("".join(parts), result))


def finish(req: Request) -> Request:
    """The generated text made an answer: cleaned as the mode says, with its warnings and
    evidence lines (``engine.answer.request.Finished``)."""
    mode, step, result, text = req.mode, req.step, req.generated.result, req.generated.text
    warnings = [step.warning] if step.warning else []
    if mode.shows_route and req.rt.encoder is not None and req.routing.dense is None:
        warnings.append(WORDS_ONLY)  # engine.passage_worker encodes them
    elif req.pending and req.opts.router == "fused" and mode.shows_route:
        warnings.append(f"{pending_line(req.pending)}: routed on words and meaning only until they "
                        "are done.")
    if result is None:
        return req.filled(finished=Finished(text, tuple(warnings)))
    reason, trimmed, evidence, form = None, False, [], None
    if mode.trims_loops:  # what came before a loop is the answer
        text, reason, trimmed = clean_answer(text, result.stop)
        if trimmed:
            warnings.append(LOOP_CUT)
    else:  # a looping memory output is the fast path failing: said, not trimmed
        reason = degeneracy(text, result.stop)
    if reason is not None:
        warnings.append(degenerate_warning(mode.name, reason, mode.fast_path))
    else:  # no answer whatever its score: a preamble alone, cut short, a leaked prompt line
        quote = req.quote
        given = "\n".join([*step.sources, quote.text if quote is not None else "",
                           req.question.text])
        form = read_form(text, result.stop, result.generated_tokens,
                         lambda part: not unsupported_terms(part, given, cut=True)[0])
        text = form.text
        if form.trimmed_off == "cut" and trimmed:  # one line for the one cut
            warnings.remove(LOOP_CUT)
        if form.note:
            warnings.append(form.note)
    if mode.keeps_evidence(reason):
        evidence = answer_evidence(req.rt, req.routing, req.trees, text, step.cited)
    ended = trimmed or (form is not None and form.trimmed)  # it now ends where it was cut
    return req.filled(finished=Finished(
        text, tuple(warnings), tuple(evidence), mode.gate(result, step.cited), reason, form,
        trimmed, ended, result.cut and not ended))


def review(req: Request) -> Request:
    """The check stage: key line, check and verdict (``engine.answer.checks.review``)."""
    return req.filled(review=review_answer(req))


def log_answer(req: Request) -> Request:
    """The answer in the query log; it comes after the answer and never holds it up or fails
    it: a storage fault is one line in the server log (storage/query_log.py) and ``query_id``
    stays None then. A failed served reader's empty answer is no answer: not logged."""
    if req.generated.reader_error is not None:
        return req
    answer, quote = Answer.of(req), req.quote
    return req.filled(query_id=req.rt.library.log_answer(QueryEntry(
        req.question.text, answer.mode, answer.text,
        doc_id=req.doc_ids[0] if len(req.doc_ids) == 1 else None, settings=asdict(req.opts),
        route=answer.as_json()["route"], metrics=asdict(req.metrics), asker=req.asker,
        quote=quote.as_json() if quote is not None else None,
        check=({**answer.check.as_json(), "folded": answer.folded}
               if answer.check is not None else None)), req.rt.settings.query_log_routes))


def route_ready(req: Request) -> RouteReady:
    """The event said once the plan is made: the route (when the mode shows it), what the
    answer will read, the mode's traits and the quote (when found first)."""
    mode = req.mode
    return RouteReady(req.route if mode.shows_route else None,
                      [citation(req.routing, i) for i in req.step.cited], mode.traits(),
                      req.quote, not_covered=mode.quote_first and req.quote is None)


@dataclass(frozen=True)
class Stage:
    """One row of the table: the stage, the Metrics field its time goes to (None: not timed
    there), whether it holds a CPU place (the log, which waits on storage, holds none; nor does
    a stage that streams events, a generator: the generation), and the event said after it."""

    run: Callable
    timed: str | None = None
    cpu: bool = True
    then: Callable[[Request], object] | None = None


STAGES = {"route": Stage(route, "route_ms"), "passages": Stage(passages, "quote_ms"),
          "plan": Stage(plan, then=route_ready), "generate": Stage(generate),
          "finish": Stage(finish, "evidence_ms"), "review": Stage(review, "check_ms"),
          "log": Stage(log_answer, cpu=False)}


def stages_for(mode, logged: bool) -> list[Stage]:
    """The table in the mode's order: the passages before the plan when the mode quotes first,
    else after the generation (the quote then leaves TTFT the mode's); the log when asked. A
    mode that shows no route routes untimed (its clock starts after routing)."""
    order = (["route", "passages", "plan", "generate"] if mode.quote_first
             else ["route", "plan", "generate", "passages"])
    order += ["finish", "review", *(["log"] if logged else [])]
    table = [STAGES[name] for name in order]
    if not mode.shows_route:
        table[0] = replace(table[0], timed=None)
    return table


def _staged(req: Request, stage: Stage) -> Iterator:
    """One stage run and timed (a CPU stage in a place of ``rt.cpu_slots``, the wait apart),
    then its event; returns the request it made."""
    metrics, t = req.metrics, time.perf_counter()
    if isgeneratorfunction(stage.run):  # it streams its own events
        req = yield from stage.run(req)
    elif stage.cpu:
        with req.rt.cpu_slots.held() as waited:
            metrics.cpu_wait_ms += waited * 1e3
            t = time.perf_counter()
            req = stage.run(req)
    else:
        req = stage.run(req)
    if stage.timed is not None:
        setattr(metrics, stage.timed, (time.perf_counter() - t) * 1e3)
    if stage.then is not None:
        yield stage.then(req)
    return req


def run(req: Request, table: list[Stage]) -> Iterator:
    """Run ``table`` on ``req``, as events: the stages up to the review under one peak-memory
    measure, then ``AnswerReady``, then the log, whose query id the event gets."""
    answering = [stage for stage in table if stage.run is not log_answer]
    with PeakMemory(req.rt.backbone.device) as peak:
        req = replace(req, started=time.perf_counter())
        for stage in answering:
            req = yield from _staged(req, stage)
    req.metrics.peak_mem_mb = max(peak.mb, 0.0)
    ready = AnswerReady(Answer.of(req))
    yield ready
    for stage in table[len(answering):]:
        req = yield from _staged(req, stage)
    ready.query_id = req.query_id


def ask_stream(rt: Runtime, doc: int | str | None, question: str,
               opts: AskOptions | None = None, log: bool | LogAs = True) -> Iterator:
    """Answer ``question`` about one document (id) or the whole library (None / "all"), as
    events: ``RouteReady`` when routing ends, ``TokenChunk``s as the answer is generated,
    ``AnswerReady`` at the end (engine.answer.events); the question is logged after it, as the
    stream is read to its end (the event's ``query_id`` is set then). The chunks join to the
    answer's text (a cut answer's text then gets " (cut at N tokens)"). Problems with the
    request, routing's included, raise AskError (or MemoriesPending) here, before any event.
    ``log``: False, not logged; ``LogAs(asker)``: logged as a signed-in person's."""
    req = check(rt, doc, question, opts, log.asker if isinstance(log, LogAs) else None)
    events = run(req, stages_for(req.mode, bool(log)))
    first = next(events)
    return _chain(first, events)


def _chain(first, events: Iterator) -> Iterator:
    yield first
    yield from events


def ask(rt: Runtime, doc: int | str | None, question: str, opts: AskOptions | None = None,
        log: bool | LogAs = True) -> Answer:
    """Answer ``question`` about one document (id) or the whole library (None / "all"): the
    answer of ``ask_stream``'s last event, with its query id once logged."""
    ready = None
    for event in ask_stream(rt, doc, question, opts, log):
        if isinstance(event, AnswerReady):
            ready = event
    return replace(ready.answer, query_id=ready.query_id)


def evaluate(rt: Runtime, doc_id: int, q: ProbeQuestion, mode: str,
             options: dict | None = None) -> Evaluation:
    """Ask one question of a question file with the product's defaults (``AskOptions(mode=
    mode)``, ``options`` set on them; not logged) and judge it: the dev probe's and the
    Evaluation tab's one code (engine/answer/evaluation.py)."""
    t0 = time.perf_counter()
    ans = ask(rt, doc_id, q.question, AskOptions(mode=mode, **(options or {})), log=False)
    return Evaluation(evaluation_row(ans, q, mode, (time.perf_counter() - t0) * 1e3), ans)
