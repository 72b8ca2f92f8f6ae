"""Ingest: a file becomes a stored document with a tree, routing evidence and node memories.

Two phases, so that a manual is askable within seconds of its upload:
1. file -> ``document.build_tree`` (with evidence hygiene) -> ``routing.evidence`` (lexical
   tokens and sentence-encoder vectors per node) -> storage with the file's bytes (its pages
   are rendered from them), in ONE transaction: the document
   is askable in text and route modes (fused router without the memory channel) at once, or
   not stored at all.
2. ``memory.writer.write_memories`` bottom-up, each tree height stored in its own transaction
   as it finishes, so an interrupted write resumes where it stopped (``write_document_memories``
   picks up the stored heights). Memory mode and the memory channel wait until every node has
   its memory: a half-written set is never used.

A file already stored (same sha256) is not built again; if its memories were written under
another fingerprint (other backbone, parts or policy), they are rewritten from the stored tree.
Two ingests of the same file racing each other (two clients, two processes) end as one document:
the loser of the race gets the winner's document back as "reused".

The limits of ``Settings`` (file size, pages, nodes) are checked before the parse where that is
cheap (``preflight``) and on the built tree; breaking one is a DocumentError like any bad file.

Each text is encoded once per ingest (``SharedVectors``): an induced tree's chunks get their
sentence-encoder vectors while the tree is induced (H2MT 4.3), and those same vectors are the
chunks' dense routing evidence, so phase one does not encode them a second time.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol

from engine.document.builders import PDF_MAGIC, media_type
from engine.runtime import Runtime
from engine.settings import Settings
from engine.document.deadline import Deadline, IngestTimeout  # noqa: F401 (IngestTimeout: API)
from engine.document.tree import DocumentError, Tree
from engine.document.build import build_tree
from engine.memory.worker import MemoryWorker, WriteFn
from engine.memory.worker import write_document_memories as write_memories_of
from engine.answer.passages.passage_index import index_for
from engine.answer.passages.unit_vectors import (digest, known_vectors, precompute, quote_kind,
                                                 texts_of)
from engine.routing.evidence import (add_vectors, compute_evidence, evidence_fingerprint,
                                     vectors_pending)
from engine.routing.shared_vectors import SharedVectors
from storage import DocumentMeta, DuplicateDocument, NodeEvidence, SourceFile


@dataclass
class IngestResult:
    doc_id: int
    title: str
    file_name: str
    source: str
    nodes: int
    leaves: int
    depth: int
    pages: int
    tokens: int
    tree_ms: float
    memory_ms: float
    reused: bool  # the file was already in the library (nothing rebuilt)
    evidence_ms: float = 0.0  # lexical tokens and dense vectors of every node
    memories: str = "complete"  # complete | pending (phase two not run or not finished)

    def as_json(self) -> dict:
        return asdict(self)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_file(path: Path, data: bytes | None = None) -> SourceFile:
    """The uploaded file as stored beside its document (its pages are rendered from it)."""
    path = Path(path)
    data = path.read_bytes() if data is None else data
    return SourceFile(file_name=path.name, media_type=media_type(path, data), data=data)


def _result(doc_id: int, tree: Tree, file_name: str, tree_ms: float, memory_ms: float,
            reused: bool, evidence_ms: float = 0.0, memories: str = "complete") -> IngestResult:
    nodes = list(tree.preorder())
    return IngestResult(doc_id=doc_id, title=tree.title, file_name=file_name, source=tree.source,
                        nodes=len(nodes), leaves=len(tree.leaves()), depth=tree.depth,
                        pages=tree.pages, tokens=sum(n.tokens for n in nodes),
                        tree_ms=round(tree_ms, 1), memory_ms=round(memory_ms, 1), reused=reused,
                        evidence_ms=round(evidence_ms, 1), memories=memories)


def preflight(path: Path, settings: Settings) -> None:
    """Cheap checks before any parse: the file exists, is not empty, and is within the size
    and page limits. DocumentError with a message for the user otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DocumentError(f"{path.name}: file not found") from None
    if not path.is_file():
        raise DocumentError(f"{path.name} is not a regular file")
    if size == 0:
        raise DocumentError(f"{path.name} is empty")
    limit = settings.max_upload_mb
    if size > limit * 2**20:
        raise DocumentError(f"{path.name} is {size / 2**20:.1f} MB; the limit is {limit:g} MB")
    with open(path, "rb") as f:
        head = f.read(4096)
    if size <= len(head) and not head.strip():
        raise DocumentError(f"{path.name} is empty (only blank space)")
    if PDF_MAGIC in head[:1024]:
        import pymupdf

        try:
            with pymupdf.open(path) as doc:
                pages = doc.page_count
        except Exception:  # damaged: the builder gives the precise message
            return
        check_pages(path.name, pages, settings)


def check_pages(name: str, pages: int, settings: Settings) -> None:
    if pages > settings.max_pages:
        raise DocumentError(f"{name} has {pages} pages; the limit is {settings.max_pages}")


def check_tree_limits(name: str, tree: Tree, settings: Settings) -> None:
    check_pages(name, tree.pages, settings)
    n = len(tree)
    if n > settings.max_nodes:
        raise DocumentError(f"{name} makes a tree of {n} nodes; the limit is {settings.max_nodes} "
                            "(split the document, or raise H2MT_MAX_NODES)")


def evidence_encoder(rt: Runtime):
    """The encoder of the nodes' evidence vectors: the runtime's, in the precision the settings
    name (``Settings.evidence_precision``, ``dense.for_evidence``: bfloat16 where the hardware
    computes it natively); its fingerprint names the precision, so evidence stored in another
    is computed again (``document_evidence``). None when the dense channel is off."""
    from engine.routing.dense import for_evidence

    return for_evidence(rt.encoder, rt.settings.evidence_precision)


def build_document_tree(path: Path, rt: Runtime, shared: SharedVectors | None = None,
                        check: Callable[[str], None] | None = None,
                        progress: Callable[[int, int], None] | None = None) -> Tree:
    """The file's tree within the settings' node limit; ``check(stage)``: the ingest's
    deadline, called while parsing, reading scanned pages, chunking, encoding and clustering;
    ``progress(done, total)``: after each OCR'd page."""
    bb = rt.backbone
    # A document without headings gets an induced hierarchy (H2MT 4.3) over the dense
    # channel's sentence-encoder vectors (an LSA embedding when that channel is off).
    if shared is None and rt.encoder is not None:
        shared = SharedVectors(evidence_encoder(rt))
    embed = None
    if shared is not None:
        def embed(texts):
            return shared.embed(texts, progress=lambda done, total: check and check("encoding"))
    tree = build_tree(path, bb.encode, bb.decode, rt.settings.node_token_limit, embed=embed,
                      check=check, max_nodes=rt.settings.max_nodes,
                      ocr_languages=rt.settings.ocr_languages, progress=progress)
    check_tree_limits(Path(path).name, tree, rt.settings)
    return tree


def tree_evidence(tree: Tree, rt: Runtime, shared: SharedVectors | None = None,
                  progress: Callable[[int, int], None] | None = None, *,
                  vectors_later: bool = False) -> NodeEvidence:
    """Routing evidence of ``tree`` (``routing.evidence``), reusing the vectors ``shared``
    already holds (an induced tree's chunks) rather than encoding them again.
    ``vectors_later``: the lexical tokens only; ``store_evidence_vectors`` adds the vectors."""
    if rt.encoder is None:
        return compute_evidence(tree, None, progress)
    if vectors_later:
        return compute_evidence(tree, evidence_encoder(rt), progress, vectors_later=True)
    shared = shared if shared is not None else SharedVectors(evidence_encoder(rt))
    return compute_evidence(tree, shared.for_evidence(tree), progress)


def store_evidence_vectors(doc_id: int, rt: Runtime,
                           progress: IngestProgress | None = None) -> int:
    """The dense vectors of a document stored with its lexical evidence only (a big upload,
    askable by its words first), encoded and stored in one transaction (stage "sections");
    how many nodes were encoded (0: nothing was pending)."""
    encoder = evidence_encoder(rt)
    ev = rt.library.get_evidence(doc_id, evidence_fingerprint(encoder))
    if ev is None or not vectors_pending(ev, encoder):
        return 0
    tree = rt.library.get_tree(doc_id)
    # the same encoder as phase one's (an induced tree's leaves read their chunk texts)
    ev = add_vectors(tree, ev, SharedVectors(encoder).for_evidence(tree),
                     _stage(progress, "sections"))
    rt.library.put_evidence(doc_id, ev)
    return len(tree)


def pending_evidence_vectors(doc_id: int, rt: Runtime) -> int:
    """How many nodes of the document wait for their dense evidence vectors (0: none)."""
    if rt.encoder is None:
        return 0
    return 0 if rt.library.evidence_has_vectors(doc_id,
                                                evidence_fingerprint(evidence_encoder(rt))) \
        else rt.library.get_document(doc_id).n_nodes


class IngestProgress(Protocol):
    """Ingest progress: ``done`` of ``total`` nodes in ``stage`` ("evidence", then "memories")."""

    def __call__(self, done: int, total: int, *, stage: str) -> None: ...


def _with_deadline(deadline: Deadline, progress: IngestProgress | None) -> IngestProgress:
    """``progress`` with the ingest's deadline checked at every report."""
    def check(done: int, total: int, stage: str) -> None:
        deadline.check(stage)
        if progress is not None:
            progress(done, total, stage=stage)
    return check


def document_evidence(doc_id: int, tree: Tree, rt: Runtime) -> NodeEvidence:
    """The stored evidence of a document under the runtime's tokenizer and encoder; computed
    and stored again when it is missing or was made by another version (re-indexing)."""
    ev = rt.library.get_evidence(doc_id, evidence_fingerprint(evidence_encoder(rt)))
    if ev is None:
        ev = tree_evidence(tree, rt)
        rt.library.put_evidence(doc_id, ev)
    return ev


def ingest_file(path: str | Path, rt: Runtime, progress: IngestProgress | None = None, *,
                timeout_s: float | None = None, memories: bool = True,
                preflighted: bool = False, unit_vectors: bool = False,
                background: bool = False) -> IngestResult:
    """Phase one (tree + evidence, stored in one transaction) and, with ``memories``, phase two
    (node memories, stored height by height) of one file; or reuse the stored document (its
    missing memories are written). DocumentError on bad files.

    ``timeout_s``: stop (IngestTimeout) when writing runs past it; phase one stores nothing
    then, phase two keeps the heights already stored and resumes on the next ingest.
    ``preflighted``: the caller ran ``preflight`` on the file already (an upload's checks).
    ``unit_vectors``: phase one also encodes and stores the passage units the quote reads
    (``store_unit_vectors``), so that no ask encodes them.
    ``background``: the caller encodes what can wait in the background (the app's
    ``engine.passage_worker``): a tree of ``Settings.background_evidence_nodes`` nodes or more
    is stored with its lexical evidence only, askable by its words at once, its dense vectors
    added by ``store_evidence_vectors``.
    """
    path = Path(path)
    deadline = Deadline(path.name, timeout_s)
    if not preflighted:
        preflight(path, rt.settings)
    progress = _with_deadline(deadline, progress)
    sha = file_sha256(path)
    lib = rt.library
    existing = lib.find_by_sha256(sha)
    if existing is not None:
        if not lib.has_source(existing):  # stored by a version that did not keep the file
            lib.put_source(existing, source_file(path))
        if unit_vectors:  # those of an older unit split (UNITS_VERSION) are replaced
            store_evidence_vectors(existing, rt, progress)  # an upload's left to the background
            store_unit_vectors(existing, rt, progress)
        return _reuse(existing, rt, progress, memories)
    t0 = time.perf_counter()
    shared = SharedVectors(evidence_encoder(rt)) if rt.encoder is not None else None
    tree = build_document_tree(path, rt, shared, deadline.check, _stage(progress, "ocr"))
    tree_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    later = background and len(tree) >= rt.settings.background_evidence_nodes
    evidence = tree_evidence(tree, rt, shared, _stage(progress, "evidence"), vectors_later=later)
    evidence_ms = (time.perf_counter() - t1) * 1e3
    meta = DocumentMeta(title=tree.title or path.stem, file_name=path.name, sha256=sha,
                        pages=tree.pages, tree_ms=tree_ms, memory_ms=0.0)
    try:
        doc_id = lib.add_document(meta, tree, evidence=evidence,
                                  source=source_file(path, tree.text_layer_pdf))
    except DuplicateDocument as e:  # another client stored the same file meanwhile
        existing = e.existing_id if e.existing_id is not None else lib.find_by_sha256(sha)
        if existing is None:
            raise
        return _reuse(existing, rt, progress, memories)
    if unit_vectors:
        t2 = time.perf_counter()
        store_evidence_vectors(doc_id, rt, progress)
        store_unit_vectors(doc_id, rt, progress)
        evidence_ms += (time.perf_counter() - t2) * 1e3
    if not memories:
        return _result(doc_id, tree, path.name, tree_ms, 0.0, False, evidence_ms, "pending")
    memory_ms = write_held(doc_id, rt, progress)
    return _result(doc_id, tree, path.name, tree_ms, memory_ms, False, evidence_ms)


def _passage_index(doc_id: int, rt: Runtime):
    return index_for(rt.cache, doc_id, rt.library.get_document(doc_id).sha256,
                     rt.library.get_tree(doc_id))


def store_unit_vectors(doc_id: int, rt: Runtime, progress: IngestProgress | None = None, *,
                       stop: Callable[[], bool] | None = None) -> int:
    """Encode and store the texts of the document's passage units that the quote stage reads
    (``engine.answer.passages.unit_vectors``; stage "passages"), a chunk at a time (an
    interrupted run resumes from the chunks stored; ``stop()``: true to stop after a chunk);
    how many were added."""
    if rt.encoder is None:
        return 0
    kind = quote_kind(rt.settings.passage_ranker_path is not None)
    return precompute(rt, doc_id, _passage_index(doc_id, rt), kind, _stage(progress, "passages"),
                      stop=stop)


def pending_unit_vectors(doc_id: int, rt: Runtime) -> tuple[int, int]:
    """(stored, total) of the document's passage texts that the quote stage reads (those
    ``store_unit_vectors`` encodes); (0, 0) without an encoder."""
    if rt.encoder is None:
        return 0, 0
    kind = quote_kind(rt.settings.passage_ranker_path is not None)
    index = _passage_index(doc_id, rt)
    texts = texts_of(index, kind)
    known = known_vectors(rt, doc_id, kind)
    return sum(1 for t in texts if digest(t) in known), len(texts)


def write_held(doc_id: int, rt: Runtime, progress: IngestProgress | None = None) -> float:
    """Phase two in this call, under the document's job lease like any memory worker (a
    worker beside it never writes the same nodes; one already writing them is waited for);
    milliseconds spent. A failure (a deadline, Ctrl-C) gives the job back and is raised."""
    t0 = time.perf_counter()
    memory_worker(rt).write_now(doc_id, progress)
    return (time.perf_counter() - t0) * 1e3


def write_document_memories(doc_id: int, rt: Runtime, progress: IngestProgress | None = None, *,
                            tree: Tree | None = None) -> float:
    """Phase two in this call (``engine.memory.worker.write_document_memories`` over the
    runtime): the document's missing node memories, each height stored as it finishes.
    Milliseconds spent."""
    return write_memories_of(rt.library, doc_id, rt.fingerprint, rt.backbone, rt.parts,
                             rt.settings.write_batches, _stage(progress, "memories"), tree=tree)


def _stage(progress: IngestProgress | None, stage: str):
    """The writer's (done, total) callback, reporting ``stage`` to the ingest's callback."""
    if progress is None:
        return None
    return lambda done, total: progress(done, total, stage=stage)


def _reuse(existing: int, rt: Runtime, progress: IngestProgress | None,
           memories: bool = True) -> IngestResult:
    """The stored document; its evidence is re-indexed when made by another tokenizer or
    encoder, and its memories are written (or completed) when the fingerprint lacks them."""
    lib = rt.library
    tree = lib.get_tree(existing)
    info = lib.get_document(existing)
    t0 = time.perf_counter()
    document_evidence(existing, tree, rt)
    evidence_ms = (time.perf_counter() - t0) * 1e3
    if not lib.memory_progress(existing, rt.fingerprint).complete:
        if not memories:
            return _result(existing, tree, info.file_name, info.tree_ms, 0.0, True, evidence_ms,
                           "pending")
        memory_ms = write_held(existing, rt, progress)
        return _result(existing, tree, info.file_name, info.tree_ms, memory_ms, True, evidence_ms)
    return _result(existing, tree, info.file_name, info.tree_ms, info.memory_ms, True, evidence_ms)


def memory_worker(rt: Runtime, write: WriteFn | None = None,
                  holder: str | None = None) -> MemoryWorker:
    """A memory worker (engine/memory/worker.py) over the runtime: it writes with the runtime's
    backbone, parts and batch limits under its fingerprint (``write``: instead, for tests), with
    the settings' lease and poll interval."""
    return MemoryWorker(rt.library, rt.fingerprint, rt.backbone, rt.parts,
                        batches=rt.settings.write_batches, lease_s=rt.settings.job_lease_s,
                        poll_s=rt.settings.worker_poll_s, holder=holder, write=write)
