"""The startup sweep of a library (``LeftoverSweep``, a part of ``Library``): what no complete
ingest can have left (an older version, a database without foreign keys) is deleted when the
library is opened. It writes only when there is something to delete, so that a library opens
beside another process's write lock, on a full disk or read-only (storage/faults.py)."""
from __future__ import annotations

import logging

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import make_url

from storage.models import (DocumentRow, EvidenceRow, MemoryRow, NodeRow, PageRow, QueryRow,
                            SourceFileRow)

log = logging.getLogger("storage.library")


class LeftoverSweep:
    """``recover`` of ``Library`` (its sessions and write lock)."""

    def recover(self) -> dict[str, int]:
        """Delete what no complete ingest can have left: documents not marked ready, nodes and
        memories whose document is gone. Rows deleted per table (logged when any). Nothing is
        written when nothing is left over, so that a library opens while another process holds
        its write lock, or on a full disk (it is read then, and says so when written)."""
        if not self._leftovers():
            return {"memories": 0, "evidence": 0, "nodes": 0, "documents": 0}
        with self._writing(), self._sessions() as s, s.begin():
            bad = select(DocumentRow.id).where(DocumentRow.status != "ready")
            docs = select(DocumentRow.id)
            counts = {
                "memories": s.execute(delete(MemoryRow).where(
                    MemoryRow.doc_id.in_(bad) | MemoryRow.doc_id.not_in(docs))).rowcount,
                "evidence": s.execute(delete(EvidenceRow).where(
                    EvidenceRow.doc_id.in_(bad) | EvidenceRow.doc_id.not_in(docs))).rowcount,
                "nodes": s.execute(delete(NodeRow).where(
                    NodeRow.doc_id.in_(bad) | NodeRow.doc_id.not_in(docs))).rowcount,
            }
            sources = s.execute(delete(SourceFileRow).where(
                SourceFileRow.doc_id.in_(bad) | SourceFileRow.doc_id.not_in(docs))).rowcount
            if sources:  # reported only when any (the key is newer than the others)
                counts["source_files"] = sources
            page_rows = s.execute(delete(PageRow).where(
                PageRow.doc_id.in_(bad) | PageRow.doc_id.not_in(docs))).rowcount
            if page_rows:
                counts["document_pages"] = page_rows
            s.execute(update(QueryRow).where(QueryRow.doc_id.in_(bad)).values(doc_id=None))
            counts["documents"] = s.execute(
                delete(DocumentRow).where(DocumentRow.status != "ready")).rowcount
        if any(counts.values()):
            log.warning("library %s: removed leftovers of interrupted ingests: %s",
                        make_url(self.url).render_as_string(hide_password=True), counts)
        return counts

    def _leftovers(self) -> bool:
        """Whether ``recover`` has anything to delete (read only)."""
        bad = select(DocumentRow.id).where(DocumentRow.status != "ready")
        docs = select(DocumentRow.id)
        with self._sessions() as s:
            if s.scalar(select(func.count()).select_from(DocumentRow).where(
                    DocumentRow.status != "ready")):
                return True
            for row in (MemoryRow, EvidenceRow, NodeRow, SourceFileRow, PageRow):
                orphans = select(row.doc_id).where(row.doc_id.in_(bad) | row.doc_id.not_in(docs))
                if s.execute(orphans.limit(1)).first() is not None:
                    return True
        return False
