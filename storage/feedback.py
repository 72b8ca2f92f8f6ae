"""Feedback on answers: a thumbs up or down, and an optional line of text, on one logged question.

One verdict per logged question (``feedback``, storage.models.FeedbackRow): a later one replaces
it. Listed with the question as it was logged (route, answer) and its quote and check
(``query_answers``), so a wrong answer can be looked at, or turned into a probe question
(``bench.feedback``), long after it was given.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from storage.errors import StorageError
from storage.library import Library
from storage.models import FeedbackRow, QueryAnswerRow, QueryRow, utc_now
from storage.query_log import query_record
from storage.records import QueryRecord, as_utc

RATINGS = ("up", "down")
NOTE_CHARS = 500  # one line of text


class QueryNotFound(StorageError, LookupError):
    def __init__(self, query_id):
        super().__init__(f"no logged question with id {query_id!r}")
        self.query_id = query_id


@dataclass(frozen=True)
class Rated:
    """One verdict with its logged question, the answer's quote and check (None: not logged,
    e.g. a question logged by an older version)."""

    query: QueryRecord
    rating: str  # up | down
    note: str
    rated_at: datetime  # UTC
    quote: dict[str, Any] | None
    check: dict[str, Any] | None


class Feedback:
    """The feedback on the answers logged in ``library`` (same engine and write lock)."""

    def __init__(self, library: Library):
        self.lib = library

    def rate(self, query_id: int, rating: str, note: str = "") -> Rated:
        """Store ``rating`` ("up" or "down") and a line of text on a logged question, replacing
        an earlier verdict on it. ValueError on another rating; QueryNotFound on an id not in the
        log (a user's mistake: one line each)."""
        if rating not in RATINGS:
            raise ValueError(f"rating {rating!r} is not one of {', '.join(RATINGS)}")
        note = " ".join((note or "").split())[:NOTE_CHARS]
        with self.lib._writing(), self.lib._sessions() as s, s.begin():
            if s.get(QueryRow, query_id) is None:
                raise QueryNotFound(query_id)
            row = s.get(FeedbackRow, query_id)
            if row is None:
                s.add(FeedbackRow(query_id=query_id, rating=rating, note=note))
            else:
                row.rating, row.note, row.created_at = rating, note, utc_now()
        return self.get(query_id)

    def get(self, query_id: int) -> Rated | None:
        """The verdict on one logged question, None when it has none."""
        found = self._select(FeedbackRow.query_id == query_id)
        return found[0] if found else None

    def list(self, doc_id: int | None = None, rating: str | None = None) -> list[Rated]:
        """Verdicts, oldest question first: on questions about ``doc_id`` only when given, of one
        ``rating`` only when given ("down": the answers marked wrong)."""
        where = []
        if doc_id is not None:
            where.append(QueryRow.doc_id == doc_id)
        if rating is not None:
            where.append(FeedbackRow.rating == rating)
        return self._select(*where)

    def _select(self, *where) -> list[Rated]:
        stmt = (select(FeedbackRow, QueryRow, QueryAnswerRow)
                .join(QueryRow, QueryRow.id == FeedbackRow.query_id)
                .outerjoin(QueryAnswerRow, QueryAnswerRow.query_id == FeedbackRow.query_id)
                .where(*where).order_by(QueryRow.id))
        with self.lib._sessions() as s:
            return [Rated(query=query_record(q), rating=f.rating, note=f.note,
                          rated_at=as_utc(f.created_at),
                          quote=a.quote_json if a is not None else None,
                          check=a.check_json if a is not None else None)
                    for f, q, a in s.execute(stmt).all()]
