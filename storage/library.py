"""The library: documents, their trees and node memories in one SQLAlchemy database.

One transaction per unit of work: a document, all its nodes, its source file and all its
memories are written together or not at all, so a process killed mid-ingest leaves nothing of
that document behind.
Opening a library also sweeps what an older version or a database without foreign keys may have
left (``recover``: documents not marked ready, nodes and memories without their document).

Concurrency: any number of threads and processes may read and write. On SQLite (WAL journal, a
busy timeout) the writes of one process go through one lock, so its threads never race each
other for SQLite's single writer slot; other processes wait on the busy timeout. Memories are keyed by the fingerprint of the model parts that wrote them,
and are only ever returned for that exact fingerprint.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Any, Mapping

import networkx as nx
import numpy as np
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import (ArgumentError, IntegrityError, InterfaceError, NoSuchModuleError,
                            OperationalError)
from sqlalchemy.orm import Session, sessionmaker

from storage.blobs import decode_array, encode_array
from storage.connection import first_line, make_engine, safe_url
from storage.errors import DatabaseUnavailable, DocumentNotFound, DuplicateDocument
from storage.faults import skipped_cache_write
from storage.memory_store import (MEMORY_INSERT_BATCH, MemoryStore, check_covers, insert_batched,
                                  insert_memories)
from storage.models import (Base, CandidateIndexRow, DocumentRow, EvidenceRow, MemoryJobRow,
                            MemoryRow, NodeRow, PageRow, QueryRow, SourceFileRow)
from storage.query_log import QueryLog
from storage.sweep import LeftoverSweep
from storage.unit_vectors import UnitVectorStore
from storage.records import (DocumentInfo, DocumentMeta, MemoryProgress, NodeEvidence, SourceFile,
                             as_utc)
from storage.tree import Node, Tree

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SCHEMA_LOCK_KEY = 0x48324D54  # PostgreSQL advisory lock held while the tables are created


class Library(MemoryStore, QueryLog, UnitVectorStore, LeftoverSweep):
    """All stored documents; construct with any SQLAlchemy URL (tables are created if missing)."""

    def __init__(self, url: str, *, echo: bool = False):
        self.url = url
        try:
            self.engine = make_engine(url, echo=echo)
        except (ArgumentError, NoSuchModuleError, ImportError, OSError) as e:
            raise DatabaseUnavailable(safe_url(url), first_line(e)) from e
        self._sqlite = self.engine.dialect.name == "sqlite"
        # One writer path per process on SQLite (it has one writer slot per database file).
        self._write_lock = threading.RLock() if self._sqlite else None
        try:
            with self._writing(), self.engine.begin() as con:
                if self.engine.dialect.name == "postgresql":
                    # replicas starting at once on a new database: one creates the tables
                    con.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                {"key": SCHEMA_LOCK_KEY})
                Base.metadata.create_all(con)
        except (OperationalError, InterfaceError) as e:
            self.engine.dispose()
            raise DatabaseUnavailable(safe_url(url), first_line(e.orig or e)) from e
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.recovered = self.recover()

    def _writing(self):
        return self._write_lock if self._write_lock is not None else contextlib.nullcontext()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ----------------------------------------------------------------------------
    def find_by_sha256(self, sha256: str) -> int | None:
        """The id of the document stored from a file with this digest, if any."""
        with self._sessions() as s:
            return s.scalar(select(DocumentRow.id).where(DocumentRow.sha256 == sha256))

    def add_document(self, meta: DocumentMeta, tree: Tree,
                     memories: Mapping[int, torch.Tensor] | None = None,
                     fingerprint: str | None = None, *,
                     evidence: NodeEvidence | None = None,
                     source: SourceFile | None = None) -> int:
        """Store a document, its tree, its routing evidence, (optionally) the bytes of the file it
        was built from and (optionally) one memory per node in one transaction; its new id.

        Phase one of ingest passes ``evidence`` and no memories (the document is askable in text
        and route modes at once; ``add_memories`` writes the memories later). When ``memories``
        is given it maps every node id of ``tree`` to a 1-D tensor. Raises DuplicateDocument if
        a file with ``meta.sha256`` is already stored (call ``find_by_sha256`` first to reuse
        it). A failure anywhere leaves nothing written.
        """
        if memories is not None:
            check_covers(memories, set(tree.graph.nodes))
        if evidence is not None and len(evidence.tokens) != len(tree):
            raise ValueError(f"evidence has {len(evidence.tokens)} rows for {len(tree)} nodes")
        nodes = list(tree.preorder())
        with self._writing(), self._sessions() as s, s.begin():
            existing = s.scalar(select(DocumentRow.id).where(DocumentRow.sha256 == meta.sha256))
            if existing is not None:
                raise DuplicateDocument(meta.sha256, existing)
            doc = DocumentRow(
                title=meta.title, file_name=meta.file_name, sha256=meta.sha256, pages=meta.pages,
                tree_source=tree.source, n_nodes=len(nodes), depth=tree.depth,
                tokens=sum(n.tokens for n in nodes), tree_ms=meta.tree_ms,
                memory_ms=meta.memory_ms, status="ready")
            s.add(doc)
            try:
                s.flush()
            except IntegrityError as e:  # another writer stored the same file meanwhile
                raise DuplicateDocument(meta.sha256, None) from e
            s.execute(insert(NodeRow), [_node_row(doc.id, n) for n in nodes])
            page_rows = _page_rows(doc.id, tree)
            if page_rows:
                s.execute(insert(PageRow), page_rows)
            if evidence is not None:
                _insert_evidence(s, doc.id, evidence)
            if source is not None:
                s.add(_source_row(doc.id, source))
            if memories is not None:
                if fingerprint is None:
                    raise ValueError("memories need the fingerprint of the parts that wrote them")
                insert_memories(s, doc.id, memories, fingerprint)
            return doc.id

    # -- routing evidence (phase one) ---------------------------------------------------------
    def put_evidence(self, doc_id: int, evidence: NodeEvidence) -> None:
        """Store (or replace) the document's routing evidence, one row per node; one transaction.
        Evidence under other fingerprints is deleted (it is cheap to recompute)."""
        with self._writing(), self._sessions() as s, s.begin():
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            if len(evidence.tokens) != doc.n_nodes:
                raise ValueError(f"evidence has {len(evidence.tokens)} rows for {doc.n_nodes} nodes")
            s.execute(delete(EvidenceRow).where(EvidenceRow.doc_id == doc_id))
            _insert_evidence(s, doc_id, evidence)

    def get_evidence(self, doc_id: int, fingerprint: str) -> NodeEvidence | None:
        """The document's evidence under exactly ``fingerprint``; None when it has none (or an
        incomplete set) under it, so the caller recomputes it."""
        with self._sessions() as s:
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            rows = s.execute(
                select(EvidenceRow.node_id, EvidenceRow.tokens, EvidenceRow.dtype,
                       EvidenceRow.dim, EvidenceRow.blob)
                .where(EvidenceRow.doc_id == doc_id, EvidenceRow.fingerprint == fingerprint)
                .order_by(EvidenceRow.node_id)).all()
        if len(rows) != doc.n_nodes or doc.n_nodes == 0:
            return None
        tokens = [r.tokens.split() for r in rows]
        dim = rows[0].dim
        dense = None
        if dim:
            dense = np.stack([decode_array(r.dtype, r.dim, r.blob) for r in rows])
        return NodeEvidence(tokens=tokens, dense=dense, fingerprint=fingerprint)

    def evidence_has_vectors(self, doc_id: int, fingerprint: str) -> bool:
        """Whether the document's evidence under ``fingerprint`` holds dense vectors (one row's
        look: ``put_evidence`` writes every row at once)."""
        with self._sessions() as s:
            dim = s.scalar(select(EvidenceRow.dim).where(
                EvidenceRow.doc_id == doc_id, EvidenceRow.fingerprint == fingerprint).limit(1))
        return bool(dim)

    # -- candidate indexes (big libraries) ----------------------------------------------------
    def get_candidate_index(self, key: str) -> bytes | None:
        """The serialised candidate index stored under ``key``; None when there is none."""
        with self._sessions() as s:
            blob = s.scalar(select(CandidateIndexRow.blob).where(CandidateIndexRow.key == key))
        return None if blob is None else bytes(blob)

    def put_candidate_index(self, key: str, doc_ids: list[int], n_nodes: int,
                            blob: bytes) -> None:
        """Store a candidate index of the documents ``doc_ids`` under ``key``, in place of any
        other index of exactly these documents (built from older evidence); one transaction."""
        docs = sorted(int(d) for d in doc_ids)
        try:
            with self._writing(), self._sessions() as s, s.begin():
                for row in s.execute(select(CandidateIndexRow.key, CandidateIndexRow.documents)):
                    if row.key == key or sorted(row.documents) == docs:
                        s.execute(delete(CandidateIndexRow).where(CandidateIndexRow.key == row.key))
                s.add(CandidateIndexRow(key=key, documents=docs, n_nodes=n_nodes, blob=blob))
        except IntegrityError:  # another process stored the same index first (same key: equal)
            if self.get_candidate_index(key) is None:
                raise
        except Exception as e:  # a full disk, a lock: the index is built again next time
            if not skipped_cache_write(e, "a candidate index", log):
                raise

    def candidate_index_keys(self) -> list[str]:
        """Keys of the stored candidate indexes."""
        with self._sessions() as s:
            return list(s.scalars(select(CandidateIndexRow.key).order_by(CandidateIndexRow.key)))

    def _drop_candidate_indexes(self, s: Session, doc_id: int) -> None:
        """Delete the candidate indexes over ``doc_id`` (inside the caller's transaction)."""
        for row in s.execute(select(CandidateIndexRow.key, CandidateIndexRow.documents)):
            if doc_id in row.documents:
                s.execute(delete(CandidateIndexRow).where(CandidateIndexRow.key == row.key))

    def get_document(self, doc_id: int) -> DocumentInfo:
        with self._sessions() as s:
            row = s.get(DocumentRow, doc_id)
            if row is None:
                raise DocumentNotFound(doc_id)
            return _document_info(row, self._fingerprints(s, doc_id))

    def list_documents(self) -> list[DocumentInfo]:
        """All documents, oldest first."""
        with self._sessions() as s:
            rows = s.scalars(select(DocumentRow).order_by(DocumentRow.id)).all()
            by_doc: dict[int, list[str]] = {}
            pairs = s.execute(select(MemoryRow.doc_id, MemoryRow.fingerprint).distinct())
            for doc_id, fp in pairs:
                by_doc.setdefault(doc_id, []).append(fp)
            return [_document_info(r, tuple(sorted(by_doc.get(r.id, ())))) for r in rows]

    def document_states(self, doc_ids: list[int] | None,
                        fingerprint: str) -> dict[int, tuple[str, MemoryProgress]]:
        """doc id -> (sha256, memories stored under ``fingerprint`` of its nodes) of the given
        documents (None: all), in one query: what a process caching documents reads per
        request to see what another process changed (a new or deleted document, memories
        finished). Documents not in the library are absent."""
        counts = (select(MemoryRow.doc_id, func.count().label("n")).where(
            MemoryRow.fingerprint == fingerprint).group_by(MemoryRow.doc_id).subquery())
        stmt = (select(DocumentRow.id, DocumentRow.sha256, DocumentRow.n_nodes, counts.c.n)
                .outerjoin(counts, counts.c.doc_id == DocumentRow.id).order_by(DocumentRow.id))
        if doc_ids is not None:
            stmt = stmt.where(DocumentRow.id.in_(list(doc_ids)))
        with self._sessions() as s:
            return {i: (sha, MemoryProgress(done=int(n or 0), total=total))
                    for i, sha, total, n in s.execute(stmt)}

    def delete_document(self, doc_id: int) -> None:
        """Remove a document with its nodes and memories (its logged queries keep no doc_id)."""
        with self._writing(), self._sessions() as s, s.begin():
            # Explicit child deletes: the schema cascades too, but a database opened without
            # foreign-key enforcement must not keep orphans. The memory job first: its row lock
            # waits for a worker storing a height of this document, and that worker's next
            # store finds no job and stops (storage/jobs.py).
            s.execute(delete(MemoryJobRow).where(MemoryJobRow.doc_id == doc_id))
            s.execute(delete(MemoryRow).where(MemoryRow.doc_id == doc_id))
            s.execute(delete(SourceFileRow).where(SourceFileRow.doc_id == doc_id))
            s.execute(delete(PageRow).where(PageRow.doc_id == doc_id))
            self._drop_candidate_indexes(s, doc_id)
            self._drop_unit_vectors(s, doc_id)
            s.execute(delete(NodeRow).where(NodeRow.doc_id == doc_id))
            s.execute(update(QueryRow).where(QueryRow.doc_id == doc_id).values(doc_id=None))
            if s.execute(delete(DocumentRow).where(DocumentRow.id == doc_id)).rowcount == 0:
                raise DocumentNotFound(doc_id)

    # -- source files -------------------------------------------------------------------------
    def put_source(self, doc_id: int, source: SourceFile) -> None:
        """Store (or replace) the bytes of the file the document was built from (a document
        stored by an older version gets them when its file is uploaded again)."""
        with self._writing(), self._sessions() as s, s.begin():
            if s.get(DocumentRow, doc_id) is None:
                raise DocumentNotFound(doc_id)
            s.execute(delete(SourceFileRow).where(SourceFileRow.doc_id == doc_id))
            s.add(_source_row(doc_id, source))

    def has_source(self, doc_id: int) -> bool:
        """Whether the document's source file is stored (one primary-key lookup, no bytes)."""
        with self._sessions() as s:
            return s.scalar(select(SourceFileRow.doc_id)
                            .where(SourceFileRow.doc_id == doc_id)) is not None

    def get_source(self, doc_id: int) -> SourceFile | None:
        """The file the document was built from; None when it was stored without it.
        DocumentNotFound when there is no such document."""
        with self._sessions() as s:
            if s.get(DocumentRow, doc_id) is None:
                raise DocumentNotFound(doc_id)
            row = s.execute(select(SourceFileRow.file_name, SourceFileRow.media_type,
                                   SourceFileRow.data)
                            .where(SourceFileRow.doc_id == doc_id)).first()
        if row is None:
            return None
        return SourceFile(file_name=row.file_name, media_type=row.media_type,
                          data=bytes(row.data))

    # -- trees --------------------------------------------------------------------------------
    def get_tree(self, doc_id: int) -> Tree:
        """The document's tree, equal node for node to the one stored."""
        with self._sessions() as s:
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            rows = s.scalars(
                select(NodeRow).where(NodeRow.doc_id == doc_id).order_by(NodeRow.node_id)).all()
            if not rows:  # deleted (by another process) between the two reads
                raise DocumentNotFound(doc_id)
            graph = nx.DiGraph()
            for r in rows:
                graph.add_node(r.node_id, node=Node(
                    id=r.node_id, parent=r.parent, order=r.position, depth=r.depth,
                    title=r.title, text=r.text, page_start=r.page_start, page_end=r.page_end,
                    tokens=r.tokens, ref=r.ref, kind=r.kind))
            for r in rows:
                if r.parent is not None:
                    graph.add_edge(r.parent, r.node_id)
            pages = s.scalars(select(PageRow).where(PageRow.doc_id == doc_id)).all()
            labels = {p.page: p.label for p in pages if p.label}
            tree = Tree(graph, doc.tree_source, doc.title, doc.pages,
                        page_labels=tuple(labels.get(i, "") for i in range(1, doc.pages + 1))
                        if labels else (),
                        ocr_pages=frozenset(p.page for p in pages if p.ocr))
        tree.validate()
        return tree

def _insert_evidence(s: Session, doc_id: int, evidence: NodeEvidence) -> None:
    """Insert one evidence row per node (tokens + dense vector as float16), in batches."""
    empty = encode_array(np.zeros(0))

    def rows():
        for node_id, toks in enumerate(evidence.tokens):
            enc = empty if evidence.dense is None else encode_array(evidence.dense[node_id])
            yield dict(doc_id=doc_id, node_id=node_id, fingerprint=evidence.fingerprint,
                       tokens=" ".join(toks), dtype=enc.dtype, dim=enc.dim, blob=enc.blob)

    insert_batched(s, EvidenceRow, rows(), MEMORY_INSERT_BATCH * 4)


def _source_row(doc_id: int, source: SourceFile) -> SourceFileRow:
    return SourceFileRow(doc_id=doc_id, file_name=source.file_name, media_type=source.media_type,
                         size=len(source.data), data=bytes(source.data))


def _page_rows(doc_id: int, tree: Tree) -> list[dict[str, Any]]:
    """One row per page that has a printed label or was read by OCR (``PageRow``)."""
    out = []
    for page in range(1, tree.pages + 1):
        label = tree.page_label(page) or ""
        if label or page in tree.ocr_pages:
            out.append({"doc_id": doc_id, "page": page, "label": label,
                        "ocr": page in tree.ocr_pages})
    return out


def _node_row(doc_id: int, n: Node) -> dict[str, Any]:
    return dict(doc_id=doc_id, node_id=n.id, parent=n.parent, position=n.order, depth=n.depth,
                title=n.title, text=n.text, page_start=n.page_start, page_end=n.page_end,
                tokens=n.tokens, ref=n.ref, kind=n.kind)


def _document_info(row: DocumentRow, fingerprints: tuple[str, ...]) -> DocumentInfo:
    return DocumentInfo(
        id=row.id, title=row.title, file_name=row.file_name, sha256=row.sha256, pages=row.pages,
        tree_source=row.tree_source, n_nodes=row.n_nodes, depth=row.depth, tokens=row.tokens,
        created_at=as_utc(row.created_at), tree_ms=row.tree_ms, memory_ms=row.memory_ms,
        status=row.status, fingerprints=fingerprints)


