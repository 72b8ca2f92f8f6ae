"""Ask: question -> channel queries -> Route -> Answer -> query log (H2MT 3.3).

The one entry point the CLI, the app and the benches call. Trees, routing evidence and memories
of a document are read from storage once per runtime and kept (keyed by the document's sha256
and the fingerprints of the parts and the evidence), and so is the routed structure of a set of
documents with its lexical index. A document whose memories are still being written (phase two
of ingest) routes on its text channels; memory mode waits for its memories.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import numbers
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator

import torch

from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.answer.evidence import EvidenceLine, PageTexts, Section, evidence_lines, locate_page
from engine.answer.guard import GuardedStreamer, clean_answer, degeneracy
from engine.answer.modes import (CONTEXT_EXCLUDED_KINDS, MODES, TEXT_PACKINGS, TEXT_PROMPTS,
                                 Answer, Context, Metrics, _PeakMemory, citation, heading_path,
                                 plan_full, plan_memory, plan_text, run_plan, slots_plan)
from engine.answer import quote as quoting
from engine.answer import sentences as sentence_evidence
from engine.answer.flat import FlatIndex, build_flat_index, search
from engine.document.tree import Tree
from engine.ingest import document_evidence
from engine.routing import lexical
from engine.routing.candidates import VERSION as CANDIDATES_VERSION, CandidateIndex
from engine.routing.evidence import evidence_fingerprint
from engine.routing.fused import (ROUTERS, WALKS, RouteQuery, RouterUnavailable,
                                  route_on_evidence)
from engine.routing.router import Route, RoutingTree, query_vector
from engine.runtime import Runtime
from engine.settings import SettingsError
from storage import MemoryProgress, NodeEvidence

MAX_QUESTION_CHARS = 2000  # the default of Settings.max_question_chars
# The most new tokens an answer may ask for: SmolLM2's context window (8192 positions) less
# room for the prompt; more than this cannot be generated whatever the mode, so it is refused
# up front (also in route and quote mode, where nothing is generated: a bad value is a bad
# request in every mode).
MAX_NEW_TOKENS = 4096


class AskError(ValueError):
    """A problem with the user's request (empty question, unknown document, bad setting)."""


class MemoriesPending(AskError):
    """The request needs memories that phase two of ingest is still writing."""

    def __init__(self, message: str, done: int, total: int):
        super().__init__(message)
        self.done, self.total = done, total


@dataclass
class AskOptions:
    mode: str = "text"  # text answers are the default; memory is the fast H2MT path
    k: int = 3
    max_depth: int | None = None
    budget: int | None = None
    temperature: float = 1.0
    gate: bool = True
    hier_pos: bool = False
    max_new_tokens: int = 128
    text_budget: int = 1024
    # At most this many sections (best routing score first) in text mode's context; None (the
    # default): as many as fit the budget. A cap of 3 (as many as the BM25 top-3 baseline) was
    # tried and not kept: on etoolbox it left \patchcmd's own section out of "How do I patch a
    # command?" (docs/results.md, "Prompt, decoding and context").
    text_sections: int | None = None
    query_fraction: float = 0.5  # H2MT 3.3 uses the first half of the question's tokens
    flat_segment_tokens: int = 256
    router: str = "fused"  # fused | memory | lexical | dense (engine.routing.fused)
    walk: str | None = None  # engine.routing.fused.WALKS; None: the settings' walk
    # Text mode's system prompt (engine.answer.modes.TEXT_PROMPTS). "generic" is the default by
    # measurement: on the manual dev questions it scored 13.12 ROUGE-L against 12.04 for the
    # stricter "manual" prompt, whose "say the manual does not say" made SmolLM2-135M refuse
    # or answer in a few words (docs/results.md, "Text-mode prompt and decoding").
    text_prompt: str = "generic"
    repetition_penalty: float = 1.0  # decoding; 1.0 = off
    no_repeat_ngram: int = 0  # decoding; 0 = off
    # Text mode's context (engine.answer.modes.TEXT_PACKINGS): "sentences" (the best sentences
    # of the routed sections within sentence_budget tokens, engine.answer.sentences) or
    # "sections" (the earlier packing: whole sections within text_budget tokens).
    text_packing: str = "sentences"
    sentence_budget: int = sentence_evidence.BUDGET
    quote_threshold: float = sentence_evidence.THRESHOLD

    def validate(self) -> None:
        """One line (AskError) for the first bad value, whatever the mode: an option a mode
        does not use is still checked, so a bad request fails the same way in every mode."""
        if self.mode not in MODES:
            raise AskError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.router not in ROUTERS:
            raise AskError(f"unknown router {self.router!r}; choose one of {', '.join(ROUTERS)}")
        for name, value in (("k", self.k), ("the depth cap", self.max_depth),
                            ("the node budget", self.budget),
                            ("max new tokens", self.max_new_tokens),
                            ("the text budget", self.text_budget),
                            ("the flat segment size", self.flat_segment_tokens)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, numbers.Integral)):
                raise AskError(f"{name} must be a whole number, not {value!r}")
        if self.k < 1:
            raise AskError(f"k must be at least 1, not {self.k}")
        if self.max_depth is not None and self.max_depth < 1:
            raise AskError(f"the depth cap must be at least 1, not {self.max_depth}")
        if self.budget is not None and self.budget < 1:
            raise AskError(f"the node budget must be at least 1, not {self.budget}")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise AskError(f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not "
                           f"{self.max_new_tokens}")
        if self.text_budget < 1:
            raise AskError(f"the text budget must be at least 1 token, not {self.text_budget}")
        if self.flat_segment_tokens < 1:
            raise AskError("the flat segment size must be at least 1 token, not "
                           f"{self.flat_segment_tokens}")
        if not (isinstance(self.temperature, numbers.Real) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise AskError(f"the temperature must be a positive number, not {self.temperature!r}")
        if self.walk is not None and self.walk not in WALKS:
            raise AskError(f"unknown walk {self.walk!r}; choose one of {', '.join(WALKS)}")
        if self.text_prompt not in TEXT_PROMPTS:
            raise AskError(f"unknown text prompt {self.text_prompt!r}; choose one of "
                           f"{', '.join(TEXT_PROMPTS)}")
        if not 1.0 <= self.repetition_penalty <= 2.0:
            raise AskError("the repetition penalty must lie in [1, 2] (1 = off)")
        if self.text_sections is not None and self.text_sections < 1:
            raise AskError("text_sections must be at least 1 (or None: as many as fit)")
        if self.text_packing not in TEXT_PACKINGS:
            raise AskError(f"unknown text packing {self.text_packing!r}; choose one of "
                           f"{', '.join(TEXT_PACKINGS)}")
        if self.sentence_budget < 1:
            raise AskError("sentence_budget must be at least 1 token")
        if self.no_repeat_ngram < 0:
            raise AskError("no_repeat_ngram must be 0 (off) or more")
        if not 0 < self.query_fraction <= 1:
            raise AskError("query_fraction must lie in (0, 1]")


@dataclass
class StoredDocument:
    """What routing and answering read of one stored document."""

    tree: Tree
    evidence: NodeEvidence
    memories: dict[int, torch.Tensor] | None  # None until phase two has written every node's
    progress: MemoryProgress
    # unique per load (an id() could be reused once an evicted document is freed)
    serial: int = field(default_factory=itertools.count().__next__)


DOCUMENTS_CACHED = 16  # documents whose tree, evidence and memories stay loaded (least recent out)


def load_documents(rt: Runtime, doc_ids: list[int]) -> dict[int, StoredDocument]:
    """Trees, evidence and (complete) memories of the documents, cached per runtime (the
    ``DOCUMENTS_CACHED`` most recently asked about)."""
    cache = rt.cache.setdefault("docs", {})
    out = {}
    for doc_id in doc_ids:
        # The sha256 is part of the key: a database may reuse a deleted document's id.
        key = (doc_id, rt.library.get_document(doc_id).sha256, rt.fingerprint,
               evidence_fingerprint(rt.encoder))
        doc = cache.pop(key, None)  # re-inserted below: the dict's order is least recent first
        if doc is None:
            tree = rt.library.get_tree(doc_id)
            doc = StoredDocument(tree, document_evidence(doc_id, tree, rt), None,
                                 MemoryProgress(0, len(tree)))
        cache[key] = doc
        if doc.memories is None:  # phase two may have finished since
            doc.progress = rt.library.memory_progress(doc_id, rt.fingerprint)
            if doc.progress.complete:
                doc.memories = rt.library.get_memories(doc_id, rt.fingerprint)
        out[doc_id] = doc
    # a long-running app does not keep every manual: the least recent go, never this request's
    while len(cache) > max(DOCUMENTS_CACHED, len(out)):
        cache.pop(next(iter(cache)), None)
    return out


def routing_tree(rt: Runtime, docs: dict[int, StoredDocument]) -> RoutingTree:
    """The routed structure of these documents, cached with its lexical index and keys; a big
    one (``Settings.candidates_min_nodes``) with its candidate index."""
    cache = rt.cache.setdefault("routing", {})
    key = tuple((d, doc.serial, doc.memories is not None) for d, doc in sorted(docs.items()))
    if key not in cache:
        if len(cache) > 8:  # a handful of recent document sets
            cache.pop(next(iter(cache)))
        tree = RoutingTree.from_library(  # in id order: a stored candidate index's row ids
            {d: (doc.tree, doc.memories, doc.evidence) for d, doc in sorted(docs.items())})
        if len(tree) >= rt.settings.candidates_min_nodes and tree.dense is not None:
            tree.candidates = candidate_index(rt, docs, tree)
        cache[key] = tree
    return cache[key]


def candidate_index(rt: Runtime, docs: dict[int, StoredDocument],
                    tree: RoutingTree) -> CandidateIndex:
    """The candidate index of these documents: kept per runtime, else read from the library,
    else built and stored there (the evidence fingerprint is part of its key, so changed
    evidence gets a new index)."""
    parts = [f"{d}:{rt.library.get_document(d).sha256}" for d in sorted(docs)]
    key = hashlib.sha256("|".join([*parts, evidence_fingerprint(rt.encoder),
                                   CANDIDATES_VERSION]).encode()).hexdigest()
    cache = rt.cache.setdefault("candidates", {})
    if key not in cache:
        blob = rt.library.get_candidate_index(key)
        index = CandidateIndex.from_bytes(blob) if blob is not None else None
        if index is None or not index.fits(tree):
            index = CandidateIndex.build(tree.dense, tree.has_evidence, key)
            rt.library.put_candidate_index(key, sorted(docs), len(tree), index.to_bytes())
        cache.clear()  # one library's index at a time: it is the size of the evidence
        cache[key] = index
    return cache[key]


def memories_pending(docs: dict[int, StoredDocument]) -> MemoryProgress | None:
    """The progress of the documents whose memories are not complete yet (None when all are)."""
    waiting = [doc.progress for doc in docs.values() if doc.memories is None]
    if not waiting:
        return None
    return MemoryProgress(done=sum(p.done for p in waiting), total=sum(p.total for p in waiting))


def _pending_line(p: MemoryProgress) -> str:
    return f"memories are being written ({p.done}/{p.total} nodes)"


def flat_index(rt: Runtime, doc_id: int, tree: Tree, segment_tokens: int) -> FlatIndex:
    cache = rt.cache.setdefault("flat", {})
    key = (doc_id, rt.library.get_document(doc_id).sha256, rt.fingerprint, segment_tokens)
    if key not in cache:
        cache[key] = build_flat_index(tree, rt.backbone, rt.parts, segment_tokens,
                                      rt.settings.write_batch_nodes, rt.settings.write_batch_tokens)
    return cache[key]


def channel_query(rt: Runtime, routing: RoutingTree, question: str,
                  opts: AskOptions, metrics: Metrics | None = None) -> RouteQuery:
    """The question as every available channel reads it. Every channel is scored whatever the
    router (the router only chooses the fusion weights), so the trace shows all the evidence and
    the fused and memory routers' selections can be compared. ``metrics.query_vector_ms``
    gets the H2MT query vector's share (the backbone pass over the question)."""
    wanted = set(routing.available_channels())
    query = RouteQuery()
    if "lexical" in wanted:
        query.tokens = lexical.tokenize(question)
    if "dense" in wanted and rt.encoder is not None:
        query.dense = rt.encoder.encode_query(question)
    if "memory" in wanted:
        t = time.perf_counter()
        query.memory = query_vector(question, rt.backbone, rt.parts, opts.query_fraction)
        if metrics is not None:
            metrics.query_vector_ms = (time.perf_counter() - t) * 1e3
    return query


def resolve_docs(rt: Runtime, doc: int | str | None) -> list[int]:
    if doc in (None, "all"):
        ids = [d.id for d in rt.library.list_documents()]
        if not ids:
            raise AskError("the library is empty: ingest a manual first")
        return ids
    try:
        doc_id = int(doc)
    except (TypeError, ValueError):
        raise AskError(f"not a document id: {doc!r}") from None
    from storage import DocumentNotFound

    try:
        rt.library.get_document(doc_id)
    except DocumentNotFound:
        raise AskError(f"no document with id {doc_id}") from None
    return [doc_id]


def page_texts(rt: Runtime) -> PageTexts:
    """The runtime's cache of PDF page texts (for the pages of evidence lines)."""
    if "page_texts" not in rt.cache:
        rt.cache["page_texts"] = PageTexts()
    return rt.cache["page_texts"]


def _sections(ctx: Context, cited: list[int]) -> list[Section]:
    out = []
    for rid in cited:
        doc_id, node_id = ctx.routing.origin[rid]
        tree = ctx.trees.get(doc_id)
        if tree is None:
            continue
        n = tree.node(node_id)
        if n.kind in CONTEXT_EXCLUDED_KINDS or not n.text.strip():
            continue
        out.append(Section(doc_id, node_id, ctx.routing.title[rid], n.text, n.page_start,
                           n.page_end))
    return out


def pages_lookup(rt: Runtime):
    """``pages_of(item)``: the normalised page texts of ``item.doc_id``'s stored PDF (None when
    not a PDF or unknown), read once per content hash (``page_texts``)."""
    cache = page_texts(rt)
    shas: dict[int, str] = {}

    def pages_of(item):
        if item.doc_id is None:
            return None
        if item.doc_id not in shas:
            shas[item.doc_id] = rt.library.get_document(item.doc_id).sha256

        def stored() -> bytes | None:  # the file kept in the library with its document
            src = rt.library.get_source(item.doc_id)
            return src.data if src is not None and src.is_pdf else None

        return cache.get(shas[item.doc_id], stored)

    return pages_of


def answer_evidence(rt: Runtime, ctx: Context, text: str, cited: list[int]) -> list[EvidenceLine]:
    """The evidence lines of an answer from its cited nodes (engine.answer.evidence)."""
    sections = _sections(ctx, cited)
    if not sections or not text.strip():
        return []
    return evidence_lines(rt.encoder, text, sections, pages_of=pages_lookup(rt))


def ranked_sentences(rt: Runtime, ctx: Context, question: str,
                     route: Route | None) -> list[sentence_evidence.Sentence]:
    """The routed sections' sentences scored against the question, best first
    (engine.answer.sentences); tables of contents and indexes left out."""
    if route is None:
        return []
    sections = []
    for rid in sorted(route.selected):
        doc_id, node_id = ctx.routing.origin[rid]
        tree = ctx.trees.get(doc_id)
        if tree is None:
            continue
        n = tree.node(node_id)
        if n.kind in CONTEXT_EXCLUDED_KINDS or not n.text.strip():
            continue
        sections.append(sentence_evidence.SectionText(
            rid=rid, doc_id=doc_id, node_id=node_id,
            heading=heading_path(tree, node_id) or ctx.routing.title[rid], body=n.text,
            page_start=n.page_start, page_end=n.page_end))
    return sentence_evidence.score(rt.encoder, question, sentence_evidence.candidates(sections),
                                   query_vec=route.query_dense)


def sentence_pager(rt: Runtime):
    """``page_of(sentence)``: the physical 1-based page where a sentence begins (its section's
    first page when the section is one page; None when unknown: never guessed)."""
    pages_of = pages_lookup(rt)

    def page_of(s: sentence_evidence.Sentence) -> int | None:
        if s.page_start is None or s.page_end is None or s.page_end <= s.page_start:
            return s.page_start
        return locate_page(s.text, s.page_start, s.page_end, pages_of(s))

    return page_of


def find_quote(rt: Runtime, ctx: Context, question: str, route: Route | None,
               opts: AskOptions) -> tuple[list[sentence_evidence.Sentence], quoting.Quote | None]:
    """(ranked sentences, the quote or None below the threshold)."""
    ranked = ranked_sentences(rt, ctx, question, route)
    return ranked, quoting.choose(question, ranked, opts.quote_threshold, sentence_pager(rt))


NOT_COVERED = "The manual does not seem to cover this: no passage of the routed sections matches it."


_REASONS = {"repeat": "it repeats itself", "markup": "it is markup debris",
            "empty": "it is empty"}


def degenerate_warning(mode: str, reason: str) -> str:
    if mode in ("memory", "flat"):
        return (f"The {mode}-mode output is not an answer ({_REASONS[reason]}): the fast memory "
                "path failed on this question. Ask in text mode for an answer from the sections' "
                "text.")
    if reason == "repeat":
        return ("The answer began repeating itself and was stopped; the repeated part adds "
                "nothing. Check it against the cited sections.")
    return (f"This output is not a usable answer ({_REASONS[reason]}); read the cited sections "
            "instead.")


def _stripped(chunks: Iterator[str]) -> Iterator[str]:
    """The chunks with the answer's leading and trailing whitespace left out (trailing space is
    held back until text follows it), so that they join to the final answer text."""
    started, pending = False, ""
    for c in chunks:
        if not started:
            c = c.lstrip()
            if not c:
                continue
            started = True
        c = pending + c
        body = c.rstrip()
        pending = c[len(body):]
        if body:
            yield body


def ask_stream(rt: Runtime, doc: int | str | None, question: str,
               opts: AskOptions | None = None, log: bool = True) -> Iterator:
    """Answer ``question`` about one document (id) or the whole library (None / "all"), as
    events: ``RouteReady`` when routing ends, ``TokenChunk``s as the answer is generated,
    ``AnswerReady`` at the end (engine.answer.events). The chunks join to the answer's text (a
    cut answer's text then gets " (cut at N tokens)"). Problems with the request raise AskError
    (or MemoriesPending) here, before any event."""
    opts = opts or AskOptions()
    opts.validate()
    question = (question or "").strip()
    if not question:
        raise AskError("the question is empty")
    limit = getattr(rt.settings, "max_question_chars", MAX_QUESTION_CHARS)
    if len(question) > limit:
        raise AskError(f"the question is {len(question)} characters long; the limit is {limit}")
    doc_ids = resolve_docs(rt, doc)
    if opts.mode == "flat" and len(doc_ids) != 1:
        raise AskError("the flat baseline answers about one document at a time")
    docs = load_documents(rt, doc_ids)
    pending = memories_pending(docs)
    if pending and opts.mode in ("memory", "flat"):
        raise MemoriesPending(f"{_pending_line(pending)}; {opts.mode} mode needs them, ask in "
                              "text or route mode meanwhile", pending.done, pending.total)
    if pending and opts.router == "memory":
        raise MemoriesPending(f"{_pending_line(pending)}; the memory router needs them, use the "
                              "fused router meanwhile", pending.done, pending.total)
    routing = routing_tree(rt, docs)
    try:
        reader = rt.reader if opts.mode in ("text", "full") else None
    except SettingsError as e:
        raise AskError(str(e)) from None
    ctx = Context(backbone=rt.backbone, parts=rt.parts, routing=routing,
                  trees={d: doc.tree for d, doc in docs.items()},
                  aligner=getattr(rt.parts, "aligner", None), gate=opts.gate,
                  hier_pos=opts.hier_pos, max_new_tokens=opts.max_new_tokens,
                  text_budget=opts.text_budget, text_sections=opts.text_sections,
                  text_system=TEXT_PROMPTS[opts.text_prompt],
                  repetition_penalty=opts.repetition_penalty, no_repeat_ngram=opts.no_repeat_ngram,
                  max_time=getattr(rt.settings, "request_timeout_s", None),
                  reader=reader, text_packing=opts.text_packing)
    metrics = Metrics()
    peak = _PeakMemory(rt.backbone.device).__enter__()
    t0 = time.perf_counter()
    rt_route: Route | None = None
    quote_route: Route | None = None  # full mode routes for its quote only
    q = None
    try:
        # every mode routes: the quote reads the routed sections
        tq = time.perf_counter()
        query = channel_query(rt, routing, question, opts, metrics)
        q = query.memory
        if opts.mode == "flat" and q is None:
            q = query_vector(question, rt.backbone, rt.parts, opts.query_fraction)
        query_ms = (time.perf_counter() - tq) * 1e3
        try:
            rt_route = route_on_evidence(routing, query, rt.parts.router, router=opts.router,
                                         weights=rt.fusion, k=opts.k,
                                         max_depth=opts.max_depth, budget=opts.budget,
                                         temperature=opts.temperature,
                                         walk_how=opts.walk or rt.settings.walk)
        except RouterUnavailable as e:
            raise AskError(str(e)) from None
        rt_route.query_ms = query_ms
        rt_route.query_dense = query.dense
        metrics.route_ms = query_ms + rt_route.route_ms
        if opts.mode == "full":  # the plain baseline reads no route: its clock starts now
            quote_route, rt_route = rt_route, None
            metrics.route_ms = 0.0
            t0 = time.perf_counter()
    except BaseException:
        peak.__exit__(None, None, None)
        raise
    return _events(rt, ctx, question, opts, doc_ids, pending, rt_route, q, metrics, peak, t0, log,
                   quote_route)


def _events(rt, ctx, question, opts, doc_ids, pending, rt_route, q, metrics, peak, t0, log,
            quote_route=None):
    try:
        plan, cited = None, []
        # The quote: before generation where the reader needs the sentences (text) or the quote is
        # the answer (quote); after it in the other modes, so their time to first token is
        # theirs alone (the app's default mode is text, which shows the quote first).
        early = opts.mode in ("text", "quote")
        ranked, quote = [], None
        if early:
            tq = time.perf_counter()
            ranked, quote = find_quote(rt, ctx, question, rt_route, opts)
            metrics.quote_ms = (time.perf_counter() - tq) * 1e3
        if opts.mode == "text" and opts.text_packing == "sentences":
            ctx.sentences = sentence_evidence.select(
                ranked, lambda t: len(ctx.text_model.encode(t)), opts.sentence_budget,
                opts.quote_threshold)
            ctx.sentence_page = sentence_pager(rt)
        if opts.mode == "quote":
            cited = [quote.rid] if quote is not None else []
        elif opts.mode == "route":
            cited = sorted(rt_route.selected)
        elif opts.mode == "memory":
            plan, cited = plan_memory(ctx, question, rt_route)
        elif opts.mode == "text":
            plan, cited = plan_text(ctx, question, rt_route)
        elif opts.mode == "full":
            plan, cited = plan_full(ctx, question)
        else:  # flat
            tree = ctx.trees[doc_ids[0]]
            index = flat_index(rt, doc_ids[0], tree, opts.flat_segment_tokens)
            seg, _ = search(index, q, rt.parts.router, max(1, len(rt_route.selected)))
            plan = slots_plan(ctx, question, index.memories[seg], None)
        citations = [citation(ctx.routing, i) for i in cited]
        yield RouteReady(rt_route, citations, quote, not_covered=early and quote is None)
        gate: dict[int, list[int]] = {}
        text, result = "", None
        if plan is not None:
            streamer = GuardedStreamer(rt.backbone.tokenizer)
            ctx.streamer = streamer
            box: dict = {}

            def work() -> None:
                try:
                    box["result"] = run_plan(ctx, plan)
                except BaseException as e:  # re-raised in the caller's thread below
                    box["error"] = e
                    streamer.end()

            worker = threading.Thread(target=work, name="answer-generation", daemon=True)
            worker.start()
            parts = []
            for piece in _stripped(streamer):
                parts.append(piece)
                yield TokenChunk(piece)
            worker.join()
            if "error" in box:
                raise box["error"]
            result = box["result"]
            text = "".join(parts)
            if opts.mode == "memory" and result.loops is not None:
                gate = {rid: [int(x) for x in result.loops[i].tolist()]
                        for i, rid in enumerate(cited)}
            metrics.prefill_tokens = result.prefill_tokens
            metrics.generated_tokens = result.generated_tokens
            if result.first_token_at is not None:
                metrics.ttft_ms = (result.first_token_at - t0) * 1e3
        elif opts.mode == "quote":
            text = quote.text if quote is not None else NOT_COVERED
            metrics.ttft_ms = metrics.route_ms + metrics.quote_ms
        else:
            metrics.ttft_ms = metrics.route_ms
        metrics.total_ms = (time.perf_counter() - t0) * 1e3
        if not early:
            tq = time.perf_counter()
            ranked, quote = find_quote(rt, ctx, question, rt_route or quote_route, opts)
            metrics.quote_ms = (time.perf_counter() - tq) * 1e3
    finally:
        peak.__exit__(None, None, None)
    metrics.peak_mem_mb = max(0.0, peak.mb)
    warnings = []
    if opts.mode == "text" and opts.text_packing == "sentences" and not ctx.sentences:
        warnings.append("No passage of the manual matched the question closely enough: this "
                        "answer is the model's own, without the manual.")
    if pending and opts.router == "fused" and rt_route is not None:
        warnings.append(f"{_pending_line(pending)}: routed on words and meaning only until they "
                        "are done")
    reason, trimmed = None, False
    evidence: list[EvidenceLine] = []
    if result is not None:
        if opts.mode in ("text", "full"):  # what came before a loop is the answer
            text, reason, trimmed = clean_answer(text, result.stop)
            if trimmed:
                warnings.append("The answer began to repeat itself; the repetition was cut.")
        else:  # a looping memory output is the fast path failing: said, not trimmed
            reason = degeneracy(text, result.stop)
        if reason is not None:
            warnings.append(degenerate_warning(opts.mode, reason))
        # a text answer that began to loop may still be right up to there: it keeps its
        # evidence; a degenerate memory output is no answer and gets none
        keeps = reason in (None, "repeat") if opts.mode == "text" else reason is None
        if keeps and opts.mode in ("text", "memory"):
            te = time.perf_counter()
            evidence = answer_evidence(rt, ctx, text, cited)
            metrics.evidence_ms = (time.perf_counter() - te) * 1e3
    cut = result is not None and result.cut and not trimmed
    if cut:
        text = f"{text} (cut at {result.generated_tokens} tokens)"
    answer = Answer(text=text, mode=opts.mode, cited=citations, gate=gate, metrics=metrics,
                    route=rt_route, warning=" ".join(warnings) or None, evidence=evidence,
                    cut=cut, cut_at=result.generated_tokens if cut else None, degenerate=reason,
                    stop=result.stop if result is not None else None, repetition_cut=trimmed,
                    quote=quote, not_covered=quote is None)
    if log:
        rt.library.log_query(question, opts.mode, text,
                             doc_id=doc_ids[0] if len(doc_ids) == 1 else None,
                             settings=asdict(opts), route=answer.as_json()["route"],
                             metrics=asdict(metrics))
    yield AnswerReady(answer)


def ask(rt: Runtime, doc: int | str | None, question: str, opts: AskOptions | None = None,
        log: bool = True) -> Answer:
    """Answer ``question`` about one document (id) or the whole library (None / "all"): the
    last event of ``ask_stream``."""
    answer = None
    for event in ask_stream(rt, doc, question, opts, log):
        if isinstance(event, AnswerReady):
            answer = event.answer
    return answer
