"""Ask: question -> channel queries -> Route -> Answer -> query log (H2MT 3.3).

The one entry point the CLI, the app and the benches call. ``ask_stream`` is a short pipeline:
check the request and load its documents (``engine.documents``), read the question once
(``engine.answer.question``), route, plan (the mode's class, ``engine.answer.modes``), stream the
answer (``engine.answer.generation.decoding``), finish it (clean-up, warnings, evidence lines),
review it (``engine.answer.checks.review``) and log it. One ``Request`` carries the ask from its
check to its answer. Whatever depends on the mode is declared by its class.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Iterator


from engine.answer.checks.check import unsupported_terms
from engine.answer.checks.form import read_form
from engine.answer.checks.review import review
from engine.answer.generation.decoding import Decoding
from engine.answer.evaluation import Evaluation, ProbeQuestion, evaluation_row
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.routing.named_pages import pin_named_pages
from engine.answer.passages.short_answer import short_answer
from engine.answer.passages.grounding import (answer_evidence, find_passages, find_quote,
                                              label_citations)
from engine.answer.generation.cleanup import clean_answer, degeneracy
from engine.answer.measure import PeakMemory
from engine.answer.notices import degenerate_warning
from engine.serving.remote_reader import ReaderError
from engine.answer.modes import MODES, NOT_COVERED, Step
from engine.answer.question import Question, as_question
from engine.answer.request import Request
from engine.answer.response import Answer, Citation, Metrics, citation
from engine.answer.options import (MAX_NEW_TOKENS, AskError, AskOptions, MemoriesPending,
                                   checked_question, parse_doc_id)
from engine.documents import load_documents, memories_pending, pending_line, routing_tree
from engine.routing.fused import RouteQuery, RouterUnavailable, route_on_evidence
from engine.routing.query import gathered_query_vector
from engine.routing.router import RoutingTree
from engine.runtime import Runtime
from engine.serving.request import GenerationResult
from engine.serving.worker import worker_for
from engine.settings import SettingsError

__all__ = ["MAX_NEW_TOKENS", "NOT_COVERED", "AskError", "AskOptions", "MemoriesPending", "ask",
           "ask_stream", "channel_query", "resolve_docs"]

# The line said when the loop clean-up cut a repetition off (engine.answer.generation.cleanup).
LOOP_CUT = "The answer began to repeat itself; the repetition was cut."


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


def check(rt: Runtime, doc: int | str | None, question: str,
          opts: AskOptions | None) -> Request:
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
    return Request(rt, mode, Question.read(question, opts), tuple(doc_ids),
                   {d: doc.tree for d, doc in docs.items()}, routing, pending, reader)


def channel_query(rt: Runtime, routing: RoutingTree, question: Question | str,
                  opts: AskOptions, metrics: Metrics | None = None) -> RouteQuery:
    """The question as every available channel reads it. Every channel is scored whatever the
    router (the router only chooses the fusion weights), so the trace shows all the evidence and
    the fused and memory routers' selections can be compared. ``metrics.query_vector_ms``
    gets the H2MT query vector's share (the backbone pass over the question). The MiniLM vector
    and the query vector are computed with the questions of other asks arriving at the same
    moment (``engine.serving.gather``)."""
    q = as_question(question)
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


def route(req: Request, metrics: Metrics) -> Request:
    """The request routed: every mode routes (the quote reads the routed sections), and the
    question gets its vectors; ``metrics.route_ms`` gets the channel queries and the walk."""
    rt, opts = req.rt, req.opts
    tq = time.perf_counter()
    query = channel_query(rt, req.routing, req.question, opts, metrics)
    q = query.memory
    if req.mode.needs_query_vector and q is None:
        q = gathered_query_vector(req.question.text, rt.backbone, rt.parts, opts.query_fraction)
    query_ms = (time.perf_counter() - tq) * 1e3
    try:
        found = route_on_evidence(req.routing, query, rt.parts.router, router=opts.router,
                                  weights=rt.fusion, k=opts.k, max_depth=opts.max_depth,
                                  budget=opts.budget, temperature=opts.temperature,
                                  walk_how=opts.walk or rt.settings.walk)
    except RouterUnavailable as e:
        raise AskError(str(e)) from None
    pin_named_pages(found, req.routing, req.trees, req.question.text)  # "what is on page 8"
    metrics.route_ms = query_ms + found.route_ms
    return req.routed(req.question.encoded(query.dense, q), found)


def quote_for(req: Request, metrics: Metrics):
    """(ranked sentences, quote or None), timed into ``metrics.quote_ms`` (the second stage's
    share into ``metrics.rerank_ms``)."""
    tq, second = time.perf_counter(), {}
    found = find_quote(req.rt, req.routing, req.trees, req.question, req.route,
                       req.question.dense, req.opts.quote_threshold, second)
    metrics.quote_ms = (time.perf_counter() - tq) * 1e3
    metrics.rerank_ms = second.get("rerank_ms", 0.0)
    metrics.rerank_tokens = second.get("rerank_tokens", 0)
    return found


def finish(req: Request, step: Step, citations: list[Citation], text: str,
           result: GenerationResult | None, quote, metrics: Metrics,
           ranked: list | None = None) -> Answer:
    """The answer as returned: cleaned as the mode says, with its warnings, evidence lines and
    the check stage's key line, check and verdict (``engine.answer.checks.review``, from
    ``ranked``: the routed sections' units)."""
    rt, mode = req.rt, req.mode
    shown = req.route if mode.shows_route else None
    warnings = [step.warning] if step.warning else []
    if req.pending and req.opts.router == "fused" and shown is not None:
        warnings.append(f"{pending_line(req.pending)}: routed on words and meaning only until they "
                        "are done.")
    reason, trimmed, evidence, gate, form = None, False, [], {}, None
    if result is not None:
        gate = mode.gate(result, step.cited)
        if mode.trims_loops:  # what came before a loop is the answer
            text, reason, trimmed = clean_answer(text, result.stop)
            if trimmed:
                warnings.append(LOOP_CUT)
        else:  # a looping memory output is the fast path failing: said, not trimmed
            reason = degeneracy(text, result.stop)
        if reason is not None:
            warnings.append(degenerate_warning(mode.name, reason, mode.fast_path))
        else:  # no answer whatever its score: a preamble alone, cut short, a leaked prompt line
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
            te = time.perf_counter()
            evidence = answer_evidence(rt, req.routing, req.trees, text, step.cited)
            metrics.evidence_ms = (time.perf_counter() - te) * 1e3
    ended = trimmed or (form is not None and form.trimmed)  # it now ends where it was cut
    cut = result is not None and result.cut and not ended
    tc = time.perf_counter()
    checked = review(req, text, result, step.sources, quote, ranked or [], ended)
    metrics.check_ms = (time.perf_counter() - tc) * 1e3
    if checked.warning is not None:
        warnings.append(checked.warning)
    if cut:
        text = f"{text} (cut at {result.generated_tokens} tokens)"
    return Answer(text=text, mode=mode.name, traits=mode.traits(),
                  cited=label_citations(citations, req.trees), gate=gate, metrics=metrics,
                  route=shown, warning=" ".join(warnings) or None, evidence=evidence,
                  cut=cut, cut_at=result.generated_tokens if cut else None, degenerate=reason,
                  stop=result.stop if result is not None else None, repetition_cut=trimmed,
                  quote=quote, not_covered=quote is None, check=checked.check,
                  verdict=checked.verdict, form=form, key_line=checked.key_line,
                  logprobs=result.logprobs if result is not None else None,
                  sources=tuple(step.sources))


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


def generation_workers(rt: Runtime):
    """``workers(model)``: the generation worker of a model of the runtime (one per model),
    which decodes the asks of the moment together, at most ``max_asks_in_flight`` of them."""
    return lambda model: worker_for(rt.cache, model, rt.settings.max_asks_in_flight)


def _answer(req: Request, metrics: Metrics, t0: float, log: bool,
            asker: str | None = None) -> Iterator:
    """Plan, stream, finish, log a routed request, as events. TTFT and total time run from the
    start of routing (from its end in a mode that ``shows_route`` not). The CPU stages hold a
    place of ``rt.cpu_slots`` (never across an event), the generation none."""
    rt, mode, opts = req.rt, req.mode, req.opts
    with PeakMemory(rt.backbone.device) as peak:
        if not mode.shows_route:  # the plain baseline reads no route: its clock starts now
            metrics.route_ms = 0.0
            t0 = time.perf_counter()
        with rt.cpu_slots.held() as waited:
            metrics.cpu_wait_ms += waited * 1e3
            ranked, quote = quote_for(req, metrics) if mode.quote_first else ([], None)
            step = mode.plan(req, ranked, quote)
        citations = [citation(req.routing, i) for i in step.cited]
        yield RouteReady(req.route if mode.shows_route else None, citations, mode.traits(), quote,
                         not_covered=mode.quote_first and quote is None)
        result, reader_error = None, None
        if step.plan is not None:
            submitted = time.perf_counter()
            streamed, parts = step.plan.streamed(Decoding(
                max_new_tokens=opts.max_new_tokens, max_time=rt.settings.request_timeout_s,
                repetition_penalty=opts.repetition_penalty,
                no_repeat_ngram=opts.no_repeat_ngram, copy_from=step.copy_from),
                generation_workers(rt)), []
            try:
                for piece in streamed:
                    parts.append(piece)
                    yield TokenChunk(piece)
            except ReaderError as e:  # a served reader failed: one line, no answer
                reader_error, text = str(e), ""
            else:
                result, text = streamed.result, "".join(parts)
                stage_times(metrics, result, submitted, time.perf_counter())
                metrics.prefill_tokens = result.prefill_tokens
                metrics.generated_tokens = result.generated_tokens
                if result.first_token_at is not None:
                    metrics.ttft_ms = (result.first_token_at - t0) * 1e3
        else:
            text = mode.text_without_generation(quote)
            metrics.ttft_ms = metrics.route_ms + metrics.quote_ms
        metrics.total_ms = (time.perf_counter() - t0) * 1e3
        if not mode.quote_first:
            with rt.cpu_slots.held() as waited:
                metrics.cpu_wait_ms += waited * 1e3
                ranked, quote = quote_for(req, metrics)
    metrics.peak_mem_mb = max(metrics.peak_mem_mb, peak.mb, 0.0)
    with rt.cpu_slots.held() as waited:  # no event is yielded while a place is held
        metrics.cpu_wait_ms += waited * 1e3
        answer = finish(req, step, citations, text, result, quote, metrics, ranked)
        answer.passages = find_passages(rt, req.trees, ranked, quote, opts.quote_threshold)
        answer.short_answer = short_answer(req.question, answer.passages,
                                           rt.learned("short_answer"), rt.encoder)
    if req.reader is not None:
        answer.reader, answer.reader_error = rt.reader_label, reader_error
    yield AnswerReady(answer)
    # The log comes after the answer and never holds it up or fails it: a storage fault is one
    # line in the server log (storage/query_log.py); ``query_id`` stays None then. A failed
    # served reader's empty answer is no answer: not logged.
    if log and reader_error is None:
        answer.query_id = rt.library.log_answer(
            req.question.text, mode.name, answer.text,
            doc_id=req.doc_ids[0] if len(req.doc_ids) == 1 else None, settings=asdict(opts),
            route=answer.as_json()["route"], metrics=asdict(metrics), asker=asker,
            keep_routes=rt.settings.query_log_routes,
            quote=quote.as_json() if quote is not None else None,
            check=({**answer.check.as_json(), "folded": answer.folded}
                   if answer.check is not None else None))


def ask_stream(rt: Runtime, doc: int | str | None, question: str,
               opts: AskOptions | None = None, log: bool = True, *,
               asker: str | None = None) -> Iterator:
    """Answer ``question`` about one document (id) or the whole library (None / "all"), as
    events: ``RouteReady`` when routing ends, ``TokenChunk``s as the answer is generated,
    ``AnswerReady`` at the end (engine.answer.events); the question is logged after it, as the
    stream is read to its end (the answer's ``query_id`` is set then). The chunks join to the answer's text (a
    cut answer's text then gets " (cut at N tokens)"). Problems with the request, routing's
    included, raise AskError (or MemoriesPending) here, before any event. The peak memory is
    the larger of routing's and the answer's (``engine.answer.measure``)."""
    req, metrics = check(rt, doc, question, opts), Metrics()
    with PeakMemory(rt.backbone.device) as peak:
        t0 = time.perf_counter()
        with rt.cpu_slots.held() as waited:
            metrics.cpu_wait_ms += waited * 1e3
            req = route(req, metrics)
    metrics.peak_mem_mb = peak.mb
    return _answer(req, metrics, t0, log, asker)


def ask(rt: Runtime, doc: int | str | None, question: str, opts: AskOptions | None = None,
        log: bool = True, *, asker: str | None = None) -> Answer:
    """Answer ``question`` about one document (id) or the whole library (None / "all"): the
    last event of ``ask_stream``."""
    answer = None
    for event in ask_stream(rt, doc, question, opts, log, asker=asker):
        if isinstance(event, AnswerReady):
            answer = event.answer
    return answer


def evaluate(rt: Runtime, doc_id: int, q: ProbeQuestion, mode: str,
             options: dict | None = None) -> Evaluation:
    """Ask one question of a question file with the product's defaults (``AskOptions(mode=
    mode)``, ``options`` set on them; not logged) and judge it: the dev probe's and the
    Evaluation tab's one code (engine/answer/evaluation.py)."""
    t0 = time.perf_counter()
    ans = ask(rt, doc_id, q.question, AskOptions(mode=mode, **(options or {})), log=False)
    return Evaluation(evaluation_row(ans, q, mode, (time.perf_counter() - t0) * 1e3), ans)
