"""The library's stored unit vectors (``UnitVectorStore``, a part of ``Library``): per document
and fingerprint, the vector of each text the quote stage encoded, by the text's digest; read on
a document's first use in a process, added to as new texts are encoded."""
from __future__ import annotations

import logging

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError

from storage.faults import skipped_cache_write
from storage.models import DocumentRow, UnitVectorRow

log = logging.getLogger(__name__)

INSERT_BATCH = 500


class UnitVectorStore:
    """The unit-vector methods of ``Library`` (its sessions and write lock)."""

    def get_unit_vectors(self, doc_id: int, fingerprint: str) -> dict[bytes, bytes]:
        """Digest -> float16 bytes of every text stored for the document under ``fingerprint``."""
        with self._sessions() as s:
            rows = s.execute(select(UnitVectorRow.key, UnitVectorRow.vector).where(
                UnitVectorRow.doc_id == doc_id, UnitVectorRow.fingerprint == fingerprint))
            return {bytes(k): bytes(v) for k, v in rows}

    def add_unit_vectors(self, doc_id: int, fingerprint: str,
                         items: dict[bytes, bytes]) -> int:
        """Store the texts' vectors that are not stored yet (another process may have stored
        some meanwhile); the document's older fingerprints of the same kind (a fingerprint
        names its kind after its last ``|``) are dropped, other kinds' rows kept. How many
        were added (0 when the document is gone)."""
        if not items:
            return 0
        try:
            with self._writing(), self._sessions() as s, s.begin():
                if s.get(DocumentRow, doc_id) is None:
                    return 0
                kind = "|" + fingerprint.rsplit("|", 1)[-1]
                s.execute(delete(UnitVectorRow).where(
                    UnitVectorRow.doc_id == doc_id, UnitVectorRow.fingerprint != fingerprint,
                    UnitVectorRow.fingerprint.endswith(kind, autoescape=True)))
                keys, have = list(items), set()
                for i in range(0, len(keys), INSERT_BATCH):  # the given keys alone, not all
                    have.update(s.scalars(select(UnitVectorRow.key).where(
                        UnitVectorRow.doc_id == doc_id, UnitVectorRow.fingerprint == fingerprint,
                        UnitVectorRow.key.in_(keys[i:i + INSERT_BATCH]))))
                rows = [dict(doc_id=doc_id, fingerprint=fingerprint, key=k, vector=v)
                        for k, v in items.items() if k not in have]
                for i in range(0, len(rows), INSERT_BATCH):
                    s.execute(insert(UnitVectorRow), rows[i:i + INSERT_BATCH])
        except IntegrityError:  # a process beside this one stored the same texts: theirs stay
            return 0
        except Exception as e:  # a full disk, a lock: the vectors are encoded again next time
            if skipped_cache_write(e, "passage vectors", log):
                return 0
            raise
        return len(rows)

    def _drop_unit_vectors(self, s, doc_id: int) -> None:
        """Delete the document's unit vectors (inside the caller's transaction)."""
        s.execute(delete(UnitVectorRow).where(UnitVectorRow.doc_id == doc_id))
