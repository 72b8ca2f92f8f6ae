"""The library's node memories: stored per document under the fingerprint of the model parts
that wrote them (``MemoryStore``, a part of ``Library``), written whole or a tree height at a
time, and only ever returned for that exact fingerprint."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from storage.blobs import decode_vector, encode_vector
from storage.errors import DocumentNotFound, MissingMemories, StaleMemories
from storage.models import DocumentRow, MemoryRow, NodeRow
from storage.records import MemoryProgress

if TYPE_CHECKING:
    import torch

MEMORY_INSERT_BATCH = 256  # memory rows per INSERT (bounds the bytes held at once)


class MemoryStore:
    """The memory methods of ``Library`` (its sessions and write lock: ``_sessions``,
    ``_writing``)."""

    def put_memories(self, doc_id: int, memories: Mapping[int, torch.Tensor], fingerprint: str,
                     memory_ms: float | None = None) -> None:
        """Store (or replace) the document's memories under ``fingerprint``, one per node.

        Memories under other fingerprints stay (see ``prune_memories``). One transaction.
        """
        with self._writing(), self._sessions() as s, s.begin():
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            node_ids = set(s.scalars(select(NodeRow.node_id).where(NodeRow.doc_id == doc_id)))
            check_covers(memories, node_ids)
            s.execute(delete(MemoryRow).where(MemoryRow.doc_id == doc_id,
                                              MemoryRow.fingerprint == fingerprint))
            insert_memories(s, doc_id, memories, fingerprint)
            if memory_ms is not None:
                doc.memory_ms = memory_ms

    def add_memories(self, doc_id: int, memories: Mapping[int, torch.Tensor],
                     fingerprint: str) -> None:
        """Store some of the document's memories under ``fingerprint`` (replacing those nodes'
        rows) in one transaction: phase two of ingest commits one tree level at a time, so an
        interrupted write resumes where it stopped. Memories are only *used* once every node
        has one (``get_memories``), so a half-written set is never read as an answer's input."""
        with self._writing(), self._sessions() as s, s.begin():
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            ids = list(memories)
            for i in range(0, len(ids), 500):
                s.execute(delete(MemoryRow).where(
                    MemoryRow.doc_id == doc_id, MemoryRow.fingerprint == fingerprint,
                    MemoryRow.node_id.in_(ids[i:i + 500])))
            insert_memories(s, doc_id, memories, fingerprint)

    def set_memory_ms(self, doc_id: int, memory_ms: float) -> None:
        """Record how long writing the document's memories took (shown in the library)."""
        with self._writing(), self._sessions() as s, s.begin():
            s.execute(update(DocumentRow).where(DocumentRow.id == doc_id)
                      .values(memory_ms=memory_ms))

    def memory_progress(self, doc_id: int, fingerprint: str) -> MemoryProgress:
        """How many of the document's nodes have a memory under ``fingerprint``."""
        with self._sessions() as s:
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            done = s.scalar(select(func.count()).select_from(MemoryRow).where(
                MemoryRow.doc_id == doc_id, MemoryRow.fingerprint == fingerprint))
            return MemoryProgress(done=int(done or 0), total=doc.n_nodes)

    def get_memories(self, doc_id: int, fingerprint: str, *,
                     partial: bool = False) -> dict[int, torch.Tensor]:
        """node id -> memory tensor (CPU), only memories written under exactly ``fingerprint``.

        Raises StaleMemories when the document only has memories under other fingerprints,
        MissingMemories when it has none (or an incomplete set) under this one. ``partial``:
        return whatever is stored under it, complete or not (to resume writing them).
        """
        with self._sessions() as s:
            doc = s.get(DocumentRow, doc_id)
            if doc is None:
                raise DocumentNotFound(doc_id)
            rows = s.execute(
                select(MemoryRow.node_id, MemoryRow.dtype, MemoryRow.dim, MemoryRow.blob)
                .where(MemoryRow.doc_id == doc_id, MemoryRow.fingerprint == fingerprint)).all()
            if not partial and len(rows) != doc.n_nodes and not self._exists(s, doc_id):
                raise DocumentNotFound(doc_id)  # deleted (by another process) meanwhile
            if not partial and not rows:
                stored = self._fingerprints(s, doc_id)
                if stored:
                    raise StaleMemories(doc_id, fingerprint, stored)
                raise MissingMemories(doc_id, fingerprint)
            if not partial and len(rows) != doc.n_nodes:
                raise MissingMemories(
                    doc_id, fingerprint, detail=(
                        f"document {doc_id} has {len(rows)} of its {doc.n_nodes} node memories "
                        f"under fingerprint {fingerprint!r}; rewrite its memories"))
        return {node_id: decode_vector(dtype, dim, blob) for node_id, dtype, dim, blob in rows}

    def memory_fingerprints(self, doc_id: int) -> tuple[str, ...]:
        """Fingerprints under which the document has memories, sorted."""
        with self._sessions() as s:
            return self._fingerprints(s, doc_id)

    def prune_memories(self, doc_id: int, keep_fingerprint: str) -> int:
        """Delete the document's memories under every other fingerprint; rows deleted."""
        with self._writing(), self._sessions() as s, s.begin():
            result = s.execute(delete(MemoryRow).where(MemoryRow.doc_id == doc_id,
                                                       MemoryRow.fingerprint != keep_fingerprint))
            return result.rowcount

    @staticmethod
    def _exists(s: Session, doc_id: int) -> bool:
        """Whether the document is there now (not the session's possibly older copy)."""
        return s.scalar(select(DocumentRow.id).where(DocumentRow.id == doc_id)) is not None

    @staticmethod
    def _fingerprints(s: Session, doc_id: int) -> tuple[str, ...]:
        stmt = select(MemoryRow.fingerprint).where(MemoryRow.doc_id == doc_id).distinct()
        return tuple(sorted(s.scalars(stmt)))


def check_covers(memories: Mapping[int, Any], node_ids: set[int]) -> None:
    """Programming-error check: exactly one memory per node of the tree."""
    keys = set(memories)
    if keys != node_ids:
        missing = sorted(node_ids - keys)[:10]
        extra = sorted(keys - node_ids, key=repr)[:10]
        raise ValueError(f"memories must cover exactly the tree's {len(node_ids)} nodes; "
                         f"missing ids {missing}, ids not in the tree {extra}")


def insert_memories(s: Session, doc_id: int, memories: Mapping[int, Any],
                    fingerprint: str) -> None:
    """Encode and insert memory rows in batches, inside the caller's transaction."""
    rows = (dict(doc_id=doc_id, node_id=node_id, fingerprint=fingerprint, dtype=enc.dtype,
                 dim=enc.dim, blob=enc.blob)
            for node_id, enc in ((n, encode_vector(v)) for n, v in memories.items()))
    insert_batched(s, MemoryRow, rows, MEMORY_INSERT_BATCH)


def insert_batched(s: Session, table, rows: Iterable[dict[str, Any]], size: int) -> None:
    """INSERT ``rows`` into ``table`` ``size`` at a time (bounds the bytes held at once)."""
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            s.execute(insert(table), batch)
            batch = []
    if batch:
        s.execute(insert(table), batch)
