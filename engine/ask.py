"""Ask: question -> channel queries -> Route -> Answer -> query log (H2MT 3.3).

The one entry point the CLI, the app and the benches call. Trees, routing evidence and memories
of a document are read from storage once per runtime and kept (keyed by the document's sha256
and the fingerprints of the parts and the evidence), and so is the routed structure of a set of
documents with its lexical index. A document whose memories are still being written (phase two
of ingest) routes on its text channels; memory mode waits for its memories.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from engine.answer.modes import (MODES, Answer, Context, Metrics, _PeakMemory, answer_full,
                                 answer_memory, answer_text, citation, generate_with_slots)
from engine.answer.flat import FlatIndex, build_flat_index, search
from engine.document.tree import Tree
from engine.ingest import document_evidence
from engine.routing import lexical
from engine.routing.evidence import evidence_fingerprint
from engine.routing.fused import ROUTERS, RouteQuery, RouterUnavailable, route_on_evidence
from engine.routing.router import Route, RoutingTree, query_vector
from engine.runtime import Runtime
from storage import MemoryProgress, NodeEvidence

MAX_QUESTION_CHARS = 2000  # the default of Settings.max_question_chars


class AskError(ValueError):
    """A problem with the user's request (empty question, unknown document, bad setting)."""


class MemoriesPending(AskError):
    """The request needs memories that phase two of ingest is still writing."""

    def __init__(self, message: str, done: int, total: int):
        super().__init__(message)
        self.done, self.total = done, total


@dataclass
class AskOptions:
    mode: str = "memory"
    k: int = 3
    max_depth: int | None = None
    budget: int | None = None
    temperature: float = 1.0
    gate: bool = True
    hier_pos: bool = False
    max_new_tokens: int = 128
    text_budget: int = 1024
    query_fraction: float = 0.5  # H2MT 3.3 uses the first half of the question's tokens
    flat_segment_tokens: int = 256
    router: str = "fused"  # fused | memory | lexical | dense (engine.routing.fused)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise AskError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.k < 1:
            raise AskError("k must be at least 1")
        if self.max_depth is not None and self.max_depth < 1:
            raise AskError("the depth cap must be at least 1")
        if self.budget is not None and self.budget < 1:
            raise AskError("the node budget must be at least 1")
        if not 0 < self.query_fraction <= 1:
            raise AskError("query_fraction must lie in (0, 1]")
        if self.router not in ROUTERS:
            raise AskError(f"unknown router {self.router!r}; choose one of {', '.join(ROUTERS)}")


@dataclass
class StoredDocument:
    """What routing and answering read of one stored document."""

    tree: Tree
    evidence: NodeEvidence
    memories: dict[int, torch.Tensor] | None  # None until phase two has written every node's
    progress: MemoryProgress


def load_documents(rt: Runtime, doc_ids: list[int]) -> dict[int, StoredDocument]:
    """Trees, evidence and (complete) memories of the documents, cached per runtime."""
    cache = rt.cache.setdefault("docs", {})
    out = {}
    for doc_id in doc_ids:
        # The sha256 is part of the key: a database may reuse a deleted document's id.
        key = (doc_id, rt.library.get_document(doc_id).sha256, rt.fingerprint,
               evidence_fingerprint(rt.encoder))
        doc = cache.get(key)
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
    return out


def routing_tree(rt: Runtime, docs: dict[int, StoredDocument]) -> RoutingTree:
    """The routed structure of these documents, cached with its lexical index and keys."""
    cache = rt.cache.setdefault("routing", {})
    key = tuple((d, id(doc.tree), doc.memories is not None) for d, doc in sorted(docs.items()))
    if key not in cache:
        if len(cache) > 8:  # a handful of recent document sets
            cache.pop(next(iter(cache)))
        cache[key] = RoutingTree.from_library(
            {d: (doc.tree, doc.memories, doc.evidence) for d, doc in docs.items()})
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
                  opts: AskOptions) -> RouteQuery:
    """The question as every available channel reads it. Every channel is scored whatever the
    router (the router only chooses the fusion weights), so the trace shows all the evidence and
    the fused and memory routers' selections can be compared."""
    wanted = set(routing.available_channels())
    query = RouteQuery()
    if "lexical" in wanted:
        query.tokens = lexical.tokenize(question)
    if "dense" in wanted and rt.encoder is not None:
        query.dense = rt.encoder.encode_query(question)
    if "memory" in wanted:
        query.memory = query_vector(question, rt.backbone, rt.parts, opts.query_fraction)
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


def ask(rt: Runtime, doc: int | str | None, question: str, opts: AskOptions | None = None,
        log: bool = True) -> Answer:
    """Answer ``question`` about one document (id) or the whole library (None / "all")."""
    opts = opts or AskOptions()
    opts.validate()
    question = (question or "").strip()
    if not question:
        raise AskError("the question is empty")
    limit = getattr(rt.settings, "max_question_chars", MAX_QUESTION_CHARS)
    if len(question) > limit:
        raise AskError(f"the question is {len(question)} characters long; the limit is {limit}")
    doc_ids = resolve_docs(rt, doc)
    docs = load_documents(rt, doc_ids)
    pending = memories_pending(docs)
    if pending and opts.mode in ("memory", "flat"):
        raise MemoriesPending(f"{_pending_line(pending)}; {opts.mode} mode needs them, ask in "
                              "text or route mode meanwhile", pending.done, pending.total)
    if pending and opts.router == "memory":
        raise MemoriesPending(f"{_pending_line(pending)}; the memory router needs them, use the "
                              "fused router meanwhile", pending.done, pending.total)
    routing = routing_tree(rt, docs)
    ctx = Context(backbone=rt.backbone, parts=rt.parts, routing=routing,
                  trees={d: doc.tree for d, doc in docs.items()},
                  aligner=getattr(rt.parts, "aligner", None), gate=opts.gate,
                  hier_pos=opts.hier_pos, max_new_tokens=opts.max_new_tokens,
                  text_budget=opts.text_budget,
                  max_time=getattr(rt.settings, "request_timeout_s", None))
    metrics = Metrics()
    with _PeakMemory(rt.backbone.device) as peak:
        t0 = time.perf_counter()
        rt_route: Route | None = None
        q = None
        if opts.mode != "full":
            tq = time.perf_counter()
            query = channel_query(rt, routing, question, opts)
            q = query.memory
            if opts.mode == "flat" and q is None:
                q = query_vector(question, rt.backbone, rt.parts, opts.query_fraction)
            query_ms = (time.perf_counter() - tq) * 1e3
            try:
                rt_route = route_on_evidence(routing, query, rt.parts.router, router=opts.router,
                                             weights=rt.fusion, k=opts.k,
                                             max_depth=opts.max_depth, budget=opts.budget,
                                             temperature=opts.temperature)
            except RouterUnavailable as e:
                raise AskError(str(e)) from None
            rt_route.query_ms = query_ms
            metrics.route_ms = query_ms + rt_route.route_ms
        gate: dict[int, list[int]] = {}
        cited: list[int] = []
        if opts.mode == "route":
            text, result = "", None
            cited = sorted(rt_route.selected)
        elif opts.mode == "memory":
            result, cited = answer_memory(ctx, question, rt_route)
            if result.loops is not None:
                gate = {rid: [int(x) for x in result.loops[i].tolist()] for i, rid in enumerate(cited)}
        elif opts.mode == "text":
            result, cited = answer_text(ctx, question, rt_route)
        elif opts.mode == "full":
            result, cited = answer_full(ctx, question)
        else:  # flat
            if len(doc_ids) != 1:
                raise AskError("the flat baseline answers about one document at a time")
            tree = ctx.trees[doc_ids[0]]
            index = flat_index(rt, doc_ids[0], tree, opts.flat_segment_tokens)
            n = max(1, len(rt_route.selected))
            seg, _ = search(index, q, rt.parts.router, n)
            result = generate_with_slots(ctx, question, index.memories[seg], None)
        if result is not None:
            text = result.text
            metrics.prefill_tokens = result.prefill_tokens
            metrics.generated_tokens = result.generated_tokens
            if result.first_token_at is not None:
                metrics.ttft_ms = (result.first_token_at - t0) * 1e3
        else:
            metrics.ttft_ms = metrics.route_ms
        metrics.total_ms = (time.perf_counter() - t0) * 1e3
    metrics.peak_mem_mb = max(0.0, peak.mb)
    warning = None
    if pending and opts.router == "fused" and rt_route is not None:
        warning = f"{_pending_line(pending)}: routed on words and meaning only until they are done"
    answer = Answer(text=text, mode=opts.mode, cited=[citation(routing, i) for i in cited],
                    gate=gate, metrics=metrics, route=rt_route, warning=warning)
    if log:
        rt.library.log_query(question, opts.mode, text,
                             doc_id=doc_ids[0] if len(doc_ids) == 1 else None,
                             settings=asdict(opts), route=answer.as_json()["route"],
                             metrics=asdict(metrics))
    return answer
