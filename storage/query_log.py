"""The library's query log: each question asked, with its settings, route, answer and metrics,
the answer's quote and check (``query_answers``), and who asked it when sign-in is on
(``QueryLog``, a part of ``Library``).

An answer never depends on its log: ``log_answer`` is what an ask calls once its answer is out,
and a storage fault there (a full disk, a read-only or unreachable database, a lock held past
the timeout: storage/faults.py) is one line in the server log and one more in ``unlogged``,
never an error.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import replace

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from storage.faults import classify
from storage.models import DocumentRow, QueryAnswerRow, QueryAskerRow, QueryRow
from storage.records import QueryEntry, QueryRecord, as_utc

ROUTE_PRUNE_SPAN = 64  # ids below the kept routes looked at per logged question

log = logging.getLogger(__name__)
_UNLOGGED_LOCK = threading.Lock()


class QueryLog:
    """The query-log methods of ``Library`` (its sessions and write lock). ``unlogged``: the
    answers given but not logged since the library was opened (``log_answer``)."""

    unlogged: int = 0

    def log_answer(self, entry: QueryEntry, keep_routes: int | None = None) -> int | None:
        """``log_query`` for an answer already given: its id, or None when a storage fault
        kept it out of the log (one warning line, counted in ``unlogged``; the answer stands).
        Anything else (a bug: a value that is not JSON, a constraint) is raised."""
        try:
            return self.log_query(entry, keep_routes)
        except Exception as e:
            fault = classify(e)
            if fault is None:
                raise
            with _UNLOGGED_LOCK:
                self.unlogged += 1
                n = self.unlogged
            log.warning("question log: a %s-mode answer was given but not logged: %s (%d "
                        "unlogged since start)", entry.mode, fault.cause, n)
            return None

    def log_query(self, entry: QueryEntry, keep_routes: int | None = None) -> int:
        """Record one question (``QueryEntry``); its id. A document deleted meanwhile (by
        another process) is logged as none, as a deletion leaves its logged questions.
        ``keep_routes``: only the newest n rows keep their route (the rows falling out of it
        drop theirs)."""
        try:
            return self._log_query(entry, keep_routes)
        except IntegrityError:
            if entry.doc_id is None:
                raise
            return self._log_query(replace(entry, doc_id=None), keep_routes)

    def _log_query(self, entry: QueryEntry, keep_routes: int | None) -> int:
        with self._writing(), self._sessions() as s, s.begin():
            doc_id = entry.doc_id
            if doc_id is not None and s.get(DocumentRow, doc_id) is None:
                doc_id = None
            row = QueryRow(doc_id=doc_id, question=entry.question, mode=entry.mode,
                           answer=entry.answer, settings_json=entry.settings,
                           route_json=entry.route, metrics_json=entry.metrics)
            s.add(row)
            s.flush()
            if entry.asker is not None:
                s.add(QueryAskerRow(query_id=row.id, asker=entry.asker))
            if keep_routes is not None:  # the rows just past the newest n: a bounded range
                old = row.id - keep_routes
                s.execute(update(QueryRow).where(
                    QueryRow.id <= old, QueryRow.id > old - ROUTE_PRUNE_SPAN,
                    QueryRow.route_json.is_not(None)).values(route_json=None))
            if entry.quote is not None or entry.check is not None:
                s.add(QueryAnswerRow(query_id=row.id, quote_json=entry.quote,
                                     check_json=entry.check))
            return row.id

    def list_queries(self, doc_id: int | None = None, *, newest: int | None = None,
                     asker: str | None = None) -> list[QueryRecord]:
        """Logged questions, oldest first; only those over ``doc_id`` when given; only those
        ``asker`` asked when given; only the ``newest`` n when given (a long log is never read
        whole for a view of its end)."""
        with self._sessions() as s:
            stmt = select(QueryRow, QueryAskerRow.asker).outerjoin(
                QueryAskerRow, QueryAskerRow.query_id == QueryRow.id)
            if doc_id is not None:
                stmt = stmt.where(QueryRow.doc_id == doc_id)
            if asker is not None:
                stmt = stmt.where(QueryAskerRow.asker == asker)
            if newest is not None:
                stmt = stmt.order_by(QueryRow.id.desc()).limit(max(0, newest))
                return [query_record(*r) for r in reversed(s.execute(stmt).all())]
            return [query_record(*r) for r in s.execute(stmt.order_by(QueryRow.id))]

    def get_query(self, query_id: int) -> QueryRecord | None:
        """One logged question by its id (None when it is not in the log)."""
        with self._sessions() as s:
            row = s.get(QueryRow, query_id)
            if row is None:
                return None
            return query_record(row, s.scalar(select(QueryAskerRow.asker).where(
                QueryAskerRow.query_id == query_id)))


def query_record(r: QueryRow, asker: str | None = None) -> QueryRecord:
    return QueryRecord(id=r.id, doc_id=r.doc_id, question=r.question, mode=r.mode,
                       settings=r.settings_json, route=r.route_json, answer=r.answer,
                       metrics=r.metrics_json, created_at=as_utc(r.created_at), asker=asker)
