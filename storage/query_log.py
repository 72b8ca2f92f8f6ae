"""The library's query log: each question asked, with its settings, route, answer and metrics
(``QueryLog``, a part of ``Library``)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from storage.models import DocumentRow, QueryRow
from storage.records import QueryRecord, as_utc


class QueryLog:
    """The query-log methods of ``Library`` (its sessions and write lock)."""

    def log_query(self, question: str, mode: str, answer: str = "", *, doc_id: int | None = None,
                  settings: dict[str, Any] | None = None, route: Any = None,
                  metrics: dict[str, Any] | None = None) -> int:
        """Record one question (settings, route and metrics must be JSON-serialisable); its id.
        A document deleted meanwhile (by another process) is logged as none, as a deletion
        leaves its logged questions."""
        row = dict(question=question, mode=mode, answer=answer, settings_json=settings,
                   route_json=route, metrics_json=metrics)
        try:
            return self._log_query(doc_id, row)
        except IntegrityError:
            if doc_id is None:
                raise
            return self._log_query(None, row)

    def _log_query(self, doc_id: int | None, values: dict[str, Any]) -> int:
        with self._writing(), self._sessions() as s, s.begin():
            if doc_id is not None and s.get(DocumentRow, doc_id) is None:
                doc_id = None
            row = QueryRow(doc_id=doc_id, **values)
            s.add(row)
            s.flush()
            return row.id

    def list_queries(self, doc_id: int | None = None, *,
                     newest: int | None = None) -> list[QueryRecord]:
        """Logged questions, oldest first; only those over ``doc_id`` when given; only the
        ``newest`` n when given (a long log is never read whole for a view of its end)."""
        with self._sessions() as s:
            stmt = select(QueryRow)
            if doc_id is not None:
                stmt = stmt.where(QueryRow.doc_id == doc_id)
            if newest is not None:
                stmt = stmt.order_by(QueryRow.id.desc()).limit(max(0, newest))
                return [query_record(r) for r in reversed(s.scalars(stmt).all())]
            return [query_record(r) for r in s.scalars(stmt.order_by(QueryRow.id))]

    def get_query(self, query_id: int) -> QueryRecord | None:
        """One logged question by its id (None when it is not in the log)."""
        with self._sessions() as s:
            row = s.get(QueryRow, query_id)
            return None if row is None else query_record(row)


def query_record(r: QueryRow) -> QueryRecord:
    return QueryRecord(id=r.id, doc_id=r.doc_id, question=r.question, mode=r.mode,
                       settings=r.settings_json, route=r.route_json, answer=r.answer,
                       metrics=r.metrics_json, created_at=as_utc(r.created_at))
