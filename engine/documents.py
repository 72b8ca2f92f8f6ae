"""The stored documents an answer reads, loaded once per runtime and kept: each document's tree,
routing evidence and memories (keyed by the document's sha256 and the fingerprints of the parts
and the evidence), and the routed structure of a set of documents with its lexical index and,
when big, its candidate index. A document whose memories are still being written (phase two of
ingest) has none yet (``memories_pending``).

Other processes change the library too (app replicas, memory workers): every request reads what
the library says now about the documents it asks, in one query (their content hashes and memory
progress), so a document uploaded, deleted or given its memories elsewhere is seen on the next
request, without a restart; so are the dense vectors of a big upload's evidence, stored after
it (``engine.ingest.store_evidence_vectors``): until then it is routed by its words."""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field

import torch

from engine.document.tree import Tree
from engine.ingest import document_evidence, evidence_encoder
from engine.routing.candidates import VERSION as CANDIDATES_VERSION, CandidateIndex
from engine.routing.evidence import evidence_fingerprint, vectors_pending
from engine.routing.router import RoutingTree
from engine.runtime import Runtime
from storage import DocumentNotFound, MemoryProgress, NodeEvidence


@dataclass
class StoredDocument:
    """What routing and answering read of one stored document."""

    tree: Tree
    evidence: NodeEvidence
    memories: dict[int, torch.Tensor] | None  # None until phase two has written every node's
    progress: MemoryProgress
    sha256: str  # of the file it was built from: the cache key (a database may reuse ids)
    # unique per load (an id() could be reused once an evicted document is freed)
    serial: int = field(default_factory=itertools.count().__next__)


DOCUMENTS_CACHED = 16  # documents whose tree, evidence and memories stay loaded (least recent out)


def load_documents(rt: Runtime, doc_ids: list[int]) -> dict[int, StoredDocument]:
    """Trees, evidence and (complete) memories of the documents, cached per runtime (the
    ``DOCUMENTS_CACHED`` most recently asked about) and checked against the library in one
    query per call. DocumentNotFound for a document deleted meanwhile."""
    cache = rt.cache.setdefault("docs", {})
    states = rt.library.document_states(doc_ids, rt.fingerprint)
    out = {}
    for doc_id in doc_ids:
        if doc_id not in states:
            raise DocumentNotFound(doc_id)
        sha256, progress = states[doc_id]
        # The sha256 is part of the key: a database may reuse a deleted document's id.
        key = (doc_id, sha256, rt.fingerprint, evidence_fingerprint(evidence_encoder(rt)))
        doc = cache.pop(key, None)  # re-inserted below: the dict's order is least recent first
        if doc is not None and vectors_pending(doc.evidence, rt.encoder) and \
                rt.library.evidence_has_vectors(doc_id, key[3]):
            doc = None  # its dense vectors were stored since (here or elsewhere): read them
        if doc is None:
            tree = rt.library.get_tree(doc_id)
            doc = StoredDocument(tree, document_evidence(doc_id, tree, rt), None,
                                 MemoryProgress(0, len(tree)), sha256)
        cache[key] = doc
        if doc.memories is None:  # phase two may have finished since (here or elsewhere)
            doc.progress = progress
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
    parts = [f"{d}:{doc.sha256}" for d, doc in sorted(docs.items())]
    key = hashlib.sha256("|".join([*parts, evidence_fingerprint(evidence_encoder(rt)),
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


def pending_line(p: MemoryProgress) -> str:
    """The user's line about memories still being written."""
    return f"memories are being written ({p.done}/{p.total} nodes)"
